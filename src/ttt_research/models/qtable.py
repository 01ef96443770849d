"""A table of action values as a policy network: ``QTable`` (one agent), ``QTableStack`` (N).

Tabular Q-learning (``algos/qlearning.py``) keeps one value per (position, move): a
(3^9, 9) table indexed by the mover's view code, ``sum((v_i + 1) 3^i)`` over the cells
(``env.game.view_code``: digits 0 opponent, 1 empty, 2 own), so one table serves both
seats (X to move and O to move are different views: the piece counts differ). Most of the
19,683 rows are never a decision position; they cost 700 kB and keep the index a plain
product, with no map from codes to rows to export.

``forward`` is the policy contract of ``models.nets``: (B, 9) mover's views -> (B, 9)
values with occupied cells masked (``MASKED``), whose argmax (ties to the lowest cell) is
the greedy policy. The code is computed inside ``forward`` with tensor operations that
ONNX exports (a matrix-vector product with the powers of 3, a cast, a gather), so
``evaluation.onnx.export`` writes the table as a graph that the terminal and the browser
play like any other ``policy.onnx``.

The table starts at ``init`` (0 by default: "nothing known", the value of a tie under the
zero-sum table and between a loss and a win under every shipped table; exploration comes
from epsilon-greedy, not from optimism). It is a ``Parameter`` without gradient: the update
writes it in place, and as a parameter it is checkpointed, checked for NaN by the guard and
stacked like a network's weights.

Another m,n,k board (``attach(game)``, which ``algos/qlearning.py`` calls with its game): a row
per reachable position of the board's tables (``env/indexed.py``: 111,973 on 3,4,3, 9.7M on
4,4,4; a row per view code would take 3^16 rows on 4x4), found through ``view_rows``, a map from
view code to row (int32, ``3^cells`` entries). ``QTable(init, cells=...)``, as the run builds a
net off 3x3, is a ``BoardQTable``: its own class, which ``evaluation.onnx`` exports through
torch's exporter (the map and the table its initialisers), not through tic-tac-toe's graph.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.models.nets import MASKED

CELLS = 9
N_CODES = 3**CELLS  # 19,683 view codes (most are no decision position: harmless rows)
POW3 = [float(3**i) for i in range(CELLS)]  # place value of each cell in a view code
# The same as a tensor, made once: ``torch.tensor`` inside ``forward`` made torch's tracer (the
# ONNX exporter's) warn that its result becomes a constant, which is all it ever is.
POW3_TENSOR = torch.tensor(POW3, dtype=torch.float32)
EMPTY_VIEW_CODE = (N_CODES - 1) // 2  # 9,841 = sum of 3^i: the code of the empty board
TABLE = "q"  # spec()["table"]: what policy_file reads to rebuild a QTable


def codes_of(view: torch.Tensor) -> torch.Tensor:
    """(..., 9) mover's views -> (...,) int64 view codes, in ops that export to ONNX:
    ``v . 3^i + 9,841`` (exact in float32, ``|v . 3^i| <= 9,841``), clamped into the
    table so that no input outside the contract can index past it."""
    pow3 = POW3_TENSOR.to(view.device)
    code = torch.matmul(view.float(), pow3) + EMPTY_VIEW_CODE
    return code.round().clamp(0, N_CODES - 1).long()


@functools.lru_cache(maxsize=2)
def view_rows(game: Game, chunk: int = 1 << 20) -> torch.Tensor:
    """(3^cells,) int32 each view code's row in ``game``'s tables (0, the empty board, where
    no reachable position has that view: a table's values there are never a decision). A
    mover's view names its position (X moves when the pieces are level), so the codes of the
    rows are distinct. Built once per board a chunk of rows at a time (4,4,4's 9.7M views at
    once would be a 1.2 GB int64 temporary): 172 MB on 4,4,4."""
    t = game.tables("cpu")
    rows = torch.zeros(game.view_codes, dtype=torch.int32)
    for first in range(0, t.states, chunk):
        part = t.view[first:first + chunk]  # (R, cells) int8
        rows[game.view_code(part)] = torch.arange(first, first + part.shape[0], dtype=torch.int32)
    return rows


def board_codes(view: torch.Tensor) -> torch.Tensor:
    """(..., cells) mover's views -> (...) int64 view codes (``Game.view_code``'s), in ops that
    export to ONNX: two float32 matmuls over the halves of the cells, each exact (3^8 < 2^24),
    joined in int64 (one float32 sum of 16 cells would pass float32's exact integers)."""
    cells = view.shape[-1]
    half = cells // 2
    pow3 = 3 ** torch.arange(cells - half, dtype=torch.float32, device=view.device)
    low = torch.matmul(view[..., :half].float(), pow3[:half]).round().long()
    high = torch.matmul(view[..., half:].float(), pow3).round().long()
    # v . 3^i in -(3^c - 1)/2 .. (3^c - 1)/2; the digits are v + 1: add the all-ones code
    return low + high * 3**half + (3**cells - 1) // 2


class QTable(nn.Module):
    """Mover's view (B, 9) -> masked action values (B, 9), read from a (3^9, 9) table."""

    def __new__(cls, init: float = 0.0, cells: int | None = None):
        # The run passes ``cells`` off 3x3 only: that table is another board's (BoardQTable)
        if cls is QTable and cells is not None and cells != CELLS:
            return super().__new__(BoardQTable)
        return super().__new__(cls)

    def __init__(self, init: float = 0.0, cells: int | None = None):
        super().__init__()
        self.init = float(init)
        self.q = nn.Parameter(torch.full((N_CODES, CELLS), self.init), requires_grad=False)
        # How many TD targets each entry has been moved towards (algos/qlearning.py's
        # running mean); not part of the policy (the ONNX graph reads ``q`` only).
        self.register_buffer("visits", torch.zeros(N_CODES, CELLS))

    def spec(self) -> dict:
        """What it takes to build this table again (checkpoints' ``net_spec``)."""
        return {"table": TABLE, "init": self.init}

    def raw_logits(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's views -> (B, 9) values of every cell, occupied ones included."""
        return self.q.index_select(0, codes_of(view).reshape(-1)).view(*view.shape[:-1], CELLS)

    def forward(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's views -> (B, 9) values with occupied cells masked."""
        return self.raw_logits(view).masked_fill(view != 0, MASKED)

    def rows(self, view: torch.Tensor) -> torch.Tensor:
        """(..., 9) mover's views -> (...) int64 their rows of ``q``: the view codes."""
        return codes_of(view)

    def attach(self, game: Game) -> None:
        """Tic-tac-toe's table is made whole: only its own board is accepted."""
        if game != TIC_TAC_TOE:
            raise ValueError(f"a tic-tac-toe table cannot play the {game.name} board")


class BoardQTable(QTable):
    """Mover's view (B, cells) -> masked action values (B, cells) of another board, read from a
    (rows, cells) table, a row per reachable position (``attach``: none before)."""

    def __init__(self, init: float = 0.0, cells: int | None = None):
        nn.Module.__init__(self)
        self.init, self.cells, self.game = float(init), int(cells), None
        self.q = nn.Parameter(torch.full((0, self.cells), self.init), requires_grad=False)
        self.register_buffer("visits", torch.zeros(0, self.cells))

    def attach(self, game: Game) -> None:
        """Give it ``game``'s rows: the table at ``init``, no visits, and the view -> row map
        (``view_rows``, not saved: the board rebuilds it)."""
        if game.cells != self.cells:
            raise ValueError(f"a table of {self.cells} cells cannot play the {game.name} board")
        rows = game.tables().states
        self.game = game
        self.q = nn.Parameter(torch.full((rows, self.cells), self.init, device=self.q.device),
                              requires_grad=False)
        self.visits = torch.zeros(rows, self.cells, device=self.q.device)
        self.register_buffer("row_of", view_rows(game).to(self.q.device), persistent=False)

    def spec(self) -> dict:
        return {"table": TABLE, "init": self.init, "cells": self.cells}

    def rows(self, view: torch.Tensor) -> torch.Tensor:
        """(..., cells) mover's views -> (...) int64 their rows of ``q`` (``view_rows``)."""
        code = board_codes(view).clamp(0, self.row_of.numel() - 1)  # no input indexes past the map
        return self.row_of.index_select(0, code.reshape(-1)).view(code.shape).long()

    def raw_logits(self, view: torch.Tensor) -> torch.Tensor:
        return self.q.index_select(0, self.rows(view).reshape(-1)).view(*view.shape[:-1], self.cells)


class QTableStack(nn.Module):
    """N tables as one module: ``q`` is (N, 3^9, 9); views (N, B, 9) (or shared (B, 9)) ->
    (N, B, 9) masked values. Member k reads and writes slice k only.

    ``from_members([...])`` stacks existing tables (copies), ``member(k)`` returns member k
    as a plain ``QTable`` and ``load_member(k, table)`` writes one back, as ``MLPStack``."""

    def __init__(self, n: int, init: float = 0.0, cells: int | None = None):
        super().__init__()
        if n < 1:
            raise ValueError(f"a population needs at least one member, got n={n}")
        self.init = float(init)
        # another board's (``cells``): no rows before ``attach``, as ``BoardQTable``
        self.cells, self.game = cells, None
        rows, width = (N_CODES, CELLS) if cells is None else (0, cells)
        self.q = nn.Parameter(torch.full((n, rows, width), self.init), requires_grad=False)
        self.register_buffer("visits", torch.zeros(n, rows, width))  # as QTable's, per member

    def attach(self, game: Game) -> None:
        """As ``BoardQTable.attach``, every member's block."""
        if self.cells is None:
            QTable.attach(self, game)
            return
        one = BoardQTable(self.init, self.cells)
        one.attach(game)
        self.game = game
        self.q = nn.Parameter(one.q[None].repeat(self.n, 1, 1).to(self.q.device), requires_grad=False)
        self.visits = torch.zeros_like(self.q)
        self.register_buffer("row_of", one.row_of.to(self.q.device), persistent=False)

    @classmethod
    def from_members(cls, members: list[QTable]) -> QTableStack:
        """Stack existing tables (all of one spec); their values are copied."""
        if not members:
            raise ValueError("a population needs at least one member")
        first = members[0]
        for k, m in enumerate(members):
            if not isinstance(m, QTable) or m.spec() != first.spec():
                raise ValueError(f"member {k} is not a table like member 0 ({first.spec()})")
        cells = first.cells if isinstance(first, BoardQTable) else None
        stack = cls(len(members), first.init, cells).to(first.q.device)
        if cells is not None and first.game is not None:  # attached members: the stack too
            stack.attach(first.game)
        for k, m in enumerate(members):
            stack.load_member(k, m)
        return stack

    @property
    def n(self) -> int:
        """The number of members."""
        return self.q.shape[0]

    @classmethod
    def like(cls, stack: QTableStack, n: int) -> QTableStack:
        """A stack of ``n`` blank members of ``stack``'s board (another board's attached)."""
        blank = cls(n, stack.init, stack.cells)
        if stack.game is not None:
            blank.attach(stack.game)
        return blank

    def spec(self) -> dict:
        """What it takes to build one member again (as ``QTable.spec``)."""
        return {"table": TABLE, "init": self.init} | ({} if self.cells is None else {"cells": self.cells})

    def rows(self, view: torch.Tensor) -> torch.Tensor:
        """(..., cells) mover's views -> (...) int64 their rows in a member's block."""
        if self.cells is None:
            return codes_of(view)
        code = board_codes(view).clamp(0, self.row_of.numel() - 1)
        return self.row_of.index_select(0, code.reshape(-1)).view(code.shape).long()

    def member(self, k: int) -> QTable:
        """Member k as a plain ``QTable`` (another board's: a ``BoardQTable``) with a copy of
        its values, on the stack's device."""
        table = QTable(self.init, self.cells).to(self.q.device)
        if self.game is not None:
            table.attach(self.game)
        with torch.no_grad():
            table.q.copy_(self.q[k])
            table.visits.copy_(self.visits[k])
        return table

    def load_member(self, k: int, table: QTable) -> None:
        """Overwrite member k's values with ``table``'s."""
        if table.spec() != self.spec():
            raise ValueError(f"cannot load a {table.spec()} table into a {self.spec()} population")
        with torch.no_grad():
            self.q[k].copy_(table.q)
            self.visits[k].copy_(table.visits)

    def raw_logits(self, view: torch.Tensor, members: slice | None = None) -> torch.Tensor:
        """(N, B, 9) (or shared (B, 9)) mover's views -> (N, B, 9) values of every cell.
        ``members`` (a slice) reads only those members (the view's leading axis is theirs)."""
        q = self.q[members if members is not None else slice(None)]  # (n, rows, cells), a view
        n, R, C = q.shape
        code = self.rows(view)  # (N, B) or shared (B,)
        if code.dim() == 1:
            code = code.expand(n, -1)
        rows = code + (torch.arange(n, device=code.device) * R)[:, None]  # member k: block k
        return q.reshape(-1, C).index_select(0, rows.reshape(-1)).view(n, -1, C)

    def forward(self, view: torch.Tensor, members: slice | None = None) -> torch.Tensor:
        """(N, B, 9) (or shared (B, 9)) mover's views -> (N, B, 9) values, occupied cells masked."""
        return self.raw_logits(view, members).masked_fill(view != 0, MASKED)
