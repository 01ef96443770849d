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
        """Count, check and log an update, in that order, in every process alike: one path
        for one agent and many (a single run is a population of one).

        The update's numbers, a column per name ((N,): one per member of this process), are
        made one agent's (a single run: the means over the DDP processes, which all played
        its games) or stay per member (a population); the numerical guard reads them
        (``guards.check``) before the callbacks of the step (exact evaluation, checkpoint)
        see the module, so no checkpoint stores a non-finite value: a single run stops, a
        population's member that fails drops out. Then every process's members are
        gathered (trainer=ddp shares a population out) and the log gets their median over
        the members still training (a single run: its own numbers), a population's min and
        max of each rate, and the speed of all members together. ``games_played`` (all
        processes of one agent; a population: the games of one member) drives the budget,
        the schedules and the checkpoints.
        """
        now = time.perf_counter()
        self.member_games += done.games * self.active.long()  # a member that fails now played them
        mine = self._columns(done)
        if not self.stacked:  # DDP: one all-reduce, then every process holds the same numbers
            mine = dict(zip(mine, self.mean_over_processes(torch.stack(list(mine.values()))).unbind(),
                            strict=True))
        games = done.games * self.budget_processes  # the games each agent played in this update
        verdict = check(self, {term_name(k): mine[term_name(k)] for k in done.terms},
                        self.games_played + games)
        if verdict is not None and not self.stacked:
            raise verdict.error()
        if verdict is not None:
            self.stop_members(verdict)
        every, live = self._of_all_members(mine)
        metrics: dict[str, float] = {}
        for k, v in every.items():
            if k == "moves":
                continue
            metrics[k] = float(v[live].quantile(0.5))  # of an even count: the middle two's mean
            if self.stacked and k.startswith("rollout/"):  # (a single run's metrics.csv has none)
                metrics[f"{k}_min"], metrics[f"{k}_max"] = float(v[live].min()), float(v[live].max())
        if self._last_time is not None:
            metrics["perf/games_per_s"] = games * int(live.sum()) / max(now - self._last_time, 1e-9)
        self._last_time = now
        self.games_local += done.games
        self.games_played += games
        if "moves" in every:  # learner moves: a population's members', or one agent's in all processes
            steps = round(float(every["moves"][live].sum()) * self.budget_processes)
            self.env_steps += steps
            metrics["perf/steps_per_s"] = steps / max(seconds, 1e-9)
            metrics["train/env_steps"] = float(self.env_steps)
        self._log_update(metrics, done.games)

    def _columns(self, done: Update) -> dict[str, torch.Tensor]:
        """The update's numbers by their logged names, a column each: (N,) float32 on the
        module's device, one per member (a number for all is repeated)."""
        def column(v) -> torch.Tensor:
            return (torch.as_tensor(v, dtype=torch.float32, device=self.device).detach()
                    .reshape(-1).expand(self.n).clone())

        mine = {f"rollout/{k}": column(v) for k, v in done.rates.items()}
        mine.update({term_name(k): column(v) for k, v in done.terms.items()})
        if done.moves is not None:
            mine["moves"] = column(done.moves.float().sum() if not self.stacked else done.moves)
        return mine

    def _of_all_members(self, mine: dict[str, torch.Tensor]) -> tuple[dict, torch.Tensor]:
        """Every process's columns side by side ((population_size,), on the CPU) and which
        members still train; a single run: its own, (1,)."""
        if not self.stacked:
            return mine, torch.ones(1, dtype=torch.bool, device=self.device)
        mine = {k: v.cpu() for k, v in mine.items()} | {"active": self.active.float()}
        shares = self.gather_objects(mine)
        every = {k: torch.cat([s[k] for s in shares]) for k in mine}  # (population_size,)
        self.active_all = every.pop("active").bool()
        if not bool(self.active_all.any()):  # trainer=ddp: no process has a member left
            raise NonFiniteError(f"every member of the population went non-finite by update "
                                 f"{self.update_index + 1}; population.json is not written")
        return every, self.active_all

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
