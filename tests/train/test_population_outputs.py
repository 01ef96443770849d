"""A population's outputs: ``curves.png`` drawn from ``population_evals.csv`` (its medians,
quartiles and share unbeatable checked against figures worked out by hand), and the
population published to W&B (offline, no account) and TensorBoard: the aggregate in the
summary, a row per member in a table."""

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.wandb_files import of_kind, wandb_records
from ttt_research.analysis.curves import drawn_members, plot_population, population_series
from ttt_research.contract import EVAL_NAMES
from ttt_research.env.solver import solve
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.objectives import objective
from ttt_research.models import nets
from ttt_research.population import results
from ttt_research.population import spec as pop
from ttt_research.train.tracking import make_loggers, markdown_table, publish

GAMES = [512, 1024, 1536, 2048]  # four exact evaluations, every member in lockstep
# Exact win rate vs random as O, [evaluation][member]; member 4 stops after the 2nd evaluation.
O_WIN = [[0.5, 0.1, 0.4, 0.2, 0.3],  # sorted .1 .2 .3 .4 .5
         [0.6, 0.2, 0.9, 0.3, 0.7],  # sorted .2 .3 .6 .7 .9
         [0.7, 0.3, 0.9, 0.5],  # 4 present: sorted .3 .5 .7 .9
         [0.8, 0.4, 1.0, 0.6]]  # sorted .4 .6 .8 1.0
O_LOSS = [[0.4, 0.5, 0.3, 0.2, 0.1],
          [0.1, 0.2, 0.05, 0.3, 0.0],
          [0.0, 0.1, 0.0, 0.2],
          [0.0, 0.0, 0.01, 0.0]]  # sorted 0 0 0 .01: a median of exactly 0
# Worst case (x, o) of each member: -1 some opponent beats it, 0 draws at worst, 1 wins.
WORST = [[(-1, -1)] * 5,
         [(0, 0), (0, -1), (-1, 0), (-1, -1), (1, 0)],  # safe: both 0, 4; as O 0, 2, 4
         [(0, 0), (0, 0), (-1, 0), (-1, -1)],  # both 0, 1; as O 0, 1, 2
         [(1, 0), (0, 0), (0, 0), (0, 1)]]  # all four, either way


