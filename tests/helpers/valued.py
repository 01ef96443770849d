"""An algorithm with action values, for testing what the shell does with them (there is no
value-learning algorithm in ``algos/`` to test with yet): REINFORCE, whose ``action_values``
are the exact game-theoretic values of a reward table (``win`` / ``tie`` / ``loss``, its
own constructor arguments, so a test can set them apart from the run's table), plus
``shift``. Train it with ``algo._target_=tests.helpers.valued.KnownValues``."""

from __future__ import annotations

import torch

from ttt_research.algos.reinforce import Reinforce
from ttt_research.env import game
from ttt_research.env.reward import Reward
from ttt_research.evaluation.values import decision_positions, game_values, move_outcomes
from ttt_research.models.nets import MLPStack

TARGET = f"{__name__}.KnownValues"


def exact_value_table(reward: Reward) -> torch.Tensor:
    """(3^9, 9) float32: the game-theoretic value of each move, indexed by ``game.view_code``
    of the mover's view (zero where nobody moves)."""
    codes = decision_positions(("x", "o"))
    table = torch.zeros(game.N_CODES, 9)
    table[game.view_code(game.tables().view[codes])] = game_values(move_outcomes(codes), reward).float()
    return table


class KnownValues(Reinforce):
    def __init__(self, net, shift: float = 0.0, win: float = 1.0, tie: float = 0.3, loss: float = -2.0,
                 **kwargs):
        super().__init__(net, **kwargs)
        self.shift = float(shift)
        self.table = exact_value_table(Reward(win, tie, loss))

    @torch.no_grad()
    def action_values(self, view: torch.Tensor) -> torch.Tensor:
        values = self.table.to(view.device)[game.view_code(view)] + self.shift  # (..., 9)
        if isinstance(self.net, MLPStack) and view.dim() == 2:  # shared views: one block per member
            values = values.expand(self.net.n, -1, -1)
        return values
