"""``metrics.csv`` written so that no kill loses a row or writes one twice.

Lightning's CSV logger rewrites the whole file in place (``open(..., "w")``: a truncation)
whenever a row brings a new column, two or three times a run, so a kill at that moment
left a 0-byte file. ``MetricsCSV`` only appends: each row is one ``write`` of one whole
line, flushed at once (a kill after it keeps the row; ``sync`` makes it durable, the
checkpoint calls it before its rename). A row with a column the header lacks makes one
atomic rewrite of the file under the wider header (a temporary file renamed over it,
``atomic.write_atomic``): a kill then leaves the old file or the new one, whole.

The format is Lightning's: one wide CSV, a header row of the columns sorted by name, a row
per ``log_metrics`` call (the metrics, plus ``step``), empty cells for what a row lacks,
floats as Python writes them. ``analysis/curves.py``, ``analysis/runs.py`` and the tests read it as before.

A resume keeps the rows up to its checkpoint (``keep_rows_until``, one atomic rewrite) and
appends from there: the rows the killed session wrote after its last checkpoint are played
again, and so written once. A torn last line (a disk that filled mid-row) is never read
as a row: a row counts only with its newline.
"""

from __future__ import annotations

import csv
import io
import os
from argparse import Namespace
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from ttt_research.contract import GAMES
from ttt_research.errors import ConfigError
from ttt_research.files.atomic import OutputError, atomic_path, describe_os_error, write_atomic

METRICS_FILE = "metrics.csv"
HPARAMS_FILE = "hparams.yaml"
EOL = "\r\n"  # csv's own line end, as Lightning's file had it; a line is whole once its \n is written


