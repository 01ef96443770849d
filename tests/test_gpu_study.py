"""The GPU study's script (experiments/populations/gpu_study.py), run on the CPU: a part becomes one
row file with what its run folder says, a finished part is skipped, and a wrong part or a stray
run folder is refused in one line before anything runs."""

from __future__ import annotations

import hashlib
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
    assert bad.returncode == 2 and bad.stderr == ("error: unknown part 'ppo9'; the parts are reinforce100, "
                                                  "ppo100, ppo1024\n")
    assert not (tmp_path / "rows").exists()


@pytest.mark.parametrize("limit", ["nan", "inf", "0", "-5", "abc"])
def test_a_limit_that_is_not_a_finite_positive_number_is_refused_in_one_line(tmp_path, limit):
    # Issue 58: --limit-s nan was accepted and the limit never fired (nothing is ever > nan).
    bad = _study(tmp_path, "--parts", "reinforce100", "--limit-s", limit, "debug=tiny", "population.size=2")
    assert bad.returncode == 2 and bad.stdout == "", bad.stderr[-2000:]
    assert bad.stderr == (f"error: gpu_study.py: argument --limit-s: must be a finite positive number of "
                          f"seconds, got {limit!r}\n")
    assert list(tmp_path.iterdir()) == []


def _hashes(folder) -> dict[str, str]:
    files = [f for f in sorted(folder.rglob("*")) if f.is_file()]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


@pytest.mark.slow  # a population's whole command in a subprocess, twice
def test_a_refused_part_writes_no_row_and_a_run_without_a_row_is_resumed(tmp_path):
    """A call cut off mid-part (the device's limit) leaves a run folder without a row: the next
    call resumes it rather than refusing it. A part whose command is refused (exit 2) ran
    nothing: it writes no row (issue 58: it wrote one from the earlier run's figures), says
    why in one line and exits 2, every file as it was."""
    done = _study(tmp_path, "--parts", "reinforce100", "debug=tiny", "population.size=2")
    assert done.returncode == 0, done.stderr[-2000:]
    (tmp_path / "rows" / "reinforce100.json").unlink()  # as a call killed mid-part leaves it
    before = _hashes(tmp_path)
    bad = _study(tmp_path, "--parts", "reinforce100", "debug=tiny", "population.size=2", "algo.lr=-1")
    assert bad.returncode == 2 and bad.stderr.startswith(
        "error: reinforce100 was refused (exit 2), no row written and its run folder as it was: "
        "algo.lr must be")
    assert bad.stderr.count("\n") == 1 and _hashes(tmp_path) == before
    again = _study(tmp_path, "--parts", "reinforce100", "debug=tiny", "population.size=2")
    assert again.returncode == 0 and "reinforce100: resuming" in again.stdout, again.stderr[-2000:]
    assert json.loads((tmp_path / "rows" / "reinforce100.json").read_text())["finished"] is True
