"""``report`` across seeds: populations and multiruns alike, the statistics columns of the
contract (IQM with its bootstrap CI, median, mean; the unbeatable share with its Wilson CI),
``--json`` and ``--compare``. Run folders are written here as training leaves them, with
numbers chosen so that every statistic can be worked out by hand."""

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ttt_research import report

Z = 1.959963984540054


def wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return centre - half, centre + half


def side(win: float, loss: float) -> dict:
    return {"vs_random": {"win": win, "loss": loss, "tie": round(1 - win - loss, 12)},
            "vs_perfect": {"win": 0.0, "loss": 0.5 if loss else 0.0, "tie": 0.5 if loss else 1.0},
            "worst_case": "loss" if loss else "draw"}


def eval_report(win: float, loss: float, optimal: float = 0.95) -> dict:
    return {"as_x": side(0.99, 0.0), "as_o": side(win, loss), "optimal_move_rate": optimal,
            "decision_points": 500}


def hydra_record(path: Path, overrides: list[str], seed: int) -> None:
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"seed": seed, "seat": {"side": "o"}, "optimized_metric": "score"}))


def fake_population(path: Path, overrides: list[str], members: list[tuple[int, dict, float, float]]) -> None:
    """A population job folder: members (seed, hparams, O win, O loss), each evaluated twice
    (at 1,000 games: beaten; at 2,000: its final report)."""
    hydra_record(path, overrides, members[0][0])
    rows = [{"index": i, "seed": seed, "hparams": hp, "games": 2000, "eval": eval_report(w, lo),
             "first_unbeatable_games": None if lo else 2000, "stopped": None}
            for i, (seed, hp, w, lo) in enumerate(members)]
    (path / "population.json").write_text(json.dumps({"members": rows, "aggregate": {}}))
    (path / "eval.json").write_text(json.dumps(rows[0]["eval"]))
    with open(path / "population_evals.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["games", "member", "seed", "eval/o_random_win", "eval/o_random_loss",
                    "eval/o_worst_case"])
        for games in (1000, 2000):
            for r in rows:
                win, loss = r["eval"]["as_o"]["vs_random"]["win"], r["eval"]["as_o"]["vs_random"]["loss"]
                final = games == 2000
                w.writerow([games, r["index"], r["seed"], win if final else win - 0.1,
                            loss if final else 0.05, (-1.0 if loss else 0.0) if final else -1.0])


def fake_run(path: Path, overrides: list[str], seed: int, win: float, loss: float) -> None:
    hydra_record(path, overrides, seed)
    (path / "eval.json").write_text(json.dumps(eval_report(win, loss)))


LOW_LR = [0.90, 0.91, 0.905, 0.88, 0.915, 0.9164, 0.87, 0.90]   # IQM: 0.90, 0.90, 0.905, 0.91
HIGH_LR = [0.91, 0.9164, 0.9164, 0.9122, 0.9037, 0.9164, 0.9079, 0.9164]
LOW_LOSS = [0, 0.002, 0, 0.01, 0, 0, 0.03, 0]                   # 5 of 8 unbeatable
HIGH_LOSS = [0, 0, 0, 0, 0, 0, 0, 0.001]                        # 7 of 8


@pytest.fixture
def population(tmp_path) -> Path:
    members = [(100 + k, {"algo.lr": lr}, wins[k], losses[k])
               for lr, wins, losses in ((0.5, LOW_LR, LOW_LOSS), (2.0, HIGH_LR, HIGH_LOSS)) for k in range(8)]
    fake_population(tmp_path / "pop", ["population.size=8", "population.vary.algo.lr=[0.5,2.0]", "seed=100"],
                    members)
    return tmp_path / "pop"


