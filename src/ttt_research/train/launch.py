"""Whose rank variables these are: the processes a run of several (``trainer=ddp``) starts
itself, told apart from a rank variable left in the user's environment.

Lightning's ``trainer=ddp`` starts the run's other processes itself: the same command, each
with ``LOCAL_RANK`` (and ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``) set. A
``LOCAL_RANK`` the user's shell had left set made Lightning believe the processes were started
elsewhere: with ``LOCAL_RANK=1 ... trainer=ddp trainer.devices=2`` the run waited 30 minutes
(torch's default timeout) for a first process nobody had started, deaf to SIGTERM (twice: the
wait is in C++, where Python's handlers never run).

* ``mark``: the process that starts the others writes its pid in ``MARK`` (Lightning copies
  the environment into the processes it starts; in a multirun, its own later jobs see it too).
* ``stray``: a rank variable that no launch set (not ours, nor torchrun's, nor SLURM's) is
  refused by the config check, in one line, before anything is claimed.
* ``wait_for_first``: a process this run started waits for the first process's address in
  Python, signals heard, for at most ``WAIT_S`` seconds, before Lightning's own wait in C++.

No torch: the config check (``validate.py``) asks before torch loads.
"""
from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable

from ttt_research.errors import UserError

MARK = "TTT_RESEARCH_LAUNCHED_BY"  # the pid of the process that started the run's others
WAIT_S = 60.0  # the first process listens before it starts the others: seconds are plenty


def ours() -> bool:
    """The rank variables are this run's: ``MARK`` names this process's parent (the first
    process started it) or this process (the first process, in a later job of a multirun)."""
    return os.environ.get(MARK) in (str(os.getppid()), str(os.getpid()))


def started() -> bool:
    """This process was started by the run's first process (``MARK`` names its parent)."""
    return os.environ.get(MARK) == str(os.getppid())


def other_launcher() -> str | None:
    """The launcher that set the rank variables, when one did: torchrun, or a SLURM step
    (Lightning reads either's own variables)."""
    if "TORCHELASTIC_RUN_ID" in os.environ:
        return "torchrun"
    if "SLURM_NTASKS" in os.environ and "SLURM_PROCID" in os.environ:
        return "SLURM"
    return None


def stray(processes: int) -> str | None:
    """Why a rank variable in the environment cannot be this run's (None: none is), for a run
    of ``processes``, unless this run started this process or torchrun or SLURM did:

    * several processes: ``LOCAL_RANK`` set at all (with it Lightning starts no process: even
      0 waits for peers nobody starts), or ``RANK`` above 0 (the first process would take
      itself for a follower and leave the folder to nobody);
    * one process: ``LOCAL_RANK`` or ``RANK`` above 0 (Lightning's ``rank_zero_only`` reads
      them: the run logged nothing and ended in a traceback, metrics.csv missing)."""
    if ours() or other_launcher():
        return None
    for var in ("LOCAL_RANK", "RANK"):
        value = os.environ.get(var)
        if value is None or (value.strip() in ("", "0") and (var == "RANK" or processes <= 1)):
            continue
        what = (f"trainer=ddp starts its own {processes} processes" if processes > 1 else
                "this run is one process, which Lightning would take for a follower")
        yourself = "; to start each process yourself, use torchrun" if processes > 1 else ""
        return (f"{var}={value} is set in the environment, but nothing launched this run with it: {what} "
                f"(run without it: env -u {var} python -m ttt_research ...{yourself})")
    return None


def mark(first: bool) -> None:
    """``first``: this process starts the run's others; it marks their environment (and its own)
    with its pid. What Lightning leaves in its environment after a job (``LOCAL_RANK=0``, the
    address) stays: in a multirun, the first process's next job meets the processes it started
    for the first job (each runs the sweep too) at that address, as Lightning arranges it."""
    if first:
        os.environ[MARK] = str(os.getpid())


class FirstGone(UserError):
    """The first process of the run did not answer (ended, or never listened): one line."""


def wait_for_first(stopped: Callable[[], int], wait_s: float = WAIT_S, poll_s: float = 0.2) -> int:
    """In a process this run started (``started``): until the first process's address
    (``MASTER_ADDR:MASTER_PORT``) accepts a connection. Raises ``FirstGone`` after ``wait_s``
    seconds, or as soon as the first process has ended (this one's parent changed); returns
    at once where there is nothing to wait for. ``stopped()``: the stop signal noted (0: none),
    read after each try that failed: the signal that ended the wait is returned (0: the first
    process answered), for the caller to stop on. A signal noted before an address that
    answers at once is left as it was (the processes then stop together, after an update)."""
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT", "")
    if not (started() and host and port.isdigit()):
        return 0
    parent, start, told = os.environ[MARK], time.monotonic(), False
    while True:
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=poll_s):
            return 0
        if stopped():
            return stopped()
        if str(os.getppid()) != parent:
            raise FirstGone(f"the run's first process (pid {parent}) has ended; this process "
                            f"(LOCAL_RANK={os.environ.get('LOCAL_RANK')}) stops too")
        waited = time.monotonic() - start
        if waited >= wait_s:
            raise FirstGone(f"the run's first process (pid {parent}) did not answer at {host}:{port} "
                            f"within {wait_s:g} s")
        if not told and waited >= 1:
            print(f"LOCAL_RANK={os.environ.get('LOCAL_RANK')}: waiting for the run's first process at "
                  f"{host}:{port} (at most {wait_s:g} s)", file=sys.stderr, flush=True)
            told = True
        time.sleep(poll_s)
