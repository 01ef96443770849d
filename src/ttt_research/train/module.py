"""The Lightning shell every algorithm runs in: one ``RLModule`` wraps one ``Algorithm``.

The algorithm (``algos/``) plays and learns in ``update(run)``; this module is the ``run``
it gets, and does the bookkeeping of every algorithm, in one place:

* the training "data": there is none, so the dataloader is the update indices, its
  length the number of updates in the budget (computed when the Trainer, hence the
  number of processes, is known: the Trainer is sized once, by the data);
* the random streams on the module's device for every random draw in rollouts, one per
  member, seeded from ``seed`` and the process's rank (and saved in checkpoints, one state
  per process, so a resumed run draws what it would have);
* the game counter (which drives the budget, the schedules and the checkpoints), the
  rollout metrics, ``train/*`` terms and ``perf/games_per_s``;
* the opponent's training state (pool snapshots, curriculum stage) in checkpoints;
* the numerical guard (``guards.py``): a non-finite loss term or parameter stops the run
  (a population: the member) at the update where it appears, before any checkpoint;
* multi-process training (``trainer=ddp``): each process plays ``games_per_update`` games
  per update with its own random stream, DDP averages the gradients (``backprop``), and
  the rollout numbers are averaged across processes once per update, so every process
  logs, counts and schedules the same global figures;
* populations (``population/``): N members in one stack, each with its own stream, counted,
  guarded and logged member by member; with ``trainer=ddp`` the members are shared out
  over the processes and gathered at the end (``whole``).

The algorithm's networks are this module's children under their own names (``net``,
``value_net``, ...), so a checkpoint's ``state_dict`` keys are the algorithm's.
"""

from __future__ import annotations

import math
import time

import lightning as L
import torch
import torch.distributed as dist

from ttt_research.algos.base import Algorithm, Update
from ttt_research.algos.spec import spec_of
from ttt_research.contract import TRAINING_SEATS
from ttt_research.env import game
from ttt_research.env.opponents import Opponent, SelfPlay
from ttt_research.env.reward import Reward
from ttt_research.env.streams import Streams
from ttt_research.errors import ConfigError, NonFiniteError
from ttt_research.models.member_optim import clip_member_grad_norm
from ttt_research.models.stacks import blank_like
from ttt_research.train.guards import Verdict, check_finite, check_members, none_left, zero_members


def term_name(key: str) -> str:
    """The logged name of an update's term: ``train/<key>``, or the key itself when it names
    its own namespace (``search/depth``)."""
    return key if "/" in key else f"train/{key}"


