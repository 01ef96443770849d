"""``report`` over several folders (a leaderboard: one population per algorithm), each one
configuration, and the time to safety: games and wall seconds until each seed's first
unbeatable evaluation (median, IQR, never), per trained seat, value accuracy, and the share of
seeds unbeatable at each evaluation with its Wilson band (report_safe.png). Populations are
written here as training leaves them, with numbers that can be worked out by hand."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import yaml

from ttt_research import report
from ttt_research.analysis.runs import ReportError
from ttt_research.evaluation import stats

GAMES = (1000, 2000, 4000, 8000)


def side(worst: str) -> dict:
    loss = 0.05 if worst == "loss" else 0.0
    return {"vs_random": {"win": 0.9 - loss, "loss": loss, "tie": 0.1},
            "vs_perfect": {"win": 0.0, "loss": loss, "tie": 1.0 - loss}, "worst_case": worst}


def eval_report(x: str, o: str, values: tuple[float, float] | None = None) -> dict:
    rep = {"as_x": side(x), "as_o": side(o), "optimal_move_rate": 0.9, "decision_points": 500}
    if values is not None:
        rep["value_accuracy"] = {"sign_agreement": values[0], "mae": values[1], "decision_points": 546}
    return rep


def population(path: Path, seat: str, overrides: list[str], safe: dict[str, list[list[bool]]],
               elapsed: list[float] | None = None, values: list | None = None) -> Path:
    """A population job: member k is unbeatable as seat s at evaluation i when safe[s][k][i]
    (GAMES[i] games); its final report is its last evaluation; ``elapsed``: the job's
    seconds at each evaluation (population_evals.csv's elapsed_s), none if None."""
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"seed": 9000, "seat": {"side": seat}, "optimized_metric": "score"}))
    seats = ("x", "o") if seat == "both" else (seat,)
    n, evals = len(safe[seats[0]]), len(safe[seats[0]][0])

    def worst(s, k, i):
        return "draw" if s in safe and safe[s][k][i] else "loss"

    rows = [{"index": k, "seed": 9000 + k, "hparams": {}, "games": GAMES[evals - 1],
             "eval": eval_report(worst("x", k, -1), worst("o", k, -1), values[k] if values else None),
             "first_unbeatable_games": None, "stopped": None} for k in range(n)]
    (path / "population.json").write_text(json.dumps({"members": rows, "aggregate": {}}))
    (path / "eval.json").write_text(json.dumps(rows[0]["eval"]))
    with open(path / "population_evals.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["games", "member", "seed", *(f"eval/{s}_worst_case" for s in seats),
                    *(["elapsed_s"] if elapsed else [])])
        for i in range(evals):
            for k in range(n):
                cases = [-1.0 if worst(s, k, i) == "loss" else 0.0 for s in seats]
                w.writerow([GAMES[i], k, 9000 + k, *cases, *([elapsed[i]] if elapsed else [])])
    return path


T, F = True, False
# Tabular-like, as O, 5 members: first unbeatable at 1k, 2k, 4k, 8k games and never.
QTAB_O = [[T, T, T, T], [F, T, F, T], [F, F, T, T], [F, F, F, T], [F, F, F, F]]
QTAB_VALUES = [(0.9, 0.1), (0.8, 0.2), (1.0, 0.05), (0.95, 0.1), (0.5, 0.6)]
# Both seats, 4 members, two evaluations (1k, 2k): X and O apart, and together.
BOTH_X = [[T, T], [F, T], [T, T], [F, F]]
BOTH_O = [[F, T], [F, F], [T, T], [F, F]]


@pytest.fixture
def rows_dir(tmp_path) -> Path:
    population(tmp_path / "qtab", "o", ["+experiment=leaderboard/qlearning"], {"o": QTAB_O},
               elapsed=[10.0, 20.0, 40.0, 80.0], values=QTAB_VALUES)
    population(tmp_path / "ppo", "both", ["algo=ppo", "net=mlp128", "population.size=4", "seed=9000"],
               {"x": BOTH_X, "o": BOTH_O})
    return tmp_path


