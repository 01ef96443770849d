"""A stochastic policy's exact figures on another board in one backward pass: both seats at once.

``exploit.policy_reports`` needs, for each seat the policy plays, three sums over the game tree
from the empty board: the best response's value and the outcomes against the random and the
perfect opponent. On tic-tac-toe they are three passes over its 5,478 rows (``exploit``); on
another board (4,4,4: 9.7M rows, every one reached by a softmax policy) this module makes them
in one pass from the full boards back to the empty one, keeping two plies' values (the rows come
ply after ply, ``Tree.offsets``), for both seats together: a row's values are (2, n, 7), by
seat (``contract.EVAL_SEATS``), policy and column (0 the best response's value from its side,
1:4 P(X wins), P(O wins), P(tie) against random, 4:7 the same against perfect). So each move
is followed once for the 14 columns of the two seats, where the seats' own passes followed it
twice, and a block's children are gathered in one call and weighed in place (three
multiplications, no table of weights), then added in order.

Bit for bit the sums of the passes over every row (tests/evaluation/test_any_board.py): at a
row, each column adds its children's terms one empty cell after the other, in cell order
(``Tree.kth``), as the passes do from cell 0 (a taken cell's term there is a zero weight times
some value, which adds nothing, and it is never the best child). At the ply of the seat's
policy every column weighs a child with the policy's probability; at its opponent's ply column
0 takes the best child and the others weigh it with the opponent's: random's 1 / (empty cells)
(``solver.uniform_over``'s number) and perfect's share of the optimal moves.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from ttt_research.contract import EVAL_SEATS, SEAT_PIECE
from ttt_research.env import game as rules
from ttt_research.evaluation.tree import Tree, Workers

Ply = Callable[[int, int, int], torch.Tensor]  # (ply, lo, hi) -> (r, n, cells) float64 probabilities
# Rows per block of a ply: a block's children's (e, r, 2, n, 7) float64 values (7.3 MB a member at
# 8,192 rows and 8 empty cells) stay in the shared cache while they are weighed and added. On one
# thread 4,096 to 16,384 rows take the same time; on two, 8,192 gave fewer switches between the
# threads than 4,096 (each operation lets the other thread run) for the same cache (4,4,4: ~5% less).
BLOCK = 2**13
PIECES = [SEAT_PIECE[s] for s in EVAL_SEATS]  # the piece of each seat axis entry


def _finished(c: Tree, lo: int, hi: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows ``lo:hi`` (one ply) that are finished boards: (f,) their positions from ``lo``,
    and (f, 2, n, 7) their values (the result from the responder's side, then two one-hot
    outcomes)."""
    at = c.done[lo:hi].nonzero().squeeze(-1)
    w = c.winner[lo:hi].index_select(0, at)
    result = torch.stack([w == rules.X, w == rules.O, w == 0], -1).double()  # (f, 3)
    seats = [torch.cat([(w * -seat).double()[:, None], result, result], -1) for seat in PIECES]  # (f, 7)
    return at, torch.stack(seats, 1)[:, :, None].expand(-1, -1, n, -1)


def both_seats(c: Tree, pol: Ply, n: int, workers: Workers | None = None) -> torch.Tensor:
    """(n, 2, 7) from the empty board: for each of n policies ``pol`` and each seat (the seat
    axis in ``EVAL_SEATS`` order) the best response's value (column 0), the outcomes vs random
    (1:4) and vs perfect (4:7); see the module. A ply's blocks are shared among ``workers``
    (each writes its own rows; none reads another's)."""
    workers = workers or Workers(1)
    device = c.legal.device
    # Two tables of the largest ply's rows, each ply written into the one its children are not
    # in: a fresh table a ply touched 1.1 GB of new pages on 4,4,4 (0.4 s of page faults).
    tall = max(c.offsets[p + 1] - c.offsets[p] for p in range(c.cells + 1))
    tables = [torch.empty(tall, 2, n, 7, dtype=torch.float64, device=device) for _ in range(2)]
    child = None
    for ply in reversed(range(c.cells + 1)):
        first, last = c.offsets[ply], c.offsets[ply + 1]
        value = tables[ply % 2][:last - first]  # (h, 2, n, 7)
        at, ends = _finished(c, first, last, n)
        value.index_copy_(0, at, ends)
        if ply < c.cells:
            fill = functools.partial(_block, c, pol, n, ply, value, child)
            workers.map(fill, range(0, c.plies[ply].numel(), BLOCK))
        child = value
    return child[c.empty].permute(1, 0, 2)


