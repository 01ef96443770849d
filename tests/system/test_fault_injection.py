"""Fault injection: runs killed with SIGKILL at each file event (the checkpoint's rename, a
metrics.csv row, its header widening, eval.json, policy.onnx, curves.png, the population's
files) and at random moments, then resumed with ``resume=true``, end with the files of the
run never interrupted: eval.json byte for byte, metrics.csv's rows (apart from the ``perf/*``
timing columns), policy.onnx, curves.png, hparams.yaml and the population's files; no row
lost, none twice; and at every kill, no torn output and no ``eval.json`` (the mark of a
complete run) without the outputs it vouches for.

The kills come from ``tests/helpers/fault_wrapper.py`` (forked children of one process, patched
``os.replace`` and ``MetricsCSV.append``): no hook in the production code.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import fault_wrapper
from tests.helpers.resume import TIMING, evals_rows

SINGLE = ["debug=tiny", "checkpoint_every=1", "threads=1", "progress=lines"]
# Every member's policy.onnx (export=all): members/000/ exists whichever member is the best.
POPULATION = ["debug=tiny", "population.size=3", "population.export=all", "checkpoint_every=1", "threads=1",
              "progress=lines"]
CKPT = "checkpoints/last.ckpt"


def replace(name: str, n: int = 1, when: str = "after") -> dict:
    return {"event": "replace", "name": name, "n": n, "when": when}


def row(n: int, when: str = "after") -> dict:
    return {"event": "row", "n": n, "when": when}


def random(fraction: float) -> dict:
    return {"event": "random", "fraction": fraction}


# (kind, kills): one job per entry; each kill is followed by the user's next step (resume=true,
# or the same command when no checkpoint was written yet), a later kill hits that next step.
# A tiny run's file events, in order (tests/helpers/fault_wrapper.py records them): run.json,
# hparams.yaml, row 1 (creates metrics.csv: its rename 1), last.ckpt 1, row 2 (the first
# evaluation; widens the header: rename 2), row 3 (perf/* appears: rename 3), last.ckpt 2,
# row 4, last.ckpt 3, rows 5 and 6, last.ckpt 4, [population files,] policy.onnx,
# curves.png, eval.json.
SCENARIOS = [
    ("single", [replace(CKPT, 1, "before")]),          # no checkpoint yet: started again
    ("single", [replace(CKPT, 2, "after")]),
    ("single", [replace(CKPT, 4, "after")]),           # the final checkpoint, no output yet
    ("single", [replace("metrics.csv", 1, "before")]),  # the file not created yet
    ("single", [replace("metrics.csv", 3, "before")]),  # mid-widening of the header
    ("single", [row(2, "after")]),
    ("single", [row(3, "torn")]),                      # half a line on disk
    ("single", [row(5, "before")]),                    # the last evaluation's row
    ("single", [replace("hparams.yaml", 1, "after")]),
    ("single", [replace("policy.onnx", 1, "before")]),
    ("single", [replace("curves.png", 1, "after")]),
    ("single", [replace("eval.json", 1, "before")]),
    ("single", [replace("eval.json", 1, "after")]),    # complete: nothing to resume
    ("single", [random(0.3)]),
    ("single", [random(0.55)]),
    ("single", [random(0.65)]),  # a tiny run's time varies +-25% from run to run: later may miss it
    ("single", [replace(CKPT, 2, "after"), row(2, "after")]),  # the resume killed in its turn
    ("population", [replace(CKPT, 2, "after")]),
    ("population", [row(3, "torn")]),
    ("population", [replace("population.json", 1, "after")]),
    ("population", [replace("population_evals.csv", 1, "before")]),
    ("population", [replace("members/000/policy.onnx", 1, "after")]),
    ("population", [replace("eval.json", 1, "before")]),
    ("population", [random(0.6)]),
]
ARGS = {"single": SINGLE, "population": POPULATION}
# Compared byte for byte with the uninterrupted run (metrics.csv: by rows, below).
SAME_BYTES = ["eval.json", "policy.onnx", "curves.png", "hparams.yaml"]
SAME_BYTES_POPULATION = ["population.json", "population.csv", "members/000/policy.onnx"]
# population_evals.csv: by rows, without its wall-clock column (elapsed_s), below.


def metric_rows(run_dir: Path) -> tuple[list[str], list[dict]]:
    """metrics.csv's header and rows without the timing values (``perf/*``, ``train/elapsed_s``)."""
    with open(run_dir / "metrics.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows = [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in reader]
        return list(reader.fieldnames or []), rows


def files(run_dir: Path) -> set[str]:
    """The run folder's files, Hydra's record and the log aside (they say how it was run)."""
    return {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()
            and not str(p.relative_to(run_dir)).startswith(".hydra") and p.name != "train.log"}


@pytest.mark.slow
@pytest.mark.alone  # its random kills fire on a timer: another job's load moves them
def test_runs_killed_at_every_file_event_resume_to_the_uninterrupted_files(tmp_path):
    jobs = [{"dir": str(tmp_path / "whole-single"), "runs": [{"args": SINGLE}]},
            {"dir": str(tmp_path / "whole-population"), "runs": [{"args": POPULATION}]}]
    for k, (kind, kills) in enumerate(SCENARIOS):
        runs = [{"args": ARGS[kind], "kill": kills[0]}]
        runs += [{"args": ARGS[kind], "kill": kill, "resume": "auto"} for kill in kills[1:]]
        runs.append({"args": ARGS[kind], "resume": "auto"})
        jobs.append({"dir": str(tmp_path / f"{k:02d}-{kind}"), "runs": runs})
    (tmp_path / "logs").mkdir()
    plan, result = tmp_path / "plan.json", tmp_path / "result.json"
    plan.write_text(json.dumps({"logs": str(tmp_path / "logs"), "jobs": jobs}))
    wrapper = Path(fault_wrapper.__file__)
    out = subprocess.run([sys.executable, str(wrapper), str(plan), str(result)],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(result.read_text())

    kills = 0
    for (kind, planned), job, done in zip([("single", []), ("population", []), *SCENARIOS], jobs,
                                          results, strict=True):
        run_dir = Path(job["dir"])
        where = f"{run_dir.name} {planned}"
        for run, spec in zip(done, job["runs"], strict=True):
            if run.get("skipped"):
                continue
            assert run["problems"] == [], f"{where}: {run['problems']}"
            if spec.get("kill") is not None:
                # every planned kill fires (random ones: on a timer inside the run's time)
                assert run["killed"], f"{where}: the kill {spec['kill']} never came (exit {run['exit']})"
                kills += 1
            else:
                assert run["exit"] == 0, f"{where}: exit {run['exit']}, see {tmp_path / 'logs'}"
        whole = tmp_path / f"whole-{kind}"
        if run_dir == whole:
            continue
        # The same files, and no temporary one left by the kill: a resume removes them; a run
        # started again (killed before its first checkpoint: nothing to resume) may keep them.
        fresh = "resume=true" not in done[-1].get("args", ["resume=true"])
        leftover = {f for f in files(run_dir) - files(whole) if f.rsplit("/", 1)[-1].startswith(".")
                    and f.endswith(".tmp")}
        assert files(run_dir) - (leftover if fresh else set()) == files(whole), where
        for name in SAME_BYTES + (SAME_BYTES_POPULATION if kind == "population" else []):
            assert (run_dir / name).read_bytes() == (whole / name).read_bytes(), f"{where}: {name}"
        if kind == "population":
            assert evals_rows(run_dir) == evals_rows(whole), f"{where}: population_evals.csv"
        header, rows = metric_rows(run_dir)
        assert (header, rows) == metric_rows(whole), f"{where}: metrics.csv"
        games = [(r["train/games"], bool(r["eval/o_random_win"])) for r in rows]
        assert len(games) == len(set(games)) == 6, where  # 4 updates' rows + 2 evaluations', once each
    print(f"fault injection: {kills} kills, every run resumed to the uninterrupted files")
    assert kills == sum(len(kills) for _, kills in SCENARIOS)
