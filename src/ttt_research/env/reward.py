"""The reward table (``reward=`` config group): what a win, a tie, a loss and an illegal move
are worth to the learner. Its fields are numbers, or a population's (N, 1) tensors when
members set their own, broadcast over each member's games.
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
