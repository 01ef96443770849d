"""Batched Monte-Carlo tree search with a Gumbel root, B searches at once, on tables.

The search of Gumbel AlphaZero (Danihelka et al., "Policy improvement by planning with
Gumbel", ICLR 2022): at the root, Gumbel-top-k sampling and sequential halving over the
simulations; below it, the deterministic rule that makes the visit counts follow the
improved policy; as the training target, the improved policy softmax(logits + sigma(q)),
q completed with a mixed value where a move was not visited. Written from the paper's
equations; the constants are the paper's (c_visit 50, c_scale 0.1, q rescaled to [0, 1]).

Why tables: during a search the network is fixed, and the game has 5,478 positions. The
caller computes the network's masked prior logits and value for every position once (an
(R, 9) and an (R,) table, one row per board code, a population's members one block of
rows each: ``offset``) and the search reads them by gather, never calling the network.

The trees are preallocated tensors, B trees of K = simulations + 1 nodes: a node's board
code, its children (-1: not expanded), and per edge the visit count and the sum of the
values backed up through it. A simulation walks all B trees at once, one depth per step
(at most 9: a game has 9 plies), expands one new node per tree (or stops at a finished
game, whose value is exact), and backs the leaf's value up the path, negated at every ply
(zero-sum: the value of a position is its mover's). No Python loop over games or nodes.

Values are the mover's: +1 a win, -1 a loss, 0 a tie. A finished position's value is its
result for the side that would move there (-1 or 0), whatever the table says.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ttt_research.env import game

C_VISIT = 50.0  # sigma's offset in visits (the paper's c_visit)
C_SCALE = 0.1  # sigma's scale (c_scale): sigma(q) = (c_visit + max visits) * c_scale * q
NEG = -torch.inf


@dataclass
class Search:
    """The result of B searches. (B, 9) rows are over the cells; illegal cells are 0."""

    action: torch.Tensor  # (B,) int64 the move the search chooses
    policy: torch.Tensor  # (B, 9) the improved policy softmax(logits + sigma(completed q))
    visits: torch.Tensor  # (B, 9) the root's visit counts
    q: torch.Tensor  # (B, 9) the root's completed q values (the mover's), illegal cells 0
    value: torch.Tensor  # (B,) the root's mixed value (the prior value and the visits' q)
    depth: torch.Tensor  # (B,) the deepest path any simulation took (edges from the root)


@functools.cache
def halving_schedule(simulations: int, max_considered: int = 9) -> torch.Tensor:
    """(10, simulations) int64: row m, column s is the visit count the root move of
    simulation s must have, with m moves considered (sequential halving).

    The simulations are spent in rounds: a round gives each of the moves still considered
    the same number of visits (at least one, about simulations / (log2 m * considered)),
    then the better half stays (at least 2). Simulation s visits the best-scored move among
    those with exactly the visits the schedule names, so each round visits every
    considered move once before any twice."""
    table = torch.zeros(10, max(simulations, 1), dtype=torch.long)
    for m in range(1, 10):
        m_eff = min(m, max_considered)
        if m_eff == 1:
            table[m] = torch.arange(table.shape[1])
            continue
        rounds = math.ceil(math.log2(m_eff))
        sequence: list[int] = []
        visits = [0] * m_eff
        considered = m_eff
        while len(sequence) < simulations:
            extra = max(1, simulations // (rounds * considered))
            for _ in range(extra):
                sequence += visits[:considered]
                visits[:considered] = [v + 1 for v in visits[:considered]]
            considered = max(2, considered // 2)
        table[m, :simulations] = torch.tensor(sequence[:simulations])
    return table


def leaf_values(codes: torch.Tensor, value: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """(B,) values of positions for their movers: exact where the game is over (-1: the
    side to move has lost, 0: a tie), else the table's ``value[rows]``."""
    t = game.tables(codes.device)
    over = t.done.index_select(0, codes)
    exact = (t.winner.index_select(0, codes) * t.mover.index_select(0, codes)).float()
    return torch.where(over, exact, value.index_select(0, rows).float())


def completed_q(visits: torch.Tensor, value_sum: torch.Tensor, logits: torch.Tensor,
                raw_value: torch.Tensor, legal: torch.Tensor, rescale: bool = True):
    """The completed q values of B nodes and sigma of them.

    (B, 9) edge visits, value sums, masked prior logits and legal cells; (B,) the network's
    values of the nodes. q(a) = value_sum / visits on a visited move; an unvisited one takes
    the node's *mixed value*: (v + n * sum_visited p(a) q(a) / sum_visited p(a)) / (1 + n),
    n the node's visits, p the prior, v the network's value (just v before any visit).
    Rescaled, the legal q's are mapped onto [0, 1] by their min and max (a node's q's all
    equal: 0) before sigma scales them. Returns (completed q (B, 9), sigma (B, 9), mixed
    value (B,)); illegal cells 0.
    """
    prior = torch.softmax(logits.masked_fill(~legal, NEG), -1)  # (B, 9), 0 on illegal cells
    seen = visits > 0
    q = torch.where(seen, value_sum / visits.clamp_min(1), 0.0)
    n = visits.sum(-1)  # (B,)
    weight = torch.where(seen, prior, 0.0)
    mean_q = (weight * q).sum(-1) / weight.sum(-1).clamp_min(1e-12)
    mixed = torch.where(n > 0, (raw_value + n * mean_q) / (1 + n), raw_value)  # (B,)
    completed = torch.where(seen, q, mixed[:, None])
    scaled = completed
    if rescale:
        low = completed.masked_fill(~legal, torch.inf).amin(-1, keepdim=True)
        high = completed.masked_fill(~legal, NEG).amax(-1, keepdim=True)
        scaled = (completed - low) / (high - low).clamp_min(1e-8)
    sigma = (C_VISIT + visits.amax(-1, keepdim=True)) * C_SCALE * torch.where(legal, scaled, 0.0)
    return torch.where(legal, completed, 0.0), sigma, mixed


