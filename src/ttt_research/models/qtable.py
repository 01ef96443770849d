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
"""

from __future__ import annotations

import torch
from torch import nn

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


class QTable(nn.Module):
    """Mover's view (B, 9) -> masked action values (B, 9), read from a (3^9, 9) table."""

    def __init__(self, init: float = 0.0):
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


class QTableStack(nn.Module):
    """N tables as one module: ``q`` is (N, 3^9, 9); views (N, B, 9) (or shared (B, 9)) ->
    (N, B, 9) masked values. Member k reads and writes slice k only.

    ``from_members([...])`` stacks existing tables (copies), ``member(k)`` returns member k
    as a plain ``QTable`` and ``load_member(k, table)`` writes one back, as ``MLPStack``."""

    def __init__(self, n: int, init: float = 0.0):
        super().__init__()
        if n < 1:
            raise ValueError(f"a population needs at least one member, got n={n}")
        self.init = float(init)
        self.q = nn.Parameter(torch.full((n, N_CODES, CELLS), self.init), requires_grad=False)
        self.register_buffer("visits", torch.zeros(n, N_CODES, CELLS))  # as QTable's, per member

    @classmethod
    def from_members(cls, members: list[QTable]) -> QTableStack:
        """Stack existing tables (all of one spec); their values are copied."""
        if not members:
            raise ValueError("a population needs at least one member")
        first = members[0]
        for k, m in enumerate(members):
            if not isinstance(m, QTable) or m.spec() != first.spec():
                raise ValueError(f"member {k} is not a table like member 0 ({first.spec()})")
        stack = cls(len(members), first.init).to(first.q.device)
        for k, m in enumerate(members):
            stack.load_member(k, m)
        return stack

    @property
    def n(self) -> int:
        """The number of members."""
        return self.q.shape[0]

    def spec(self) -> dict:
        """What it takes to build one member again (as ``QTable.spec``)."""
        return {"table": TABLE, "init": self.init}

    def member(self, k: int) -> QTable:
        """Member k as a plain ``QTable`` with a copy of its values, on the stack's device."""
        table = QTable(self.init).to(self.q.device)
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
        q = self.q[members if members is not None else slice(None)]  # (n, 3^9, 9), a view
        n = q.shape[0]
        code = codes_of(view)  # (N, B) or shared (B,)
        if code.dim() == 1:
            code = code.expand(n, -1)
        rows = code + (torch.arange(n, device=code.device) * N_CODES)[:, None]  # member k: block k
        return q.reshape(-1, CELLS).index_select(0, rows.reshape(-1)).view(n, -1, CELLS)

    def forward(self, view: torch.Tensor, members: slice | None = None) -> torch.Tensor:
        """(N, B, 9) (or shared (B, 9)) mover's views -> (N, B, 9) values, occupied cells masked."""
        return self.raw_logits(view, members).masked_fill(view != 0, MASKED)
