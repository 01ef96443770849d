"""``report.png``'s layout, measured on the drawn figure: the legend clear of the title and the
plots, and a sweep with one exact evaluation per run drawn so that it can be read."""

import csv
import json
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pytest
import yaml

from ttt_research import report

matplotlib.use("Agg")


def fake_run(path: Path, seed: int, net: str, side: str, evals: list[tuple[int, float, float]]) -> None:
    """A run folder as training leaves it, with exact evaluations (games, win, loss) per seat."""
    (path / ".hydra").mkdir(parents=True)
    win, loss = evals[-1][1:]
    res = {"vs_random": {"win": win, "loss": loss, "tie": 1 - win - loss},
           "vs_perfect": {"win": 0.0, "loss": 0.0, "tie": 1.0}, "worst_case": "loss" if loss else "draw"}
    (path / "eval.json").write_text(json.dumps({"as_x": res, "as_o": res, "optimal_move_rate": 0.9,
                                                "decision_points": 500}))
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={seed}", f"net={net}"]))
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"seed": seed, "seat": {"side": side}, "optimized_metric": "score"}))
    seats = ("x", "o") if side == "both" else (side,)
    cols = [f"eval/{s}_{o}" for s in seats for o in ("random_win", "random_loss", "worst_case")]
    with open(path / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "train/games", "rollout/win_rate", *cols])
        for i, (games, win, loss) in enumerate(evals):
            w.writerow([2 * i, games - 512, 0.5, *[""] * len(cols)])  # updates between evaluations
            w.writerow([2 * i + 1, games, 0.5, *[win, loss, -1.0 if loss else 0.0] * len(seats)])


def drawn_report(tmp_path, monkeypatch, side: str, evals: list[tuple[int, float, float]], nets: int):
    """report.report over ``nets`` groups of 2 seeds; returns the figures it drew (not closed):
    the learning curves, the performance profiles and the share of seeds unbeatable."""
    for n in range(nets):
        for seed in (0, 1):
            fake_run(tmp_path / f"{n}{seed}", seed, f"mlp{25 + n}_with_a_long_name_{n}", side,
                     [(g, w - 0.01 * seed, lo) for g, w, lo in evals])
    kept = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    report.report(tmp_path, reps=200)
    for fig in kept:
        fig.canvas.draw()  # the constrained layout is placed at draw time
    return kept


def overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


CURVE = [(g, 0.5 + 0.03 * i, 0.1 / (i + 1)) for i, g in enumerate(range(10_000, 160_000, 10_000))]


@pytest.mark.parametrize("side,nets", [("o", 1), ("o", 4), ("both", 7)])
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_the_legend_covers_neither_the_title_nor_a_plot(tmp_path, monkeypatch, side, nets):
    curves, profiles, safe = drawn_report(tmp_path, monkeypatch, side, CURVE, nets)
    for fig in (curves, profiles, safe):
        r = fig.canvas.get_renderer()
        (legend,) = fig.legends
        box, title = legend.get_window_extent(r), fig._suptitle.get_window_extent(r)
        page = fig.bbox
        assert not overlap(box, title)
        assert all(not overlap(box, ax.get_tightbbox(r)) for ax in fig.axes if ax.get_visible())
        for b in (box, title):  # nothing cut off at the edges
            assert page.x0 <= b.x0 and b.x1 <= page.x1 + 1 and page.y0 <= b.y0 and b.y1 <= page.y1 + 1
        assert len(legend.get_texts()) == nets
    # One profile per metric: win and loss per trained seat, and the optimal-move rate.
    assert len([ax for ax in profiles.axes if ax.get_visible()]) == (5 if side == "both" else 3)


def test_one_evaluation_per_run_is_drawn_in_context_not_as_a_lone_dot(tmp_path, monkeypatch):
    fig, *_ = drawn_report(tmp_path, monkeypatch, "o", [(4096, 0.7556, 0.149)], 1)
    win_ax, loss_ax = fig.axes
    for ax in (win_ax, loss_ax):
        assert ax.get_xlim()[0] <= 0 < 4096 < ax.get_xlim()[1]  # training from 0 games on
        assert any(line.get_marker() == "o" and line.get_markersize() >= 6 for line in ax.get_lines())
    assert win_ax.get_ylim()[0] <= 0 and win_ax.get_ylim()[1] >= 1  # 0.7556 read against 0..1
    assert [t.get_text() for t in win_ax.texts] == ["0.7506"]  # the mean of the seeds, written out
    assert "one exact evaluation per run" in " ".join(fig._suptitle.get_text().split())