@pytest.fixture
def no_figures(monkeypatch):
    """The tests of the tables alone skip drawing (most of a report's time)."""
    for name in ("plot", "plot_profiles", "plot_safe"):
        monkeypatch.setattr(report, name, lambda *a, **k: None)


def csv_rows(path: Path) -> dict[str, dict]:
    with open(path, newline="") as f:
        return {r["configuration"]: r for r in csv.DictReader(f)}


def num(row: dict, key: str) -> float | None:
    return float(row[key]) if row[key] != "" else None


def test_several_folders_are_one_configuration_each_with_time_to_first_unbeatable(rows_dir, monkeypatch):
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    for name in ("plot", "plot_profiles"):  # tested elsewhere; here only report_safe.png is drawn
        monkeypatch.setattr(report, name, lambda *a, **k: None)
    files = report.report([rows_dir / "qtab", rows_dir / "ppo"], out=rows_dir / "out", reps=200)
    rows = csv_rows(files["csv"])
    assert list(rows) == ["qtab", "ppo"]  # the folders' names, though their overrides differ
    q, p = rows["qtab"], rows["ppo"]
    # qtab: first unbeatable at 1000, 2000, 4000, 8000 games, one seed never; NumPy's quartiles.
    assert (num(q, "first_unbeatable_games_median"), num(q, "first_unbeatable_games_q25"),
            num(q, "first_unbeatable_games_q75"), q["first_unbeatable_never"]) == (3000, 1750, 5000, "1")
    # The job's seconds 10, 20, 40, 80 shared by 5 members: 2, 4, 8, 16 s per agent.
    assert (num(q, "first_unbeatable_seconds_median"), num(q, "first_unbeatable_seconds_q25"),
            num(q, "first_unbeatable_seconds_q75")) == (6.0, 3.5, 10.0)
    assert (q["seeds"], q["unbeatable"], q["o_unbeatable"]) == ("5", "4", "4")
    assert (num(q, "unbeatable_ci_low"), num(q, "unbeatable_ci_high")) == pytest.approx(stats.wilson(4, 5))
    # Value accuracy: the IQM of 5 cuts one seed at each end.
    assert num(q, "value_sign_agreement_iqm") == pytest.approx((0.8 + 0.9 + 0.95) / 3)
    assert num(q, "value_mae_iqm") == pytest.approx((0.1 + 0.1 + 0.2) / 3)
    assert "x_unbeatable" not in q or q["x_unbeatable"] == ""  # trained as O only
    assert q.get("x_random_win_iqm", "") == ""                  # nor judged as X
    # ppo, both seats: together first at 2000, never, 1000, never; X 1000, 2000, 1000, never.
    assert (num(p, "first_unbeatable_games_median"), num(p, "first_unbeatable_games_q25"),
            num(p, "first_unbeatable_games_q75"), p["first_unbeatable_never"]) == (1500, 1250, 1750, "2")
    assert (num(p, "x_first_unbeatable_games_median"), num(p, "x_first_unbeatable_games_q75"),
            p["x_first_unbeatable_never"]) == (1000, 1500, "1")
    assert (num(p, "o_first_unbeatable_games_median"), p["o_first_unbeatable_never"]) == (1500, "2")
    assert (p["unbeatable"], p["x_unbeatable"], p["o_unbeatable"]) == ("2", "3", "2")
    assert (num(p, "x_unbeatable_ci_low"), num(p, "x_unbeatable_ci_high")) == pytest.approx(
        stats.wilson(3, 4))
    assert num(p, "first_unbeatable_seconds_median") is None  # no elapsed_s: blank, not 0
    assert p.get("value_mae_iqm", "") == ""
    md = files["md"].read_text()
    assert "| qtab | O | 5 | 4/5 = 0.80 [0.38, 0.96] | 3.0k [1.8k, 5.0k] | 1 of 5 | 6 [3.5, 10] |" in md
    assert "| ppo | X and O | 4 | 2/4 = 0.50 [0.15, 0.85] | 1.5k [1.2k, 1.8k] | 2 of 4 |  |" in md
    assert "| ppo | X | 4 | 3/4 = 0.75" in md and "| ppo | O | 4 | 2/4 = 0.50" in md
    assert "| 0.8833 [" in md  # the value sign agreement column of the main table
    # report_safe.png: the share unbeatable at each evaluation (1/5, 2/5, 2/5, 4/5 for qtab),
    # against games and against seconds (only qtab has them), each in its Wilson band.
    safe = figures[-1]
    games_ax, seconds_ax = safe.axes
    (q_games, p_games) = games_ax.get_lines()
    assert list(q_games.get_xdata()) == list(GAMES) and list(q_games.get_ydata()) == [0.2, 0.4, 0.4, 0.8]
    assert list(p_games.get_ydata()) == [0.25, 0.5]  # ppo: 1 of 4 at 1k games, 2 of 4 at 2k
    (q_seconds,) = seconds_ax.get_lines()
    assert list(q_seconds.get_xdata()) == [2, 4, 8, 16]
    band = games_ax.collections[0].get_paths()[0].vertices[:, 1]
    assert min(band) == pytest.approx(stats.wilson(1, 5)[0])
    assert max(band) == pytest.approx(stats.wilson(4, 5)[1])
    assert len(figures) == 1 and files["safe"].stat().st_size > 10_000


