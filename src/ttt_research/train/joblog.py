"""``train.log`` in the run folder: what the run printed (the opening line, the progress lines,
the final table) and its log records, so a run folder tells its own story after the terminal
is gone (a sweep's jobs, a SLURM task).

Hydra makes the file from its job logging config (``conf/hydra/job_logging/run.yaml``), which
builds one handler: ``RunLog``. Its construction copies everything the job writes to stdout
into the file as well (a tee in front of ``sys.stdout``), and log records are written to that
stdout, so the file holds the console's lines in their order. A terminal's progress bar (lines
with escape sequences) stays on the terminal; the file takes complete plain lines, each as
the terminal leaves it (after its last carriage return). The file is opened at the first
line, so a job refused before it printed anything leaves none (``train/refusal.discard_run_dir``
then removes the folder). Standard library only; a failing file never disturbs the console.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path


class _Tee:
    """``sys.stdout`` as it was, with every complete plain line also appended to a file."""

    def __init__(self, console, path: Path):
        self._console = console
        self._path = path
        self._file = None
        self._failed = False
        self._partial = ""

    def write(self, text: str) -> int:
        self._copy(text)
        return self._console.write(text)  # a closed pipe (`| head`) raises here, as before

    def _copy(self, text: str) -> None:
        if self._failed:
            return
        self._partial += text
        *lines, self._partial = self._partial.replace("\r\n", "\n").split("\n")
        # A carriage return rewrites its line (the terminal then shows what follows it); a
        # line with escape sequences is a progress bar's redraw, for the terminal only.
        lines = [line.rsplit("\r", 1)[-1] for line in lines]
        keep = [line for line in lines if "\x1b" not in line]
        if not keep:
            return
        try:
            if self._file is None:
                self._file = open(self._path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close)
            self._file.write("".join(f"{line}\n" for line in keep))
            self._file.flush()
        except OSError:  # the folder went (a refused job) or the disk is full: the console goes on
            self._failed = True

    def flush(self) -> None:
        self._console.flush()

    def close_copy(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __getattr__(self, name):  # isatty, fileno, encoding, ...: the console's own
        return getattr(self._console, name)


class RunLog(logging.StreamHandler):
    """The job's logging handler (Hydra's ``job_logging``): tees stdout into ``filename`` for
    the job's life, and writes log records to that stdout. ``close`` (Hydra's next job, or the
    interpreter's exit) puts stdout back."""

    def __init__(self, filename: str):
        self.tee = _Tee(sys.stdout, Path(filename))
        sys.stdout = self.tee
        super().__init__(self.tee)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if sys.stdout is self.tee:  # only our own tee: someone else's stdout stays theirs
                sys.stdout = self.tee._console
            self.tee.close_copy()
