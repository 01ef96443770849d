"""Exact cross-play: every policy against every other, from both seats, over the whole tree.

``cross_play(probs, game=)`` takes n policies of one board (move probabilities at its decision
positions, 4,520 on tic-tac-toe, the layout of ``exploit.py``) and returns, for every ordered
pair, the exact probabilities of the three outcomes when policy i plays X against policy j as
O: an (n, n, 3) table. Not a sample of games: the same sum over the game tree as
``solver.outcome_probs`` (which is the single-pair reference the tests hold it to), for all n *
n pairs at once.

How: backward induction over plies, as ``solver.outcome_probs``, with two policy axes after the
position axis. A table ``value`` (R, a, b, 2) holds P(X wins), P(O wins) from each of the R
reachable positions (5,478 on tic-tac-toe; ``tree.Tree``'s rows) for a block of a X-policies
against b O-policies. At a position where X moves, the children's values are averaged with X's
move probabilities (which vary along ``a`` and not ``b``); where O moves, with O's (along
``b``). A loop over the plies (one a cell) and over blocks of pairs, none over positions or
pairs. Ties are 1 - P(X wins) - P(O wins) at the end: the three add up to 1 in every row, so
keeping two channels saves a third of the work and loses nothing above 1e-15.

Memory: the table is R * a * b * 2 float64 numbers; blocks are sized to keep it (and the
temporaries of one ply) near ``BLOCK_BYTES``. What does not shrink with the blocks is each
policy by row, R * n * cells float64 numbers, and the moves out of every position (``_edges``):
on a 4x4 board (R in the millions) those pass ``MAX_BYTES`` for two policies, and ``check_size``
refuses them in one line before any policy is loaded (``cost``: the estimate it states).

Threads: on the CPU it runs on one torch thread. Its operations are small (a ply of one block
is a few MB), so a second thread gains little when the host is idle and, when other work
shares the cores, costs a lot: 100 policies took 22 s on two threads against 3 s on one, on
the 2-core host at a load of 4 (threads spinning while they wait for each other).
"""

from __future__ import annotations

import torch

from ttt_research.env import game as rules
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.solver import solve
from ttt_research.errors import UserError
from ttt_research.evaluation.tree import Tree, one_thread, tree  # one_thread: ratings, tournament use it

# Bytes of one block's value table (R, a, b, 2) float64; a ply's temporaries are about as
# large. Small blocks stay nearer the cache: on the 2-core host, 100 policies took 1.1-1.4 s
# at 16 MB (one X-policy against all 100 O-policies per block), 1.7 s at 32 MB, 6 s at 128 MB.
BLOCK_BYTES = 16 * 2**20
# The most cross-play may hold (``cost``): issue 59's budget for one exact evaluation. 3,4,3's
# 112k positions take 30 MB a policy; a 4x4 board's millions 1.5-2.5 GB a policy, refused.
MAX_BYTES = 3 * 10**9


def cost(positions: int, decisions: int, cells: int, n: int) -> int:
    """Bytes cross-play of n policies holds on a board of ``positions`` reachable positions,
    ``decisions`` of them with someone to move, and ``cells`` cells, at most: the policies as
    given (n, M, cells) and by row (R, n, cells) in float64, the moves out of every position
    (``_edges``: parent, cell and child row, at most ``cells`` a position) and two blocks."""
    policies = 8 * cells * n * (decisions + positions)
    return policies + 24 * decisions * cells + 2 * max(BLOCK_BYTES, 16 * positions)


def check_size(g: Game, n: int) -> None:
    """``UserError`` (one line) when n policies' cross-play on ``g`` would hold more than
    ``MAX_BYTES`` (``cost``); tic-tac-toe always fits."""
    if g == TIC_TAC_TOE:
        return
    facts = g.positions().facts
    need = cost(int(facts["reachable"]), int(facts["to_move"]), g.cells, n)
    if need > MAX_BYTES:
        raise UserError(f"cross-play of {n} policies on the {g.name} board ({int(facts['reachable']):,} "
                        f"positions x {g.cells} cells) would hold about {need / 1e9:.1f} GB, over the "
                        f"{MAX_BYTES / 1e9:g} GB this command allows; refused (evaluate scores one "
                        "policy on any board)")