def test_names_label_the_folders_and_compare_takes_them(rows_dir, capsys, no_figures):
    out = rows_dir / "out"
    assert report.main([str(rows_dir / "qtab"), str(rows_dir / "ppo"), "--names", "tabular q,flagship ppo",
                        "--out", str(out), "--reps", "200", "--json"]) == 0
    assert [r["configuration"] for r in json.loads(capsys.readouterr().out)] == ["tabular q", "flagship ppo"]
    assert report.main([str(rows_dir / "qtab"), str(rows_dir / "ppo"), "--compare", "qtab", "ppo",
                        "--json"]) == 0
    got = {c["metric"]: c for c in json.loads(capsys.readouterr().out)["comparisons"]}
    assert got["o_random_loss"]["seeds_a"] == 5 and got["o_random_loss"]["seeds_b"] == 4


def test_one_folder_is_reported_as_before_with_the_safety_table(rows_dir, no_figures):
    files = report.report(rows_dir / "qtab", reps=200)
    (row,) = csv.DictReader(open(files["csv"], newline=""))
    assert "configuration" not in row and row["first_unbeatable_never"] == "1"
    assert "| all runs | O | 5 | 4/5 = 0.80" in files["md"].read_text()


def test_a_folder_without_runs_is_left_out_with_a_warning(rows_dir, capsys, no_figures):
    (rows_dir / "empty").mkdir()  # e.g. a row still running
    files = report.report([rows_dir / "qtab", rows_dir / "empty"], out=rows_dir / "o", reps=200)
    assert list(csv_rows(files["csv"])) == ["qtab"]
    assert f"left out {rows_dir / 'empty'}: no runs under" in capsys.readouterr().err


def test_a_folder_that_does_not_exist_is_an_error_not_a_shorter_report(rows_dir, no_figures):
    with pytest.raises(ReportError, match="no such directory: .*nowhere"):
        report.report([rows_dir / "qtab", rows_dir / "nowhere"], out=rows_dir / "o", reps=200)
    assert not (rows_dir / "o").exists()  # nothing written