def gumbel_search(root: torch.Tensor, logits: torch.Tensor, value: torch.Tensor, simulations: int,
                  gumbel: torch.Tensor | None = None, offset: torch.Tensor | None = None,
                  max_considered: int = 9, rescale: bool = True) -> Search:
    """Search B positions with ``simulations`` simulations each.

    ``root``: (B,) board codes, none finished. ``logits`` (R, 9) masked prior logits and
    ``value`` (R,) values of every position, row ``offset + code`` (``offset`` (B,): a
    population member's block; None: 0). ``gumbel``: (B, 9) Gumbel noise for the root's
    top-k sampling (self-play), or None: a deterministic search (test time), ties to the
    lowest cell. Returns a ``Search``.
    """
    dev = root.device
    t = game.tables(dev)
    B, K = root.shape[0], simulations + 1
    if simulations < 1:
        raise ValueError(f"a search needs at least one simulation, got {simulations}")
    if bool(t.done.index_select(0, root).any()):
        raise ValueError("a search starts from an unfinished position")
    base = torch.zeros(B, dtype=torch.long, device=dev) if offset is None else offset.long()
    games = torch.arange(B, device=dev)
    code = torch.zeros(B, K, dtype=torch.long, device=dev)  # (B, K) board code of each node
    code[:, 0] = root
    child = torch.full((B, K, 9), -1, dtype=torch.long, device=dev)  # (B, K, 9) -1: none
    visits = torch.zeros(B, K, 9, device=dev)
    value_sum = torch.zeros(B, K, 9, device=dev)

    root_logits = torch.log_softmax(logits.index_select(0, base + root).float()
                                    .masked_fill(~t.legal.index_select(0, root), NEG), -1)
    root_legal = t.legal.index_select(0, root)  # (B, 9)
    root_value = leaf_values(root, value, base + root)
    noise = torch.zeros(B, 9, device=dev) if gumbel is None else gumbel.float()
    considered = t.n_legal.index_select(0, root).clamp(max=max_considered)  # (B,)
    schedule = halving_schedule(simulations, max_considered).to(dev).index_select(0, considered)  # (B, S)

    def root_scores() -> torch.Tensor:  # (B, 9) g + log p + sigma(q) of the root's moves
        _, sigma, _ = completed_q(visits[:, 0], value_sum[:, 0], root_logits, root_value, root_legal, rescale)
        return noise + root_logits + sigma

    depth_max = torch.zeros(B, dtype=torch.long, device=dev)
    for s in range(simulations):
        node = torch.zeros(B, dtype=torch.long, device=dev)
        alive = torch.ones(B, dtype=torch.bool, device=dev)
        depth = torch.zeros(B, dtype=torch.long, device=dev)
        path_node = torch.zeros(B, 10, dtype=torch.long, device=dev)
        path_move = torch.zeros(B, 10, dtype=torch.long, device=dev)
        leaf = torch.zeros(B, device=dev)
        for d in range(10):
            here = code.gather(1, node[:, None]).squeeze(1)  # (B,) the board at each tree's node
            if d == 0:  # the root: the best-scored move with the visits the schedule names
                due = root_legal & (visits[:, 0] == schedule[:, s:s + 1])
                move = root_scores().masked_fill(~due, NEG).argmax(-1)
            else:  # below: the move whose visits lag the improved policy the most
                legal = t.legal.index_select(0, here)
                n_edge = visits[games, node]  # (B, 9)
                lg = logits.index_select(0, base + here).float()
                _, sigma, _ = completed_q(n_edge, value_sum[games, node], lg,
                                          leaf_values(here, value, base + here), legal, rescale)
                improved = torch.softmax((lg + sigma).masked_fill(~legal, NEG), -1)
                lag = improved - n_edge / (1 + n_edge.sum(-1, keepdim=True))
                move = lag.masked_fill(~legal, NEG).argmax(-1)
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

    q, sigma, mixed = completed_q(visits[:, 0], value_sum[:, 0], root_logits, root_value, root_legal, rescale)
    most = visits[:, 0].masked_fill(~root_legal, -1).amax(-1, keepdim=True)
    final = root_legal & (visits[:, 0] == most)
    action = (noise + root_logits + sigma).masked_fill(~final, NEG).argmax(-1)
    policy = torch.softmax((root_logits + sigma).masked_fill(~root_legal, NEG), -1)
    return Search(action, policy, visits[:, 0].clone(), q, mixed, depth_max)