def block_sizes(n: int, positions: int, block_bytes: int = BLOCK_BYTES) -> tuple[int, int]:
    """(a, b): X-policies and O-policies per block for n policies. All n O-policies against as
    many X-policies as fit; when not even one row of pairs fits, part of a row."""
    pairs = max(1, block_bytes // (positions * 2 * 8))
    return (min(n, pairs // n), n) if pairs >= n else (1, pairs)


def _by_row(c: Tree, probs: torch.Tensor) -> torch.Tensor:
    """(n, M, cells) probabilities at ``decision_codes(game)`` -> (R, n, cells) by compact
    row, zero at finished rows: following a move then gathers whole blocks of policies."""
    return c.by_row(probs)


Edges = list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]


def _edges(c: Tree) -> Edges:
    """Per ply, from the last down to 0, the legal moves out of its unfinished positions:
    (rows (r,), parent (e,) index into rows, cell (e,), child row (e,)). Only legal moves: a
    sum over all the cells would spend more than half its work on cells of probability 0."""
    out = []
    for ply in reversed(range(c.cells)):
        rows = c.plies[ply]
        parent, cell = c.legal[rows].nonzero(as_tuple=True)
        out.append((rows, parent, cell, c.next[rows[parent], cell]))
    return out


def _block(c: Tree, edges: Edges, px: torch.Tensor, po: torch.Tensor) -> torch.Tensor:
    """(a, b, 2) P(X wins), P(O wins) from the empty board: a X-policies px (R, a, cells)
    against b O-policies po (R, b, cells)."""
    a, b = px.shape[1], po.shape[1]
    start = torch.stack([c.winner == rules.X, c.winner == rules.O], -1).double()  # (R, 2)
    value = start[:, None, None, :].expand(-1, a, b, -1).clone()  # (R, a, b, 2); finished rows stay
    for ply, (rows, parent, cell, child) in zip(reversed(range(c.cells)), edges, strict=True):
        if c.ply_mover[ply] == rules.X:  # X's move probabilities vary along a
            w = px[rows[parent], :, cell][:, :, None, None]  # (e, a, 1, 1)
        else:  # O's along b
            w = po[rows[parent], :, cell][:, None, :, None]  # (e, 1, b, 1)
        acc = torch.zeros(rows.numel(), a, b, 2, dtype=torch.float64, device=px.device)
        acc.index_add_(0, parent, w * value.index_select(0, child))  # (r, a, b, 2)
        value[rows] = acc
    return value[c.empty]


def cross_play(probs: torch.Tensor, block_bytes: int = BLOCK_BYTES,
               game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """Exact outcome probabilities of every ordered pair of n policies.

    Args:
        probs: (n, M, cells) float64 move probabilities at ``exact.decision_codes(game)`` (M =
            4,520 on tic-tac-toe), each row a distribution over that position's empty cells.
        block_bytes: about how large one block's value table may be.
        game: the board the policies play.

    Returns:
        (n, n, 3) float64: ``[i, j]`` = (P(X wins), P(O wins), P(tie)) when policy i plays X
        and policy j plays O.
    """
    c = tree(str(probs.device), game)
    m = c.decision.numel()
    if probs.dim() != 3 or tuple(probs.shape[1:]) != (m, c.cells):
        raise ValueError(f"cross_play wants (n, {m}, {c.cells}) move probabilities, got {list(probs.shape)}")
    with one_thread(probs.device):  # why: the module's docstring, "Threads"
        return _cross_play(c, probs, block_bytes)


def _cross_play(c: Tree, probs: torch.Tensor, block_bytes: int) -> torch.Tensor:
    n = probs.shape[0]
    rows = _by_row(c, probs)  # (R, n, cells)
    a, b = block_sizes(n, c.size, block_bytes)
    edges = _edges(c)
    out = torch.empty(n, n, 3, dtype=torch.float64, device=probs.device)
    for i in range(0, n, a):
        for j in range(0, n, b):
            xo = _block(c, edges, rows[:, i:i + a], rows[:, j:j + b])  # (a, b, 2)
            out[i:i + a, j:j + b, :2] = xo
    out[..., 2] = (1 - out[..., 0] - out[..., 1]).clamp_min(0.0)
    return out


def with_responder(results: torch.Tensor, against: torch.Tensor, at: int,
                   game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """The cross-play table with the best-response participant added at index ``at``.

    Args:
        results: (n, n, 3) ``cross_play`` of n policies.
        against: (n, 2, 3) each policy's games against its own best response, from seat X and
            from seat O (``exploit.best_response_outcomes``).
        at: the responder's index among the n + 1 participants.
        game: the board, whose value the responder gets against itself.

    Returns:
        (n + 1, n + 1, 3): the responder's row (it plays X) holds each policy's games as O,
        its column each policy's games as X. Against itself the game's value: two players each
        best responding to the other are an equilibrium (tic-tac-toe: a tie; 3,4,3: X wins).
    """
    n = results.shape[0]
    keep = [k for k in range(n + 1) if k != at]
    out = torch.zeros(n + 1, n + 1, 3, dtype=results.dtype, device=results.device)
    out[torch.tensor(keep)[:, None], torch.tensor(keep)[None, :]] = results
    out[at, keep] = against[:, 1]
    out[keep, at] = against[:, 0]
    c = tree("cpu", game)
    value = int(solve(g=game).value[c.codes[c.empty]])  # +1 X wins, 0 a draw, -1 O wins
    out[at, at] = torch.tensor([value > 0, value < 0, value == 0], dtype=results.dtype)
    return out


def expected_result(results: torch.Tensor) -> torch.Tensor:
    """(n, n, 3) cross-play -> (n, n) expected result for the row player (X): +1 win, 0 tie,
    -1 loss, i.e. P(X wins) - P(O wins)."""
    return results[..., 0] - results[..., 1]


def points(results: torch.Tensor) -> torch.Tensor:
    """(n, n, 3) cross-play -> (n, n) expected points of the row player (X): 1 a win, 1/2 a
    tie, 0 a loss."""
    return results[..., 0] + 0.5 * results[..., 2]


def both_seats(results: torch.Tensor) -> torch.Tensor:
    """(n, n) ``S[i, j]``: i's expected result against j summed over both seats (i as X vs
    j, plus i as O vs j). Antisymmetric, zero on the diagonal: the first move's advantage
    cancels when each plays each seat once."""
    r = expected_result(results)
    return r - r.T


def standings(results: torch.Tensor) -> torch.Tensor:
    """(n, n, 3) cross-play -> (n, 4) the standings: each player's expected wins, ties, losses
    and points (1 a win, 1/2 a tie) over its 2 (n - 1) games against the others, one from each
    seat (its games against itself left out: they are its own win and loss)."""
    other = ~torch.eye(results.shape[0], dtype=torch.bool, device=results.device)[..., None]  # (n, n, 1)
    r = torch.where(other, results, 0.0)
    # As X (row i): wins [..., 0], losses [..., 1]; as O (column i): the other way round.
    wins = r[..., 0].sum(1) + r[..., 1].sum(0)
    losses = r[..., 1].sum(1) + r[..., 0].sum(0)
    ties = r[..., 2].sum(1) + r[..., 2].sum(0)
    return torch.stack([wins, ties, losses, wins + ties / 2], -1)
