"""Tic-tac-toe rules as batched tensor operations.

This module owns the rules and nothing else: boards, legal moves, the winner, whose turn
it is, and stepping B games at once (B from 1 to millions) on CPU or CUDA, with no
Python loop over games.

Two layers, as in pgx:

* **Pure rules on boards** (``winner``, ``legal_mask``, ``to_move``, ``encode``,
  ``decode``): a board is a ``(B, 9)`` integer tensor with ``+1`` for X, ``-1`` for O and
  ``0`` for an empty cell, laid out row by row::

        0 | 1 | 2
       ---+---+---
        3 | 4 | 5
       ---+---+---
        6 | 7 | 8

  X always moves first, so the player to move follows from the board: X when the
  pieces are level, O otherwise.

* **Lookup tables over all 3^9 = 19,683 board codes** (``tables``). A board's code is
  ``sum(digit_i * 3**i)`` with digit 0 empty, 1 X, 2 O. The tables are built once from
  the pure rules (the winner through the 8-line table) and then every rule is a gather:
  ``next[code, cell]`` is the code after the mover plays ``cell``, ``winner[code]`` and
  ``done[code]`` say how it ended. ``Games`` keeps B codes and steps them with auto-reset.

Edge cases are fixed rules, not errors (so a batched step never branches per game):

* **A move on an occupied cell, or outside 0..8, forfeits**: the board is unchanged, the
  game ends (``done``), ``illegal`` is set and the mover loses (``winner = -mover``).
  With action masking on, learners never trigger it; with masking off (PPO's
  ``algo.masking=false``) this is the seed's "illegal move ends the game" rule. The
  forfeit lives in the step's result, not in the code (a forfeited board looks unfinished),
  so whoever steps must restart that game: ``Games`` does.
* **A move on a finished board changes nothing**: the code, its winner and its done flag
  stay as they were, ``illegal`` is not set, and the step reports no new ending
  (``ended`` is False). ``Games`` never holds a finished board: it resets them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ttt_research.env.streams import uniform

CELLS = 9
N_CODES = 3**CELLS  # 19,683 codes, of which 5,478 are reachable from the empty board
X, O, EMPTY = 1, -1, 0
EMPTY_CODE = 0

# The 8 lines that win: 3 rows, 3 columns, 2 diagonals. (8, 3) cell indices.
LINES = torch.tensor(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]
)
POW3 = 3 ** torch.arange(CELLS)  # (9,) place value of each cell in a code


# --------------------------------------------------------------------------- pure rules


def winner(boards: torch.Tensor) -> torch.Tensor:
    """(B, 9) boards -> (B,) int8: +1 X has a line, -1 O has a line, 0 neither.

    One gather of the 8 lines, one sum, two comparisons; no branch per game. A legal
    game never has both players on a line, so the two tests cannot both be true.
    """
    line_sums = boards[:, LINES.to(boards.device)].sum(-1)  # (B, 8) in -3..3
    x_won = (line_sums == 3).any(-1)
    o_won = (line_sums == -3).any(-1)
    return (x_won.to(torch.int8) - o_won.to(torch.int8))


def legal_mask(boards: torch.Tensor) -> torch.Tensor:
    """(B, 9) boards -> (B, 9) bool: the empty cells (ignores whether the game is over)."""
    return boards == EMPTY


def to_move(boards: torch.Tensor) -> torch.Tensor:
    """(B, 9) boards -> (B,) int8: X (+1) when the pieces are level, else O (-1)."""
    return torch.where(boards.sum(-1) == 0, X, O).to(torch.int8)


def encode(boards: torch.Tensor) -> torch.Tensor:
    """(B, 9) boards in {-1, 0, 1} -> (B,) int64 codes (O's -1 becomes digit 2)."""
    digits = torch.remainder(boards.long(), 3)
    return (digits * POW3.to(boards.device)).sum(-1)


_EMPTY_VIEW_CODE = (3**CELLS - 1) // 2  # 9,841 = sum of 3^i: the code of the empty view


def view_code(view: torch.Tensor) -> torch.Tensor:
    """(..., 9) mover's views -> (...,) base-3 codes (digits: 0 opponent, 1 empty, 2 own);
    equal codes, equal views. Not ``encode``'s digits (those are X/O, not own/opponent).
    ``sum((v + 1) 3^i) = v . 3^i + sum(3^i)``: one matrix-vector product (exact in float32:
    |v . 3^i| <= 9,841) instead of four (B, 9) operations."""
    return (view.float() @ _pow3_float(view.device)).long() + _EMPTY_VIEW_CODE


@functools.cache
def _pow3_float(device: torch.device) -> torch.Tensor:
    """``POW3`` as float32 on ``device``, once per device (a GPU would otherwise wait for a copy
    at every learner ply)."""
    return POW3.to(device, torch.float32)


def decode(codes: torch.Tensor) -> torch.Tensor:
    """(B,) codes -> (B, 9) int8 boards."""
    digits = torch.div(codes.long()[:, None], POW3.to(codes.device), rounding_mode="floor") % 3
    return torch.where(digits == 2, -1, digits).to(torch.int8)


@functools.cache
def symmetries() -> torch.Tensor:
    """(8, 9) int64 the board's 8 symmetries (rotations and reflections) as cell
    permutations: ``board[..., SYM[k]]`` is the board turned by symmetry k (row 0: the
    identity). A position's moves turn with it: ``policy[..., SYM[k]]`` too. Built once
    (a learner turns every minibatch with it); do not write into it."""
    grid = torch.arange(CELLS).view(3, 3)
    turns = [torch.rot90(grid, k) for k in range(4)]
    return torch.stack([g.reshape(-1) for g in turns + [t.t() for t in turns]])


def turned(cells: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(..., 9) boards or per-cell values, (...) symmetry indices in 0..7 -> each turned by
    its symmetry (``symmetries``): a position and its per-cell targets turn alike."""
    return cells.gather(-1, symmetries().to(cells.device)[k])


def turned_cell(cell: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(...) cell indices, (...) symmetry indices -> where each cell lands when its board is
    ``turned`` by k: ``turned(board, k)[..., turned_cell(c, k)] == board[..., c]``."""
    return _inverse_symmetries(cell.device)[k, cell.long()]


@functools.cache
def _inverse_symmetries(device: torch.device) -> torch.Tensor:
    """(8, 9) cell -> its place after symmetry k (``symmetries``' inverse permutations), once
    per device (a learner turns every minibatch)."""
    return symmetries().argsort(-1).to(device)


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Tables:
    """Every rule, precomputed for all 19,683 codes (unreachable codes included: they are
    harmless and keep indexing trivial). All tensors live on one device."""

    board: torch.Tensor  # (N, 9) int8, +1 X / -1 O / 0 empty
    view: torch.Tensor  # (N, 9) int8, the mover's view: +1 own / -1 opponent / 0 empty
    mover: torch.Tensor  # (N,) int8, +1 X to move, -1 O to move
    ply: torch.Tensor  # (N,) int64, pieces on the board
    winner: torch.Tensor  # (N,) int8, +1 X won, -1 O won, 0 nobody (yet)
    done: torch.Tensor  # (N,) bool, somebody won or the board is full
    legal: torch.Tensor  # (N, 9) bool, empty cells of unfinished boards
    n_legal: torch.Tensor  # (N,) int64
    kth_legal: torch.Tensor  # (N * 9,) int64, flat: [code * 9 + k] is the k-th legal cell
    next: torch.Tensor  # (N * 9,) int64, flat: [code * 9 + cell] is the code after the move
    reachable: torch.Tensor  # (N,) bool, reachable from the empty board by legal play
    # What a move in 0..8 does, flat like ``next`` (``step`` reads these and ``next``: 4 gathers
    # where the rules took 6 gathers and 14 operations each move):
    ends: torch.Tensor  # (N * 9,) bool, the move ends the game (a win, the last cell, a forfeit)
    forfeits: torch.Tensor  # (N * 9,) bool, the cell is occupied on an unfinished board
    wins: torch.Tensor  # (N * 9,) int8, the winner when the move ends the game (-mover on a forfeit), else 0

    @property
    def cells(self) -> int:
        """The board's cells (9 for tic-tac-toe): the width of every per-cell table."""
        return self.legal.shape[1]

    @property
    def states(self) -> int:
        """N, the rows of every per-position table: all 3^9 codes for tic-tac-toe, the
        reachable positions of another board (``env/indexed.py``)."""
        return self.legal.shape[0]

    @property
    def next2d(self) -> torch.Tensor:
        """(N, cells) view of ``next``."""
        return self.next.view(self.states, self.cells)


def _build_tables() -> Tables:
    codes = torch.arange(N_CODES)
    board = decode(codes)  # (N, 9)
    mover = to_move(board)
    win = winner(board)
    full = (board != EMPTY).all(-1)
    done = (win != 0) | full
    legal = legal_mask(board) & ~done[:, None]

    # Playing an empty cell adds mover's digit (1 for X, 2 for O) times the cell's place value.
    mover_digit = torch.where(mover == X, 1, 2).long()  # (N,)
    nxt = codes[:, None] + mover_digit[:, None] * POW3[None, :]  # (N, 9)
    nxt = torch.where(legal, nxt, codes[:, None])  # illegal / finished: unchanged

    # k-th legal cell: sort cells so that legal ones come first, in cell order.
    order = torch.argsort((~legal).to(torch.int8) * CELLS + torch.arange(CELLS), dim=-1)

    # Reachability: breadth-first from the empty board, one ply at a time.
    reachable = torch.zeros(N_CODES, dtype=torch.bool)
    frontier = torch.tensor([EMPTY_CODE])
    reachable[frontier] = True
    while frontier.numel():
        children = nxt[frontier][legal[frontier]].unique()
        frontier = children[~reachable[children]]
        reachable[frontier] = True

    # The step's results for every (code, cell) (``step``'s rules, a cell in 0..8).
    forfeits = ~(legal | done[:, None])  # (N, 9)
    ends = (done[nxt] & ~done[:, None]) | forfeits
    wins = torch.where(forfeits, -mover[:, None], win[nxt]) * ends

    return Tables(
        board=board,
        view=(board * mover[:, None]).to(torch.int8),
        mover=mover,
        ply=(board != EMPTY).sum(-1),
        winner=win,
        done=done,
        legal=legal,
        n_legal=legal.sum(-1),
        kth_legal=order.reshape(-1).contiguous(),
        next=nxt.reshape(-1).contiguous(),
        reachable=reachable,
        ends=ends.reshape(-1).contiguous(),
        forfeits=forfeits.reshape(-1).contiguous(),
        wins=wins.to(torch.int8).reshape(-1).contiguous(),
    )


@functools.cache
def _tables_on(device: str) -> Tables:
    cpu = _tables_cpu()
    if device == "cpu":
        return cpu
    return Tables(**{k: v.to(device) for k, v in vars(cpu).items()})


@functools.lru_cache(maxsize=1)
def _tables_cpu() -> Tables:
    return _build_tables()


def tables(device: torch.device | str = "cpu") -> Tables:
    """The rule tables on ``device``, built once per process and cached per device."""
    return _tables_on(str(torch.device(device)))


# --------------------------------------------------------------------------- stepping


class Step(NamedTuple):
    """What one move did to B games. All (B,) tensors."""

    code: torch.Tensor  # int64 code after the move (before any reset)
    ended: torch.Tensor  # bool, the game ended with this move (win, full board or forfeit)
    winner: torch.Tensor  # int8, +1 X / -1 O / 0 for games that ended; 0 for the others
    illegal: torch.Tensor  # bool, the move forfeited (occupied cell or index outside 0..8)


def at(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for a table of per-code rows: ``index_select`` when the index is
    one-dimensional (about 3x faster than advanced indexing on the CPU for a batch of a
    few thousand: it skips the general indexing machinery), advanced indexing otherwise."""
    return table.index_select(0, index) if index.dim() == 1 else table[index]


def step(code: torch.Tensor, action: torch.Tensor, t: Tables | None = None) -> Step:
    """Play ``action`` (B,) on boards ``code`` (B,) for whoever is to move. Pure: no reset.

    Follows the module's edge-case rules: an occupied or out-of-range cell forfeits; a
    finished board is left alone.
    """
    t = t or tables(code.device)
    cells = t.cells
    # The usual case, every move in 0..8, checked on the CPU only (a GPU would wait for it).
    inside = action.device.type == "cpu" and action.numel() > 0 and _in_cells(action, cells)
    cell = action if inside else action.clamp(0, cells - 1)
    flat = torch.add(cell, code, alpha=cells)  # code * 9 + cell, one operation
    # ``.long()``: another board's tables hold int32 rows (a no-op on tic-tac-toe's int64).
    s = Step(at(t.next, flat).long(), at(t.ends, flat), at(t.wins, flat), at(t.forfeits, flat))
    if inside:
        return s
    # A move outside 0..8 (the tables hold 0..8) forfeits, unless the board is finished.
    outside = (cell != action) & ~at(t.done, code)
    return Step(torch.where(outside, code, s.code), s.ended | outside,
                torch.where(outside, -at(t.mover, code), s.winner), s.illegal | outside)


def _in_cells(action: torch.Tensor, cells: int = CELLS) -> bool:
    """Every move of ``action`` (B,), B > 0, is a cell in 0..cells-1 (one pass for both ends)."""
    low, high = torch.aminmax(action)
    return bool(low >= 0) and bool(high < cells)


def random_moves(code: torch.Tensor, generator=None, t: Tables | None = None) -> torch.Tensor:
    """(B,) codes -> (B,) uniformly random legal cells (cell 0 for finished boards); with
    ``streams.Streams`` as the generator, (N, B) codes of a population, row k drawn from
    member k's stream.

    Draws k uniform in [0, n_legal) and looks up the k-th legal cell: three gathers and
    no (B, 9) tensor, which is what makes random play cheap.
    """
    t = t or tables(code.device)
    flat = code.reshape(-1)
    n = at(t.n_legal, flat)
    u = uniform(code.shape, code.device, generator).reshape(-1)
    k = (u * n).long().clamp_max(t.cells - 1)
    return at(t.kth_legal, flat * t.cells + k).long().view(code.shape)


class Games:
    """B games in flight, stepped together, each restarted on the empty board when it ends.

    ``code`` (B,) is the whole state; everything else (boards, views, masks, the mover)
    is a gather from ``tables``. ``step`` returns what the move did, including how the
    games that just ended finished, and then resets those games in place.
    """

    def __init__(self, batch: int, device: torch.device | str = "cpu", t: Tables | None = None):
        self.t = t or tables(device)
        self.code = torch.full((batch,), EMPTY_CODE, dtype=torch.long, device=device)

    @property
    def batch(self) -> int:
        return self.code.numel()

    def view(self) -> torch.Tensor:
        """(B, 9) int8: each board from the view of the player to move."""
        return self.t.view[self.code]

    def legal(self) -> torch.Tensor:
        """(B, 9) bool legal-move masks."""
        return self.t.legal[self.code]

    def mover(self) -> torch.Tensor:
        """(B,) int8: +1 when X is to move, -1 for O."""
        return self.t.mover[self.code]

    def step(self, action: torch.Tensor) -> Step:
        """Play one move in every game; games that end are reset to the empty board."""
        s = step(self.code, action, self.t)
        self.code = torch.where(s.ended, EMPTY_CODE, s.code)
        return s


# --------------------------------------------------------------------------- boards from outside

# A board read from a file or a request may be any of the 19,683 codes, including boards no
# game reaches: ``winner`` then says 0 when both sides have a line, and a lookup keyed on
# "unfinished" lands on another position. Training never meets such codes, so the rules
# above stay as they are; outside boards go through this verdict instead.
TO_MOVE, BAD_COUNTS, BOTH_LINES, PLAYED_ON, UNREACHABLE, WON, FULL = range(7)


@functools.cache
def verdicts() -> torch.Tensor:
    """(N,) int8 per code: ``TO_MOVE`` for the 4,520 positions where somebody is to move
    (reachable, unfinished), else why not, the first that applies: ``BAD_COUNTS`` (x is not
    o or o + 1), ``BOTH_LINES``, ``PLAYED_ON`` (a side has a line, yet the other moved
    after it), ``UNREACHABLE`` (anything else no game reaches), ``WON``, ``FULL``."""
    t = tables()
    sums = t.board[:, LINES].sum(-1)  # (N, 8) in -3..3
    x_line, o_line = (sums == 3).any(-1), (sums == -3).any(-1)
    lead = (t.board == X).sum(-1) - (t.board == O).sum(-1)  # x minus o
    rules = [  # (reason, where it applies), in the order of the docstring
        (BAD_COUNTS, (lead != 0) & (lead != 1)),
        (BOTH_LINES, x_line & o_line),
        (PLAYED_ON, x_line & (lead == 0) | o_line & (lead == 1)),  # X wins on its move: x = o + 1
        (UNREACHABLE, ~t.reachable),
        (WON, x_line | o_line),
        (FULL, t.done),
    ]
    verdict = torch.full((N_CODES,), TO_MOVE, dtype=torch.int8)
    for reason, applies in reversed(rules):  # the earliest rule is written last, so it wins
        verdict[applies] = reason
    return verdict


def outside_problem(code: int) -> str | None:
    """Why the board ``code`` (from outside: a file, a request) is no position where somebody
    is to move, to follow "the board is ..."; None when somebody is to move."""
    reason = int(verdicts()[code])
    if reason == TO_MOVE:
        return None
    board = tables().board[code]
    nx, no = int((board == X).sum()), int((board == O).sum())
    x_lined = (reason == PLAYED_ON and nx == no) or (reason == WON and int(tables().winner[code]) == X)
    line, other = ("x", "o") if x_lined else ("o", "x")  # who has the line, and the other side
    return {
        BAD_COUNTS: f"impossible: {nx} x and {no} o (X moves first, so x = o or o + 1)",
        BOTH_LINES: "impossible: both x and o have three in a row (the game ends at the first line)",
        PLAYED_ON: f"impossible: {line} has three in a row, yet {other} moved after the game was over",
        UNREACHABLE: "impossible: no game of tic-tac-toe reaches it",
        WON: f"a finished game ({line} has three in a row): nobody is to move",
        FULL: "a finished game (the board is full): nobody is to move",
    }[reason]
