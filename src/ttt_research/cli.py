"""How every command line of the project reports a user's mistake: one line, no traceback.

A bad file, a bad argument or a missing optional extra is not a bug: the user sees
``error: <what is wrong>`` on stderr and the command exits with ``USER_ERROR`` (2, as
argparse does for bad usage). Exceptions that mean such a mistake derive from ``UserError``
(``PolicyFileError``, ``ExportError``, ``ReportError``, ``MissingExtra``) or are named to
``command``; anything else is a bug and keeps its traceback.

    @command(OSError)
    def main(argv: list[str] | None = None) -> int:
        ...
        raise UserError("--steps must be a positive integer")

Standard library only: every module may import it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

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


def command(*also: type[BaseException]) -> Callable[[Main], Main]:
    """Decorate a command's ``main(argv) -> int``: ``UserError`` and the ``also`` exception
    types become one ``error:`` line on stderr and exit code ``USER_ERROR``."""
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

        return run

    return wrap
