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
``value_net``, ...), so a checkpoint's ``state_dict`` keys are the algorithm's. The class is
composed of parts, one module each: ``offered.py`` (what an algorithm's update is offered),
``accounting.py`` (counting, guarding and logging an update), ``checkpointing.py`` (the
checkpoint's state) and ``processes.py`` (what the DDP processes share).
"""

from __future__ import annotations

import math
import time

import lightning as L
import torch

from ttt_research.algos.base import Algorithm, Update
from ttt_research.algos.spec import spec_of
from ttt_research.contract import TRAINING_SEATS
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.opponents import Opponent
from ttt_research.env.reward import Reward
from ttt_research.env.streams import Streams
from ttt_research.train.accounting import Accounting
from ttt_research.train.checkpointing import CheckpointState
from ttt_research.train.offered import Offered
from ttt_research.train.processes import Processes


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


class RLModule(Offered, Accounting, CheckpointState, Processes, L.LightningModule):
    """An algorithm with its opponent, seat, reward and budget, and the shared bookkeeping,
    in parts of one job each: what an update is offered (``offered.Offered``), what follows
    it (``accounting.Accounting``), the checkpoint's state (``checkpointing.CheckpointState``)
    and the other processes (``processes.Processes``); here, the rest: the budget's updates,
    the random streams, the fit's start and end, and the update itself.

    ``members``: a population's (``population.spec.Member``), whose nets the algorithm holds
    stacked; None for a single run. ``population_size``: the members of all processes
    (trainer=ddp shares them out); ``shard_rank``: the rank whose members these are.
    ``game``: the board played (``board.Game``), which the exact evaluation and the export ask.
    """

    def __init__(self, algo: Algorithm, opponent: Opponent, reward: Reward, seat: str,
                 budget_games: int, seed: int, members: list | None = None,
                 population_size: int | None = None, shard_rank: int | None = None,
                 game: Game = TIC_TAC_TOE):
        super().__init__()
        self.game = game
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
    def on_board(self) -> dict:
        """The keyword that tells evaluation and export another board (``game=``); none for
        tic-tac-toe, which they take by default."""
        return {} if self.game == TIC_TAC_TOE else {"game": self.game}

    @property
    def name(self) -> str:
        """The algorithm's algo= option (checkpoints, ONNX metadata, console lines)."""
        return self.algo.name

    def configure_optimizers(self):
        return self.algo.configure_optimizers()

    # ------------------------------------------------------------------ budget and data

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
        self.algo.values_to(self.device)  # and the algorithm's
        if states is not None:
            self.streams.set_state(states[rank])
        self._stream_states = None

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
        if self.algo.finished:  # nothing left to learn: this update ends the run, as a budget's last
            self.trainer.should_stop = True  # (its exact evaluation and checkpoint: their ``due``)