class UpdateIndices:
    """The training "data": update indices 0 .. ``total`` - 1, as many as the budget's updates.

    Lightning takes its length as the number of training batches. Not a DataLoader, so
    Lightning adds no distributed sampler: every process runs every update. There is
    nothing to resume in it (the indices are not used; a resumed run draws what it would
    have from the module's streams, which the checkpoint holds), so its state is empty,
    which tells Lightning that a checkpoint taken mid-epoch resumes it correctly.
    """

    def __init__(self, total: int):
        self.total = int(total)

    def __len__(self) -> int:
        return self.total

    def __iter__(self):
        return iter(range(self.total))

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class RLModule(L.LightningModule):
    """An algorithm with its opponent, seat, reward and budget, and the shared bookkeeping.

    ``members``: a population's (``population.spec.Member``), whose nets the algorithm holds
    stacked; None for a single run. ``population_size``: the members of all processes
    (trainer=ddp shares them out); ``shard_rank``: the rank whose members these are.
    """

    def __init__(self, algo: Algorithm, opponent: Opponent, reward: Reward, seat: str,
                 budget_games: int, seed: int, members: list | None = None,
                 population_size: int | None = None, shard_rank: int | None = None):
        super().__init__()
        if seat not in TRAINING_SEATS:
            raise ValueError(f"seat must be one of {TRAINING_SEATS}, got {seat!r}")
        # Not a child: its networks are (below), so the state_dict keys are net.*, value_net.*
        self.__dict__["algo"] = algo
        for name, child in algo.named_children():
            self.add_module(name, child)
        self.opponent = opponent
        self.reward = reward
        self.seat = seat
        self.games_per_update = algo.games_per_update
        self.budget_games = int(budget_games)
        self.seed = int(seed)
        self.games_played = 0  # all processes together
        self.games_local = 0  # this process's games (DDP: each process plays its own)
        self.env_steps = 0  # learner moves, all processes (only algorithms that count them)
        self.update_index = 0  # the update being played (0-based), for messages
        # A population (population/): N members, one per seed and hyperparameter values,
        # trained in lockstep; the algorithm's nets are then ``MLPStack``s and every tensor
        # has a leading member axis. A single run is the population of one: the same code,
        # with the plain ``MLP`` (so its numbers stay a single run's).
        self.members = list(members) if members else None
        self.n = len(self.members) if self.members else 1  # members in this process
        # A population's module (N may be 1 in a process of trainer=ddp, which trains its
        # share of the members: population.sharing.shard), and the members in all processes.
        self.stacked = self.members is not None
        self.population_size = int(population_size or self.n)
        self.shard_rank = shard_rank
        self.active = torch.ones(self.n, dtype=torch.bool)  # (N,) members still training
        self.stopped: dict[int, str] = {}  # member index (Member.index) -> why it stopped
        self.active_all = self.active  # (population_size,) of every process, after each update
        self.whole: dict | None = None  # the population of all processes at the end (on_train_end)
        self.member_games = torch.zeros(self.n, dtype=torch.long)  # (N,) games each has played
        self.last_update: Update | None = None
        self._positions: tuple[torch.Tensor, torch.Tensor] | None = None  # views, row_of
        self.streams: Streams | None = None  # one random stream per member (on_fit_start)
        self._stream_states: list | None = None  # from a checkpoint, one per process
        self._last_time: float | None = None
        self.automatic_optimization = False
        self.save_hyperparameters({"algo": algo.name, "seat": seat, "games_per_update": self.games_per_update,
                                   "budget_games": self.budget_games, "seed": self.seed})

    @property
    def name(self) -> str:
        """The algorithm's algo= option (checkpoints, ONNX metadata, console lines)."""
        return self.algo.name

    def configure_optimizers(self):
        return self.algo.configure_optimizers()

    # ------------------------------------------------------------------ budget and data

    @property
    def processes(self) -> int:
        """Training processes (DDP's world size; 1 before the module is given a Trainer)."""
        return self._trainer.world_size if self._trainer is not None else 1

    @property
    def split(self) -> bool:
        """A population whose members are shared out over processes (trainer=ddp)."""
        return self.stacked and self.processes > 1

    @property
    def budget_processes(self) -> int:
        """Processes that share the game budget: all of DDP's for one agent (each plays its
        part of every update); 1 for a population, whose every member plays its budget."""
        return 1 if self.stacked else self.processes

    @property
    def total_updates(self) -> int:
        """Updates in the budget: enough batches of games to cover ``budget_games``, each
        update playing ``games_per_update`` games in every process (a population's
        members: each plays the budget)."""
        return max(1, math.ceil(self.budget_games / (self.games_per_update * self.budget_processes)))

    def train_dataloader(self) -> UpdateIndices:
        """The update indices: RL makes its own data in ``update()``. Built when the Trainer
        is known, so the number of updates counts every process's games (trainer=ddp:
        world_size times fewer updates): the Trainer is sized once, here."""
        return UpdateIndices(self.total_updates)

    # ------------------------------------------------------------------ randomness

    @property
    def seeds(self) -> list[int]:
        """Each member's seed (a single run: ``[seed]``)."""
        return [m.seed for m in self.members] if self.members else [self.seed]

    def on_fit_start(self) -> None:
        rank = self.global_rank
        if spec_of(f"{type(self.algo).__module__}.{type(self.algo).__qualname__}").one_process \
                and self.trainer.world_size > 1:
            raise RuntimeError(f"algo={self.name} trains in one process: its updates "
                               "bypass DDP's gradient averaging")
        if self.split and self.shard_rank is not None and self.shard_rank != rank:
            raise RuntimeError(f"this process (rank {rank}) was given the members of rank "
                               f"{self.shard_rank}: the launcher's ranks were not read right")
        # One stream per process (DDP: each plays its own games), and in a population one per
        # member: member k's is the one of a single run with its seed, in whichever process.
        streams = [s * 1_000_003 + (0 if self.stacked else rank) for s in self.seeds]
        states = self._stream_states
        if states is not None and len(states) != self.trainer.world_size:
            # resumed with another number of processes: fresh, distinct streams
            streams = [s ^ (self.games_played << 20) for s in streams]
            states = None
        self.streams = Streams(streams, self.device)
        self.reward = self.reward.to(self.device)  # a population's per-member values, if any
        if states is not None:
            self.streams.set_state(states[rank])
        self._stream_states = None

    def _per_process(self, value: torch.Tensor) -> list[torch.Tensor]:
        """One ``value`` from every process, in rank order (a list of one without DDP)."""
        if self.trainer.world_size == 1:
            return [value]
        value = value.to(self.device)  # NCCL gathers CUDA tensors only
        gathered = [torch.empty_like(value) for _ in range(self.trainer.world_size)]
        dist.all_gather(gathered, value)
        return [g.cpu() for g in gathered]

    def gather_objects(self, obj) -> list:
        """One picklable ``obj`` from every process, in rank order (a list of one alone)."""
        if self._trainer is None or self.trainer.world_size == 1:
            return [obj]
        out = [None] * self.trainer.world_size
        dist.all_gather_object(out, obj)
        return out

    def on_train_end(self) -> None:
        """DDP: every process must end with the same weights (DDP averaged every gradient);
        a mismatch means some update bypassed it, and the run must not pass as good. A
        population gathers its members from every process instead (``whole``)."""
        if self.stacked:
            self.whole = self.gather_population()
            return
        if self.trainer.world_size == 1:
            return
        flat = torch.cat([p.detach().flatten() for p in self.parameters()]).double()
        checksum = torch.stack([flat.sum(), (flat * torch.arange(flat.numel(), device=flat.device)).sum()])
        sums = self._per_process(checksum)
        if any(not torch.equal(s, sums[0]) for s in sums):
            raise RuntimeError("the DDP processes ended with different weights: an update "
                               "bypassed DDP's gradient averaging")

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # Called on every process (Lightning writes the file from rank 0): gather what
        # differs between processes, i.e. each one's random stream and game count.
        checkpoint["net_spec"] = self.algo.net.spec()
        checkpoint["algo"] = self.name
        if not self.members:  # a single run's policy as trained (a population's differ per member)
            checkpoint["acting"] = self.algo.acting(self).to_meta()
        checkpoint["games_played"] = self.games_played
        checkpoint["env_steps"] = self.env_steps
        checkpoint["games_by_process"] = [int(g) for g in self._per_process(
            torch.tensor(self.games_local, dtype=torch.int64))]
        checkpoint["opponent_state"] = self.opponent.state()
        population = None
        if self.members:
            population = {"member_games": self.member_games.clone(), "active": self.active.clone(),
                          "stopped": {str(k): v for k, v in self.stopped.items()}}
            checkpoint["population"] = population
        if self.split:
            # Each process holds other members: the file keeps every process's share (rank
            # 0's is also Lightning's own state_dict), and a resumed process takes its own.
            checkpoint["member_shards"] = self.gather_objects({
                "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
                "optimizer": self.trainer.optimizers[0].state_dict(),
                "generator": self.streams.get_state() if self.streams is not None else None,
                "population": population, "opponent_state": self.opponent.state()})
            checkpoint["generator_states"] = [s["generator"] for s in checkpoint["member_shards"]]
        elif self.streams is not None:
            checkpoint["generator_states"] = self._per_process(self.streams.get_state())

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.games_played = int(checkpoint.get("games_played", 0))
        self.env_steps = int(checkpoint.get("env_steps", 0))
        by_process = checkpoint.get("games_by_process", [self.games_played])
        self._stream_states = checkpoint.get("generator_states")
        if self._stream_states is None and "generator_state" in checkpoint:  # older files
            self._stream_states = [checkpoint["generator_state"]]
        rank = self.global_rank
        self.games_local = int(by_process[rank]) if rank < len(by_process) else 0
        shards = checkpoint.get("member_shards")
        if shards is not None or self.split:
            world = self.trainer.world_size
            if shards is None or len(shards) != world:
                raise ConfigError(f"this checkpoint holds a population trained by "
                                  f"{len(shards) if shards else 1} process(es); resume it with as many "
                                  f"(trainer.devices), not {world}")
            mine = shards[rank]  # Lightning restores the state and optimiser read here
            checkpoint["state_dict"] = mine["state_dict"]
            checkpoint["optimizer_states"] = [mine["optimizer"]]
            checkpoint["opponent_state"] = mine["opponent_state"]
            checkpoint["population"] = mine["population"]
        self.opponent.restore(checkpoint.get("opponent_state", {}), self.net)
        pop = checkpoint.get("population")
        if pop is not None:
            self.member_games = pop["member_games"].clone()
            self.active = pop["active"].clone()
            self.stopped = {int(k): v for k, v in pop["stopped"].items()}

    @property
    def progress(self) -> float:
        """Share of the game budget played so far, in [0, 1] (schedules follow it; it is
        checkpointed through ``games_played``, so a resumed run continues them)."""
        return min(1.0, self.games_played / max(1, self.budget_games))

    def scheduled(self, start: float, final: float | None, games_ahead: int = 0) -> float:
        """A linear schedule from ``start`` to ``final`` over the budget (None: constant),
        at ``progress`` plus ``games_ahead`` games this process has played in the current
        update (so a schedule stepped within an update does not depend on the grouping)."""
        if final is None:
            return start
        played = self.games_played + games_ahead * self.budget_processes
        final = final if isinstance(final, torch.Tensor) else float(final)
        return start + min(1.0, played / max(1, self.budget_games)) * (final - start)

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        """Tell the opponent an update is coming (pools snapshot, curricula move on)."""
        self.update_index = batch_idx
        self.opponent.on_update(self.net, self.progress, batch_idx)

    # ------------------------------------------------------------------ one update

    def training_step(self, batch, batch_idx: int) -> None:
        """The algorithm's ``update(run)`` (this module is its run), then the bookkeeping."""
        start = time.perf_counter()
        done = self.algo.update(self)
        self.last_update = done  # what the latest update did, per member (tests read it)
        self.account(done, time.perf_counter() - start)

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
        check_finite(self, {k: v for k, v in metrics.items() if k.startswith("train/")
                           and isinstance(v, torch.Tensor)})
        self._log_update(metrics, done.games)

    def _log_update(self, metrics: dict, games: int) -> None:
        metrics["train/games"] = float(self.games_played)
        self.log_dict(metrics, on_step=True, on_epoch=False, batch_size=games)
        if "perf/games_per_s" in metrics:
            self.log("games/s", metrics["perf/games_per_s"], prog_bar=True, logger=False,
                     on_step=True, on_epoch=False)

    def stop_members(self, verdict: Verdict) -> None:
        """Stop the members the guard found non-finite, alone; none left: the run stops."""
        self.stopped.update(verdict.why)
        self.active &= ~verdict.bad
        zero_members(self, verdict.bad.to(self.device))
        if not bool(self.active.any()) and not self.split:  # (split: the other processes' may go on)
            raise none_left(self.stopped, self.update_index + 1)

    def _account_population(self, done: Update, seconds: float, now: float) -> None:
        """``account`` for a population: its numbers come per member, (N,). The guard reads
        them per member (``check_members``: a member that fails drops out); then every
        process's members are gathered (trainer=ddp shares them out), and the log gets the
        median over the members still training, the min and max of each rate, and the speed
        of all members together. ``games_played`` counts the games of one member."""
        self.member_games += done.games * self.active.long()  # a member that fails now played them
        verdict = check_members(self, done.terms, self.games_played + done.games)
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

    def gather_population(self) -> dict:
        """Every process's members, for the run folder: the stacked weights of each process's
        share (state dicts, in rank order), and the members, games, stops and activity."""
        shares = self.gather_objects({
            "net": {k: v.detach().cpu() for k, v in self.net.state_dict().items()},
            "members": self.members, "member_games": self.member_games.clone(),
            "active": self.active.clone(), "stopped": dict(self.stopped)})
        net = blank_like(self.net, self.population_size)  # an MLPStack, or a QTableStack
        with torch.no_grad():
            for name, p in net.state_dict().items():  # parameters and buffers (a table's visits)
                p.copy_(torch.cat([s["net"][name] for s in shares]))
        return {"net": net.to(self.device), "members": [m for s in shares for m in s["members"]],
                "member_games": torch.cat([s["member_games"] for s in shares]),
                "active": torch.cat([s["active"] for s in shares]),
                "stopped": {k: v for s in shares for k, v in s["stopped"].items()}}

    # ------------------------------------------------------------------ what an update uses

    def optimizer(self):
        """The algorithm's optimiser in Lightning's wrapper: precision and accelerator
        plugins apply to its steps."""
        return self.optimizers()

    def backprop(self, loss: torch.Tensor) -> None:
        self.manual_backward(loss)

    def clip_grad_norm(self, opt, max_norm: float) -> None:
        """Lightning's norm clipping for one agent; each member's own norm in a stack."""
        if self.stacked:
            clip_member_grad_norm(self.parameters(), max_norm, self.n)
        else:
            self.clip_gradients(opt, gradient_clip_val=max_norm, gradient_clip_algorithm="norm")

    def positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The learner's decision positions: (P, 9) mover's views and the (3^9,) map from a
        view's code (``game.view_code``) to its row (-1: not a decision position): 4,520
        positions, or the 2,097 where O moves (2,423 for X) with a fixed seat."""
        if self._positions is None or self._positions[0].device != self.device:
            t = game.tables(self.device)
            side = torch.ones_like(t.done)  # seat both, or self-play: every position
            if self.seat in ("x", "o") and not isinstance(self.opponent, SelfPlay):
                side = t.mover == (game.X if self.seat == "x" else game.O)
            codes = torch.nonzero(t.reachable & ~t.done & side).squeeze(-1)
            views = t.view[codes]
            row_of = torch.full((game.N_CODES,), -1, dtype=torch.long, device=self.device)
            row_of[game.view_code(views)] = torch.arange(codes.numel(), device=self.device)
            self._positions = (views.float(), row_of)
        return self._positions

    # ------------------------------------------------------------------ policy

    @torch.no_grad()
    def policy_logits(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's view -> (B, 9) masked logits; their argmax is the greedy policy
        that evaluation and export see."""
        return self.algo.policy_logits(view.to(self.device))

    def extra_report(self) -> dict[str, float]:
        """Figures of the algorithm's own that ``eval.json`` adds to the exact evaluation."""
        return self.algo.extra_report()

    def mean_over_processes(self, values: torch.Tensor) -> torch.Tensor:
        """(K,) numbers of this process -> (K,) means over all processes (DDP), one all-reduce."""
        if self.processes == 1 or self._trainer is None:
            return values
        return self.trainer.strategy.reduce(values, reduce_op="mean")
