"""The table of decision positions a batch of games reaches, computed ply by ply
(``ReachedTable``): what REINFORCE's position-table update reads and learns from.

Why: a batch's games reach only some of the learner's decision positions. Early in training
nearly all 2,097 of O's; once the policy is sharp, a few hundred (the default REINFORCE's
population of 8: 2,094 in its first batch, 770 a third of the way, 302 at the end). A
network pass over every position, kept for the backward pass, spends most of its work on
rows whose gradient is exactly zero. Here each ply's pass covers the positions the live
games are at when the learner is to move, and nothing else; as a position's ply is its
number of pieces, no position is computed twice in a batch. The passes keep their autograd
graphs, and the loss over the reached rows (``gathered``, ``place_of``) gives the gradient
of the whole table's loss: the rows left out would have added zeros.

A population's members reach different positions: the rows are member k's, then member
k + 1's, each member's through its own layers (``forward`` gets the counts). Nothing pads a
member's rows to its neighbours', so no member's numbers depend on the others' (a batched
matmul padded to the most any member reaches would sum each weight's gradient over a
length set by the neighbours, and float sums change with their length).

Another m,n,k board has too many decision positions for a table of them all (4,4,4: 9M, and a
map from every view code to a row would take 3^16 entries), so ``ReachedCodes`` finds each
ply's positions by the codes of the live games' views (``Game.view_code``) instead: the same
rows, numbered as they are reached.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ttt_research.env import game
from ttt_research.env.board import Game


class ReachedTable:
    """The logits of the positions the games reach, one network pass per ply.

    Args:
        forward: (R, 9) views and each member's number of rows -> (R, 9) logits; called once
            per ply with the positions reached, its autograd graph kept.
        views: (P, 9) float views of the decision positions (``Run.positions``).
        row_of: (3^9,) map from a view's code to its row of ``views`` (-1: none).
    """

    def __init__(self, forward: Callable[[torch.Tensor, list[int]], torch.Tensor],
                 views: torch.Tensor, row_of: torch.Tensor):
        self.forward = forward
        self.views, self.row_of = views, row_of
        self.P = views.shape[0]
        self.members = 1  # N: the games' leading axis, (N, B, 9) (a (B, 9) batch: one)
        self.logits: list[torch.Tensor] = []  # per ply: (R, 9) logits with autograd
        self.at: list[torch.Tensor] = []  # per ply: (R,) flat rows (member k's positions + k P)
        self.width = 0  # rows over the plies so far
        self.column = None  # (N P,) each reached flat row's row of ``gathered``
        # per call: (N B,) each game's flat row (N P, a spare row, for a finished game)
        self.games_rows: list[torch.Tensor] = []

    def read(self, view: torch.Tensor, legal: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, 9) (a population's (N, B, 9)) views of one ply's games -> this ply's (R, 9)
        logits (with autograd), the (R, 9) views of their positions, the (R,) member of each
        row and the (N B,) row each game reads. A finished game (no decision position) reads
        row 0: it rides along in lockstep and what is drawn for it is ignored. (``legal``:
        unused here, the table knows its positions; ``ReachedCodes`` reads it.)"""
        N = self.members = view.shape[0] if view.dim() == 3 else 1
        P = self.P
        if self.column is None:
            self.column = torch.full((N * P,), -1, dtype=torch.long, device=view.device)
        code = game.view_code(view).reshape(-1)  # (N B,)
        B = code.numel() // N
        row = self.row_of.index_select(0, code)  # (N B,) -1 where the game is over
        member = torch.arange(N, device=row.device).repeat_interleave(B) if N > 1 else 0
        flat = torch.where(row >= 0, row + member * P, N * P)  # (N B,) finished: a spare row
        self.games_rows.append(flat)
        hit = torch.zeros(N * P + 1, dtype=torch.bool, device=row.device).index_fill_(0, flat, True)
        hit[-1] = False
        at = hit.nonzero().squeeze(1)  # (R,) flat rows reached, member by member
        if at.numel() == 0:  # every game is over: nothing to learn, one row of zeros to read
            zero = torch.zeros(1, dtype=torch.long, device=row.device)
            no_row = self.views.new_zeros(1, self.views.shape[-1])
            return no_row, self.views[:1], zero, zero.expand(flat.numel())
        views = self.views.index_select(0, at % P)  # (R, 9)
        owner = torch.div(at, P, rounding_mode="floor")  # (R,)
        logits = self.forward(views, torch.bincount(owner, minlength=N).tolist())
        here = torch.arange(at.numel(), device=row.device)
        self.column[at] = self.width + here
        self.width += at.numel()
        self.logits.append(logits)
        self.at.append(at)
        rows = torch.zeros(N * P + 1, dtype=torch.long, device=row.device)
        rows[at] = here
        return logits, views, owner, rows.index_select(0, flat)

    def gathered(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every ply's rows one after another: (W, 9) logits with autograd, the (W, 9) views of
        their positions and the (W,) member of each row."""
        at = torch.cat(self.at)
        return (torch.cat(self.logits), self.views.index_select(0, at % self.P),
                torch.div(at, self.P, rounding_mode="floor"))

    def place_of(self, rows: torch.Tensor) -> torch.Tensor:
        """(M,) rows of the whole table (member k's positions in block k of P) -> (M,) rows of
        ``gathered``; every row given was reached in this batch."""
        return self.column.index_select(0, rows)


class ReachedCodes(ReachedTable):
    """``ReachedTable`` of a board with no table of its positions (another m,n,k board): each
    ply's rows are the distinct positions its live games are at, found by the codes of their
    views (member by member, in code order), and numbered as they are reached, so a game's row
    is already its row of ``gathered``.

    Args:
        forward: as ``ReachedTable``'s, with (R, cells) views.
        g: the board (``board.Game``).
    """

    def __init__(self, forward: Callable[[torch.Tensor, list[int]], torch.Tensor], g: Game):
        self.forward, self.game = forward, g
        self.members = 1
        self.logits: list[torch.Tensor] = []  # per ply: (R, cells) logits with autograd
        self.views_at: list[torch.Tensor] = []  # per ply: (R, cells) views of the rows
        self.owners: list[torch.Tensor] = []  # per ply: (R,) the member of each row
        self.width = 0
        self.games_rows: list[torch.Tensor] = []  # per call: (N B,) each game's row of ``gathered``

    def read(self, view: torch.Tensor, legal: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """As ``ReachedTable.read``, with the games' (B, cells) (a population's (N, B, cells))
        ``legal`` cells, required: a finished game has none, and no row (it reads one anyway)."""
        N = self.members = view.shape[0] if view.dim() == 3 else 1
        C = view.shape[-1]
        flat = view.reshape(-1, C)  # (N B, cells)
        live = legal.reshape(-1, C).any(-1)  # (N B,)
        B = live.numel() // N
        member = torch.arange(N, device=view.device).repeat_interleave(B)
        key = self.game.view_code(flat) + member * self.game.view_codes  # (N B,) member-major
        uniq, inv = torch.unique(key[live], return_inverse=True)  # (R,) sorted: member by member
        rows = torch.zeros(live.numel(), dtype=torch.long, device=view.device)
        if uniq.numel() == 0:  # every game is over: nothing to learn, one row of zeros to read
            self.games_rows.append(rows)
            return flat.new_zeros(1, C), flat[:1], rows[:1], rows
        first = torch.empty(uniq.numel(), dtype=torch.long, device=view.device)
        first.scatter_(0, inv, live.nonzero().squeeze(1))  # a game at each position (any: same view)
        views = flat.index_select(0, first)  # (R, cells)
        owner = torch.div(uniq, self.game.view_codes, rounding_mode="floor")  # (R,)
        logits = self.forward(views, torch.bincount(owner, minlength=N).tolist())
        rows[live] = inv  # a finished game: row 0
        self.games_rows.append(rows + self.width)
        self.width += uniq.numel()
        self.logits.append(logits)
        self.views_at.append(views)
        self.owners.append(owner)
        return logits, views, owner, rows

    def gathered(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.cat(self.logits), torch.cat(self.views_at), torch.cat(self.owners)

    def place_of(self, rows: torch.Tensor) -> torch.Tensor:
        """The rows of ``gathered`` already (``games_rows``)."""
        return rows
