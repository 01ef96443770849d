"""``command_floor_s``: what a whole training command costs beyond importing Lightning.

A 1-game run (``python -m ttt_research seed=1 budget.games=1``, in a fresh folder) and
``python -c "import lightning.pytorch"`` are timed in turn as whole processes, ``repeats``
times each, and the floor is the difference of their medians: Hydra's composition, the
project's imports, building the agent, one update, the exact evaluation, the ONNX export and
its parity check, curves.png and the files. Lightning's own import (torch, ``torch._dynamo``,
torchmetrics, SciPy) is the part this project cannot cut, so it is measured beside it, in the
same run, rather than subtracted from another host's figure. ``help_s`` and ``refusal_s``
(``--help``; ``seed=-1``, refused in one line) are the commands that must never load torch.

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
        runs, lightning = [], []
        for k in range(repeats):
            first, second = (RUN, LIGHTNING) if k % 2 == 0 else (LIGHTNING, RUN)
            for args in (first, second):
                seconds = _seconds([*args, f"hydra.run.dir={cwd / f'run{k}'}"] if args is RUN else args, cwd)
                (runs if args is RUN else lightning).append(seconds)
        help_s = statistics.median(_seconds(["-m", "ttt_research", "--help"], cwd) for _ in range(repeats))
        refusal = statistics.median(_seconds(["-m", "ttt_research", "seed=-1"], cwd) for _ in range(repeats))
    run, light = statistics.median(runs), statistics.median(lightning)
    log(f"whole command, 1 game: {run:.2f} s; import lightning.pytorch: {light:.2f} s; "
        f"floor {run - light:.2f} s")
    return {"command_floor_s": run - light, "command_1game_s": run, "import_lightning_s": light,
            "help_s": help_s, "refusal_s": refusal}


def format_line(res: dict) -> str:
    return (f"{'command_floor_s':<24} {res['command_floor_s']:>14.2f}  a 1-game run's whole command "
            f"{res['command_1game_s']:.2f} s less importing Lightning {res['import_lightning_s']:.2f} s; "
            f"--help {res['help_s']:.2f} s, a refusal {res['refusal_s']:.2f} s")


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
