"""``command_floor_s``: what a whole training command costs beyond importing Lightning.

A 1-game run (``python -m ttt_research seed=1 budget.games=1``, in a fresh folder) and
``python -c "import lightning.pytorch"`` are timed in turn as whole processes, ``repeats``
times each, and the floor is the difference of their medians: Hydra's composition, the
project's imports, building the agent, one update, the exact evaluation, the ONNX export and
its parity check, curves.png and the files. Lightning's own import (torch, ``torch._dynamo``,
torchmetrics, SciPy) is the part this project cannot cut, so it is measured beside it, in the
same run, rather than subtracted from another host's figure. The command freezes what its
imports made (``gc.freeze``), which spares it the ~1 s that the plain import's exit spends
collecting them, so the floor is also given against an import that does the same
(``command_floor_frozen_s``: the fair one). ``help_s`` and ``refusal_s``
(``--help``; ``seed=-1``, refused in one line) are the commands that must never load torch.
``start_s`` times the same two for every command of the project (``COMMANDS``: ``--help``,
and a typo in its first argument or a value out of range): each should answer in under
``START_LIMIT_S``, and ``format_line`` names any that does not.

``python -m ttt_research.bench.floor [--repeats N]`` prints these figures alone.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

RUN = ["-m", "ttt_research", "seed=1", "budget.games=1"]
LIGHTNING = ["-c", "import lightning.pytorch"]
# The same import with its objects frozen (gc.freeze), as the command freezes them: the exit
# then skips the ~1 s collection over them, so this is what importing Lightning costs the command.
FROZEN = ["-c", "import gc, lightning.pytorch; gc.freeze()"]
# Every command, with one refusal it answers in one line (exit 2) before any work.
COMMANDS = {
    "ttt_research": ["seed=-1"],
    "ttt_research.evaluate": ["missing.onnx"],
    "ttt_research.play": ["missing.onnx"],
    "ttt_research.export": ["missing.ckpt"],
    "ttt_research.report": ["missing-folder"],
    "ttt_research.bench": ["--threads", "0"],
    "ttt_research.tournament": ["missing-player"],
    "ttt_research.dashboard": [],  # --entity is required
    "ttt_research.solve": ["game=mnk", "game.m=5", "game.n=4"],  # 20 cells: more than 16
}
START_LIMIT_S = 0.5  # --help or a refusal slower than this is named (issue 43)


def _seconds(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=cwd, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def bench_floor(repeats: int, log: Callable[[str], None] = print) -> dict:
    """The floor and its parts, medians of ``repeats`` alternating whole processes."""
    with tempfile.TemporaryDirectory(prefix="ttt-floor-") as tmp:
        cwd = Path(tmp)
        _seconds(LIGHTNING, cwd)  # warm the file cache for both
        kinds = {"run": RUN, "lightning": LIGHTNING, "frozen": FROZEN}
        times: dict[str, list[float]] = {name: [] for name in kinds}
        for k in range(repeats):  # in turn, each kind going first in turn
            for name in list(kinds)[k % 3:] + list(kinds)[:k % 3]:
                extra = [f"hydra.run.dir={cwd / f'run{k}'}"] if name == "run" else []
                times[name].append(_seconds([*kinds[name], *extra], cwd))
        help_s = statistics.median(_seconds(["-m", "ttt_research", "--help"], cwd) for _ in range(repeats))
        refusal = statistics.median(_seconds(["-m", "ttt_research", "seed=-1"], cwd) for _ in range(repeats))
        start = start_times(repeats, cwd)
    run, light, frozen = (statistics.median(times[name]) for name in kinds)
    log(f"whole command, 1 game: {run:.2f} s; import lightning.pytorch: {light:.2f} s "
        f"({frozen:.2f} s frozen); floor {run - light:.2f} s ({run - frozen:.2f} s)")
    return {"command_floor_s": run - light, "command_floor_frozen_s": run - frozen, "command_1game_s": run,
            "import_lightning_s": light, "import_lightning_frozen_s": frozen, "help_s": help_s,
            "refusal_s": refusal, "start_s": start}


def start_times(repeats: int, cwd: Path) -> dict[str, dict[str, float]]:
    """{command: {"help": s, "refusal": s}}: medians of ``repeats`` whole processes each."""
    out = {}
    for module, refusal in COMMANDS.items():
        out[module] = {what: statistics.median(_seconds(["-m", module, *args], cwd) for _ in range(repeats))
                       for what, args in (("help", ["--help"]), ("refusal", refusal))}
    return out


def slow_starts(start: dict[str, dict[str, float]], limit: float = START_LIMIT_S) -> list[str]:
    """The commands whose --help or refusal took ``limit`` seconds or more, as "NAME --help 1.45 s"."""
    return [f"{module.removeprefix('ttt_research.') if '.' in module else 'train'} "
            f"{'--help' if what == 'help' else 'refusal'} {s:.2f} s"
            for module, figures in start.items() for what, s in figures.items() if s >= limit]


def format_line(res: dict) -> str:
    return (f"{'command_floor_s':<24} {res['command_floor_s']:>14.2f}  a 1-game run's whole command "
            f"{res['command_1game_s']:.2f} s less importing Lightning {res['import_lightning_s']:.2f} s "
            f"({res['command_floor_frozen_s']:.2f} s less {res['import_lightning_frozen_s']:.2f} s, "
            f"the import frozen as the command freezes it); --help {res['help_s']:.2f} s, "
            f"a refusal {res['refusal_s']:.2f} s" + _start_text(res.get("start_s")))


def _start_text(start: dict | None) -> str:
    """Every command's start, in a few words: the slowest, and any over ``START_LIMIT_S``."""
    if not start:
        return ""
    worst = max(s for figures in start.values() for s in figures.values())
    slow = slow_starts(start)
    return (f"; every command's --help and refusal within {worst:.2f} s"
            + (f", over {START_LIMIT_S} s: {', '.join(slow)}" if slow else ""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ttt_research.bench.floor", description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="whole processes of each kind (default 5)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    print(format_line(bench_floor(args.repeats, log=lambda m: print(m, file=sys.stderr))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
