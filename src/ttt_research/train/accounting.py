"""What the shell does after each update, in every process alike: count its games, run the
numerical guard on its numbers (``guards.py``), and log them (``rollout/*``, ``train/*``,
``perf/*``): one agent's means over processes, or a population's median, min and max over
the members still training. A part of ``RLModule`` (``train/module.py``).
"""

from __future__ import annotations

import time

import torch

from ttt_research.algos.base import Update
from ttt_research.errors import NonFiniteError
from ttt_research.train.guards import Verdict, check, none_left, zero_members


def term_name(key: str) -> str:
    """The logged name of an update's term: ``train/<key>``, or the key itself when it names
    its own namespace (``search/depth``)."""
    return key if "/" in key else f"train/{key}"


class Accounting:
    """``RLModule``'s part that counts, checks and logs an update."""

    def account(self, done: Update, seconds: float) -> None:
        """Count, check and log an update, in that order, in every process alike.

        ``games_played`` (all processes) drives the budget, the schedules and the
        checkpoints; the numerical guard runs before the callbacks of the step (exact
        evaluation, checkpoint) see the module, so no checkpoint stores a non-finite value.
        """
        now = time.perf_counter()
        if self.stacked:
            return self._account_population(done, seconds, now)
        metrics = {f"rollout/{k}": torch.as_tensor(v, dtype=torch.float32, device=self.device).reshape(())
                   for k, v in done.rates.items()}
        metrics.update({term_name(k): torch.as_tensor(v, dtype=torch.float32, device=self.device)
                        .detach().reshape(()) for k, v in done.terms.items()})
        if self._last_time is not None:
            metrics["perf/games_per_s"] = torch.tensor(
                done.games / max(now - self._last_time, 1e-9), device=self.device)
        self._last_time = now
        if done.moves is not None:
            metrics["moves"] = done.moves.detach().float().sum().reshape(()).to(self.device)
        self.games_local += done.games
        # DDP: every process played as many games, so the global rates and loss terms are
        # the means over processes; one all-reduce of all of them, then each process logs
        # the same numbers (Lightning's loggers write from rank 0 only).
        metrics = dict(zip(metrics, self.mean_over_processes(torch.stack(list(metrics.values())))
                           .unbind(), strict=True))
        if "perf/games_per_s" in metrics:  # the whole job's speed: the sum over processes
            metrics["perf/games_per_s"] = metrics["perf/games_per_s"] * self.processes
        self.games_played += done.games * self.processes
        if "moves" in metrics:  # learner moves in all processes: their mean times their number
            steps = round(float(metrics.pop("moves")) * self.processes)
            self.env_steps += steps
            metrics["perf/steps_per_s"] = steps / max(seconds, 1e-9)
            metrics["train/env_steps"] = float(self.env_steps)
        verdict = check(self, {k: v for k, v in metrics.items() if k.startswith("train/")
                               and isinstance(v, torch.Tensor)}, self.games_played)
        if verdict is not None:
            raise verdict.error()
        self._log_update(metrics, done.games)

    def _log_update(self, metrics: dict, games: int) -> None:
        metrics["train/games"] = float(self.games_played)
        self.log_dict(metrics, on_step=True, on_epoch=False, batch_size=games)
        if "perf/games_per_s" in metrics:
            self.log("games/s", metrics["perf/games_per_s"], prog_bar=True, logger=False,
                     on_step=True, on_epoch=False)

    def stop_members(self, verdict: Verdict) -> None:
        """Stop the members the guard found non-finite, alone; none left: the run stops."""
        self.stopped.update(verdict.why(self.members))
        self.active &= ~verdict.bad
        zero_members(self, verdict.bad.to(self.device))
        if not bool(self.active.any()) and not self.split:  # (split: the other processes' may go on)
            raise none_left(self.stopped, self.update_index + 1)

    def _account_population(self, done: Update, seconds: float, now: float) -> None:
        """``account`` for a population: its numbers come per member, (N,). The guard reads
        them per member (``guards.check``: a member that fails drops out); then every
        process's members are gathered (trainer=ddp shares them out), and the log gets the
        median over the members still training, the min and max of each rate, and the speed
        of all members together. ``games_played`` counts the games of one member."""
        self.member_games += done.games * self.active.long()  # a member that fails now played them
        verdict = check(self, done.terms, self.games_played + done.games)
        if verdict is not None:
            self.stop_members(verdict)

        def column(v) -> torch.Tensor:  # a number for all, or (n,) per member -> (n,) on the CPU
            return torch.as_tensor(v, dtype=torch.float32).detach().cpu().reshape(-1).expand(self.n).clone()

        mine = {f"rollout/{k}": column(v) for k, v in done.rates.items()}
        mine.update({term_name(k): column(v) for k, v in done.terms.items()})
        if done.moves is not None:
            mine["moves"] = column(done.moves)
        mine["active"] = self.active.float()
        shares = self.gather_objects(mine)
        every = {k: torch.cat([s[k] for s in shares]) for k in mine}  # (population_size,)
        self.active_all = every.pop("active").bool()
        live = self.active_all
        if not bool(live.any()):  # trainer=ddp: no process has a member left
            raise NonFiniteError(f"every member of the population went non-finite by update "
                                 f"{self.update_index + 1}; population.json is not written")
        metrics: dict[str, float] = {}
        for k, v in every.items():
            if k == "moves":
                continue
            metrics[k] = float(v[live].quantile(0.5))  # of an even count: the middle two's mean
            if k.startswith("rollout/"):
                metrics[f"{k}_min"], metrics[f"{k}_max"] = float(v[live].min()), float(v[live].max())
        playing = int(live.sum())
        if self._last_time is not None:
            metrics["perf/games_per_s"] = done.games * playing / max(now - self._last_time, 1e-9)
        self._last_time = now
        self.games_local += done.games
        self.games_played += done.games
        if "moves" in every:
            steps = int(every["moves"][live].sum())
            self.env_steps += steps
            metrics["perf/steps_per_s"] = steps / max(seconds, 1e-9)
            metrics["train/env_steps"] = float(self.env_steps)
        self._log_update(metrics, done.games)
