"""The GPU study's script (experiments/populations/gpu_study.py), run on the CPU: a part becomes one
row file with what its run folder says, a finished part is skipped, and a wrong part or a stray
run folder is refused in one line before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.experiments import REPO

SCRIPT = REPO / "experiments" / "populations" / "gpu_study.py"


def _study(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "rows"), "--runs",
                           str(tmp_path / "runs"), "--trainer", "cpu", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


@pytest.mark.slow  # a population's whole command in a subprocess, twice
def test_a_part_becomes_one_row_and_a_second_run_skips_it(tmp_path):
    first = _study(tmp_path, "--parts", "ppo1024", "--mirror", str(tmp_path / "out"), "debug=tiny",
                   "population.size=3")
    assert first.returncode == 0, first.stderr[-2000:]
    row = json.loads((tmp_path / "rows" / "ppo1024.json").read_text())
    assert row["finished"] is True and row["members"] == 3 and 0 <= row["unbeatable"] <= 3
    assert row["games"] == row["budget_games"] == 2048 and 0 < row["train_s"] < row["wall_s"]
    assert row["projected_train_s"] == round(row["train_s"], 1)  # at its budget: what it trained
    [session] = row["sessions"]
    assert session["exit"] == 0 and session["peak_rss_mib"] > 100 and session["peak_gpu_mib"] == 0
    assert "population.size=3" in row["command"] and "experiment=flagship" in row["command"]
    assert not (tmp_path / "rows" / "ppo1024.err").exists()  # kept only for a part that failed
    before = (tmp_path / "rows" / "ppo1024.json").read_bytes()
    assert (tmp_path / "out" / "ppo1024.json").read_bytes() == before
    again = _study(tmp_path, "--parts", "ppo1024", "debug=tiny", "population.size=3")
    assert again.returncode == 0 and "ppo1024: finished before, skipped" in again.stdout
    assert (tmp_path / "rows" / "ppo1024.json").read_bytes() == before


def test_an_unknown_part_is_refused_in_one_line(tmp_path):
    bad = _study(tmp_path, "--parts", "ppo100,ppo9")
    assert bad.returncode == 1 and bad.stderr == ("error: unknown part 'ppo9'; the parts are reinforce100, "
                                                  "ppo100, ppo1024\n")
    assert not (tmp_path / "rows").exists()


@pytest.mark.slow  # a population's whole command in a subprocess, twice
def test_a_failed_part_leaves_its_row_and_a_run_without_a_row_is_resumed(tmp_path):
    """A call cut off mid-part (the device's limit) leaves a run folder without a row: the next
    call resumes it rather than refusing it; a part that fails says why, and its row stays."""
    bad = _study(tmp_path, "--parts", "reinforce100", "debug=tiny", "population.size=2", "algo.lr=-1")
    assert bad.returncode == 1 and "reinforce100 exited 2: error: algo.lr must be" in bad.stderr
    row = json.loads((tmp_path / "rows" / "reinforce100.json").read_text())
    assert row["finished"] is False and row["sessions"][0]["exit"] == 2
    done = _study(tmp_path, "--parts", "reinforce100", "debug=tiny", "population.size=2")
    assert done.returncode == 0, done.stderr[-2000:]
    (tmp_path / "rows" / "reinforce100.json").unlink()  # as a call killed mid-part leaves it
    again = _study(tmp_path, "--parts", "reinforce100", "debug=tiny", "population.size=2")
    assert again.returncode == 0 and "reinforce100: resuming" in again.stdout, again.stderr[-2000:]
    assert json.loads((tmp_path / "rows" / "reinforce100.json").read_text())["finished"] is True
