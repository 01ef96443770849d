"""What a newcomer met reading ``report``'s and the plots' output, each measured on what is
written or drawn: the unbeatable share with its Wilson interval at any count, ``--compare``
warning about too few seeds, titles broken at phrase ends, the profile's y-label true for a
loss rate, a population's win rates on an axis that shows them move, ``dashboard --print |
head`` quiet, and no pointer to a file users do not have."""

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import yaml

from ttt_research import report
from ttt_research.analysis import curves as curves_module
from ttt_research.analysis.curves import plot_population, rate_limits, wrap_phrases
from ttt_research.contract import EVAL_NAMES

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[2]


def fake_run(path: Path, seed: int, lr: str, wins: list[float], losses: list[float]) -> None:
    """A run folder as training leaves it: exact evaluations every 10,000 games, as O."""
    (path / ".hydra").mkdir(parents=True)
    side = {"vs_random": {"win": wins[-1], "loss": losses[-1], "tie": 1 - wins[-1] - losses[-1]},
            "vs_perfect": {"win": 0.0, "loss": 0.5, "tie": 0.5}, "worst_case": "loss"}
    (path / "eval.json").write_text(json.dumps({"as_x": side, "as_o": side, "optimal_move_rate": 0.9}))
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={seed}", f"algo.lr={lr}"]))
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"seed": seed, "seat": {"side": "o"}, "optimized_metric": "score"}))
    with open(path / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "train/games", "eval/o_random_win", "eval/o_random_loss", "eval/o_worst_case"])
        for i, (win, loss) in enumerate(zip(wins, losses, strict=True)):
            w.writerow([i, 10_000 * (i + 1), win, loss, -1.0])


@pytest.fixture
def two_by_two(tmp_path) -> Path:
    """Two configurations of two seeds, none unbeatable; lr=2's seeds all beat lr=1's."""
    for seed in (0, 1):
        fake_run(tmp_path / f"a{seed}", seed, "1", [0.6, 0.7 + 0.01 * seed], [0.2, 0.10 + 0.01 * seed])
        fake_run(tmp_path / f"b{seed}", seed, "2", [0.7, 0.8 + 0.01 * seed], [0.1, 0.02 + 0.01 * seed])
    return tmp_path


def test_the_table_shows_the_unbeatable_share_with_its_interval_even_for_two_seeds(two_by_two, monkeypatch):
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    files = report.report(two_by_two, reps=200)
    md = files["md"].read_text()
    # Wilson's interval of 0 of 2 reaches 0.66: "0 of 2" alone read as "never".
    assert md.count("| 0 of 2: 0.00 [0.00, 0.66] |") == 2
    curves, profiles, _ = figures
    # The title breaks where a phrase ends, not inside "its 95% CI".
    assert curves._suptitle.get_text().split("\n") == [
        "exact evaluations during training:", "the IQM of each configuration's seeds, band its 95% CI"]
    loss = next(ax for ax in profiles.axes if ax.get_xlabel() == "threshold t on o_random_loss")
    win = next(ax for ax in profiles.axes if ax.get_xlabel() == "threshold t on o_random_win")
    assert loss.get_ylabel() == "share of seeds with o_random_loss ≤ t"
    assert win.get_ylabel() == "share of seeds with o_random_win > t"
    # For a loss rate the share at or below t: 0 left of every seed, all of them at the right
    # end; so a curve above another is better in this panel as in the others.
    for line in loss.get_lines():
        assert (line.get_ydata()[0], line.get_ydata()[-1]) == (0.0, 1.0)
    for line in win.get_lines():
        assert (line.get_ydata()[0], line.get_ydata()[-1]) == (1.0, 0.0)


