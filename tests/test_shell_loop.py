"""The shell-loop study (experiments/populations/shell_loop.py): single runs from a queue, two at a
time, one row file per seed, a second run skipping what is done, a failed seed stopping the loop
in one line; and the README's projected figures are the committed rows'."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.helpers.experiments import REPO, load_script

SCRIPT = REPO / "experiments" / "populations" / "shell_loop.py"
shell_loop = load_script("experiments/populations/shell_loop.py", "shell_loop")


def test_seeds_are_read_as_written():
    assert shell_loop.seeds_of("5000-5003") == [5000, 5001, 5002, 5003]
    assert shell_loop.seeds_of("7,9") == [7, 9]


def test_the_readme_projects_from_the_committed_rows():
    readme = (REPO / "experiments" / "populations" / "README.md").read_text()
    for algo, seeds in (("reinforce", 20), ("ppo", 10)):
        files = sorted((SCRIPT.parent / "shell_loop" / algo).glob("seed_*.json"))
        rows = [json.loads(p.read_text()) for p in files]
        assert len(rows) == seeds and all(r["exit"] == 0 and r["unbeatable"] is True for r in rows)
        figure = f"about {shell_loop.projected(rows, 100, 2):,.0f} s"
        assert re.search(rf"\*\*{figure}\*\* \({seeds} seeds measured", readme), (algo, figure)


@pytest.mark.slow  # four tiny single runs in subprocesses
def test_a_seed_becomes_one_row_file_and_a_second_run_skips_it(tmp_path):
    command = [sys.executable, str(SCRIPT), "--seeds", "3-4", "--out", str(tmp_path), "debug=tiny"]
    first = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert first.returncode == 0, first.stderr[-2000:]
    rows = [json.loads((tmp_path / f"seed_{s}.json").read_text()) for s in (3, 4)]
    assert [r["seed"] for r in rows] == [3, 4] and {r["seat"] for r in rows} == {"o"}
    assert all(r["exit"] == 0 and r["train_s"] > 0 and r["wall_s"] > r["train_s"] for r in rows)
    assert all(isinstance(r["unbeatable"], bool) for r in rows)
    before = [(tmp_path / f"seed_{s}.json").read_bytes() for s in (3, 4)]
    again = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0 and "this invocation: 0 seeds" in again.stdout
    assert [(tmp_path / f"seed_{s}.json").read_bytes() for s in (3, 4)] == before
    bad = subprocess.run([sys.executable, str(SCRIPT), "--seeds", "5", "--out", str(tmp_path), "debug=tiny",
                          "algo.lr=-1"], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 1 and bad.stderr.startswith("seed 5 exited 2: error: algo.lr must be")
    assert "Traceback" not in bad.stderr
    assert not (tmp_path / "seed_5.json").exists()
