"""The rule tables (``game.Tables``) of any m,n,k board, one row per reachable position.

Tic-tac-toe's tables have a row for each of the 3^9 codes, so a board's code is its row.
A 4x4 board has 3^16 = 43M codes, and a row per code and cell would not fit; its rows are
the reachable positions instead (``positions.Positions``: 9.7M on 4,4,4), in the cache's
order, ply after ply. The empty board is row 0 in both layouts, a move's result is still a
gather of ``next``, and every other layer reads the same fields, so stepping, random play
and evaluation do not ask which layout they hold.

Narrower types than tic-tac-toe's keep 4,4,4 near 1.8 GB: ``next`` int32 (row numbers
below 2^31), ``kth_legal`` int8 (a cell), ``ply`` and ``n_legal`` int8; the readers cast
what they index with (``.long()``, a no-op on tic-tac-toe's int64).

``board`` and the step's tables (``ends``, ``forfeits``, ``wins``) are made where they are
first read (``Indexed``): an exact evaluation reads none of them, and on 4,4,4 they are
0.6 GB of its peak (the board is the mover's view times the mover, the others as
``game._build_tables`` makes them). A training run reads them at its first step.
"""

from __future__ import annotations

import numpy as np
import torch

from ttt_research.env.game import O, Tables, X
from ttt_research.env.mnk import MNK
from ttt_research.env.positions import Positions

# Rows per step of ``kth_legal``: its (rows, cells) int32 temporary stays near 64 MB.
PATTERN_ROWS = 2**20
# The fields made on first read (the module's docstring).
LAZY = ("board", "ends", "forfeits", "wins")


class Indexed(Tables):
    """``game.Tables`` whose ``LAZY`` fields are made, and kept, where they are first read."""

    def __getattr__(self, name: str):  # only for attributes not set yet: the lazy ones
        if name not in LAZY:
            raise AttributeError(name)
        made = _board(self) if name == "board" else _step(self)[name]
        object.__setattr__(self, name, made)  # a frozen dataclass: set once, as __init__ would
        return made


def _board(t: Tables) -> torch.Tensor:
    """(N, cells) int8 the board: the mover's view times the mover (+1 X, -1 O)."""
    return t.view * t.mover[:, None]


def _step(t: Tables) -> dict[str, torch.Tensor]:
    """The step's results for every (row, cell): as game._build_tables, with rows for codes
    (``index_select`` takes the int32 rows as they are: no 1.2 GB int64 copy)."""
    cells, done, mover = t.cells, t.done, t.mover
    forfeits = ~(t.legal | done[:, None])
    ends = (done.index_select(0, t.next).view(-1, cells) & ~done[:, None]) | forfeits
    wins = torch.where(forfeits, -mover[:, None], t.winner.index_select(0, t.next).view(-1, cells)) * ends
    return {"ends": ends.reshape(-1).contiguous(), "forfeits": forfeits.reshape(-1).contiguous(),
            "wins": wins.to(torch.int8).reshape(-1).contiguous()}


def build(game: MNK, p: Positions) -> Tables:
    """``game``'s rule tables over the rows of ``p`` (its solved positions)."""
    t = torch.from_numpy
    board = t(game.decode(p.codes))  # (N, cells) int8
    ply = t(np.repeat(np.arange(len(p.offsets) - 1, dtype=np.int8), np.diff(p.offsets)))  # (N,)
    mover = torch.where(ply % 2 == 0, X, O).to(torch.int8)
    done = t(np.array(p.done))
    legal = (board == 0) & ~done[:, None]  # (N, cells)
    n_legal = legal.sum(-1, dtype=torch.int8)
    return make(
        view=(board * mover[:, None]).to(torch.int8),
        mover=mover,
        ply=ply,
        winner=t(np.array(p.winner)),
        done=done,
        legal=legal,
        n_legal=n_legal,
        kth_legal=_kth_legal(legal).reshape(-1).contiguous(),
        next=t(np.array(p.next)),  # (N * cells,) int32
        reachable=torch.ones(board.shape[0], dtype=torch.bool),
    )


def _kth_legal(legal: torch.Tensor) -> torch.Tensor:
    """(N, cells) bool legal cells -> (N, cells) int8 the legal cells first, then the others,
    each group in cell order (``Tables.kth_legal``): a row's is looked up by its pattern of
    empty cells (one of 2^cells, each sorted once), where sorting 4,4,4's 9.7M rows took
    1.6 s (0.4 s now)."""
    cells, device = legal.shape[1], legal.device
    patterns = (torch.arange(2**cells, device=device)[:, None] >> torch.arange(cells, device=device)) & 1
    # (2^cells, cells): bit i of a pattern is cell i; a stable sort puts the legal cells (key 0)
    # first, each group in cell order
    table = torch.sort((1 - patterns).to(torch.int8), dim=-1, stable=True).indices.to(torch.int8)
    weights = 1 << torch.arange(cells, dtype=torch.int32, device=device)
    out = torch.empty(legal.shape, dtype=torch.int8, device=device)
    for lo in range(0, legal.shape[0], PATTERN_ROWS):
        pattern = (legal[lo:lo + PATTERN_ROWS].to(torch.int32) * weights).sum(-1, dtype=torch.int32)
        out[lo:lo + PATTERN_ROWS] = table.index_select(0, pattern)
    return out


def make(**fields: torch.Tensor) -> Indexed:
    """An ``Indexed`` from every field of ``Tables`` but the ``LAZY`` ones (the others are
    made when read); ``Tables.__init__`` wants them all, so the fields are set as it sets them."""
    out = object.__new__(Indexed)
    for name, value in fields.items():
        object.__setattr__(out, name, value)
    return out
