"""Every error type a user can meet, and how a command reports one: one line, no traceback.

A bad file, a bad argument or a missing optional extra is not a bug: the user sees
``error: <what is wrong>`` on stderr and the command exits with ``USER_ERROR`` (2, as
argparse does for bad usage). Exceptions that mean such a mistake derive from ``UserError``
or are named to ``command``; anything else is a bug and keeps its traceback.

The error types, here or derived from one here where they are raised:

- ``UserError`` (exit 2): ``MissingExtra`` and ``IllegalMoveError`` (a policy with no legal
  greedy move somewhere; ``__main__`` exits 3 for it) here; ``OutputError``
  (files/atomic.py: a disk full or read-only), ``PolicyFileError``
  (evaluation/policy_file.py), ``PolicyTableError`` (evaluation/policy_table.py),
  ``ExportError`` (evaluation/onnx.py), ``ReportError`` (analysis/runs.py), ``DashboardError``
  (dashboard.py), ``AntirezError`` (baselines/antirez.py).
- ``ConfigError`` (a ``ValueError``, exit 2): a value out of range; ``FolderInUse``
  (train/runfolder.py: another run's folder, left untouched).
- ``NonFiniteError`` (a ``RuntimeError``, exit 3): the numerical guard stopped the run.

Never shown to a user as such: ``files.untrusted.Malformed`` and ``web.server.BadBoard``
(``ValueError``s turned into a skipped run, a warning or a ``DashboardError``, and an HTTP
400), ``train.signals.Stopped`` (a stop signal, checkpointed; its own exit code) and
``play.Quit``.

    @command(OSError)
    def main(argv: list[str] | None = None) -> int:
        ...
        raise UserError("--steps must be a positive integer")

``ConfigError`` (a config value out of range) comes with the small checks that raise it
(``value_of``, ``need`` (its value ``shown``, cut when long), ``is_int``, ``is_number``,
``bounded``, ``positive_int``), used by every layer that reads a config (``train/validate.py``
holds the rules).
``NonFiniteError`` is raised by the numerical guard of the training shell and by the
checkpoint callback; ``__main__`` turns it into one line and exit status 3.

The bottom of the package: standard library and omegaconf only, so every module may import it.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Mapping
from numbers import Real

from omegaconf import DictConfig, OmegaConf

USER_ERROR = 2
Main = Callable[[list[str] | None], int]


class UserError(Exception):
    """A mistake the user can fix; the message is the one line they see."""


class MissingExtra(UserError):
    """An optional extra of the package is not installed."""

    def __init__(self, extra: str, what: str, error: ImportError):
        super().__init__(f"{what} needs the '{extra}' extra ({error.name or error} is missing): "
                         f"pip install 'ttt_research[{extra}]'")


def fail(message: object) -> int:
    """Print ``error: message`` on stderr; return the exit code for a user's mistake."""
    print(f"error: {message}", file=sys.stderr)
    return USER_ERROR


def reader_gone() -> int:
    """The output's reader left (``... --help | head``): no traceback, nothing more to write.
    stdout goes to /dev/null so that Python's own flush at exit cannot fail again."""
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141  # what a shell reports for a command ended by SIGPIPE


INTERRUPTED = 130  # what a shell reports for a command ended by SIGINT (128 + 2)


def command(*also: type[BaseException]) -> Callable[[Main], Main]:
    """Decorate a command's ``main(argv) -> int``: ``UserError`` and the ``also`` exception
    types become one ``error:`` line on stderr and exit code ``USER_ERROR``; a Ctrl-C one
    line and ``INTERRUPTED`` (a 4,4,4 file's evaluation runs for half a minute: it printed a
    traceback from wherever the forward pass was)."""
    caught = (UserError, *also)

    def wrap(main: Main) -> Main:
        @functools.wraps(main)
        def run(argv: list[str] | None = None) -> int:
            try:
                return main(argv)
            except BrokenPipeError:  # first: it is an OSError, which a command may name in ``also``
                return reader_gone()
            except caught as e:
                return fail(e)
            except KeyboardInterrupt:
                print("stopped by SIGINT", file=sys.stderr)
                return INTERRUPTED

        return run

    return wrap


# A config value out of range, and the checks that say so.

class ConfigError(ValueError):
    """A config value is out of its allowed range; the message names key and range."""


def value_of(cfg: DictConfig | Mapping, key: str):
    """The value at dotted ``key``, None where the config has no such key: of a composed
    config, or of plain settings (nested dicts: ``train/runspec.settings``)."""
    if OmegaConf.is_config(cfg):
        return OmegaConf.select(cfg, key, default=None)
    node = cfg
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def is_int(v) -> bool:
    """An integer, not a bool (YAML's true is no count)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v) -> bool:
    """A finite real number, not a bool."""
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v)


SHOWN = 200  # characters of a refused value that an error line echoes


def clipped(text: str, size: str = "") -> str:
    """``text``, or its first ``SHOWN`` characters and how long it was (``size``, or its number
    of characters): a refused list of thousands of values stays one readable line (issue 58
    met a grid echoed whole, a 14.8 KB line)."""
    if len(text) <= SHOWN:
        return text
    return f"{text[:SHOWN]}... ({size or f'{len(text):,} characters'})"


def shown(value) -> str:
    """``repr(value)`` for an error line, ``clipped`` (a list's length counted in items)."""
    sized = isinstance(value, (list, tuple, dict, set))
    return clipped(repr(value), f"{len(value):,} items" if sized else "")


def need(ok: bool, key: str, allowed: str, value) -> None:
    """``ConfigError`` "KEY must be ALLOWED, got VALUE" unless ``ok`` (a long VALUE cut: ``shown``)."""
    if not ok:
        raise ConfigError(f"{key} must be {allowed}, got {shown(value)}")


def positive_int(cfg, key, most: int | None = None, why: str = ""):
    """``key`` is a positive integer (at most ``most``, ``why`` saying why), else ``ConfigError``."""
    v = value_of(cfg, key)
    need(is_int(v) and v > 0, key, "a positive integer", v)
    if most is not None:
        need(v <= most, key, f"at most {most:,}{why}", v)


def bounded(v, lo: float, hi: float, low_open: bool = False) -> bool:
    """A finite number in [lo, hi] ((lo, hi] with ``low_open``)."""
    return is_number(v) and (lo < v if low_open else lo <= v) and v <= hi


class IllegalMoveError(UserError):
    """A policy without a legal greedy move at some position: refused, never scored."""


# A run that cannot go on.

class NonFiniteError(RuntimeError):
    """A loss term or a parameter became NaN or infinite: the run stops at this update."""

    def __init__(self, message: str):
        super().__init__(message)
        self.checkpoint: str | None = None  # the last good checkpoint, filled in by its callback

    def __str__(self) -> str:
        kept = f"; the last good checkpoint is kept: {self.checkpoint}" if self.checkpoint else \
            "; no checkpoint was written before it"
        return f"{self.args[0]}{kept}"