def _block(c: Tree, pol: Ply, n: int, ply: int, value: torch.Tensor, child: torch.Tensor, lo: int) -> None:
    """Fill the unfinished rows ``lo:lo + BLOCK`` of ``ply`` in ``value`` (its rows from the
    ply's first) from the next ply's ``child`` values."""
    first, base = c.offsets[ply], c.offsets[ply + 1]
    empty = c.cells - ply  # every unfinished row of the ply has this many empty cells
    mover = PIECES.index(c.ply_mover[ply])  # the seat whose policy moves here; the other responds
    other = 1 - mover
    at_cells = getattr(pol, "at_cells", None)  # (ply, lo, hi, cells) -> (r, n, e), where a policy has it
    rows = c.plies[ply][lo:lo + BLOCK]  # (r,) int32
    r = rows.numel()
    cells = empty_cells(c, ply, rows)  # (r, e) the empty cells, ascending
    kids = c.next.index_select(0, rows).gather(1, cells).sub_(base)  # (r, e) int32 next ply's rows
    # Every child's values at once, (e, r, 2, n, 7), each then weighed in place: by the
    # policy's probability in every column of its seat, by the opponent's in the other's
    # columns 1:7 (column 0 keeps the child's value: the responder takes the best).
    v = child.index_select(0, kids.T.reshape(-1)).view(empty, r, 2, n, 7)
    p = (at_cells(ply, lo, lo + r, cells) if at_cells is not None  # (r, n, e)
         else pol(ply, lo, lo + r).gather(2, cells[:, None, :].expand(-1, n, -1)))
    v[:, :, mover].mul_(p.permute(2, 0, 1)[..., None])
    v[:, :, other, :, 1:4].mul_(1.0 / empty)  # random: uniform over the empty cells (uniform_over's)
    perfect = c.optimal.index_select(0, rows).gather(1, cells).double()  # (r, e)
    perfect /= perfect.sum(-1, keepdim=True).clamp_min(1.0)  # uniform over the optimal moves
    v[:, :, other, :, 4:].mul_(perfect.T[:, :, None, None])
    best = v[:, :, other, :, 0].amax(0)  # (r, n) the responder's best child
    acc = v[0]  # (r, 2, n, 7): the first child's terms, then the others added in place
    for e in range(1, empty):  # the children's terms one after the other, in cell order
        acc.add_(v[e])
    acc[:, other, :, 0] = best
    value.index_copy_(0, (rows - first).long(), acc)


# --------------------------------------------------------------------------- logits by ply
#
# One agent's (M, cells) float32 logits are 0.58 GB on 4,4,4; the pass above reads, at each
# row, only its empty cells' (an occupied cell's logit is masked to -inf before the softmax).
# So an evaluation keeps each ply's (u, e) logits at the empty cells (0.22 GB) and puts a
# block's back in their cells where the pass reads it: the softmax sees the same numbers.


def at_empty_cells(c: Tree, logits: torch.Tensor) -> list[torch.Tensor]:
    """(M, cells) logits at the decision positions -> per ply, (u, e) at the ply's unfinished
    rows (``Tree.plies``) and their empty cells in cell order (``Tree.kth``)."""
    parts, lo = [], 0
    for ply, rows in enumerate(c.plies):  # a ply's decision positions follow the last ply's
        parts.append(logits[lo:lo + rows.numel()].gather(1, empty_cells(c, ply, rows)))
        lo += rows.numel()
    return parts


def scattered(c: Tree, parts: list[torch.Tensor], ply: int, lo: int, hi: int) -> torch.Tensor:
    """(r, cells) the logits of rows ``lo:hi`` of ``ply`` from ``at_empty_cells``' ``parts``,
    each in its cell (0 in the occupied ones, which the softmax masks)."""
    rows = c.plies[ply][lo:hi]
    part = parts[ply][lo:hi]
    return torch.zeros(rows.numel(), c.cells, dtype=part.dtype, device=part.device).scatter_(
        1, empty_cells(c, ply, rows), part)


