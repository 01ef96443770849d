"""Errors that stop a training run and that callers report in one line.

``NonFiniteError`` is raised by the numerical guard of the algorithms (``algos/base.py``)
and by the checkpoint callback (``callbacks.py``); the command line (``__main__.py``)
turns it into one line on stderr and exit status 3. It lives here, below all three, so
that none of them imports upwards.
"""

from __future__ import annotations


class NonFiniteError(RuntimeError):
    """A loss term or a parameter became NaN or infinite: the run stops at this update."""

    def __init__(self, message: str):
        super().__init__(message)
        self.checkpoint: str | None = None  # the last good checkpoint, filled in by its callback

    def __str__(self) -> str:
        kept = f"; the last good checkpoint is kept: {self.checkpoint}" if self.checkpoint else \
            "; no checkpoint was written before it"
        return f"{self.args[0]}{kept}"
