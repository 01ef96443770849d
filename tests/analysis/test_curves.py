"""A run's ``curves.png``: its lower legend stands under the lower panel, never over a curve.

Issue 43: inside the panel, at its upper right, the legend hid the best response's value
(orange), which starts at the top right of that panel in most runs."""

import csv

import pytest

from ttt_research.analysis.curves import curves_figure, curves_png


def metrics(path, seats):
    """A metrics.csv as training writes it: sampled rates every row, exact ones every 4th."""
    cols = ["step", "train/games", "rollout/win_rate", "rollout/loss_rate", "rollout/tie_rate"]
    for s in seats:
        cols += [f"eval/{s}_random_win", f"eval/{s}_random_loss", f"eval/{s}_random_tie",
                 f"eval/{s}_perfect_loss", f"eval/{s}_worst_case", f"eval/trained_{s}_best_response"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        for i in range(1, 41):
            row = {"step": i, "train/games": 1000 * i, "rollout/win_rate": 0.5 + i / 100,
                   "rollout/loss_rate": 0.4 - i / 100, "rollout/tie_rate": 0.1}
            if i % 4 == 0:
                for s in seats:
                    loss = max(0.0, 0.1 - i / 300)
                    row.update({f"eval/{s}_random_win": 0.9, f"eval/{s}_random_loss": loss,
                                f"eval/{s}_random_tie": 0.1 - loss, f"eval/{s}_perfect_loss": loss,
                                f"eval/{s}_worst_case": -1.0 if loss else 0.0,
                                f"eval/trained_{s}_best_response": 1.0 - i / 50})
            w.writerow(row)
    return path


@pytest.mark.parametrize("seat,seats", [("o", ["o"]), ("both", ["x", "o"])])
def test_the_lower_legend_is_under_the_lower_panel(tmp_path, seat, seats):
    fig = curves_figure(metrics(tmp_path / "metrics.csv", seats), seat, "a run")
    top, bottom = fig.axes
    fig.canvas.draw()  # places the x label and the legend as savefig does
    renderer = fig.canvas.get_renderer()
    legend = bottom.get_legend().get_window_extent(renderer)
    label = bottom.xaxis.label.get_window_extent(renderer)  # "training games", under the ticks
    assert legend.y1 < label.y0 < bottom.get_window_extent(renderer).y0  # below it all: covers no curve
    assert legend.y0 >= 0 and legend.x0 >= 0 and legend.x1 <= fig.bbox.x1  # and on the figure
    assert len(bottom.get_legend().get_texts()) == 4 * len(seats)
    assert curves_png(tmp_path / "metrics.csv", seat).startswith(b"\x89PNG")
