"""The shell's bookkeeping: an algorithm's ``update(run)`` returns its numbers, the shell
(``train/module.py``) counts the games, sizes the run from the budget, checks for
non-finite values and logs."""

import math

import lightning as L
import pytest
import torch

from ttt_research.algos.base import Algorithm, Update
from ttt_research.env.opponents import RandomOpponent
from ttt_research.env.reward import Reward
from ttt_research.errors import NonFiniteError
from ttt_research.models.nets import MLP
from ttt_research.train.module import RLModule


class Script(Algorithm):
    """Plays no games: each update reports 100 games and the loss of a script."""

    name = "script"

    def __init__(self, losses):
        super().__init__(MLP([4], "planes18"), games_per_update=100)
        self.losses = list(losses)
        self.seen: list[int] = []  # games_played as each update began

    def configure_optimizers(self):
        return torch.optim.SGD(self.net.parameters(), lr=0.1)

    def update(self, run) -> Update:
        self.seen.append(run.games_played)
        loss = self.losses[len(self.seen) - 1]
        return Update(100, {"win_rate": 0.25, "loss_rate": 0.5, "tie_rate": 0.25},
                      {"loss": torch.tensor(loss)}, moves=torch.tensor(250))


def scripted(losses, budget_games: int) -> RLModule:
    return RLModule(Script(losses), RandomOpponent(), Reward(1.0, 0.0, -1.0, -1.0), seat="o",
                    budget_games=budget_games, seed=0)


def fit(module):
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(module)
    return trainer


def test_the_budget_sizes_the_run_and_every_update_is_counted():
    m = scripted([0.5] * 3, budget_games=250)  # 250 games in updates of 100: 3 updates
    trainer = fit(m)
    assert trainer.num_training_batches == m.total_updates == math.ceil(250 / 100) == 3
    assert m.algo.seen == [0, 100, 200]  # counted after each update, before the next
    assert m.games_played == m.games_local == 300
    assert m.env_steps == 750  # the learner moves an update reports
    logged = trainer.logged_metrics
    assert float(logged["train/games"]) == 300 and float(logged["train/loss"]) == 0.5
    assert float(logged["rollout/loss_rate"]) == 0.5 and float(logged["train/env_steps"]) == 750


def test_a_non_finite_term_stops_the_run_at_its_update():
    m = scripted([0.5, float("nan"), 0.5], budget_games=300)
    with pytest.raises(NonFiniteError, match=r"^non-finite value at update 2 of 3 \(after 200 games\): "
                                             r"train/loss = nan; training stopped"):
        fit(m)
    assert m.algo.seen == [0, 100]
