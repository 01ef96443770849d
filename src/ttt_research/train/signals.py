"""A run stopped by a signal stops at a consistent point, with a checkpoint ``resume=true``
continues.

SIGTERM (``kill``, SLURM, most schedulers), SIGINT (Ctrl-C) and the signals SLURM is asked to
send before a time limit (SIGUSR2: submitit's ``--signal=USR2@90``, or the one named by
``$SUBMITIT_PREEMPT_SIGNAL``; SIGUSR1: Lightning's convention for ``sbatch`` scripts) do not
stop the process where they find it. The handler only notes the signal (``Stop``);
``StopOnSignal``, the last callback of an update, acts at the end of the update in which it
arrived, after that update's exact evaluation and regular checkpoint: it takes the update's
``checkpoints/last.ckpt`` (``PeriodicCheckpoint.take``, renamed into place once Lightning has
logged the update's row, so no row is lost) and ends the fit after the update; ``train`` then
raises ``Stopped``. ``__main__`` prints one line (``stopped by SIGTERM after N
games: resume=true continues``) and exits with 128 + the signal's number (143 for SIGTERM,
130 for SIGINT), which also ends a multirun (``-m``). A second signal of the same kind ends
the process at once, as an unhandled one would; the checkpoint on disk stays whole (it is
renamed into place).

With Lightning: its signal connector installs a SIGTERM handler as ``fit`` starts that ends
the run with ``SIGTERMException`` (a ``SystemExit`` of status 0: a killed run looked
finished), at a batch end of its choosing and without a checkpoint; ``StopOnSignal``
puts ours back in its place in ``on_train_start``, and Lightning's teardown restores ours
(what it found). Lightning's SLURM auto-requeue (on SIGUSR1: ``hpc_ckpt_N.ckpt`` written from
inside the handler, mid-update, resumed past our checks) is installed only on a signal
without a handler, so ours on SIGUSR1 keeps it out. Several processes (DDP) decide together,
once per update, so that all stop after the same update (saving a checkpoint is collective).

Under submitit (``hydra/launcher=slurm``) the handler that was there before ours (submitit's:
requeue the job) is called once the checkpoint is written (``Stopped.chain``); the requeued
job reruns the same command, and ``runfolder`` continues its folder as a resume.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator

import lightning as L
import torch

from ttt_research.train import early_stop


def stop_signals() -> list[int]:
    """The signals that stop a run cleanly (those this platform has)."""
    names = ["SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2"]
    preempt = os.environ.get("SUBMITIT_PREEMPT_SIGNAL")  # submitit's override of USR2
    if preempt:
        names.append(preempt if preempt.startswith("SIG") else f"SIG{preempt}")
    found = [getattr(signal, n) for n in names if isinstance(getattr(signal, n, None), signal.Signals)]
    return list(dict.fromkeys(found))


class Stopped(Exception):
    """The run stopped on a signal; ``code`` is the exit status (128 + the signal)."""

    def __init__(self, signum: int, games: int, complete: bool = False, chain: Callable | None = None):
        self.signum, self.games, self.complete, self.chain = signum, games, complete, chain
        self.code = 128 + signum
        self.command: str | None = None  # the command that continues the run (set by __main__)
        super().__init__(str(self))

    def __str__(self) -> str:
        name = signal.Signals(self.signum).name
        if self.complete:
            return (f"stopped by {name} after {self.games:,} games: the run had finished, "
                    "its outputs are complete")
        where = f": {self.command}" if self.command else ""
        return f"stopped by {name} after {self.games:,} games: resume=true continues{where}"


class Stop:
    """The signal noted during a run (``signum``, 0 if none) and the handlers ours replaced.

    An update on a bigger board can take a while (4,4,4's first one builds or reads its tables,
    10-60 s; an exact evaluation at its end, 5-20 s): when the update has not ended ``ACK_S``
    after the signal, one line on stderr says that it was heard and what happens next. A tic-tac-
    toe update ends long before: its stop prints only its own line."""

    ACK_S = 2.0

    def __init__(self):
        self.signum = 0
        self.games = 0  # games played when training ended (train.py)
        self.previous: dict[int, object] = {}
        self.trained = False  # the fit has ended: what is left is the final evaluation and the outputs
        self._ack: threading.Timer | None = None

    def handler(self, signum: int, frame) -> None:
        if self.signum == signum:  # the second one: stop now, as if we had no handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if not self.signum:
            self.signum = signum
            self._ack = threading.Timer(self.ACK_S, self._acknowledge, (signum,))
            self._ack.daemon = True
            self._ack.start()

    def _acknowledge(self, signum: int) -> None:
        """The line a stop signal gets while its update (or the outputs) still run: written to
        the descriptor, not through ``sys.stderr``, which the main thread may be writing."""
        name = signal.Signals(signum).name
        if self.trained:
            then = "the run has trained: it stops once its outputs are written"
        else:
            then = "the run stops with a checkpoint once this update ends"
        os.write(2, f"{name} noted: {then} (another {name} stops it now)\n".encode())

    def acted(self) -> None:
        """The update ended and the stop is under way: no acknowledgement is due any more."""
        if self._ack is not None:
            self._ack.cancel()

    def install(self) -> None:
        for signum in stop_signals():
            previous = signal.signal(signum, self.handler)
            self.previous.setdefault(signum, previous)

    def take_back(self, signum: int) -> None:
        """Ours again on ``signum`` (Lightning's SIGTERM handler replaced it)."""
        if signum in self.previous and threading.current_thread() is threading.main_thread():
            signal.signal(signum, self.handler)

    def restore(self) -> None:
        self.acted()
        for signum, previous in self.previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self.previous = {}

    def stopped(self, games: int, signum: int | None = None, complete: bool = False) -> Stopped:
        signum = signum or self.signum
        chain = self.previous.get(signum)
        if not callable(chain) or chain is signal.default_int_handler or early_stop.is_ours(chain):
            chain = None  # nothing of anyone else's to call (the defaults are ours to replace)
        return Stopped(signum, games, complete, chain)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Stop]:
    """Our handlers for the stop signals while the block runs (the main thread only: Python
    delivers signals there), the previous ones after."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    stop.install()
    stop.signum = early_stop.pending()  # noted as the folder was claimed: stop after the first update
    try:
        yield stop
    finally:
        stop.restore()


class StopOnSignal(L.Callback):
    """At the end of each update: if a stop signal was noted (on any process), take the
    update's checkpoint and end the fit after it. Must be the last callback, after the
    evaluation and the regular checkpoint of the update."""

    def __init__(self, stop: Stop, checkpoint):
        self.stop = stop
        self.checkpoint = checkpoint  # callbacks.PeriodicCheckpoint

    def on_train_start(self, trainer, module) -> None:
        self.stop.take_back(signal.SIGTERM)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        signum = agreed(trainer, self.stop.signum)  # several processes: all stop, or none
        if not signum:
            return
        self.stop.acted()
        # The update's checkpoint, renamed into place once Lightning has logged the update's
        # row (so no row is lost), then the loop ends after this update; train() raises Stopped.
        self.checkpoint.take(trainer, batch_idx + 1)
        self.stop.signum = signum
        trainer.should_stop = True


def agreed(trainer, signum: int) -> int:
    """The stop signal every process acts on: the largest any of them noted (0: none), one
    all-reduce. ``StopOnSignal`` votes so after each update; ``train`` once more after the fit, as
    a signal can reach one process after the last vote and the processes must go on together:
    all to their outputs, or all to ``part_ways``."""
    dist = torch.distributed
    if trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
        noted = torch.tensor([signum], dtype=torch.int64, device=trainer.strategy.root_device)
        dist.all_reduce(noted, op=dist.ReduceOp.MAX)
        return int(noted.item())
    return signum


def part_ways() -> None:
    """Several processes that stopped or finished together leave their process group together,
    before the command exits: each waits for the others, then closes its connections. Left to
    the exit, a process that ended while its peer was still alive (rank 1 while rank 0 wrote the
    outputs, or after the line that says how to resume) was now and then ended by gloo's C++
    runtime, "terminate called without an active exception", and Lightning then killed rank 0
    (exit -9): 1 run in 12 of the 2-process test here; a bare gloo pair that exits without
    leaving aborted 8 times in 60, none in 100 with the barrier and ``destroy_process_group``."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
