"""The m,n,k game as a value: ``MNK(m, n, k)``, a board of m rows and n columns where the
first to put k pieces in a line (a row, a column or a diagonal) wins; X moves first.

Tic-tac-toe is ``MNK(3, 3, 3)``. This is the board's geometry: its cells, its lines, its
symmetries and its encoding, what the exact facts of any board start from
(``positions.py``). ``board.Game`` adds its rule tables: the value every layer is given.

* **Cells** row by row: cell ``r * n + c`` is row r, column c.
* **Lines**: every run of k cells in a row, a column or a diagonal, as index tuples.
* **Symmetries** as cell permutations: ``board[..., perm]`` is the board turned. A square
  has 8 (the rotations and reflections), a rectangle 4 (identity, the two mirrors and the
  half turn).
* **Codes**: a position's code is ``sum(digit_i * 3**i)``, digit 0 empty, 1 X, 2 O, as in
  ``game.py``; int64 holds every code of a board of up to 16 cells (3^16 < 2^26).

Only boards of at most ``MAX_CELLS`` cells with ``1 < k <= max(m, n)`` are games here; any
other is refused with ``ConfigError``, one line naming the keys.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ttt_research.contract import MAX_CELLS
from ttt_research.errors import ConfigError, UserError, is_int

EMPTY, X_DIGIT, O_DIGIT = 0, 1, 2


def problem(m, n, k, prefix: str = "game.") -> str | None:
    """Why ``(m, n, k)`` is no board this module plays (one line naming the keys), or None."""
    for key, v in (("m", m), ("n", n), ("k", k)):
        if not is_int(v) or v < 1:
            return f"{prefix}{key} must be a positive integer, got {v!r}"
    if m * n > MAX_CELLS:
        return (f"{prefix}m={m} {prefix}n={n}: a board of {m * n} cells; at most {MAX_CELLS} "
                f"(m * n <= {MAX_CELLS}: the positions of a larger board do not fit in memory)")
    if not 1 < k <= max(m, n):
        why = "one piece is no line" if k < 2 else f"no line of {k} fits on the board"
        return f"{prefix}k={k}: k must be in 2..{max(m, n)} on a {m}x{n} board (1 < k <= max(m, n): {why})"
    return None


def game_option(text: str | None) -> tuple[int, int, int] | None:
    """A command's ``--game M,N,K`` as three numbers (None when not given); ``UserError``
    naming the problem otherwise (``problem``: the boards training accepts), before torch loads."""
    if text is None:
        return None
    parts = text.split(",")
    sizes = [int(v) for v in parts if v.strip().isdigit()] if len(parts) == 3 else []
    why = problem(*sizes, prefix="") if len(sizes) == 3 else "not three whole numbers"
    if why is not None:
        raise UserError(f"--game {text[:40]!r} names no board ({why}); e.g. --game 3,4,3")
    return sizes[0], sizes[1], sizes[2]


def config_problem(g) -> str | None:
    """Why a composed ``game`` group (``conf/game/``: ``name``, ``m``, ``n``, ``k``) names no
    board here (one line naming the key: ``problem``, or ``game=ttt`` given another size:
    ``game=mnk`` is the option for any board), or None. No torch: the training command checks
    its config before torch loads."""
    board = (g.m, g.n, g.k)
    if (why := problem(*board)) is not None:
        return why
    if g.name == "ttt" and board != (3, 3, 3):
        return (f"game=ttt is the 3,3,3 board, got game.m={g.m} game.n={g.n} game.k={g.k}; "
                "choose game=mnk for another board")
    return None


@dataclass(frozen=True)
class MNK:
    """An m,n,k board; ``MNK(3, 3, 3)`` is tic-tac-toe. Refuses a board ``problem`` names."""

    m: int
    n: int
    k: int

    def __post_init__(self):
        if (why := problem(self.m, self.n, self.k)) is not None:
            raise ConfigError(why)

    @property
    def cells(self) -> int:
        return self.m * self.n

    @property
    def name(self) -> str:
        return f"{self.m},{self.n},{self.k}"

    @property
    def placements(self) -> int:
        """How many boards hold as many X as O, or one X more: every reachable position is one,
        and a line ends a game before the board fills, so fewer are reached (5,478 of 6,046 on
        tic-tac-toe; of 10,165,779 on 4x4, 9,722,011 with four in a row, 6,036,001 with three).
        A bound known before the positions are built (a run's memory estimate)."""
        c = self.cells  # o O pieces, then o or o + 1 X pieces in the cells left
        return sum(math.comb(c, o) * (math.comb(c - o, o) + math.comb(c - o, o + 1))
                   for o in range(c // 2 + 1))

    @functools.cached_property
    def lines(self) -> tuple[tuple[int, ...], ...]:
        """Every line of k cells: rows, columns, then both diagonals, each as cell indices."""
        m, n, k = self.m, self.n, self.k
        out = []
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            for r in range(m):
                for c in range(n):
                    end_r, end_c = r + dr * (k - 1), c + dc * (k - 1)
                    if 0 <= end_r < m and 0 <= end_c < n:
                        out.append(tuple((r + dr * i) * n + c + dc * i for i in range(k)))
        return tuple(out)

    @functools.cached_property
    def symmetries(self) -> np.ndarray:
        """(8 or 4, cells) int64 cell permutations, row 0 the identity: ``board[..., s]`` is
        the board turned by s. 8 on a square; 4 on a rectangle (a quarter turn would swap
        m and n)."""
        grid = np.arange(self.cells).reshape(self.m, self.n)
        if self.m == self.n:
            turns = [np.rot90(grid, t) for t in range(4)]
            perms = turns + [t.T for t in turns]
        else:
            perms = [grid, grid[::-1], grid[:, ::-1], grid[::-1, ::-1]]
        return np.stack([p.reshape(-1) for p in perms]).astype(np.int64)

    @functools.cached_property
    def pow3(self) -> np.ndarray:
        """(cells,) int64 the place value of each cell in a code."""
        return 3 ** np.arange(self.cells, dtype=np.int64)

    def encode(self, boards: np.ndarray) -> np.ndarray:
        """(B, cells) boards, +1 X / -1 O / 0 empty -> (B,) int64 codes."""
        return (np.remainder(np.asarray(boards, dtype=np.int64), 3) * self.pow3).sum(-1)

    def digits(self, codes: np.ndarray) -> np.ndarray:
        """(B,) codes -> (B, cells) int8 digits (0 empty, 1 X, 2 O)."""
        return _by_lookup(codes, self.cells, _DIGITS)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """(B,) codes -> (B, cells) int8 boards, +1 X / -1 O / 0 empty."""
        return _by_lookup(codes, self.cells, _PIECES)

    def transposed(self) -> MNK:
        """The same game on the board turned on its side (n rows, m columns)."""
        return MNK(self.n, self.m, self.k)


TIC_TAC_TOE = MNK(3, 3, 3)

# A code's digits are read ``LOOKUP`` at a time from a (3^LOOKUP, LOOKUP) table of every number's
# digits: two divisions and two gathers a 4x4 code, where a division a cell took 1.7 s of 4,4,4's
# 9.7M codes (0.5 s now; every process that loads the board decodes them).
LOOKUP = 8
_DIGITS = (np.arange(3**LOOKUP)[:, None] // 3 ** np.arange(LOOKUP) % 3).astype(np.int8)  # (3^8, 8)
_PIECES = np.where(_DIGITS == O_DIGIT, -1, _DIGITS).astype(np.int8)  # the same, as pieces


def _by_lookup(codes: np.ndarray, cells: int, table: np.ndarray) -> np.ndarray:
    """(B,) codes -> (B, cells) int8: each cell's digit as ``table`` gives it (``_DIGITS`` or
    ``_PIECES``), ``LOOKUP`` cells a gather; one (B,) int64 temporary."""
    rest = np.array(codes, dtype=np.int64).reshape(-1)  # a copy: divided in place
    out = np.empty((rest.size, cells), dtype=np.int8)
    for lo in range(0, cells, LOOKUP):
        out[:, lo:lo + LOOKUP] = table[rest % 3**LOOKUP, :min(LOOKUP, cells - lo)]
        rest //= 3**LOOKUP
    return out

