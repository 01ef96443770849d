"""The cells' study (experiments/cells/study.py): a chunk of seeds becomes one row file, a second
run skips what is done, and the matrix in the README, docs/leaderboard.md and
experiments/cells/README.md is the one its rows give."""

from __future__ import annotations

import csv
import hashlib
import re
import shutil
import subprocess
import sys

import pytest

from tests.helpers.experiments import REPO, load_script
from ttt_research.errors import UserError

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
    with pytest.raises(UserError, match="FIRST < LAST"):
        study.chunks("9-7", 2)
    with pytest.raises(UserError, match="at least 2"):
        study.chunks("1-9", 1)


def _hashes(*folders) -> dict[str, str]:
    """Every file under ``folders`` (or the file itself), by its bytes' hash."""
    files = [f for d in folders for f in ([d] if d.is_file() else sorted(d.rglob("*"))) if f.is_file()]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


@pytest.mark.parametrize("args,line", [
    (["--seeds", "abc"], "error: --seeds must be FIRST-LAST, two seeds with FIRST < LAST (e.g. 6000-6099), "
                         "got 'abc'"),
    (["--seeds", "7"], "error: --seeds must be FIRST-LAST"),
    (["--seeds=-3-4"], "error: --seeds must be FIRST-LAST"),
    (["--tuned-on", "some"], "error: --tuned-on must be FIRST-LAST"),
    (["--chunk", "z"], "error: python experiments/cells/study.py run: argument --chunk: invalid int "
                       "value: 'z'"),
    # debug=tiny shrinks the budget of any cell (a pipeline check): the cell's is compared with it
    (["algo=ppo", "debug=tiny"], "error: reinforce_mlp25: algo=ppo debug=tiny changes the cell's "
                                 "algorithm and seats (reinforce -> ppo, o -> both); its rows would "
                                 "not be the cell's"),
    (["experiment=flagship"], "error: reinforce_mlp25: experiment=flagship changes the cell's seats"),
    (["++budget.games=5"], "error: reinforce_mlp25: ++budget.games=5 changes the cell's budget "
                           "(1000000 -> 5)"),
    (["net=mlp100"], "error: reinforce_mlp25: net=mlp100 changes the cell's network"),
    (["seat=x", "algo.lr=0.1"], "error: reinforce_mlp25: seat=x algo.lr=0.1 changes the cell's seats"),
])
def test_a_run_that_would_file_rows_under_the_wrong_cell_is_refused_before_anything_runs(
        tmp_path, capsys, args, line):
    # Issue 58: "run reinforce_mlp100 ... algo=ppo" trained PPO and wrote its rows in the
    # reinforce cell; and --seeds abc ended in a traceback. One line each, exit 2, nothing run.
    argv = ["run", "reinforce_mlp25", "--tuned-on", "1-2", "--seeds", "3-6", "--chunk", "2",
            "--runs", str(tmp_path / "runs"), "--rows", str(tmp_path / "rows"), *args]
    assert study.main(argv) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith(line) and out.err.count("\n") == 1, out.err
    assert list(tmp_path.iterdir()) == []


def _cell_copy(tmp_path, monkeypatch):
    """The committed rows of reinforce_mlp100 and the three tables, copied into ``tmp_path``
    (where ``study`` reads and writes them)."""
    rows = tmp_path / "rows"
    shutil.copytree(study.ROWS / "reinforce_mlp100", rows / "reinforce_mlp100",
                    ignore=shutil.ignore_patterns("tuning"))
    targets = []
    for i, path in enumerate(study.TARGETS):
        targets.append(tmp_path / f"{i}_{path.name}")
        shutil.copyfile(path, targets[-1])
    monkeypatch.setattr(study, "ROWS", rows)
    monkeypatch.setattr(study, "TARGETS", targets)
    return rows / "reinforce_mlp100"


def _rewrite(path, **values) -> None:
    rows = list(csv.DictReader(open(path, newline="")))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, **values} for r in rows)


@pytest.mark.parametrize("values,why", [
    # a PPO chunk filed in the reinforce cell, as the old study.py wrote it
    ({"seats": "both", "budget": "300000", "overrides": "algo=ppo"},
     "seats 'both' (the cell's: 'o'), budget '300000' (the cell's: '4000000'), overrides 'algo=ppo' "
     "(its first chunk's: 'threads=1')"),
    ({"tuned_on": "11000-11015"}, "tuned_on '11000-11015' (its first chunk's: '11000-11047')"),
])
def test_tables_refuse_a_cell_whose_chunks_disagree_naming_the_files(tmp_path, monkeypatch, capsys,
                                                                      values, why):
    cell = _cell_copy(tmp_path, monkeypatch)
    _rewrite(cell / "seeds_6025-6049.csv", **values)
    before = _hashes(tmp_path)
    for argv in (["tables"], ["tables", "--check"]):
        assert study.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: reinforce_mlp100: 1 of its 4 chunk files are not the cell's "
                              "(algo=reinforce net=mlp100, seats o, budget 4000000)") and err.count("\n") == 1
        assert err.endswith(f"{cell / 'seeds_6025-6049.csv'}: {why}\n"), err
    assert _hashes(tmp_path) == before


def test_tables_refuse_rows_run_with_an_override_that_changes_the_cell(tmp_path, monkeypatch, capsys):
    # Every chunk the same, each with the cell's seats and budget written in, but made with an
    # override that changes its seats.
    cell = _cell_copy(tmp_path, monkeypatch)
    for path in cell.glob("seeds_*.csv"):
        _rewrite(path, overrides="algo.lr=0.5 experiment=flagship")
    before = _hashes(tmp_path)
    assert study.main(["tables"]) == 2
    err = capsys.readouterr().err
    assert "4 of its 4 chunk files" in err and err.count("\n") == 1
    assert "seeds_6075-6099.csv: algo.lr=0.5 experiment=flagship changes the cell's seats (o -> both)" in err
    assert _hashes(tmp_path) == before
    for path in cell.glob("seeds_*.csv"):  # the committed rows as they are: written
        _rewrite(path, overrides="")
    assert study.main(["tables"]) == 0 and _hashes(tmp_path) != before


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