def rows_of(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_population_is_a_configuration_per_grid_point_with_the_contract_statistics(population):
    files = report.report(population, reps=1000)
    rows = rows_of(files["csv"])
    assert [r["algo.lr"] for r in rows] == ["0.5", "2.0"]
    low = rows[0]
    for m in ("o_random_win", "o_random_loss", "optimal_move_rate"):
        for stat in ("iqm", "iqm_ci_low", "iqm_ci_high", "median", "mean"):
            assert f"{m}_{stat}" in low
    assert not any(k.startswith("x_") for k in low)  # the seat trained is O: X is not judged
    assert float(low["o_random_win_iqm"]) == pytest.approx((0.90 + 0.90 + 0.905 + 0.91) / 4)
    assert float(low["o_random_win_median"]) == pytest.approx((0.90 + 0.905) / 2)
    assert float(low["o_random_win_mean"]) == pytest.approx(sum(LOW_LR) / 8)
    assert float(low["o_random_win_iqm_ci_low"]) < float(low["o_random_win_iqm"]) < float(
        low["o_random_win_iqm_ci_high"])
    assert (low["seeds"], low["unbeatable"]) == ("8", "5") and float(low["unbeatable_fraction"]) == 5 / 8
    assert (float(low["unbeatable_ci_low"]), float(low["unbeatable_ci_high"])) == pytest.approx(
        wilson_by_hand(5, 8), abs=1e-9)
    assert (rows[1]["unbeatable"], float(rows[1]["unbeatable_ci_low"])) == (
        "7", pytest.approx(wilson_by_hand(7, 8)[0], abs=1e-9))
    # Unbeatable at the second evaluation (2,000 games), from the members' evaluations.
    assert float(low["first_unbeatable_games_median"]) == 2000.0
    md = files["md"].read_text()
    assert "| 0.5 | 8: 100–107 | 0.9038 [" in md and "| 5 of 8: 0.62 [0.31, 0.86] |" in md
    # Each number with its meaning or unit: the objective's column says what it measures
    # (it said "objective (score)"), the time column its unit (it said "job s": "2 x 1").
    head = next(line for line in md.splitlines() if line.startswith("| algo.lr"))
    assert "objective: score (worst trained seat's win - loss vs random, minus 1 if beatable), IQM" in head
    assert "| training seconds per job (jobs x mean) |" in head and "job s" not in head
    per_seed = rows_of(files["runs"])
    assert [int(r["seed"]) for r in per_seed] == list(range(100, 108)) * 2
    assert [int(r["member"]) for r in per_seed] == list(range(16))
    assert files["png"].stat().st_size > 10_000 and files["profiles"].stat().st_size > 10_000


def test_a_multirun_of_populations_and_single_runs_is_grouped_by_what_differs(tmp_path):
    sweep = tmp_path / "sweep"
    fake_population(sweep / "0", ["reward=antirez", "population.size=4", "seed=0"],
                    [(k, {}, w, lo) for k, (w, lo) in enumerate(zip(LOW_LR[:4], LOW_LOSS[:4], strict=True))])
    for k in range(3):
        fake_run(sweep / str(k + 1), ["reward=zero_sum", f"seed={k}"], k, HIGH_LR[k], HIGH_LOSS[k])
    rows = rows_of(report.report(sweep, reps=500)["csv"])
    assert [(r["reward"], r["seeds"], r["unbeatable"], r["jobs"]) for r in rows] == [
        ("antirez", "4", "2", "1"), ("zero_sum", "3", "3", "3")]
    assert float(rows[0]["o_random_win_iqm"]) == pytest.approx((0.90 + 0.905) / 2)  # of .88 .90 .905 .91
    assert float(rows[1]["o_random_win_iqm"]) == pytest.approx(sum(HIGH_LR[:3]) / 3)  # 3: nothing cut
    assert "population.size" not in rows[0]  # the seeds axis is no configuration
    # A second sweep inside the first's folder (seeds run as two commands): read, not a crash.
    fake_run(sweep / "more" / "0", ["reward=zero_sum", "seed=3"], 3, HIGH_LR[3], HIGH_LOSS[3])
    rows = rows_of(report.report(sweep, reps=200)["csv"])
    assert [(r["reward"], r["seeds"]) for r in rows] == [("antirez", "4"), ("zero_sum", "4")]


def test_json_prints_the_csv_rows(population, capsys):
    assert report.main([str(population), "--json", "--reps", "500"]) == 0
    printed = json.loads(capsys.readouterr().out)
    rows = rows_of(population / "report.csv")
    assert len(printed) == len(rows) == 2
    for got, want in zip(printed, rows, strict=True):
        assert {k: str(v) for k, v in got.items() if v is not None} == {k: v for k, v in want.items() if v}


def test_compare_gives_the_probability_of_improvement_with_its_interval(population, capsys):
    assert report.main([str(population), "--compare", "algo.lr=2", "algo.lr=0.5", "--json"]) == 0
    got = {c["metric"]: c for c in json.loads(capsys.readouterr().out)["comparisons"]}
    # Wins: each of the 64 pairs (high-lr seed, low-lr seed) counted by hand below.
    wins = sum((a > b) + 0.5 * (a == b) for a in HIGH_LR for b in LOW_LR) / 64
    assert got["o_random_win"]["p_improvement"] == pytest.approx(wins)
    losses = sum((a < b) + 0.5 * (a == b) for a in HIGH_LOSS for b in LOW_LOSS) / 64  # lower is better
    assert got["o_random_loss"]["p_improvement"] == pytest.approx(losses)
    assert got["o_random_loss"]["better"] == "lower"
    for c in got.values():
        assert c["ci_low"] <= c["p_improvement"] <= c["ci_high"] and (c["seeds_a"], c["seeds_b"]) == (8, 8)
    assert report.main([str(population), "--compare", "1", "2"]) == 0  # row numbers
    out = capsys.readouterr().out
    assert out.startswith("A: 1 (8 seeds)   B: 2 (8 seeds)") and "o_random_win" in out


def test_compare_of_two_folders_pools_each(tmp_path, capsys):
    for k in range(4):
        fake_run(tmp_path / "a" / str(k), [f"seed={k}", "algo.lr=1"], k, 0.91, 0.0)
        fake_run(tmp_path / "b" / str(k), [f"seed={k}", "algo.lr=2"], k, 0.88, 0.01)
    assert report.main(["--compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    got = {c["metric"]: c for c in json.loads(capsys.readouterr().out)["comparisons"]}
    assert got["o_random_win"]["p_improvement"] == 1.0 and got["o_random_loss"]["p_improvement"] == 1.0
    assert got["objective (score)"]["p_improvement"] == 1.0


@pytest.mark.parametrize("args,needle", [
    (["--compare", "algo.lr=3", "algo.lr=0.5"], "matches 0 configurations"),
    (["--compare", "net=mlp25", "algo.lr=0.5"], "names no configuration"),
    (["--metrics", "o_random_wins"], "unknown metric o_random_wins"),
])
def test_bad_report_arguments_are_one_line_and_exit_2(population, args, needle):
    res = subprocess.run([sys.executable, "-m", "ttt_research.report", str(population), *args],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stdout == "", res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_a_member_stopped_before_any_evaluation_counts_as_a_seed_that_is_not_unbeatable(tmp_path):
    fake_population(tmp_path, ["population.size=3"],
                    [(0, {}, 0.91, 0.0), (1, {}, 0.90, 0.0), (2, {}, 0.5, 0.1)])
    pop = json.loads((tmp_path / "population.json").read_text())
    pop["members"][2].update(eval=None, stopped="non-finite loss at update 1")  # as training leaves it
    (tmp_path / "population.json").write_text(json.dumps(pop))
    (row,) = rows_of(report.report(tmp_path, reps=200)["csv"])
    assert (row["seeds"], row["unbeatable"]) == ("3", "2")  # 2 of 3, not 2 of 2
    assert float(row["unbeatable_ci_low"]) == pytest.approx(wilson_by_hand(2, 3)[0], abs=1e-9)
    assert float(row["o_random_win_mean"]) == pytest.approx((0.91 + 0.90) / 2)  # values: the two reports


def test_a_jobs_seconds_are_its_training_seconds_across_a_resume(tmp_path):
    """A resume rewrites .hydra/config.yaml, from whose time the job's seconds were measured: a
    resumed run read 0 s. ``elapsed_s`` at the last evaluation continues across the resume."""
    import os

    from ttt_research.analysis.runs import ELAPSED, RunRecord

    (tmp_path / ".hydra").mkdir()
    (tmp_path / "eval.json").write_text("{}")
    (tmp_path / ".hydra" / "config.yaml").write_text("seed: 0\n")  # rewritten by the resume, last
    os.utime(tmp_path / "eval.json", (1000, 1000))
    os.utime(tmp_path / ".hydra" / "config.yaml", (1000, 1000))
    rec = RunRecord(tmp_path, {}, 0, "o", "score", {}, series={ELAPSED: [(2048, 3.5), (8192, 12.25),
                                                                         (4096, 7.0)]})
    assert rec.seconds == 12.25
    assert RunRecord(tmp_path, {}, 0, "o", "score", {}).seconds == 0  # the file times' reading


def test_a_sweep_with_jobs_missing_says_so(tmp_path):
    """A sweep stopped by a signal ends with its stopped job; the jobs after it never ran, and a
    report of the folder said nothing of them."""
    from ttt_research.analysis.runs import RunRecord
    from ttt_research.analysis.summary import missing_jobs

    def record(text: str) -> None:
        (tmp_path / "multirun.yaml").write_text(text)

    runs = [RunRecord(tmp_path / str(k), {}, k, "o", "score", {}) for k in range(2)]
    record("hydra:\n  sweeper: {_target_: hydra._internal.core_plugins.basic_sweeper.BasicSweeper}\n"
           "  overrides: {task: ['seed=0,1,2', 'net=mlp25,mlp100', budget.games=1000]}\n")
    assert missing_jobs(tmp_path, runs).startswith(f"{tmp_path / 'multirun.yaml'} names 6 jobs and 2 "
                                                   "finished")
    assert missing_jobs(tmp_path, runs * 3 + [RunRecord(tmp_path / str(k), {}, k, "o", "score", {})
                                              for k in range(2, 6)]) == ""
    record("hydra:\n  sweeper: {_target_: hydra._internal.core_plugins.basic_sweeper.BasicSweeper,\n"
           "            params: {seed: '0,1,2,3', net: 'mlp25,mlp100'}}\n"
           "  overrides: {task: ['seed=0,1,2']}\n")  # a preset's sweep, the command's seeds winning
    assert "names 6 jobs and 2 finished" in missing_jobs(tmp_path, runs)
    record("hydra:\n  sweeper: {_target_: hydra_plugins.hydra_nevergrad_sweeper.NevergradSweeper}\n"
           "  overrides: {task: ['seed=0,1,2']}\n")
    assert missing_jobs(tmp_path, runs) == ""  # another sweeper: no count of ours
    record("hydra:\n  sweeper: {_target_: hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper,"
           " n_trials: 3}\n")
    assert "names 3 jobs and 2 finished" in missing_jobs(tmp_path, runs)
    for foreign in ("[1, 2", "hydra: 7\n", "hydra:\n  overrides: {task: ['seed=range(0,10**9']}\n",
                    "hydra:\n  overrides: {task: ['seed=range(0,1000000000000)']}\n"):
        record(foreign)
        assert missing_jobs(tmp_path, runs) == ""
    (tmp_path / "multirun.yaml").unlink()
    assert missing_jobs(tmp_path, runs) == ""
