"""The Gumbel search over the positions it reaches: B literal trees, the network asked at each node.

``gumbel.py`` plays every position's subtree once from the net's tables over the whole board:
one forward pass and a few steps over the board's positions per network, then a search is
a few gathers. On tic-tac-toe, a few thousand positions, that is the fast way; on 4,4,4 (9.1M) it is
a forward pass over every position and 8.5 GB each update, for searches that visit a few
hundred of them. This one walks B trees of K = simulations + 1 nodes held as preallocated
tensors, as the paper draws the search: each simulation goes down from the root one depth
at a time (at the root, the best-scored move among those whose visits equal the count the
halving schedule names, the scores frozen for each sub-round; below it, the move whose
visits lag the improved policy the most), makes at most one new node, asks ``evaluate``
for the new nodes' prior logits and values (one call for the B trees) and backs the leaf's
value up its path. With the same logits and values it returns ``gumbel_search``'s moves and
visits, and its values up to float rounding (the same leaves summed path by path, not subtree
by subtree; tests/search/test_gumbel.py, test_reached.py), at a cost that does not grow
with the board's positions: ``simulations`` network calls of B positions and a few steps
over (cells, B) per depth of each simulation.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.search.gumbel import (
    MOVES,
    NEG,
    Nodes,
    Search,
    completed_q,
    first_argmax,
    halving_schedule,
)

# (B,) rows of the game's tables -> (B, cells) prior logits (illegal cells are masked here) and
# (B,) values, the mover's, of those positions.
Evaluate = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def reached_search(root: torch.Tensor, evaluate: Evaluate, simulations: int,
                   gumbel: torch.Tensor | None = None, max_considered: int = MOVES,
                   game: Game = TIC_TAC_TOE, rescale: bool = True) -> Search:
    """B searches from (B,) unfinished ``root`` rows of ``game``'s tables, the network read
    through ``evaluate`` at the root and at each node a simulation adds; ``gumbel`` (B, cells)
    the root's noise (None: none, a deterministic search). ``gumbel_search``'s result."""
    dev = root.device
    t = game.tables(dev)
    B, K, C = root.shape[0], simulations + 1, t.cells
    steps = torch.arange(C + 1, device=dev)  # a path has at most one edge per cell
    games = torch.arange(B, device=dev)
    row = torch.zeros(B, K, dtype=torch.long, device=dev)  # (B, K) each node's row of the tables
    logits = torch.zeros(B, K, C, device=dev)  # (B, K, cells) each node's prior logits
    value = torch.zeros(B, K, device=dev)  # (B, K) and the network's value
    child = torch.full((B, K, C), -1, dtype=torch.long, device=dev)  # -1: not made yet
    visits = torch.zeros(B, K, C, device=dev)
    value_sum = torch.zeros(B, K, C, device=dev)

    row[:, 0] = root
    l0, v0 = evaluate(root)
    logits[:, 0], value[:, 0] = l0.float(), v0.float()
    top = Nodes.of(logits[:, 0].t(), t.legal.index_select(0, root).t(), value[:, 0])
    legal0 = top.legal > 0
    score0 = top.log_prior + (0.0 if gumbel is None else gumbel.float().t())
    considered = t.n_legal.index_select(0, root).long().clamp(max=max_considered)
    schedule = halving_schedule(simulations, max_considered, C).to(dev).index_select(0, considered)  # (B, S)
    frozen = score0.clone()
    depth_max = torch.zeros(B, dtype=torch.long, device=dev)
    for s in range(simulations):
        fresh = schedule[:, s] != schedule[:, s - 1] if s else torch.ones(B, dtype=torch.bool, device=dev)
        _, sigma, _ = completed_q(top, visits[:, 0].t(), value_sum[:, 0].t(), rescale)
        frozen = torch.where(fresh[None], score0 + sigma, frozen)  # a new sub-round scores afresh
        node = torch.zeros(B, dtype=torch.long, device=dev)
        alive = torch.ones(B, dtype=torch.bool, device=dev)
        depth = torch.zeros(B, dtype=torch.long, device=dev)
        path_node = torch.zeros(B, C + 1, dtype=torch.long, device=dev)
        path_move = torch.zeros(B, C + 1, dtype=torch.long, device=dev)
        end = root.clone()  # (B,) the row each path ends at
        for d in range(C + 1):
            here = row.gather(1, node[:, None]).squeeze(1)  # (B,) the position at each tree's node
            if d == 0:  # the root: the best-scored move with the visits the schedule names
                due = legal0 & (visits[:, 0].t() == schedule[:, s][None])
                move = first_argmax(frozen.masked_fill(~due, NEG))
            else:  # below: the move whose visits lag the improved policy the most
                at = Nodes.of(logits[games, node].t(), t.legal.index_select(0, here).t(), value[games, node])
                n_edge = visits[games, node].t()  # (cells, B)
                _, sigma, _ = completed_q(at, n_edge, value_sum[games, node].t(), rescale)
                improved = torch.softmax(at.logits + sigma, 0)
                lag = improved - n_edge / (1 + n_edge.sum(0))
                move = first_argmax(lag - at.barrier)
            path_node[:, d] = node
            path_move[:, d] = move
            nxt = child[games, node, move]  # (B,)
            after = t.next.index_select(0, here * C + move).long()  # (B,) the row after the move
            new = alive & (nxt < 0)
            child[games, node, move] = torch.where(new, s + 1, nxt)
            row[:, s + 1] = torch.where(new, after, row[:, s + 1])
            depth += alive.long()
            ended = alive & (new | t.done.index_select(0, after))
            end = torch.where(ended, after, end)
            alive = alive & ~ended
            node = torch.where(alive, nxt, node)
            if not bool(alive.any()):
                break
        # The new nodes' prior and value (one call for every tree: a finished position's is
        # not read), and the leaf's value: exact where the game is over.
        l_new, v_new = evaluate(end)
        logits[:, s + 1], value[:, s + 1] = l_new.float(), v_new.float()
        over = t.done.index_select(0, end)
        exact = (t.winner.index_select(0, end) * t.mover.index_select(0, end)).float()
        leaf = torch.where(over, exact, value[:, s + 1])
        # Back up: edge d of a path of `depth` edges gets the leaf's value for its mover,
        # the leaf's own negated once per ply between them.
        on_path = steps[None] < depth[:, None]  # (B, C + 1)
        sign = torch.where((depth[:, None] - steps[None]) % 2 == 1, -1.0, 1.0)
        flat = ((games[:, None] * K + path_node) * C + path_move)[on_path]
        visits.view(-1).index_add_(0, flat, torch.ones_like(flat, dtype=visits.dtype))
        value_sum.view(-1).index_add_(0, flat, (sign * leaf[:, None])[on_path])
        depth_max = torch.maximum(depth_max, depth)

    v_root, s_root = visits[:, 0].t(), value_sum[:, 0].t()
    q, sigma, mixed = completed_q(top, v_root, s_root, rescale)
    q = q * top.legal
    final = legal0 & (v_root == v_root.amax(0))
    action = first_argmax((score0 + sigma).masked_fill(~final, NEG))
    policy = torch.softmax(top.logits + sigma, 0)
    return Search(action, policy.t().contiguous(), v_root.t().contiguous(), q.t().contiguous(), mixed,
                  depth_max, top.prior.t().contiguous())
