"""``threads=auto``: a population takes the cores nothing else uses, and gives them back.

A population's stacked matrices are large enough for a second torch thread to pay (on the
2-core host, 1.37x to 1.49x the games per second of one thread: BENCHMARKS.md), but two
threads per run fight any other job for a 2-core host (docs/reliability.md#busy-hosts: two
runs of two threads each kept under a third of their speed). So ``auto`` decides from what
the other processes use, measured, not guessed:

* a single run: one thread (its matrices are too small for a second to pay);
* a population: one thread to start, then after a first short window (``first_s``: a
  population of 16 trained for two or three seconds spent most of them on one thread while it
  waited for a whole window) and every ``every_s`` seconds after it (give or take a tenth,
  so that several of them do not decide in step) ``CoreShare`` reads the busy CPU time of the
  CPUs this process may use (``/proc/stat``, its affinity's lines) and this process's own
  (``time.process_time``); what the others used in the window, in cores, leaves ``free``
  cores. It gives threads back at once (to the whole cores free, at least 1) and takes one
  more after a window with a whole core free (the next one a window later); a core taken in vain (another
  ``auto`` process took it in the same window) makes it wait a random number of windows,
  up to twice as many each time (as Ethernet backs off), so that several of them settle
  instead of growing and shrinking together; at most ``MOST``, and at most
  its share of the usable CPUs (a CPU quota of its cgroup counts; ``trainer=ddp``: each
  process's share). A job started beside it gets its core back a window or two later (a
  window closes at the end of an update); when it ends, the population takes it again. The
  count it started on comes back when the fit ends. Where ``/proc/stat`` cannot be read (not
  Linux), ``auto`` is one thread.

On the 2-core host the thread count changed no number of a population's run (population.json
byte for byte at 1 and 2 threads, tests/train/test_cores.py); on other hosts and sizes it
may, as any thread count may (docs/reliability.md): ``threads=1`` fixes it.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable

import torch
from lightning.pytorch.callbacks import Callback

from ttt_research.train.cpus import affinity, usable_cpus

MOST = 4  # the population's matrices are small: past a few threads the fork/join costs more
# Cores of others' use that still leave a core free (daemons, the shell; 0.0001 on the idle 2-core
# host): a quarter let a process keep two threads where 5 populations held 9 threads on 8 CPUs.
OTHERS_SLACK = 0.1
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def host_busy_seconds(cpus: set[int] | None = None) -> float | None:
    """CPU seconds the CPUs ``cpus`` (None: this process's affinity; else the host's) spent
    busy since boot (``/proc/stat``'s ``cpuN`` lines: user, nice, system, irq, softirq, steal);
    None where it cannot be read."""
    cpus = affinity() if cpus is None else cpus
    try:
        with open("/proc/stat") as f:
            lines = [line.split() for line in f if line.startswith("cpu")]
    except OSError:
        return None
    total, seen = 0, False
    for fields in lines:
        name = fields[0]
        if name == "cpu" or len(fields) < 9 or (cpus is not None and int(name[3:]) not in cpus):
            continue
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
        total += user + nice + system + irq + softirq + steal
        seen = True
    return total / TICK if seen else None


def threads_for(free: float, most: int = MOST) -> int:
    """Threads for ``free`` cores (cores minus what the others use): the whole cores free,
    with ``OTHERS_SLACK`` of a core forgiven, at least 1 and at most ``most``."""
    return max(1, min(most, int(free + OTHERS_SLACK)))


def starting_threads(setting) -> int | None:
    """The threads a run starts on: ``setting`` when it is a number (None: torch's default);
    ``auto``: one (a population then takes what is free: ``callbacks``)."""
    return 1 if setting == "auto" else setting


def callbacks(setting, population: bool) -> list[Callback]:
    """What the fit of a run gets for its threads: ``CoreShare`` for a population under
    ``auto`` (``python -m ttt_research`` and the bench alike), nothing otherwise."""
    return [CoreShare()] if setting == "auto" and population else []


class CoreShare(Callback):
    """``threads=auto`` for a population: after ``first_s`` and then every ``every_s`` seconds of
    training, as many torch threads as the cores others leave free (``threads_for``: fewer at
    once, one more after a window with a core free, later after a core taken in vain); logged as
    ``perf/threads``.

    ``busy``, ``own`` and ``clock``: the usable CPUs' busy seconds, this process's and the wall
    clock; ``jitter``: the share of ``every_s`` a window may be longer by (tests pass their own);
    ``first_s``: the first window, from the start of training (``/proc/stat`` counts in
    hundredths of a second per CPU: 0.3 s on two CPUs reads the others' use to within about
    0.07 of a core, inside ``OTHERS_SLACK``; on many CPUs the error grows, up to about half a
    core on 16, and a misread first window only delays a thread by one window)."""

    def __init__(self, every_s: float = 2.0, cpus: int | None = None,
                 busy: Callable[[], float | None] = host_busy_seconds,
                 own: Callable[[], float] = time.process_time,
                 clock: Callable[[], float] = time.monotonic,
                 set_threads: Callable[[int], None] = torch.set_num_threads, jitter: float = 0.1,
                 first_s: float = 0.3):
        self.every_s, self.jitter, self.first_s = every_s, jitter, min(first_s, every_s)
        self.cpus = cpus or usable_cpus()
        self.busy, self.own, self.clock, self.set_threads = busy, own, clock, set_threads
        self.threads = 1
        self.most = MOST
        self._last: tuple[float, float, float] | None = None
        self._window = self.first_s  # set again, jittered, when training starts
        self._hold = 0  # windows with a core free to wait before taking one (the first: none)
        self._backoff = 1  # the most windows ``_hold`` is drawn from after a core taken in vain
        self._grew = False  # the last decision took a core
        self._started_on: int | None = None
        self._draw = random.Random()  # its own: the training's random streams are not touched
        self.others: float | None = None  # cores the other processes used in the last window

    def decide(self, now: tuple[float, float, float]) -> None:
        """The window since the last reading: the others' cores, then the threads."""
        wall = now[0] - self._last[0]
        self.others = max(0.0, (now[1] - self._last[1]) - (now[2] - self._last[2])) / wall
        self._last = now
        self._window = self.every_s * (1 + self.jitter * self._draw.random())
        fits = threads_for(self.cpus - self.others, self.most)
        want, grew = self.threads, False
        if fits < self.threads:  # others need a core: give it back at once
            want = fits
            if self._grew:  # taken in vain (another process took it too): wait longer next time
                self._backoff = min(2 * self._backoff, 64)
            self._hold = self._draw.randint(1, 2 * self._backoff)
        elif fits > self.threads:  # a core free: taken once the hold is over, one at a time
            if self._hold > 0:
                self._hold -= 1
            else:
                want, grew = self.threads + 1, True
                self._hold = 1
        elif not self._grew:  # a steady window: the backoff wears off
            self._backoff = max(1, self._backoff // 2)
        self._grew = grew
        if want != self.threads:
            self.threads = want
            self.set_threads(want)

    def reading(self) -> tuple[float, float, float] | None:
        busy = self.busy()
        return None if busy is None else (self.clock(), busy, self.own())

    def on_train_start(self, trainer, pl_module) -> None:
        self._started_on = torch.get_num_threads()
        processes = getattr(trainer, "world_size", 1) // max(1, getattr(trainer, "num_nodes", 1))
        self.most = max(1, min(MOST, self.cpus // max(1, processes)))  # trainer=ddp: a share each
        self.threads = 1
        self.set_threads(1)
        self._last = self.reading()
        # The first decision soon (a short run gets its cores too), jittered as every window is.
        self._window = self.first_s * (1 + self.jitter * self._draw.random())

    def on_train_end(self, trainer, pl_module) -> None:
        self._restore()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._restore()

    def _restore(self) -> None:
        """The thread count the fit started on (the bench's later figures run on it)."""
        if self._started_on is not None:
            self.set_threads(self._started_on)
            self._started_on = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if self._last is None:  # no /proc/stat: one thread, as started
            return
        if self.clock() - self._last[0] >= self._window:  # /proc/stat read once a window, not an update
            now = self.reading()
            if now is not None:
                self.decide(now)
        pl_module.log("perf/threads", float(self.threads), on_step=True, on_epoch=False)
