"""The search as the paper draws it: B trees of K = simulations + 1 nodes as preallocated
tensors, every simulation walked from the root one depth at a time, its leaf's value
backed up the path. The reference that ``search/gumbel.gumbel_search`` (which plays each
position's subtree once for all trees, and the root in phases) is checked against, bit for
bit: the same visits, values and moves.

The root visits one move per simulation: the best-scored among those whose visits equal
the count the halving schedule names, the scores frozen for each sub-round (a run of
simulations that visit moves with the same count), as the paper's phases score the
moves once per phase."""

from __future__ import annotations

import torch

from ttt_research.env import game
from ttt_research.search.gumbel import (
    NEG,
    Nodes,
    Search,
    completed_q,
    first_argmax,
    halving_schedule,
    leaf_values,
)


def tree_search(root, logits, value, simulations, gumbel=None, offset=None, max_considered=9,
                rescale=True) -> Search:
    """``search/gumbel.gumbel_search``'s arguments and result, by walking B literal trees."""
    dev = root.device
    t = game.tables(dev)
    B, K = root.shape[0], simulations + 1
    n_rows = value.numel()
    base = torch.zeros(B, dtype=torch.long, device=dev) if offset is None else offset.long()
    codes_all = torch.arange(n_rows, device=dev) % game.N_CODES
    table = Nodes.of(logits.t(), t.legal.index_select(0, codes_all).t(),
                     leaf_values(codes_all, value, torch.arange(n_rows, device=dev)))
    games = torch.arange(B, device=dev)
    code = torch.zeros(B, K, dtype=torch.long, device=dev)  # (B, K) board code of each node
    code[:, 0] = root
    child = torch.full((B, K, 9), -1, dtype=torch.long, device=dev)  # (B, K, 9) -1: none
    visits = torch.zeros(B, K, 9, device=dev)
    value_sum = torch.zeros(B, K, 9, device=dev)

    top = table.take(base + root)
    legal0 = top.legal > 0
    score0 = top.log_prior + (0.0 if gumbel is None else gumbel.float().t())
    considered = t.n_legal.index_select(0, root).clamp(max=max_considered)
    schedule = halving_schedule(simulations, max_considered).to(dev).index_select(0, considered)  # (B, S)
    frozen = score0.clone()
    depth_max = torch.zeros(B, dtype=torch.long, device=dev)
    for s in range(simulations):
        fresh = schedule[:, s] != schedule[:, s - 1] if s else torch.ones(B, dtype=torch.bool, device=dev)
        _, sigma, _ = completed_q(top, visits[:, 0].t(), value_sum[:, 0].t(), rescale)
        frozen = torch.where(fresh[None], score0 + sigma, frozen)  # a new sub-round scores afresh
        node = torch.zeros(B, dtype=torch.long, device=dev)
        alive = torch.ones(B, dtype=torch.bool, device=dev)
        depth = torch.zeros(B, dtype=torch.long, device=dev)
        path_node = torch.zeros(B, 10, dtype=torch.long, device=dev)
        path_move = torch.zeros(B, 10, dtype=torch.long, device=dev)
        leaf = torch.zeros(B, device=dev)
        for d in range(10):
            here = code.gather(1, node[:, None]).squeeze(1)  # (B,) the board at each tree's node
            if d == 0:  # the root: the best-scored move with the visits the schedule names
                due = legal0 & (visits[:, 0].t() == schedule[:, s][None])
                move = first_argmax(frozen.masked_fill(~due, NEG))
            else:  # below: the move whose visits lag the improved policy the most
                at = table.take(base + here)
                n_edge = visits[games, node].t()  # (9, B)
                _, sigma, _ = completed_q(at, n_edge, value_sum[games, node].t(), rescale)
                improved = torch.softmax(at.logits + sigma, 0)
                lag = improved - n_edge / (1 + n_edge.sum(0))
                move = first_argmax(lag - at.barrier)
            path_node[:, d] = node
            path_move[:, d] = move
            nxt = child[games, node, move]  # (B,)
            after = t.next.index_select(0, here * 9 + move)  # (B,) code after the move
            new = alive & (nxt < 0)
            child[games, node, move] = torch.where(new, s + 1, nxt)
            code[:, s + 1] = torch.where(new, after, code[:, s + 1])
            depth += alive.long()
            ended = alive & (new | t.done.index_select(0, after))
            leaf = torch.where(ended, leaf_values(after, value, base + after), leaf)
            alive = alive & ~ended
            node = torch.where(alive, nxt, node)
            if not bool(alive.any()):
                break
        # Back up: edge d of a path of `depth` edges gets the leaf's value for its mover,
        # the leaf's own negated once per ply between them.
        steps = torch.arange(10, device=dev)
        on_path = steps[None] < depth[:, None]  # (B, 10)
        sign = torch.where((depth[:, None] - steps[None]) % 2 == 1, -1.0, 1.0)
        flat = ((games[:, None] * K + path_node) * 9 + path_move)[on_path]
        visits.view(-1).index_add_(0, flat, torch.ones_like(flat, dtype=visits.dtype))
        value_sum.view(-1).index_add_(0, flat, (sign * leaf[:, None])[on_path])
        depth_max = torch.maximum(depth_max, depth)

    v0, s0 = visits[:, 0].t(), value_sum[:, 0].t()
    q, sigma, mixed = completed_q(top, v0, s0, rescale)
    q = q * top.legal
    final = legal0 & (v0 == v0.amax(0))
    action = first_argmax((score0 + sigma).masked_fill(~final, NEG))
    policy = torch.softmax(top.logits + sigma, 0)
    return Search(action, policy.t().contiguous(), v0.t().contiguous(), q.t().contiguous(), mixed, depth_max,
                  top.prior.t().contiguous())
