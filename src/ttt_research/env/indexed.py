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
"""

from __future__ import annotations

import numpy as np
import torch

from ttt_research.env.game import O, Tables, X
from ttt_research.env.mnk import MNK
from ttt_research.env.positions import Positions


def build(game: MNK, p: Positions) -> Tables:
    """``game``'s rule tables over the rows of ``p`` (its solved positions)."""
    cells = game.cells
    t = torch.from_numpy
    board = t(game.decode(p.codes))  # (N, cells) int8
    ply = t(np.repeat(np.arange(len(p.offsets) - 1, dtype=np.int8), np.diff(p.offsets)))  # (N,)
    mover = torch.where(ply % 2 == 0, X, O).to(torch.int8)
    done = t(np.array(p.done))
    legal = (board == 0) & ~done[:, None]  # (N, cells)
    n_legal = legal.sum(-1, dtype=torch.int8)
    # k-th legal cell first: a stable sort puts the legal cells first, each group in cell order.
    kth = torch.sort((~legal).to(torch.int8), dim=-1, stable=True).indices.to(torch.int8)
    nxt = t(np.array(p.next))  # (N * cells,) int32
    winner = t(np.array(p.winner))
    # The step's results for every (row, cell): as game._build_tables, with rows for codes
    # (``index_select`` takes the int32 rows as they are: no 1.2 GB int64 copy).
    forfeits = ~(legal | done[:, None])
    ends = (done.index_select(0, nxt).view(-1, cells) & ~done[:, None]) | forfeits
    wins = torch.where(forfeits, -mover[:, None], winner.index_select(0, nxt).view(-1, cells)) * ends
    return Tables(
        board=board,
        view=(board * mover[:, None]).to(torch.int8),
        mover=mover,
        ply=ply,
        winner=winner,
        done=done,
        legal=legal,
        n_legal=n_legal,
        kth_legal=kth.reshape(-1).contiguous(),
        next=nxt,
        reachable=torch.ones(board.shape[0], dtype=torch.bool),
        ends=ends.reshape(-1).contiguous(),
        forfeits=forfeits.reshape(-1).contiguous(),
        wins=wins.to(torch.int8).reshape(-1).contiguous(),
    )
