"""The algo=teacher pilot on 4,4,4 (issue 62): one row file per (setting, seed), resumable.

    nice -n 10 python experiments/board444/pilot.py            # every cell not done yet, in order
    nice -n 10 python experiments/board444/pilot.py --only mix128

Each cell is one training run (``python -m ttt_research algo=teacher game=mnk444 ...``) in
``outputs/board444/SETTING_SEED`` (git ignores ``outputs/``), one torch thread, at most
``CELL_S`` seconds of wall time a cell (training, exact evaluations and start-up counted,
over every session): past it the run gets SIGTERM (the shell checkpoints) and the cell ends
there. A cell stopped by ``kill PID`` of this script (SIGTERM or SIGINT) resumes from its
checkpoint at the next start (``resume=true``), its time so far kept in its row file. The row file,
``rows/SETTING_SEED.json``, holds the run's every exact evaluation (from the checkpoint's
history: games, training seconds, optimal_move_rate_all, holds_value as X and as O) and
``done`` once the run ended or ran out of time. Tuning seeds: 62000-62009 (the default
62000-62002); the presets' fresh seeds (``--only teacher444 --seeds 62100 ...``, ``--only
teacher443 --seeds 62200 ...``) only once a setting is frozen and committed.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ROWS = HERE / "rows"
RUNS = ROOT / "outputs" / "board444"
CELL_S = 30 * 60  # wall seconds a cell, every session together
SEEDS = (62000, 62001, 62002)  # tuning seeds: never the fresh ones
BASE = ["threads=1", "progress=lines"]
OLD = ["algo=teacher", "game=mnk444"]  # the pilot's settings, before the presets
# (setting -> overrides). Sized when the host was loaded (load ~8 on 2 cores, this job niced: an
# update of mlp128 ~0.3 s, an exact evaluation of 4,4,4 ~2.5 min); with the load at 3-5 the same
# cells took 4-9 minutes (the run's own clock, train_s, counts the evaluations before it).
SETTINGS = {  # in the order a seed runs them: the most promising first
    # the presets (value128's setting, conf/experiment/teacher444.yaml and teacher443.yaml): what the
    # fresh seeds run (--only teacher444 --seeds 62100 ...), one command a seed
    "teacher444": ["experiment=teacher444"],
    "teacher443": ["experiment=teacher443"],
    # hard rows only where its greedy move gives up the draw (hard_from=value: none in either tree is
    # exactly holding the draw from both seats), walked every 50 updates; past 3/4 of 16,000 updates the
    # first walk that finds none freezes the net (no more steps: the certificate is kept)
    "value128": [*OLD, "algo.hard=1024", "algo.hard_from=value", "algo.recheck_every=50",
                 "algo.freeze_after=0.75", "budget.games=4096000", "eval_every=4000",
                 "checkpoint_every=1000"],
    # mix128's batch and 1,024 rows an update from where its greedy move errs in its own tree
    # against every reply (``algo.hard``), walked every 100 updates, 12,000 updates
    "hard128_long": [*OLD, "algo.hard=1024", "algo.recheck_every=100", "budget.games=3072000",
                     "eval_every=4000", "checkpoint_every=4000"],
    "hard128": [*OLD, "algo.hard=1024", "algo.recheck_every=200", "budget.games=921600", "eval_every=1200",
                "checkpoint_every=1200"],
    "mix128": [*OLD, "budget.games=921600", "eval_every=1200", "checkpoint_every=1200"],
    "uniform128": [*OLD, "algo.games_per_update=16", "algo.uniform=4096", "budget.games=57600",
                   "eval_every=1200", "checkpoint_every=1200"],
    # more of the positions its own play reaches (those holds_value depends on): 1,024 games an update
    "play1024": [*OLD, "algo.games_per_update=1024", "budget.games=3686400", "eval_every=1200",
                 "checkpoint_every=1200"],
    "mix256": [*OLD, "net.hidden=[256,256]", "budget.games=614400", "eval_every=800", "checkpoint_every=800"],
}


def curve(run: Path) -> list[dict]:
    """The run's exact evaluations, from its checkpoint's history: one dict each."""
    ckpt = run / "checkpoints" / "last.ckpt"
    if not ckpt.exists():
        return []
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    ev = next(v for k, v in state["callbacks"].items() if "ExactEvaluation" in k)
    out = []
    for (games, report), seconds in zip(ev["history"], ev["elapsed"], strict=True):
        out.append({"games": games, "train_s": seconds,
                    "optimal_move_rate_all": report["optimal_move_rate_all"],
                    "holds_x": report["as_x"]["holds_value"], "holds_o": report["as_o"]["holds_value"],
                    "worst_x": report["as_x"]["worst_case"], "worst_o": report["as_o"]["worst_case"]})
    return out


def walks(run: Path) -> dict:
    """From the run's metrics.csv: the hard rows its walks found (``train/wrong_in_tree``) every
    250 updates, [update, rows], and the update whose walk froze the net (None: never)."""
    found, frozen = [], None
    path = run / "metrics.csv"
    if not path.exists():
        return {"walks": found, "froze_at": frozen}
    with open(path) as f:
        for line in csv.DictReader(f):
            step, wrong = int(line["step"]) + 1, line.get("train/wrong_in_tree")
            if wrong and step % 250 == 0:
                found.append([step, int(float(wrong))])
            if frozen is None and float(line.get("train/frozen") or 0) > 0:
                frozen = step
    return {"walks": found, "froze_at": frozen}


def run_cell(setting: str, seed: int) -> None:
    name = f"{setting}_{seed}"
    row_file, run = ROWS / f"{name}.json", RUNS / name
    row = json.loads(row_file.read_text()) if row_file.exists() else {"setting": setting, "seed": seed,
                                                                        "overrides": SETTINGS[setting],
                                                                        "wall_s": 0.0}
    if row.get("done"):
        return
    left = CELL_S - row["wall_s"]
    resume = (run / "checkpoints" / "last.ckpt").exists()
    cmd = [sys.executable, "-m", "ttt_research", *BASE, *SETTINGS[setting], f"seed={seed}",
           f"hydra.run.dir={run}", *(["resume=true"] if resume else [])]
    again = " (resumed)" if resume else ""
    print(f"{time.strftime('%H:%M:%S')} {name}: {left:.0f} s left{again}", flush=True)
    env = {**os.environ, "TTT_RESEARCH_CACHE": os.environ.get("TTT_RESEARCH_CACHE", "/tmp/tcache"),
           "PYTHONPATH": str(ROOT / "src")}
    start = time.monotonic()
    run.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no outputs/ yet
    with open(run.parent / f"{name}.stderr", "a") as err:  # a refusal's one line, beside the run
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        rc = proc.wait(timeout=max(left, 1))
        said = (run.parent / f"{name}.stderr").read_text().strip()[-300:]
        ended = "budget" if rc == 0 else f"exit {rc}: {said}"
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the shell checkpoints and stops
        proc.wait()
        ended = "30 min"

    except KeyboardInterrupt:  # this script stopped: the cell resumes at its next start
        proc.send_signal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the wait short
        proc.wait()
        row["wall_s"] += time.monotonic() - start
        row["curve"] = curve(run)
        row.update(walks(run))
        row_file.write_text(json.dumps(row, indent=1) + "\n")
        raise
    row["wall_s"] += time.monotonic() - start
    row["curve"] = curve(run)
    row.update(walks(run))
    row["done"] = True
    row["ended"] = ended
    row_file.write_text(json.dumps(row, indent=1) + "\n")
    last = row["curve"][-1] if row["curve"] else {}
    print(f"{time.strftime('%H:%M:%S')} {name}: {row['ended']}, {row['wall_s']:.0f} s, {last}", flush=True)


def _stop(signum, frame):
    raise KeyboardInterrupt  # SIGTERM (or SIGINT, ignored by a shell's background job otherwise)


def main() -> None:
    signal.signal(signal.SIGTERM, _stop)  # kill PID: the running cell checkpoints, its row is kept
    signal.signal(signal.SIGINT, _stop)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(SETTINGS), help="settings to run")
    parser.add_argument("--seeds", nargs="*", type=int, default=list(SEEDS), help="tuning seeds to run")
    args = parser.parse_args()
    ROWS.mkdir(parents=True, exist_ok=True)
    try:
        for seed in args.seeds:  # each setting on the first seed before the next seed
            for setting in args.only:
                run_cell(setting, seed)
    except KeyboardInterrupt:
        print(f"{time.strftime('%H:%M:%S')} stopped: the next start resumes the cell", flush=True)


if __name__ == "__main__":
    main()
