"""Learner-vs-opponent games, B at once, recorded as (T, B) tensors.

``play_batch`` starts B games on the empty board and plays them in lockstep to the end (at
most 9 plies). At each ply the learner moves in the games where it is to move and the
opponent in the others; a game that has ended is carried along untouched (its moves are
marked inactive). The result is an ``Episodes`` record that algorithms turn into
updates, and the reward table that turns outcomes into numbers.

Lockstep has a useful property: at ply t every unfinished game has t pieces, so with a
fixed seat we know before looking at any board whether the learner or the opponent moves,
and skip the other's computation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import game
from .contract import SEAT_PIECE, TRAINING_SEATS
from .opponents import Opponent, SelfPlay

# The learner's move function: mover's view (B, 9) float and legal mask (B, 9) -> cells (B,).
LearnerAct = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Reward:
    """The reward table, from the learner's side. ``illegal`` applies to a forfeit by the
    learner (an occupied cell chosen with masking off)."""

    win: float = 1.0
    tie: float = 0.0
    loss: float = -1.0
    illegal: float = -1.0

    def of(self, outcome: torch.Tensor, forfeit: torch.Tensor | None = None) -> torch.Tensor:
        """(B,) learner outcomes (+1 win, 0 tie, -1 loss) -> (B,) float rewards."""
        r = torch.where(outcome > 0, self.win, torch.where(outcome < 0, self.loss, self.tie))
        if forfeit is not None:
            r = torch.where(forfeit, self.illegal, r)
        return r.float()


@dataclass
class Episodes:
    """B complete games. T = 9 plies; entries after a game's end are inactive."""

    view: torch.Tensor  # (T, B, 9) int8, the mover's view before each ply
    legal: torch.Tensor  # (T, B, 9) bool
    action: torch.Tensor  # (T, B) int64, the cell played
    active: torch.Tensor  # (T, B) bool, the game was still going at this ply
    learner: torch.Tensor  # (T, B) bool, an active ply where the learner moved
    seat: torch.Tensor  # (B,) int8, the learner's side: +1 X, -1 O (X in self-play)
    outcome: torch.Tensor  # (B,) int8, from the learner's side: +1 win, 0 tie, -1 loss
    forfeit: torch.Tensor  # (B,) bool, the learner lost by an illegal move (self-play: a side did)
    plies: torch.Tensor  # (B,) int64, moves played in the game

    @property
    def batch(self) -> int:
        return self.seat.numel()

    def rates(self) -> dict[str, torch.Tensor]:
        """Sampled win / loss / tie rates of the learner over these games (0-dim tensors)."""
        o = self.outcome
        return {"win_rate": (o > 0).float().mean(), "loss_rate": (o < 0).float().mean(),
                "tie_rate": (o == 0).float().mean()}


def draw_seats(batch: int, seat: str, device: torch.device,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """(B,) int8 learner sides: all X, all O, or each game's side drawn at random."""
    if seat in SEAT_PIECE:
        return torch.full((batch,), SEAT_PIECE[seat], dtype=torch.int8, device=device)
    if seat == "both":
        coin = torch.rand(batch, device=device, generator=generator) < 0.5
        return torch.where(coin, game.X, game.O).to(torch.int8)
    raise ValueError(f"seat must be one of {TRAINING_SEATS}, got {seat!r}")


def play_batch(batch: int, learner: LearnerAct, opponent: Opponent, seat: str,
               device: torch.device | str = "cpu", generator: torch.Generator | None = None) -> Episodes:
    """Play ``batch`` complete games of the learner against ``opponent``."""
    device = torch.device(device)
    t = game.tables(device)
    T = game.CELLS
    self_play = isinstance(opponent, SelfPlay)  # the learner moves for both sides
    seats = draw_seats(batch, "x" if self_play else seat, device, generator)
    code = torch.zeros(batch, dtype=torch.long, device=device)
    over = torch.zeros(batch, dtype=torch.bool, device=device)
    winner = torch.zeros(batch, dtype=torch.int8, device=device)
    forfeit = torch.zeros(batch, dtype=torch.bool, device=device)
    plies = torch.zeros(batch, dtype=torch.long, device=device)
    views = torch.empty((T, batch, 9), dtype=torch.int8, device=device)
    legals = torch.empty((T, batch, 9), dtype=torch.bool, device=device)
    actions = torch.empty((T, batch), dtype=torch.long, device=device)
    actives = torch.empty((T, batch), dtype=torch.bool, device=device)
    learners = torch.empty((T, batch), dtype=torch.bool, device=device)
    opponent.reset(torch.ones(batch, dtype=torch.bool, device=device), generator)

    for ply in range(T):
        mover = game.X if ply % 2 == 0 else game.O  # lockstep: every live game has `ply` pieces
        view, legal = game.at(t.view, code), game.at(t.legal, code)
        mine = (seats == mover) | self_play
        # With a fixed seat only one side moves at this ply: skip the other's computation.
        learner_moves = self_play or seat == "both" or (seat == "x") == (mover == game.X)
        opponent_moves = not self_play and (seat == "both" or not learner_moves)
        if learner_moves and opponent_moves:
            action = torch.where(mine, learner(view.float(), legal), opponent.act(code, generator))
        elif learner_moves:
            action = learner(view.float(), legal)
        else:
            action = opponent.act(code, generator)
        s = game.step(code, action, t)
        active = ~over
        views[ply], legals[ply], actions[ply] = view, legal, action
        actives[ply], learners[ply] = active, active & mine
        ends = s.ended & active
        winner = torch.where(ends, s.winner, winner)
        forfeit |= ends & s.illegal & mine
        plies += active.long()
        over |= s.ended
        code = torch.where(active, s.code, code)  # a finished game keeps its final board

    return Episodes(view=views, legal=legals, action=actions, active=actives, learner=learners,
                    seat=seats, outcome=(winner * seats).to(torch.int8), forfeit=forfeit,
                    plies=plies)