def read_lines(path: Path) -> tuple[list[str], list[str]]:
    """(header, complete data lines) of a metrics file; a last line without its newline
    (torn by a full disk or a crash mid-write) is left out. A missing file: ([], [])."""
    try:
        text = path.read_bytes().decode("utf-8")  # no newline translation: lines keep their \r
    except FileNotFoundError:
        return [], []
    lines = text.split("\n")
    lines.pop()  # after the last newline: "" for a whole file, a torn row otherwise
    if not lines:
        return [], []
    return next(csv.reader([lines[0]])), [line for line in lines[1:] if line]


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(header, rows as {column: cell}) of a metrics file, complete lines only."""
    header, lines = read_lines(path)
    return header, [dict(zip(header, cells, strict=False)) for cells in csv.reader(lines)]


def check_rows(path: Path) -> None:
    """Refuse, in one line naming the file and the line, a metrics file that a resume could
    not carry to its end: bytes that are not UTF-8, a cell past csv's field limit, a row with
    more cells than the header, or a cell that is not a number (every cell this project logs
    is one; ``analysis/curves.py`` draws from them after the last update, so a text row there
    would fail the run only after its training). Called before a resume writes anything."""
    try:
        header, lines = read_lines(path)
        rows = list(csv.reader(lines))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text (byte {e.start}): it is not this run's metrics log; "
                          "nothing was changed") from None
    except csv.Error as e:
        raise ConfigError(f"{path} is not a metrics log of this project ({e}); nothing was changed") from None
    for line, cells in enumerate(rows, start=2):
        bad = next((i for i, cell in enumerate(cells) if i >= len(header) or not _number(cell)), None)
        if bad is not None:
            what = ("more cells than the header has" if bad >= len(header)
                    else f"{header[bad]!r} is not a number")
            raise ConfigError(f"{path}, line {line}: {what} (a resume would train to the end, then fail "
                              "to draw curves.png from it); remove that row (or the file) and resume "
                              "again; nothing was changed")


def _number(cell: str) -> bool:
    """An empty cell or one that reads as a float."""
    if cell == "":
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def format_rows(header: list[str], rows: list[dict]) -> str:
    """CSV text of ``rows`` under ``header`` (no header line), as ``csv.DictWriter`` writes it."""
    out = io.StringIO()
    csv.DictWriter(out, fieldnames=header, restval="", lineterminator=EOL).writerows(rows)
    return out.getvalue()


def _games(row: dict) -> float | None:
    value = row.get(GAMES)
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def keep_rows_until(path: str | Path, games: int) -> int:
    """Keep the rows of ``path`` logged at or before ``games`` games (a resume's checkpoint),
    in one atomic rewrite; return how many rows were dropped. Rows without a game count are
    kept (nothing logs one; a stray row is not ours to judge). A missing file stays missing."""
    path = Path(path)
    header, rows = read_rows(path)
    if not header:
        return 0
    kept = [r for r in rows if (g := _games(r)) is None or g <= games]
    write_atomic(path, format_rows(header, [header_row(header)]) + format_rows(header, kept))
    return len(rows) - len(kept)


def header_row(header: list[str]) -> dict[str, str]:
    return {name: name for name in header}


class MetricsCSV(Logger):
    """Lightning logger writing ``RUN/metrics.csv`` (and ``hparams.yaml``), append-only.

    ``fresh``: the first row starts the file anew (a new run); otherwise (``resume=true``)
    rows are appended to the file that is there, under its header."""

    def __init__(self, run_dir: str | Path, fresh: bool = True):
        super().__init__()
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / METRICS_FILE
        self.fresh = bool(fresh)
        self.header: list[str] = []
        self._file = None  # the open append handle, once the header on disk is known
        self._hparams: dict[str, Any] = {}

    # Lightning's Logger interface ------------------------------------------------------

    @property
    def name(self) -> str:
        return ""

    @property
    def version(self) -> str:
        return ""

    @property
    def save_dir(self) -> str:
        return str(self.run_dir)

    @property
    def log_dir(self) -> str:
        return str(self.run_dir)

    @rank_zero_only
    def log_hyperparams(self, params: dict | Namespace, *args, **kwargs) -> None:
        """``hparams.yaml``, as Lightning's CSV logger writes it, atomically."""
        from lightning.pytorch.core.saving import save_hparams_to_yaml

        params = vars(params) if isinstance(params, Namespace) else dict(params)
        self._hparams.update(params)
        with atomic_path(self.run_dir / HPARAMS_FILE) as tmp:
            save_hparams_to_yaml(tmp, self._hparams)

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        row = {k: (v.item() if hasattr(v, "item") else v) for k, v in metrics.items()}
        if step is not None:
            row["step"] = step
        self.append(row)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        self.close()

    # Ours ---------------------------------------------------------------------------------

    def append(self, row: dict[str, Any]) -> None:
        """Write ``row`` as one line at the end of the file and flush it (the header widened
        first, atomically, if the row brings a column)."""
        try:
            if self._file is None and not self.header:
                self._open()
            if self._file is None or not set(row) <= set(self.header):
                self._widen(row)
            self._file.write(format_rows(self.header, [row]))
            self._file.flush()
        except OSError as e:
            raise OutputError(f"cannot write {self.path}: {describe_os_error(e)}") from e

    def sync(self) -> None:
        """Make the rows written so far durable (``fsync``): called before a checkpoint that
        covers them is renamed into place."""
        if self._file is not None:
            try:
                os.fsync(self._file.fileno())
            except OSError as e:
                raise OutputError(f"cannot write {self.path}: {describe_os_error(e)}") from e

    def close(self) -> None:
        if self._file is not None:
            self.sync()
            self._file.close()
            self._file = None

    def _open(self) -> None:
        """A resume: take the header of the file there and append to it (a torn last line
        cut away first, by one atomic rewrite). A fresh run opens nothing: its first row
        writes a new file (``_widen``), so an old file is replaced whole, never truncated."""
        if self.fresh:
            return
        header, lines = read_lines(self.path)
        if not header:
            return
        if not _ends_whole(self.path):
            self._rewrite(header, lines)
        self.header = header
        self._file = open(self.path, "a", encoding="utf-8", newline="")

    def _widen(self, row: dict) -> None:
        """New columns (or the first row of a fresh file): the rows there under the wider
        header (sorted by name, as Lightning's), written as one atomic rewrite, and the
        handle reopened on the new file."""
        header = sorted(set(self.header) | set(row))
        rows: list[dict] = []
        if self._file is not None:
            self._file.close()
            self._file = None
            rows = read_rows(self.path)[1]
        self._rewrite(header, [format_rows(header, rows)] if rows else [])
        self.header = header
        self._file = open(self.path, "a", encoding="utf-8", newline="")

    def _rewrite(self, header: list[str], lines: list[str]) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        body = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        write_atomic(self.path, format_rows(header, [header_row(header)]) + body)


def _ends_whole(path: Path) -> bool:
    """Whether the file ends with a newline (its last row complete)."""
    try:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"
    except OSError:  # missing or empty
        return False