def write_evals(path: Path) -> Path:
    """population_evals.csv as train.py writes it: rows by evaluation, then member. As X,
    member m has the rates of the last-but-m member as O at the same evaluation: the same
    values in another order, so both seats have the same statistics."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["games", "member", "seed", *EVAL_NAMES])
        for e, games in enumerate(GAMES):
            for m in range(len(O_WIN[e])):
                mirror = len(O_WIN[e]) - 1 - m
                values = {"eval/o_random_win": O_WIN[e][m], "eval/o_random_loss": O_LOSS[e][m],
                          "eval/x_random_win": O_WIN[e][mirror], "eval/x_random_loss": O_LOSS[e][mirror],
                          "eval/x_worst_case": WORST[e][m][0], "eval/o_worst_case": WORST[e][m][1]}
                out.writerow([games, m, 100 + m, *(values.get(k, 0.0) for k in EVAL_NAMES)])
    return path


def captured_figures(monkeypatch) -> list:
    """The figures plot functions save, kept for inspection (and still saved)."""
    import matplotlib.figure

    figures, save = [], matplotlib.figure.Figure.savefig

    def keep(fig, *args, **kwargs):
        figures.append(fig)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return figures


# ---------------------------------------------------------------------- curves.png


def test_population_series_are_quartiles_of_the_members_present_and_share_unbeatable_of_all(tmp_path):
    path = write_evals(tmp_path / "population_evals.csv")
    both = population_series(path, "both")
    assert both["games"].tolist() == GAMES
    assert both["present"].tolist() == [5, 5, 4, 4] and both["members"] == 5
    assert both["ended_early"] == 1
    # Rows: 25th percentile, median, 75th; numpy's linear interpolation: with 4 members the
    # 25th percentile sits 0.75 of the way from the 1st to the 2nd value (.3 + .75 * .2 = .45).
    win = [[0.2, 0.3, 0.45, 0.55], [0.3, 0.6, 0.6, 0.7], [0.4, 0.7, 0.75, 0.85]]
    loss = [[0.2, 0.05, 0.0, 0.0], [0.3, 0.1, 0.05, 0.0], [0.4, 0.2, 0.125, 0.0025]]
    for s in ("x", "o"):  # X's values are O's, mirrored across members
        np.testing.assert_allclose(both["seats"][s]["win"], win, atol=1e-12)
        np.testing.assert_allclose(both["seats"][s]["loss"], loss, atol=1e-12)
    # Unbeatable from both seats, over all 5 members (a stopped one counts, as not safe):
    # 2 of 5 at the 3rd evaluation, not 2 of the 4 present.
    np.testing.assert_allclose(both["unbeatable"], [0.0, 0.4, 0.4, 0.8], atol=1e-12)
    o = population_series(path, "o")
    assert list(o["seats"]) == ["o"]  # only the seat O learners are judged on
    np.testing.assert_allclose(o["unbeatable"], [0.0, 0.6, 0.6, 0.8], atol=1e-12)


@pytest.mark.parametrize("seat,columns", [("both", 2), ("o", 1)])
def test_population_curves_draw_every_member_the_median_and_the_share_unbeatable(
        tmp_path, monkeypatch, seat, columns):
    import matplotlib.image as mpimg

    path = write_evals(tmp_path / "population_evals.csv")
    figures = captured_figures(monkeypatch)
    png = plot_population(path, tmp_path / "curves.png", seat, "reinforce mlp100")
    (fig,) = figures
    assert fig._suptitle.get_text() == "reinforce mlp100: population of 5 members, 1 stopped early"
    series = population_series(path, seat)
    axes = fig.axes  # the top panels, the bottom ones, then each bottom panel's right axis
    assert len(axes) == 3 * columns
    for j, s in enumerate(["x", "o"] if seat == "both" else ["o"]):
        top, bottom, share = axes[j], axes[columns + j], axes[2 * columns + j]
        assert top.get_title() == f"as {s.upper()} vs random (exact)"
        assert len(top.lines) == 5 + 1  # a line per member, and the median
        np.testing.assert_allclose(top.lines[-1].get_ydata(), series["seats"][s]["win"][1])
        assert bottom.get_yscale() == "log"
        # The loss median, with its exact 0 drawn at the 1e-5 floor.
        np.testing.assert_allclose(bottom.lines[-1].get_ydata(), [0.3, 0.1, 0.05, 1e-5])
        np.testing.assert_allclose(share.lines[-1].get_ydata(), series["unbeatable"])
        assert share.get_ylim() == pytest.approx((-0.02, 1.02))
    (legend,) = fig.legends  # one legend, below the plots: none on the axes
    assert not any(ax.get_legend() for ax in axes)
    labels = [t.get_text() for t in legend.get_texts()]
    seats = " (from X and O)" if seat == "both" else ""
    assert labels == ["win vs random, one line per member (all 5)",
                      "win: 25th-75th percentile of members", "win: median",
                      "loss: 25th-75th percentile of members",
                      "loss vs random: median (0 drawn at 1e-5)",
                      f"share of members unbeatable{seats} (right axis)"]  # once each, not per seat
    image = mpimg.imread(str(png))  # 110 dpi: 14 x 7.8 inches for two seats, 9 x 7.8 for one
    assert image.shape == (858, 1540 if columns == 2 else 990, 4) and image.std() > 0.05


def test_a_large_population_draws_200_members_spread_evenly_and_says_so(tmp_path, monkeypatch):
    drawn = drawn_members(np.arange(1000))
    assert len(drawn) == len(set(drawn.tolist())) == 200 and drawn[0] == 0 and drawn[-1] == 999
    assert np.diff(drawn).min() >= 5 and np.diff(drawn).max() <= 6
    path = tmp_path / "population_evals.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["games", "member", "seed", *EVAL_NAMES])
        for games in (512, 1024):
            out.writerows([games, m, m, *[0.5] * len(EVAL_NAMES)] for m in range(250))
    figures = captured_figures(monkeypatch)
    plot_population(path, tmp_path / "curves.png", "o")
    (fig,) = figures
    assert len(fig.axes[0].lines) == 200 + 1
    assert fig.legends[0].get_texts()[0].get_text() == (
        "win vs random, one line per member (200 of 250, evenly chosen)")
    assert fig._suptitle.get_text() == "population of 250 members"


def test_a_population_with_one_evaluation_draws_points_and_says_how_to_get_curves(tmp_path, monkeypatch):
    """It drew a lone dot under a legend that promised lines, with no hint (issue 35)."""
    path = tmp_path / "population_evals.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["games", "member", "seed", *EVAL_NAMES])
        out.writerows([2048, m, m, *[0.5] * len(EVAL_NAMES)] for m in range(3))
    figures = captured_figures(monkeypatch)
    plot_population(path, tmp_path / "curves.png", "o")
    (fig,) = figures
    assert fig.legends[0].get_texts()[0].get_text() == "win vs random, one point per member (all 3)"
    assert all(line.get_marker() not in (None, "None", "") for line in fig.axes[0].lines)
    assert fig._suptitle.get_text() == ("population of 3 members\none exact evaluation (the last), "
                                        "so no curves: lower eval_every for them")


def test_a_population_with_no_evaluation_yet_still_gets_its_curves_png(tmp_path):
    path = tmp_path / "population_evals.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerow(["games", "member", "seed", *EVAL_NAMES])  # the header alone
    series = population_series(path, "both")
    assert series["members"] == 0 and series["seats"]["x"]["win"].shape == (3, 0)
    assert plot_population(path, tmp_path / "curves.png", "both").stat().st_size > 10_000


# ---------------------------------------------------------------------- publishing


@pytest.fixture(scope="module")
def population_dir(tmp_path_factory) -> tuple[Path, dict, dict]:
    """A population run folder of 3 members, with real reports: a random-init MLP (beaten),
    the minimax player (unbeatable, the best), and one stopped before any evaluation.
    Returns (folder, the parsed population.json, the best member's report)."""
    run_dir = tmp_path_factory.mktemp("population")
    # Small tensors: one thread does it in 0.1 s, where two on a busy machine took seconds.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        beaten = ev.evaluate_policy(nets.MLP())
        perfect = ev.evaluate_actions(solve().optimal.to(torch.int8).argmax(-1))
    finally:
        torch.set_num_threads(threads)
    members = [pop.Member(0, 7, {"algo.lr": 0.5}), pop.Member(1, 8, {"algo.lr": 2.0}),
               pop.Member(2, 9, {"algo.lr": 2.0, "reward.tie": 0.3})]
    rows = [results.member_row(members[0], 2048, beaten),
            results.member_row(members[1], 2048, perfect, first_unbeatable_games=1024),
            results.member_row(members[2], 512, None, stopped="non-finite loss")]
    results.write_population_json(run_dir / "population.json", rows, results.aggregate(rows, "o"))
    results.write_population_csv(run_dir / "population.csv", rows, "o")
    population = json.loads((run_dir / "population.json").read_text())  # as train.py reads it
    assert population["aggregate"]["best"] == 1
    return run_dir, population, perfect




def items(entries) -> dict:
    # W&B writes some keys as a path (nested_key) rather than one string
    return {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in entries}


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_wandb_run_of_a_population_holds_the_aggregate_and_a_row_per_member(
        population_dir, tmp_path, monkeypatch):
    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc: no key
    src, population, best = population_dir
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in ("population.json", "population.csv"):
        (run_dir / name).write_bytes((src / name).read_bytes())
    cfg = make_cfg("logger=wandb")
    value = publish(cfg, make_loggers(cfg, run_dir), run_dir, best, population=population)
    assert value == objective(best, "o")  # the objective is the report's, as for one agent

    records = wandb_records(run_dir)
    summary: dict = {}
    for r in of_kind(records, "summary"):
        summary.update(items(r.summary.update))
    beaten = population["members"][0]["eval"]
    assert summary["population/members"] == 3 and summary["population/stopped"] == 1
    assert summary["population/best"] == 1
    assert summary["population/unbeatable_fraction"] == pytest.approx(1 / 3)
    # Medians of the two evaluated members (the stopped one has no report): their mean.
    assert summary["population/objective_median"] == pytest.approx(
        (objective(beaten, "o") + objective(best, "o")) / 2)
    assert summary["population/eval/o_random_win_median"] == pytest.approx(
        (beaten["as_o"]["vs_random"]["win"] + best["as_o"]["vs_random"]["win"]) / 2)
    assert all(f"population/{m}_median" in summary for m in EVAL_NAMES)
    assert summary["eval"]["as_o"] == best["as_o"]  # the best member's report, whole
    assert "eval/o_random_win" not in summary  # no series was logged; nothing stands in for one

    # The table's record in the history: its fields, flattened (members/nrows, ...).
    (logged,) = [h for h in (items(r.history.item) for r in of_kind(records, "history"))
                 if "members/_type" in h]
    assert logged["members/_type"] == "table-file" and logged["members/nrows"] == 3
    assert logged["members/ncols"] == 8 + len(EVAL_NAMES)
    (path,) = run_dir.glob("wandb/offline-run-*/files/media/table/members_*.table.json")
    table = json.loads(path.read_text())
    cols = table["columns"]
    assert cols[:9] == ["index", "seed", "algo.lr", "reward.tie", "games", "stopped", "unbeatable",
                        "first_unbeatable_games", "eval/x_random_win"]
    rows = [dict(zip(cols, row, strict=True)) for row in table["data"]]
    assert [(r["index"], r["seed"], r["algo.lr"], r["reward.tie"]) for r in rows] == [
        (0, 7, 0.5, None), (1, 8, 2.0, None), (2, 9, 2.0, 0.3)]
    assert [(r["unbeatable"], r["first_unbeatable_games"], r["stopped"]) for r in rows] == [
        (False, None, ""), (True, 1024, ""), (None, None, "non-finite loss")]
    assert rows[0]["eval/o_random_loss"] == pytest.approx(beaten["as_o"]["vs_random"]["loss"])
    assert rows[1]["eval/o_worst_case"] == 0.0 and rows[2]["eval/o_worst_case"] is None

    # W&B stores the table itself as a run_table artifact; the files are in the model one.
    (art,) = [a for a in of_kind(records, "artifact") if a.artifact.type == "model"]
    assert sorted(m.path for m in art.artifact.manifest.contents) == ["population.csv", "population.json"]


def test_tensorboard_run_of_a_population_holds_the_aggregate_and_the_members_as_text(population_dir):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, population, best = population_dir
    cfg = make_cfg("logger=tensorboard")
    publish(cfg, make_loggers(cfg, run_dir), run_dir, best, population=population)
    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    assert acc.Scalars("final/population_unbeatable_fraction")[0].value == pytest.approx(1 / 3)
    assert acc.Scalars("final/population_members")[0].value == 3
    assert acc.Scalars("final/population_o_random_win_median")[0].value == pytest.approx(
        population["aggregate"]["metrics"]["eval/o_random_win"]["median"], abs=1e-6)
    assert acc.Scalars("final/objective")[0].value == pytest.approx(objective(best, "o"), abs=1e-6)
    (event,) = acc.Tensors("population/text_summary")
    text = event.tensor_proto.string_val[0].decode()
    lines = text.splitlines()
    assert lines[0].startswith("| index | seed | algo.lr | reward.tie | games | stopped | unbeatable |")
    assert lines[3].startswith("| 1 | 8 | 2 |  | 2048 |  | True | 1024 | ")
    assert lines[4].startswith("| 2 | 9 | 2 | 0.3 | 512 | non-finite loss |  |  | ")
    assert len(lines) == 2 + 3


def test_tensorboard_run_of_one_agent_gets_no_population_text_nor_figures(population_dir, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, _, best = population_dir
    cfg = make_cfg("logger=tensorboard")
    publish(cfg, make_loggers(cfg, tmp_path), tmp_path, best)  # population=None: one agent
    acc = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    assert "final/objective" in acc.Tags()["scalars"]
    assert not [t for t in acc.Tags()["scalars"] + acc.Tags()["tensors"] if "population" in t]


def test_members_text_stops_at_1024_rows_and_says_how_many_more():
    rows = [[i, 0.123456789] for i in range(1030)]
    lines = markdown_table(["index", "value"], rows).splitlines()
    assert lines[2] == "| 0 | 0.123457 |" and lines[2 + 1023] == "| 1023 | 0.123457 |"
    assert lines[-1] == "6 more members not shown (population.csv has them all)"
