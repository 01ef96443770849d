"""antirez's ttt-rl training loop, reproduced (``algo=reinforce_faithful``).

The seed learns from one game at a time: it plays a game greedily (the highest output
among the empty cells), then replays the network's moves and takes one plain SGD step
after each, on the loss of ``algos/reinforce.py`` (the move's target times its scaled
reward), with the softmax over all 9 outputs: the network has to learn that occupied
cells are bad. There are no batches, no temperature, no momentum and no schedules, so the
only hyperparameters are the learning rate (the seed's 0.1) and how many games one
training step plays (``games_per_update``: a Lightning step per game would cost more than
the game). The experiment ``antirez_repro`` sets the rest of the seed: 18 -> 100 -> 9
with uniform initialisation, the rewards 1 / 0.3 / -2, O against a random X.

Two implementations of the same loop:

* **NumPy** (``algos/faithful.py``), for the seed's own setting: a network with one
  hidden layer on planes18, on the CPU, playing X or O against the random player. It
  updates the network's weights in place, about ten times faster than torch on one
  board at a time.
* **torch**, for everything else (deeper nets, other opponents, seat=both, a GPU): the
  same games and steps with autograd, through Lightning's optimizer wrapper.

Both play one game at a time and update outside DDP's gradient averaging, so this
algorithm trains in one process only (``config.py`` refuses it with several).
"""

from __future__ import annotations

import numpy as np
import torch

from .. import game
from ..opponents import RandomOpponent
from ..rollout import play_batch
from . import faithful
from .base import RLModule, Update
from .reinforce import antirez_loss, antirez_targets, concat, learner_moves


class ReinforceFaithful(RLModule):
    """The LightningModule for ``algo=reinforce_faithful``: one SGD step per move."""

    name = "reinforce_faithful"  # its algo= option: in checkpoints, ONNX metadata and console lines

    def __init__(self, *args, lr: float = 0.1, **kwargs):
        super().__init__(*args, **kwargs)
        self.lr = float(lr)
        self.save_hyperparameters(ignore=["net", "opponent", "reward"])

    def configure_optimizers(self):
        return torch.optim.SGD(self.net.parameters(), lr=self.lr)  # the seed's plain SGD

    def on_fit_start(self) -> None:
        if self.trainer.world_size > 1:
            raise RuntimeError("algo=reinforce_faithful trains in one process: its updates "
                               "bypass DDP's gradient averaging")
        super().on_fit_start()

    @property
    def numpy_loop(self) -> bool:
        """Whether ``algos/faithful.py`` can run this setting (else the torch loop does)."""
        return (faithful.supports(self.net) and isinstance(self.opponent, RandomOpponent)
                and self.seat in ("x", "o"))

    @torch.no_grad()
    def act(self, view: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """(B, 9) view -> (B,) greedy moves: the highest logit among the empty cells."""
        return self.net(view).argmax(-1)

    def update(self) -> Update:
        if self.numpy_loop:
            return self._numpy_games()
        return self._torch_games()

    def _numpy_games(self) -> Update:
        """``games_per_update`` games in NumPy on the network's own weights."""
        # Drawn from the module's stream, which keeps runs reproducible.
        seed = int(torch.randint(2**62, (1,), generator=self.generator.generators[0]))
        seat = game.X if self.seat == "x" else game.O
        with torch.no_grad():
            s = faithful.train_games(self.net, self.games_per_update, self.reward, self.lr, seat,
                                     np.random.default_rng(seed))
        n = self.games_per_update
        rates = {"win_rate": s["win"] / n, "loss_rate": s["loss"] / n, "tie_rate": s["tie"] / n}
        return Update(n, rates, {"loss": s["loss_sum"] / n, "lr": self.lr})

    def _torch_games(self) -> Update:
        """The same loop with torch: one game, then one SGD step per learner move, in order."""

        opt = self.optimizers()
        results = []
        total = torch.zeros((), device=self.device)
        for _ in range(self.games_per_update):
            ep = play_batch(1, self.act, self.opponent, self.seat, self.device,
                            self.generator.generators[0])  # one game, no member axis
            view, legal, action, scaled, _ = learner_moves(ep, self.reward)
            targets = antirez_targets(action, legal, scaled)
            for i in range(view.shape[0]):  # one SGD step per move, in playing order
                m = slice(i, i + 1)
                loss = antirez_loss(self.net.raw_logits(view[m]), targets[m], scaled[m].abs(), 1.0)
                opt.zero_grad()
                self.manual_backward(loss)
                opt.step()
                total += loss.detach()
            results.append(ep)
        merged = concat(results)
        return Update(merged.batch, merged.rates(), {"loss": total / merged.batch, "lr": self.lr})