def test_a_bad_elapsed_s_or_value_accuracy_skips_its_population_naming_it(rows_dir, capsys, no_figures):
    evals = rows_dir / "qtab" / "population_evals.csv"
    evals.write_text(evals.read_text().replace(",80.0", ",-3"))
    pop = json.loads((rows_dir / "ppo" / "population.json").read_text())
    pop["members"][1]["eval"]["value_accuracy"] = {"sign_agreement": 1.5, "mae": 0.1}
    (rows_dir / "ppo" / "population.json").write_text(json.dumps(pop))
    (rows_dir / "ok").mkdir()
    population(rows_dir / "ok" / "pop", "o", [], {"o": QTAB_O})
    report.report([rows_dir / "qtab", rows_dir / "ppo", rows_dir / "ok"], out=rows_dir / "o", reps=200)
    err = capsys.readouterr().err
    assert "population_evals.csv: line 17: train/elapsed_s is -3.0 at 8000 games" in err
    assert "members[1].eval: value_accuracy.sign_agreement is 1.5, not a rate" in err


@pytest.mark.parametrize("args,needle", [
    (["A", "B"], "several folders: say where the report goes with --out DIR"),
    (["A", "B", "--out", "o", "--names", "one"], "--names gives 1 name(s) for 2 folders"),
    (["A", "sub/A", "--out", "o"], "two folders would be named 'A': name each with --names"),
    (["--names", "a,", "A"], "is not one name per DIR"),
])
def test_bad_folder_arguments_are_one_line_and_exit_2(rows_dir, args, needle):
    for d in ("A", "B", "sub/A"):
        population(rows_dir / d, "o", [], {"o": QTAB_O})
    res = subprocess.run([sys.executable, "-m", "ttt_research.report", *args], cwd=rows_dir,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stdout == "", res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], res.stderr


def single_run(path: Path, seed: int, evals: list[tuple[int, bool, float]]) -> None:
    """A run folder with metrics.csv's exact evaluations (games, unbeatable as O, elapsed_s)."""
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={seed}"]))
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"seed": seed, "seat": {"side": "o"}, "optimized_metric": "score"}))
    (path / "eval.json").write_text(json.dumps(eval_report("loss", "draw" if evals[-1][1] else "loss")))
    with open(path / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "train/games", "eval/o_worst_case", "train/elapsed_s"])
        for i, (games, safe, elapsed) in enumerate(evals):
            w.writerow([i, games, 0.0 if safe else -1.0, elapsed])


def test_single_runs_count_their_own_elapsed_s_whole(tmp_path, no_figures):
    single_run(tmp_path / "sweep" / "0", 0, [(1000, False, 3.0), (2000, True, 6.0)])
    single_run(tmp_path / "sweep" / "1", 1, [(1000, True, 2.5), (2000, True, 5.0)])
    single_run(tmp_path / "sweep" / "2", 2, [(1000, False, 2.0), (2000, False, 4.0)])
    files = report.report([tmp_path / "sweep"], out=tmp_path / "o", reps=200, names=["runs"])
    row = csv_rows(files["csv"])["runs"]
    assert (num(row, "first_unbeatable_games_median"), row["first_unbeatable_never"]) == (1500, "1")
    assert num(row, "first_unbeatable_seconds_median") == pytest.approx((6.0 + 2.5) / 2)  # one agent a job


def test_seeds_safe_before_the_run_kept_its_clock_are_not_timed_not_never(tmp_path, no_figures):
    # A run started before elapsed_s existed, then resumed: its early evaluations have none.
    population(tmp_path / "late", "o", ["algo=qlearning"], {"o": [[F, T, T, T], [F, F, T, T]]},
               elapsed=["", "", 40.0, 80.0])
    population(tmp_path / "early", "o", ["algo=qlearning"], {"o": [[T, T, T, T], [F, T, T, T]]},
               elapsed=["", "", 40.0, 80.0])
    files = report.report([tmp_path / "late", tmp_path / "early"], out=tmp_path / "out", reps=200)
    md = files["md"].read_text()
    late = next(line for line in md.splitlines() if line.startswith("| late | O |"))
    early = next(line for line in md.splitlines() if line.startswith("| early | O |"))
    assert late.endswith("(1 of 2 timed) |") and "never" not in late.split("|")[-2]
    assert early.endswith("not measured (no elapsed_s at those evaluations) |")
