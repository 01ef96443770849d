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

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Reward:
    """The reward table, from the learner's side. ``illegal`` applies to a forfeit by the
    learner (an occupied cell chosen with masking off)."""

    win: float = 1.0
    tie: float = 0.0
    loss: float = -1.0
    illegal: float = -1.0

    def of(self, outcome: torch.Tensor, forfeit: torch.Tensor | None = None) -> torch.Tensor:
        """(B,) learner outcomes (+1 win, 0 tie, -1 loss) -> (B,) float rewards. A
        population's members may each have their own values: then a field is an (N, 1)
        tensor (on the games' device: ``to``) and the outcomes (N, B)."""
        r = torch.where(outcome > 0, self.win, torch.where(outcome < 0, self.loss, self.tie))
        if forfeit is not None:
            r = torch.where(forfeit, self.illegal, r)
        return r.float()


    def to(self, device: torch.device) -> Reward:
        """The table with its per-member tensors on ``device`` (numbers stay numbers)."""
        move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
        return Reward(move(self.win), move(self.tie), move(self.loss), move(self.illegal))