def test_compare_with_few_seeds_a_side_warns_and_says_so_on_each_line(two_by_two, capsys):
    assert report.main([str(two_by_two), "--compare", "algo.lr=1", "algo.lr=2", "--reps", "200"]) == 0
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [
        "warning: --compare: A has 2 seeds and B 2; with fewer than 5 a side the probability of "
        "improvement takes few values and its interval can shrink to a point: run more seeds "
        "before reading it"]
    line = next(lo for lo in cap.out.splitlines() if "o_random_win" in lo)
    assert line.endswith("0.000 [0.000, 0.000]  (few seeds: 2 vs 2, read with care)")
    assert report.main([str(two_by_two), "--compare", "1", "2", "--json", "--reps", "200"]) == 0
    got = json.loads(capsys.readouterr().out)["comparisons"]
    assert all(c["few_seeds"] for c in got) and {c["seeds_a"] for c in got} == {2}


def test_titles_wrap_only_where_a_phrase_ends():
    title = "exact evaluations during training: the IQM of each configuration's seeds, band its 95% CI"
    assert wrap_phrases(title, 84).split("\n") == [
        "exact evaluations during training:", "the IQM of each configuration's seeds, band its 95% CI"]
    assert wrap_phrases(title, 40).split("\n") == [
        "exact evaluations during training:", "the IQM of each configuration's seeds,", "band its 95% CI"]
    assert wrap_phrases(title, 200) == title
    long = "net=mlp25_with_a_long_name_0, algo.lr=0.5"  # a word longer than a line stays whole
    assert wrap_phrases(long, 20) == "net=mlp25_with_a_long_name_0,\nalgo.lr=0.5"
    assert wrap_phrases("a b c d\nsecond", 3) == "a b\nc d\nsecond"


def write_evals(path: Path, wins: np.ndarray) -> Path:
    """population_evals.csv: wins (G, N) for N members at G evaluations, as O."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["games", "member", "seed", *EVAL_NAMES])
        for g, row in enumerate(wins):
            for m, win in enumerate(row):
                vals = dict.fromkeys(EVAL_NAMES, 0.0)
                vals.update({"eval/o_random_win": win, "eval/o_random_loss": 0.01 / (g + 1),
                             "eval/o_random_tie": 1 - win - 0.01 / (g + 1), "eval/o_worst_case": -1.0})
                w.writerow([10_000 * (g + 1), m, m, *(vals[n] for n in EVAL_NAMES)])
    return path


def test_a_populations_win_rates_are_drawn_on_their_own_range(tmp_path, monkeypatch):
    wins = 0.90 + 0.02 * np.linspace(0, 1, 6)[:, None] + 0.001 * np.arange(4)[None, :]  # 0.900 .. 0.923
    path = write_evals(tmp_path / "population_evals.csv", wins)
    figures = []
    monkeypatch.setattr(curves_module, "png_bytes", lambda fig: figures.append(fig) or b"")
    plot_population(path, tmp_path / "curves.png", "o")
    top = figures[0].axes[0]
    low, high = top.get_ylim()
    assert low < wins.min() and wins.max() < high  # every member in view...
    assert high - low == pytest.approx(0.023 * 1.16)  # ...filling the axis (8% margins), not 0..1
    assert top.get_ylabel() == "win rate (axis: the members' range)"
    assert rate_limits([0.999, 1.0]) == pytest.approx((0.98, 1.0)) and rate_limits([]) == (-0.02, 1.02)
    assert rate_limits([float("nan"), 0.5]) == pytest.approx((0.49, 0.51))


def test_dashboard_print_into_a_closed_pipe_is_quiet():
    pytest.importorskip("wandb_workspaces")
    proc = subprocess.Popen([sys.executable, "-m", "ttt_research.dashboard", "--entity", "E", "--print"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before a line is written: `... --print | head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == ""


def test_report_points_users_only_to_files_they_have():
    source = (ROOT / "src" / "ttt_research" / "report.py").read_text()
    assert "ARCHITECTURE" not in source and "shared/" not in source
    for doc in set(re.findall(r"docs/[\w-]+\.md", source)):
        assert (ROOT / doc).is_file(), doc
