"""Ctrl-C or ``kill`` while a command starts: one line and no run folder, not a traceback.

Importing torch and Lightning takes seconds before ``train`` installs its own handlers
(``signals.py``: a stop after the current update, with a checkpoint). A SIGINT there used to
end in a ``KeyboardInterrupt`` traceback from inside an import, and a SIGTERM ended the process
silently; both left the run folder Hydra had just made.

From the command's start (``install``) SIGINT and SIGTERM are only noted: an exception raised
inside an import leaves a library half-loaded (numpy then recursed without end), and inside
Hydra's job set-up it loses the folder. The job looks at what was noted at safe points
(``check``: as it starts, and in ``train``, once torch and Lightning are loaded and before the
run folder is claimed) and ends with ``StoppedEarly``, which ``__main__`` turns into ``stopped by SIGINT
before training started: nothing was trained`` (exit 130 / 143) after removing the job's
folder if it holds nothing else (``refusal.discard_run_dir``: a resumed run's folder stays as
it was). A signal noted after the last check is ``signals``' to act on (``pending``): the run
stops after its first update, with a checkpoint; so is one a DDP process of rank > 0 notes
(Lightning starts it once rank 0 trains: the processes decide together, after the first update).
A second signal of the same kind ends the process at once, as an unhandled one would. Once a job's
training has ended (``release``) the handlers found before are back, so that Ctrl-C still ends a
slow upload (W&B's ``finish``), and between the jobs of a multirun signals are noted again
(``rearm``). A signal that was ignored (SIGINT in a job a shell started in the background) stays
ignored. Under another launcher than Hydra's basic one (joblib, submitit) the jobs run elsewhere
and never look: ``OtherLaunchers`` gives the signals back to the command as the sweep starts.
Nothing but the standard library (``hydra_hooks`` is too): ``python -m ttt_research`` sets the
note before it imports anything else.
"""

from __future__ import annotations

import os
import signal
import threading

from ttt_research.train.hydra_hooks import Hooks

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_found: dict[int, object] = {}  # the handlers before ``install``
noted = 0  # the stop signal noted, 0 if none
composing: str | None = None  # the sweep folder while the basic sweeper composes its jobs (``Composing``)


class StoppedEarly(BaseException):
    """A stop signal before training started. A ``BaseException``, as ``KeyboardInterrupt``
    is: the ``except Exception`` of a library it passes through lets it by."""

    def __init__(self, signum: int):
        self.signum, self.code = signum, 128 + signum
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name} before training started: nothing was trained"


def _note(signum: int, frame) -> None:
    global noted
    if noted == signum:  # the second of a kind: the user insists; as if we had no handler
        signal.signal(signum, _found.get(signum, signal.SIG_DFL))
        if signum == signal.SIGINT and _found.get(signum) is signal.default_int_handler:
            raise KeyboardInterrupt
        os.kill(os.getpid(), signum)
        return
    noted = noted or signum
    if composing is not None:  # no safe point until the first job starts, minutes away on a long sweep
        raise StoppedEarly(signum)


def _set(handler) -> None:
    """``handler`` (None: the one found) on the signals ``install`` took; none taken: nothing."""
    if threading.current_thread() is threading.main_thread():  # Python delivers signals there only
        for signum, found in _found.items():
            signal.signal(signum, handler if handler is not None else found)


def install() -> None:
    """The command's start: stop signals noted from here (again: nothing changes)."""
    global noted
    if _found or threading.current_thread() is not threading.main_thread():
        return
    noted = 0
    for signum in SIGNALS:
        found = signal.getsignal(signum)
        if found is signal.SIG_IGN or is_ours(found):  # ignored by whoever started us: it stays so
            continue
        _found[signum] = found if found is not None else signal.SIG_DFL
    _set(_note)


def check() -> None:
    """A safe point before training: a stop signal noted ends the job here (a DDP process of rank
    > 0 leaves it to ``pending``: rank 0 trains already, and they stop together)."""
    if noted and not _secondary():
        raise StoppedEarly(noted)


def _secondary() -> bool:
    """A process of rank > 0 (Lightning sets ``LOCAL_RANK`` for the processes it starts,
    torchrun ``RANK``)."""
    return any(os.environ.get(var, "0") not in ("", "0") for var in ("LOCAL_RANK", "RANK"))


def pending() -> int:
    """The signal noted since the last ``check`` (0 if none), handed over: ``signals`` acts on it."""
    global noted
    signum, noted = noted, 0
    return signum


def release() -> None:
    """Training began (``signals`` had its turn) and ended: the handlers found before."""
    _set(None)


def rearm() -> None:
    """Between the jobs of a multirun: noted again."""
    _set(_note)


def uninstall() -> int:
    """The command's end: the handlers found before, for good. Returns the signal noted and not
    acted on (0 if none), forgotten: a later command in this process starts afresh."""
    global noted, composing
    _set(None)
    _found.clear()
    signum, noted, composing = noted, 0, None
    return signum


class OtherLaunchers(Hooks):
    """A Hydra callback (``hydra.callbacks`` in ``config.yaml``; ``hydra_hooks.Hooks``, not
    ``hydra.experimental.callback.Callback``, which would load Hydra before the note is set): a
    sweep under a launcher other than the basic one (joblib, submitit) runs its jobs in other
    processes, where nothing looks at what this one noted; the signals go back to their handlers
    as the sweep starts, and one noted already is delivered again."""

    def on_multirun_start(self, config, **kwargs) -> None:
        if not basic_launcher(config) and (signum := uninstall()):
            signal.raise_signal(signum)


class Composing(Hooks):
    """A Hydra callback (``hydra.callbacks`` in ``config.yaml``): Hydra's basic sweeper composes
    every job's config before the first job starts (``validate_batch_is_legal``: a quarter of a
    second a job, 12 minutes for a grid of 3,000), a stretch with no safe point where a noted
    signal would wait. There nothing is loading and nothing but the sweep's ``multirun.yaml`` is
    written: a stop signal ends the command at once (``StoppedEarly``; ``__main__`` removes the
    sweep's folder, or puts a continued sweep's record back)."""

    def on_multirun_start(self, config, **kwargs) -> None:
        global composing
        if basic_launcher(config):
            composing = str(config.hydra.sweep.dir)  # resolved as the sweeper resolves it

    def on_job_start(self, config, **kwargs) -> None:
        global composing
        composing = None


def basic_launcher(config) -> bool:
    """Whether a sweep's jobs run in this process (Hydra's basic launcher)."""
    return str(getattr(getattr(config.hydra, "launcher", None), "_target_", "")).endswith("BasicLauncher")


def is_ours(handler: object) -> bool:
    """Whether ``handler`` is this module's (``signals.Stop`` must not chain to it)."""
    return handler is _note
