"""antirez's C ttt-rl as a reference timed in the same run as ours (``bench --compare antirez``).

Speeds measured on different hosts do not divide: the project's torch code and a scalar C
program gain differently from a CPU's SIMD width and caches. So ``bench`` times the C program
itself, between its own training runs, and reports only the ratio of the two.

This module owns building the program from its source (``cc -O3 -ffast-math``, into a
temporary folder; the source is antirez's, BSD licence, and never part of this project),
checking that a binary behaves like it, and timing it. Standard library only.

The program's interface, as used here: ``ttt N`` trains against a random opponent for N games,
printing ``Training neural network against N random games...``, a ``Games: K, ...`` line every
10,000 games and ``Training complete!``; then it plays one interactive game (the human is X
and moves first, reading one character per move from stdin, refusing occupied squares) and
asks ``Play again? (y/n)``. ``ANSWERS`` plays squares 0, 1, ..., 8 in turn, so every square is
tried at most once and the game ends before they run out; the next character left (a square
or the final ``n``) is not ``y``, so the program exits. Without answers it would wait on the
terminal, and at end of input it loops on its last (refused) move forever.

What is timed: the wall time of the whole process (start, N training games, the one game on
stdin, exit), nothing subtracted. Its stdout is a pipe, hence fully buffered: the progress lines
carry no usable timestamps. At 300,000 games the training is all but a few milliseconds of it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from ttt_research.errors import UserError

ANSWERS = "0\n1\n2\n3\n4\n5\n6\n7\n8\nn\n"
DEFAULT_GAMES = 300_000
CHECK_GAMES = 10_000  # the probe: one progress line, a fraction of a second
PROGRESS_EVERY = 10_000  # the program's own progress interval
_PROGRESS = re.compile(r"^Games: (\d+), Wins: \d+", re.MULTILINE)


class AntirezError(UserError):
    """The program cannot be built, started, or does not behave like ttt-rl: one line."""


def build(src: Path, into: Path, log: Callable[[str], None] = lambda msg: None) -> Path:
    """Compile ``src`` (antirez's ttt.c) into ``into/ttt`` with ``$CC`` or ``cc``; the binary's path."""
    if not src.is_file():
        raise AntirezError(f"--antirez-src {src}: no such file")
    cc = shlex.split(os.environ.get("CC", "")) or [
        next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), "")]
    if not cc[0] or not shutil.which(cc[0]):
        raise AntirezError("--antirez-src needs a C compiler, and none was found (cc, gcc, clang or $CC)")
    out = into / "ttt"
    log(f"building {src} with {cc[0]} -O3 -ffast-math")
    try:
        r = subprocess.run([*cc, "-O3", "-ffast-math", "-o", str(out), str(src), "-lm"],
                           capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise AntirezError(f"compiling {src} with {cc[0]} took over 300 s") from None
    if r.returncode != 0:
        first = next((line for line in r.stderr.splitlines() if "error" in line), r.stderr.strip()[:200])
        raise AntirezError(f"{cc[0]} could not compile {src}: {first}")
    return out


def check_binary(binary: Path) -> None:
    """Refuse a path that is missing or not executable; then run a short training as a probe."""
    if not binary.exists():
        raise AntirezError(f"--antirez-bin {binary}: no such file")
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise AntirezError(f"--antirez-bin {binary} is not an executable file")
    run_once(binary, CHECK_GAMES, timeout=60)


def run_once(binary: Path, games: int, timeout: float | None = None) -> float:
    """Train the program for ``games`` games, answering its game on stdin; the process's wall time in s."""
    timeout = timeout or 60 + games / 1_000  # 1,000 games/s would be ~100x slower than expected
    hint = "is it antirez's ttt-rl?"
    start = time.perf_counter()
    try:
        r = subprocess.run([str(binary), str(games)], input=ANSWERS, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AntirezError(f"--antirez-bin {binary} did not finish {games:,d} games and the game on stdin "
                           f"within {timeout:.0f} s ({hint})") from None
    except OSError as err:
        raise AntirezError(f"--antirez-bin {binary} could not be started: {err.strerror}") from None
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        raise AntirezError(f"--antirez-bin {binary} exited with status {r.returncode} ({hint})")
    out = r.stdout
    counts = [int(k) for k in _PROGRESS.findall(out)]
    expected = games // PROGRESS_EVERY * PROGRESS_EVERY
    if (f"against {games} random games" not in out or "Training complete!" not in out
            or (expected and (not counts or counts[-1] != expected))):
        raise AntirezError(f"--antirez-bin {binary} did not print ttt-rl's training progress for "
                           f"{games:,d} games ({hint})")
    return seconds