def empty_cells(c: Tree, ply: int, rows: torch.Tensor) -> torch.Tensor:
    """(r, e) int64 the empty cells of ``rows`` (all of one ply), ascending."""
    return c.kth.index_select(0, rows)[:, :c.cells - ply].long()


# --------------------------------------------------------------------------- the greedy report's outcomes


def outcome_tables(c: Tree, n: int, device: torch.device | str) -> list[torch.Tensor]:
    """The two (h, n, 2, 3) float64 tables ``greedy_outcomes`` fills, h the tallest ply's rows;
    zeros (a row no agent reaches is never read, but then holds a number, never garbage). Made
    once for both seats: each made anew was 190 MB of new pages on 4,4,4."""
    tall = max(c.offsets[p + 1] - c.offsets[p] for p in range(c.cells + 1))
    return [torch.zeros(tall, n, 2, 3, dtype=torch.float64, device=device) for _ in range(2)]


def greedy_outcomes(c: Tree, act: torch.Tensor, seat: int, plies: list[torch.Tensor],
                    tables: list[torch.Tensor] | None = None) -> torch.Tensor:
    """``exact._outcomes`` on another board against both fixed opponents at once: (2, n, 3) P(X
    wins), P(O wins), P(tie) from the empty board of n agents (``act``: (R, n) moves) as ``seat``
    against ``"random"`` (first) and ``"perfect"``, filling ``plies``' rows (the reached ones)
    from two plies' tables (``outcome_tables``), a block of ``BLOCK`` rows at a time, in place of
    four passes over (R, n, 3) tables (233 MB a table on 4,4,4, each on new pages).

    Bit for bit ``exact._outcomes``: at the agent's rows the chosen child's row; at the
    opponent's its children's terms, each weighed by the opponent's probability, added from the
    first empty cell in cell order, where that pass adds a zero term for each taken cell (a zero
    weight times a value: nothing)."""
    n = act.shape[1]
    tables = tables or outcome_tables(c, n, act.device)  # (``outcome_tables``)
    child = None
    for ply in reversed(range(c.cells + 1)):
        first, last = c.offsets[ply], c.offsets[ply + 1]
        value = tables[ply % 2][:last - first]  # (h, n, 2, 3)
        at = c.done[first:last].nonzero().squeeze(-1)
        w = c.winner[first:last].index_select(0, at)
        ends = torch.stack([w == rules.X, w == rules.O, w == 0], -1).double()  # (f, 3)
        value.index_copy_(0, at, ends[:, None, None].expand(-1, n, 2, -1))
        if ply < c.cells:
            for lo in range(0, plies[ply].numel(), BLOCK):
                _outcome_block(c, act, seat, plies[ply][lo:lo + BLOCK], ply, value, child)
        child = value
    return child[c.empty].transpose(0, 1).clone()


def _outcome_block(c: Tree, act: torch.Tensor, seat: int, rows: torch.Tensor, ply: int,
                   value: torch.Tensor, child: torch.Tensor) -> None:
    """``greedy_outcomes``' rows ``rows`` (of ``ply``) in ``value`` from the next ply's ``child``."""
    first, base = c.offsets[ply], c.offsets[ply + 1]
    n = act.shape[1]
    if c.ply_mover[ply] == seat:  # the agent's own move: its child's row
        kids = c.next.index_select(0, rows).gather(1, act.index_select(0, rows)).sub_(base)  # (r, n)
        acc = child[kids, torch.arange(n, device=act.device)]  # (r, n, 2, 3)
    else:
        cells = empty_cells(c, ply, rows)  # (r, e)
        e, r = cells.shape[1], rows.numel()
        kids = c.next.index_select(0, rows).gather(1, cells).sub_(base)  # (r, e)
        weights = torch.stack([c.opponent(o, rows).gather(1, cells) for o in ("random", "perfect")])
        # (2, r, e): each opponent's probabilities
        v = child.index_select(0, kids.T.reshape(-1)).view(e, r, n, 2, 3)
        v.mul_(weights.permute(2, 1, 0)[:, :, None, :, None])  # each child's terms, in place
        acc = v[0]
        for k in range(1, e):  # added in cell order
            acc.add_(v[k])
    value.index_copy_(0, (rows - first).long(), acc)
