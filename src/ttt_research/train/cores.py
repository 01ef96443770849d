"""``threads=auto``: a population takes the cores nothing else uses, and gives them back.

A population's stacked matrices are large enough for a second torch thread to pay (on the
2-core host, 1.37x to 1.49x the games per second of one thread: BENCHMARKS.md), but two
threads per run fight any other job for a 2-core host (docs/reliability.md#busy-hosts: two
runs of two threads each kept under a third of their speed). So ``auto`` decides from what
the other processes use, measured, not guessed:

* a single run: one thread (its matrices are too small for a second to pay);
* a population: one thread to start, then every ``every_s`` seconds ``CoreShare`` reads the
  host's busy CPU time (``/proc/stat``) and this process's own (``time.process_time``); what
  the others used in the window, in cores, leaves ``free`` cores, and the population runs on
  as many threads as whole cores are free (at least 1, at most ``MOST``). A job started
  beside it takes a core back within a window; when it ends, the population takes it again.
  Where ``/proc/stat`` cannot be read (not Linux), ``auto`` is one thread.

On the 2-core host the thread count changed no number of a population's run (population.json
byte for byte at 1 and 2 threads, tests/train/test_cores.py); on other hosts and sizes it
may, as any thread count may (docs/reliability.md): ``threads=1`` fixes it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import torch
from lightning.pytorch.callbacks import Callback

MOST = 4  # the population's matrices are small: past a few threads the fork/join costs more
OTHERS_SLACK = 0.25  # cores of others' use that still leave a core free (daemons, the shell)
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity; else the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def host_busy_seconds() -> float | None:
    """CPU seconds every CPU of the host spent busy since boot (``/proc/stat``'s first line:
    user, nice, system, irq, softirq, steal); None where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / TICK


def threads_for(free: float, most: int = MOST) -> int:
    """Threads for ``free`` cores (cores minus what the others use): the whole cores free,
    with ``OTHERS_SLACK`` of a core forgiven, at least 1 and at most ``most``."""
    return max(1, min(most, int(free + OTHERS_SLACK)))


def starting_threads(setting) -> int | None:
    """The threads a run starts on: ``setting`` when it is a number (None: torch's default);
    ``auto``: one (a population then takes what is free: ``CoreShare``)."""
    return 1 if setting == "auto" else setting


class CoreShare(Callback):
    """``threads=auto`` for a population: every ``every_s`` seconds of training, as many torch
    threads as the cores others leave free (``threads_for``); logged as ``perf/threads``.

    ``busy``, ``own`` and ``clock``: the host's busy CPU seconds, this process's and the wall
    clock (tests pass their own)."""

    def __init__(self, every_s: float = 2.0, cpus: int | None = None,
                 busy: Callable[[], float | None] = host_busy_seconds,
                 own: Callable[[], float] = time.process_time,
                 clock: Callable[[], float] = time.monotonic,
                 set_threads: Callable[[int], None] = torch.set_num_threads):
        self.every_s = every_s
        self.cpus = cpus or usable_cpus()
        self.busy, self.own, self.clock, self.set_threads = busy, own, clock, set_threads
        self.threads = 1
        self._last: tuple[float, float, float] | None = None
        self.others: float | None = None  # cores the other processes used in the last window

    def reading(self) -> tuple[float, float, float] | None:
        busy = self.busy()
        return None if busy is None else (self.clock(), busy, self.own())

    def on_train_start(self, trainer, pl_module) -> None:
        self.threads = 1
        self.set_threads(1)
        self._last = self.reading()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if self._last is None:  # no /proc/stat: one thread, as started
            return
        now = self.reading()  # (the window's figures; every update logs the threads it ran on)
        if now is not None and now[0] - self._last[0] >= self.every_s:
            wall = now[0] - self._last[0]
            self.others = max(0.0, (now[1] - self._last[1]) - (now[2] - self._last[2])) / wall
            self._last = now
            want = threads_for(self.cpus - self.others)
            if want != self.threads:
                self.threads = want
                self.set_threads(want)
        pl_module.log("perf/threads", float(self.threads), on_step=True, on_epoch=False)
