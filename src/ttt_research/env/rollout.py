"""Learner-vs-opponent games, B at once, recorded as (T, B) tensors.

``play_batch`` starts B games of a board (``board.Game``, tic-tac-toe unless told) on
the empty board and plays them in lockstep to the end (at most one ply per cell). At each
ply the learner moves in the games where it is to move and the opponent in the others; a
game that has ended is carried along untouched (its moves are marked inactive). The result
is an ``Episodes`` record that algorithms turn into updates (with the reward table of
``env/reward.py``).

Lockstep has a useful property: at ply t every unfinished game has t pieces, so with a
fixed seat we know before looking at any board whether the learner or the opponent moves,
and skip the other's computation.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ttt_research.contract import SEAT_PIECE, TRAINING_SEATS
from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.opponents import Opponent, SelfPlay
from ttt_research.env.streams import Streams, uniform

# The learner's move function: mover's view (B, cells) float and legal mask (B, cells) -> cells
# (B,) (a population's: (N, B, cells) and (N, B, cells) -> (N, B)).
LearnerAct = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class Episodes:
    """B complete games (a population's: N x B, member axis first). T = cells plies; entries
    after a game's end are inactive. Shapes below for a single run; a population's have
    (N, B) in place of (B,)."""

    view: torch.Tensor  # (T, B, cells) int8, the mover's view before each ply
    legal: torch.Tensor  # (T, B, cells) bool
    action: torch.Tensor  # (T, B) int64, the cell played
    active: torch.Tensor  # (T, B) bool, the game was still going at this ply
    learner: torch.Tensor  # (T, B) bool, an active ply where the learner moved
    seat: torch.Tensor  # (B,) int8, the learner's side: +1 X, -1 O (X in self-play)
    outcome: torch.Tensor  # (B,) int8, from the learner's side: +1 win, 0 tie, -1 loss
    forfeit: torch.Tensor  # (B,) bool, the learner lost by an illegal move (self-play: a side did)
    plies: torch.Tensor  # (B,) int64, moves played in the game

    @property
    def batch(self) -> int:
        """Games per member."""
        return self.seat.shape[-1]

    def rates(self) -> dict[str, torch.Tensor]:
        """Sampled win / loss / tie rates of the learner over these games (``rates``)."""
        return rates(self.outcome)


def rates(outcome: torch.Tensor) -> dict[str, torch.Tensor]:
    """(B,) learner outcomes -> win / loss / tie rates, 0-dim tensors; (N, B) -> (N,) each
    (a population: each member's over its own games)."""
    o = outcome
    return {"win_rate": (o > 0).float().mean(-1), "loss_rate": (o < 0).float().mean(-1),
            "tie_rate": (o == 0).float().mean(-1)}


def draw_seats(shape: tuple[int, ...] | int, seat: str, device: torch.device,
               generator=None) -> torch.Tensor:
    """``shape`` int8 learner sides: all X, all O, or each game's side drawn at random."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if seat in SEAT_PIECE:
        return torch.full(shape, SEAT_PIECE[seat], dtype=torch.int8, device=device)
    if seat == "both":
        coin = uniform(shape, device, generator) < 0.5
        return torch.where(coin, game.X, game.O).to(torch.int8)
    raise ValueError(f"seat must be one of {TRAINING_SEATS}, got {seat!r}")


def learner_plies(seat: str, opponent: Opponent, g: Game = TIC_TAC_TOE) -> list[int]:
    """The plies of ``g`` at which ``play_batch`` asks the learner for moves (every live game
    has that many pieces): each ply for ``both`` seats or self-play, else the seat's own (X: 0,
    2, ..)."""
    if isinstance(opponent, SelfPlay) or seat == "both":
        return list(range(g.cells))
    return [ply for ply in range(g.cells) if (seat == "x") == (ply % 2 == 0)]


def play_batch(batch: int, learner: LearnerAct, opponent: Opponent, seat: str,
               device: torch.device | str = "cpu", generator=None, g: Game = TIC_TAC_TOE) -> Episodes:
    """Play ``batch`` complete games of ``g`` (tic-tac-toe unless told) of the learner against
    ``opponent`` (which plays the same board).

    With ``streams.Streams`` as the generator, every one of its N members plays ``batch``
    games of its own, all in one batch: the learner and the opponent see (N, B) games
    (member axis first) and member k's draws come from stream k, in the order a single run
    with that stream draws them. With a ``torch.Generator`` (or None): (B,) games.
    """
    device = torch.device(device)
    t = g.tables(device)
    T = C = g.cells  # a game lasts at most one ply per cell
    shape = (generator.n, batch) if isinstance(generator, Streams) else (batch,)
    G = shape[0] * shape[-1] if len(shape) == 2 else batch  # games in all: the engine's batch
    self_play = isinstance(opponent, SelfPlay)  # the learner moves for both sides
    seats = draw_seats(shape, "x" if self_play else seat, device, generator).reshape(G)
    code = torch.zeros(G, dtype=torch.long, device=device)
    over = torch.zeros(G, dtype=torch.bool, device=device)
    winner = torch.zeros(G, dtype=torch.int8, device=device)
    forfeit = torch.zeros(G, dtype=torch.bool, device=device)
    plies = torch.zeros(G, dtype=torch.long, device=device)
    views = torch.empty((T, G, C), dtype=torch.int8, device=device)
    legals = torch.empty((T, G, C), dtype=torch.bool, device=device)
    actions = torch.empty((T, G), dtype=torch.long, device=device)
    actives = torch.empty((T, G), dtype=torch.bool, device=device)
    learners = torch.empty((T, G), dtype=torch.bool, device=device)
    opponent.reset(torch.ones(shape, dtype=torch.bool, device=device), generator)
    asked = learner_plies(seat, opponent, g)

    def learner_act(view: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        return learner(view.float().view(*shape, C), legal.view(*shape, C)).reshape(G)

    def opponent_act(code: torch.Tensor) -> torch.Tensor:
        return opponent.act(code.view(shape), generator).reshape(G)

    for ply in range(T):
        mover = game.X if ply % 2 == 0 else game.O  # lockstep: every live game has `ply` pieces
        view, legal = game.at(t.view, code), game.at(t.legal, code)  # (G, cells)
        mine = (seats == mover) | self_play
        # With a fixed seat only one side moves at this ply: skip the other's computation.
        learner_moves = ply in asked
        opponent_moves = not self_play and (seat == "both" or not learner_moves)
        if learner_moves and opponent_moves:
            action = torch.where(mine, learner_act(view, legal), opponent_act(code))
        elif learner_moves:
            action = learner_act(view, legal)
        else:
            action = opponent_act(code)
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

    return Episodes(view=views.view(T, *shape, C), legal=legals.view(T, *shape, C),
                    action=actions.view(T, *shape), active=actives.view(T, *shape),
                    learner=learners.view(T, *shape), seat=seats.view(shape),
                    outcome=(winner * seats).to(torch.int8).view(shape),
                    forfeit=forfeit.view(shape), plies=plies.view(shape))
