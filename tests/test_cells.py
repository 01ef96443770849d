"""The cells' study (experiments/cells/study.py): a chunk of seeds becomes one row file, a second
run skips what is done, and the matrix in the README, docs/leaderboard.md and
experiments/cells/README.md is the one its rows give."""

from __future__ import annotations

import csv
import re
import subprocess
import sys

import pytest

from tests.helpers.experiments import REPO, load_script

SCRIPT = REPO / "experiments" / "cells" / "study.py"
study = load_script("experiments/cells/study.py", "cells_study")


def test_the_three_tables_agree_with_the_rows():
    assert study.write_tables(check=True) == 0
    table = study.matrix()
    for path in study.TARGETS:
        assert f"{study.BEGIN}\n{table}\n{study.END}" in path.read_text(), path


def test_cells_and_chunks_are_read_as_written():
    assert study.cell_overrides("reinforce_faithful_mlp100") == ["algo=reinforce_faithful", "net=mlp100"]
    assert study.chunks("6000-6099", 25) == [(6000, 6024), (6025, 6049), (6050, 6074), (6075, 6099)]
    assert study.chunks("7-11", 2) == [(7, 8), (9, 11)]  # never a population of one
    with pytest.raises(SystemExit, match="FIRST < LAST"):
        study.chunks("9-7", 2)
    with pytest.raises(SystemExit, match="at least 2"):
        study.chunks("1-9", 1)


@pytest.mark.slow  # two tiny populations in subprocesses
def test_a_chunk_becomes_one_row_file_and_a_second_run_skips_it(tmp_path):
    command = [sys.executable, str(SCRIPT), "run", "reinforce_mlp25", "--seeds", "3-7", "--chunk", "2",
               "--tuned-on", "1-2", "--runs", str(tmp_path / "runs"), "--rows", str(tmp_path / "rows"),
               "debug=tiny"]
    first = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert first.returncode == 0, first.stderr[-2000:]
    files = sorted((tmp_path / "rows" / "reinforce_mlp25").glob("*.csv"))
    assert [f.name for f in files] == ["seeds_3-4.csv", "seeds_5-7.csv"]
    rows = list(csv.DictReader(open(files[0], newline="")))
    assert [r["seed"] for r in rows] == ["3", "4"] and {r["seats"] for r in rows} == {"o"}
    assert {r["tuned_on"] for r in rows} == {"1-2"} and {r["overrides"] for r in rows} == {"debug=tiny"}
    assert all(r["unbeatable"] in ("True", "False") and float(r["training_s"]) > 0 for r in rows)
    before = [f.read_bytes() for f in files]
    again = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0 and again.stdout.count(": done (") == 2
    assert [f.read_bytes() for f in files] == before


# Each leaderboard row (README and docs/leaderboard.md: "`NAME ...` | seats | **K/N** [low, high]")
# and the members' files it was read from, committed beside the studies.
LEADERBOARD = {"qlearning": "experiments/leaderboard/qlearning/population.csv",
               "ppo net=mlp128": "experiments/leaderboard/ppo/population.csv",
               "dqn": "experiments/leaderboard/dqn/population.csv",
               "a2c": "experiments/a2c/leaderboard/seeds_*.csv",
               "alphazero": "experiments/alphazero/study/default/population.csv",
               "reinforce": "experiments/leaderboard/reinforce/population.csv"}


def test_the_leaderboards_counts_and_intervals_are_those_of_the_members_files():
    # Issue 45 found a leaderboard saying 82/100 beside a README saying 99/100: both pages now
    # hold the same count, the count of the members' own files, and its Wilson interval.
    from ttt_research.evaluation.stats import wilson

    for page in (REPO / "README.md", REPO / "docs" / "leaderboard.md"):
        text = page.read_text()
        for name, pattern in LEADERBOARD.items():
            rows = [r for f in sorted(REPO.glob(pattern)) for r in csv.DictReader(open(f, newline=""))]
            safe = sum(r["unbeatable"] == "True" for r in rows)
            low, high = wilson(safe, len(rows))
            row = rf"^\| `{re.escape(name)}` \(.*?\*\*(\d+)/(\d+)(?:\*\*)? \[([\d.]+), ([\d.]+)\]"
            found = re.findall(row, text, re.M)
            assert found, (page.name, name)
            for k, n, lo, hi in found:
                assert (int(k), int(n)) == (safe, len(rows)), (page.name, name)
                assert (float(lo), float(hi)) == (round(low, 2), round(high, 2)), (page.name, name)


def test_the_leaderboards_report_says_what_its_members_files_say():
    # experiments/leaderboard/report.md and report.csv (a report over run folders that are not in
    # the repository; a row measured again is written in by current_rows.py): each row's count of
    # unbeatable seeds and its seed count are those of its committed members' files.
    board = REPO / "experiments" / "leaderboard"
    csv_rows = {r["configuration"]: r for r in csv.DictReader(open(board / "report.csv", newline=""))}
    md = (board / "report.md").read_text()
    assert set(csv_rows) == {"reinforce", "ppo", "qlearning", "dqn"}
    for name, row in csv_rows.items():
        members = list(csv.DictReader(open(board / name / "population.csv", newline="")))
        safe = sum(r["unbeatable"] == "True" for r in members)
        assert (int(row["unbeatable"]), int(row["seeds"])) == (safe, len(members)), name
        (k, n), = re.findall(rf"^\| {name} \| \d+: .*? \| (\d+) of (\d+): ", md, re.M)
        assert (int(k), int(n)) == (safe, len(members)), name
        seats = re.findall(rf"^\| {name} \| (X and O|O) \| (\d+) \| (\d+)/(\d+) = ", md, re.M)
        assert seats and all((int(k), int(n)) == (safe, len(members)) for _, _, k, n in seats), name
