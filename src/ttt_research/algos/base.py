"""What every learning algorithm here shares, as a LightningModule base class.

An algorithm plays a batch of games inside ``training_step`` and updates its network
(manual optimisation: the algorithm decides how many optimiser steps a batch makes). The
base class owns the bookkeeping around that:

* the training "data": there is none, so the dataloader yields update indices forever
  and the Trainer's ``limit_train_batches`` is the number of updates in the budget;
* a ``torch.Generator`` on the module's device for every random draw in rollouts, seeded
  from ``seed`` (and saved in checkpoints, so a resumed run draws what it would have);
* the game counter, the rollout metrics and ``perf/games_per_s``;
* the greedy policy that the exact evaluator and the exporter see.
"""

from __future__ import annotations

import math
import time

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from ..nets import MLP
from ..opponents import Opponent
from ..rollout import SEATS, Episodes, Reward


class _Updates(IterableDataset):
    """An endless stream of update indices: RL makes its own data in ``training_step``."""

    def __iter__(self):
        i = 0
        while True:
            yield i
            i += 1


class RLModule(L.LightningModule):
    """Base for algorithms: net, opponent, seat, reward, budget and the shared bookkeeping."""

    def __init__(self, net: MLP, opponent: Opponent, reward: Reward, seat: str = "o",
                 games_per_update: int = 1024, budget_games: int = 100_000, seed: int = 0):
        super().__init__()
        if seat not in SEATS:
            raise ValueError(f"seat must be one of {SEATS}, got {seat!r}")
        self.net = net
        self.opponent = opponent
        self.reward = reward
        self.seat = seat
        self.games_per_update = int(games_per_update)
        self.budget_games = int(budget_games)
        self.seed = int(seed)
        self.games_played = 0
        self.generator: torch.Generator | None = None
        self._generator_state: torch.Tensor | None = None
        self._last_time: float | None = None
        self.latest_eval: dict | None = None  # set by the exact-evaluation callback
        self.automatic_optimization = False

    # ------------------------------------------------------------------ budget and data

    @property
    def total_updates(self) -> int:
        """Updates in the budget: enough batches of games to cover ``budget_games``."""
        return max(1, math.ceil(self.budget_games / self.games_per_update))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_Updates(), batch_size=None)

    # ------------------------------------------------------------------ randomness

    def on_fit_start(self) -> None:
        rank = self.global_rank
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed * 1_000_003 + rank)  # one stream per process
        if self._generator_state is not None:
            self.generator.set_state(self._generator_state)
            self._generator_state = None

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["net_spec"] = self.net.spec()
        checkpoint["algo"] = type(self).__name__.lower()
        checkpoint["games_played"] = self.games_played
        if self.generator is not None:
            checkpoint["generator_state"] = self.generator.get_state()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.games_played = int(checkpoint.get("games_played", 0))
        self._generator_state = checkpoint.get("generator_state")

    @property
    def progress(self) -> float:
        """Share of the game budget played so far, in [0, 1] (schedules follow it; it is
        checkpointed through ``games_played``, so a resumed run continues them)."""
        return min(1.0, self.games_played / max(1, self.budget_games))

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        """Tell the opponent an update is coming (pools snapshot, curricula move on)."""
        self.opponent.on_update(self.net, self.progress, batch_idx)

    # ------------------------------------------------------------------ policy

    @torch.no_grad()
    def greedy(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's view -> (B, 9) masked logits, for evaluation and export."""
        return self.net(view.to(self.device)).float()

    # ------------------------------------------------------------------ logging

    def log_rollout(self, episodes: Episodes, extra: dict[str, torch.Tensor]) -> None:
        """Rollout rates, ``train/*`` terms and speed, every update."""
        self.log_results(episodes.batch, episodes.rates(), extra)

    def log_results(self, games: int, rates: dict, extra: dict[str, torch.Tensor]) -> None:
        """Log an update of ``games`` games: sampled rates, ``train/*`` terms, games/s."""
        self.games_played += games
        now = time.perf_counter()
        metrics = {f"rollout/{k}": v for k, v in rates.items()}
        metrics.update({f"train/{k}": v.detach() for k, v in extra.items()})
        metrics["train/games"] = float(self.games_played)
        if self._last_time is not None:
            metrics["perf/games_per_s"] = games / max(now - self._last_time, 1e-9)
        self._last_time = now
        self.log_dict(metrics, on_step=True, on_epoch=False, batch_size=games)
        if "perf/games_per_s" in metrics:
            self.log("games/s", metrics["perf/games_per_s"], prog_bar=True, logger=False,
                     on_step=True, on_epoch=False)
