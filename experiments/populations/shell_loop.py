"""A study's seeds as a shell loop of single runs, ``--slots`` at a time: what a user pays
without ``population.size`` (issue 48), to compare with the population's one command.

Each seed is the whole command a user would type, ``python -m ttt_research seed=S OVERRIDES``
(its start-up, training, final evaluation, ONNX export and run folder included), run from a
queue that keeps ``--slots`` of them going. Every finished seed writes one row file
(``OUT/seed_S.json``: its wall seconds, its training seconds, unbeatable or not), so a killed
study continues where it stopped when started again (a run cut off writes nothing, and a stopped
loop stops its runs); the summary projects the wall time of ``--project`` seeds from the measured
ones (their wall seconds' mean, times the seeds, over the slots).

    python experiments/populations/shell_loop.py --seeds 5000-5019 \\
        --out experiments/populations/shell_loop/reinforce
    python experiments/populations/shell_loop.py --seeds 5000-5009 \\
        --out experiments/populations/shell_loop/ppo algo=ppo net=mlp128
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ttt_research.contract import unbeatable


def seeds_of(text: str) -> list[int]:
    """``5000-5019`` or ``5000,5003`` -> the seeds."""
    if "-" in text:
        lo, hi = (int(v) for v in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(v) for v in text.split(",")]


def row_of(seed: int, wall: float, folder: Path, returncode: int) -> dict:
    """The row of one finished run: its wall seconds, ``train/elapsed_s`` from its metrics and
    whether its exact evaluation found it unbeatable from the seat it trained in (``eval.json``,
    the seat from ``hparams.yaml``: ``o``, ``x`` or ``both``)."""
    row = {"seed": seed, "wall_s": round(wall, 3), "exit": returncode}
    metrics = folder / "metrics.csv"
    if metrics.exists():
        elapsed = [r["train/elapsed_s"] for r in csv.DictReader(metrics.open()) if r.get("train/elapsed_s")]
        row["train_s"] = float(elapsed[-1]) if elapsed else None
    report, hparams = folder / "eval.json", folder / "hparams.yaml"
    if report.exists() and hparams.exists():
        seat = next(line.split(":", 1)[1].strip() for line in hparams.read_text().splitlines()
                    if line.startswith("seat:"))
        row["seat"], row["unbeatable"] = seat, unbeatable(json.loads(report.read_text()), seat)
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", required=True, help="5000-5019, or 5000,5003,...")
    ap.add_argument("--out", required=True, type=Path, help="folder of the row files (one per seed)")
    ap.add_argument("--slots", type=int, default=2, help="single runs at a time (default 2: the 2-core host)")
    ap.add_argument("--project", type=int, default=100, help="seeds to project the loop's wall time to")
    args, overrides = ap.parse_known_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    todo = [s for s in seeds_of(args.seeds) if not (args.out / f"seed_{s}.json").exists()]
    now = len(todo)
    scratch = Path(tempfile.mkdtemp(prefix="shell_loop_"))
    running: dict[int, tuple[subprocess.Popen, float, Path]] = {}
    start = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        loop(todo, running, args, overrides, scratch, env)
    except KeyboardInterrupt:  # Ctrl-C, or a run stopped by a signal: what is done stays done
        done = len(list(args.out.glob("seed_*.json")))
        sys.exit(f"stopped: {done} seeds have their rows in {args.out}; the same command continues "
                 "with the others")
    finally:  # stopped (Ctrl-C, a failed seed): no run goes on alone
        for proc, _, _ in running.values():
            proc.kill()
            proc.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    loop_s = time.perf_counter() - start
    rows = [json.loads(p.read_text()) for p in sorted(args.out.glob("seed_*.json"))]
    if not rows:
        return
    walls = sum(r["wall_s"] for r in rows)
    unbeaten = sum(bool(r.get("unbeatable")) for r in rows)
    print(f"{len(rows)} seeds, {unbeaten} unbeatable; the runs' wall seconds {walls:.1f} in all "
          f"(this invocation: {now} seeds in {loop_s:.1f} s); {args.project} seeds "
          f"{args.slots} at a time: about {projected(rows, args.project, args.slots):.0f} s")


def projected(rows: list[dict], seeds: int, slots: int) -> float:
    """The loop's wall seconds for ``seeds`` seeds ``slots`` at a time, from the rows' runs: the
    slots run side by side, so the loop takes about the runs' seconds over the slots (a resumed
    loop's own wall time covers only its part)."""
    return sum(r["wall_s"] for r in rows) / len(rows) * seeds / slots


def loop(todo: list[int], running: dict, args, overrides: list[str], scratch: Path, env: dict) -> None:
    """Run the seeds of ``todo``, ``args.slots`` at a time, a row file for each as it ends."""
    while todo or running:
        while todo and len(running) < args.slots:
            seed = todo.pop(0)
            folder = scratch / str(seed)
            cmd = [sys.executable, "-m", "ttt_research", f"seed={seed}", *overrides, "logger=csv",
                   "progress=false", f"hydra.run.dir={folder}"]
            err = (scratch / f"{seed}.err").open("w")  # a file: a pipe left unread could fill and block
            running[seed] = (subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env),
                             time.perf_counter(), folder)
            err.close()
        time.sleep(0.05)
        for seed, (proc, began, folder) in list(running.items()):
            if proc.poll() is None:
                continue
            if proc.returncode in (130, 143):  # the run was stopped by SIGINT / SIGTERM (Ctrl-C)
                raise KeyboardInterrupt
            if proc.returncode != 0:
                del running[seed]
                err = (scratch / f"{seed}.err").read_text().strip().splitlines()
                sys.exit(f"seed {seed} exited {proc.returncode}: {err[-1] if err else ''}")
            row = row_of(seed, time.perf_counter() - began, folder, proc.returncode)
            # Whole or absent: a Ctrl-C while it is written leaves no half row behind.
            part = args.out / f"seed_{seed}.json.part"
            part.write_text(json.dumps(row) + "\n")
            os.replace(part, args.out / f"seed_{seed}.json")
            print(json.dumps(row), flush=True)
            shutil.rmtree(folder, ignore_errors=True)  # the row is what the study keeps
            del running[seed]


if __name__ == "__main__":
    main()
