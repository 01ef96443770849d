"""curves.png's helper process (``analysis/plotter.py``): it draws the same bytes as the run's
own process, and anything wrong with it falls back to drawing in the run's process."""
from __future__ import annotations

import csv
import signal
import time

import pytest

from ttt_research.analysis.curves import curves_png, population_png
from ttt_research.analysis.plotter import Plotter


@pytest.fixture()
def metrics(tmp_path):
    path = tmp_path / "metrics.csv"
    cols = ["step", "train/games", "rollout/win_rate", "rollout/loss_rate", "rollout/tie_rate",
            "eval/o_random_win", "eval/o_random_loss", "eval/o_random_tie", "eval/o_perfect_loss",
            "eval/o_worst_case", "eval/trained_o_best_response"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for k in range(1, 9):
            loss = 0.3 / k if k < 7 else 0.0
            w.writerow([k, 16384 * k, 0.5 + k / 20, 0.3 / k, 0.2 - 0.01 * k, 0.6 + k / 30, loss,
                        0.4 - k / 30 - loss, 0.5 / k, -1 if loss else 0, 0.9 / k])
    return path


@pytest.fixture()
def plotter():
    p = Plotter.start()
    assert p is not None
    yield p
    p.close()


def test_the_helper_draws_the_bytes_the_run_would_draw(metrics, plotter, tmp_path):
    here = curves_png(metrics, "o", "reinforce [128, 128] signed9, seat o, seed 1")
    drawing = plotter.request("curves", metrics, "o", "reinforce [128, 128] signed9, seat o, seed 1")
    got = plotter.answer()
    assert got is not None, "the helper did not answer"
    assert got == here and got.startswith(b"\x89PNG")
    # a second request on the same helper, a population's figure this time
    evals = tmp_path / "population_evals.csv"
    evals.write_text("games,member,seed,eval/o_random_win,eval/o_random_loss,eval/o_worst_case\n"
                     "100,0,1,0.8,0.01,-1\n100,1,2,0.85,0.0,0\n200,0,1,0.9,0.0,0\n200,1,2,0.88,0.0,0\n")
    assert plotter.request("population", evals, "o", "pop").png() == population_png(evals, "o", "pop")
    del drawing


def test_a_dead_helper_costs_only_time_the_run_draws_it_itself(metrics, plotter):
    plotter.process.kill()
    plotter.process.wait()
    assert plotter.request("curves", metrics, "o", "t").png() == curves_png(metrics, "o", "t")


def test_an_error_in_the_helper_is_met_again_in_the_run_with_its_own_message(tmp_path, plotter):
    bad = tmp_path / "metrics.csv"
    bad.write_text("train/games,eval/o_random_win\n100,abc\n")
    drawing = plotter.request("curves", bad, "o", "t")
    with pytest.raises(ValueError, match="line 2: eval/o_random_win is not a number"):
        drawing.png()
    # and the helper still answers the next request
    good = tmp_path / "good.csv"
    good.write_text("train/games,eval/o_random_win\n100,0.5\n")
    plotter.request("curves", good, "o", "t")
    assert plotter.answer() == curves_png(good, "o", "t")


def test_the_helper_ignores_ctrl_c_and_ends_when_its_input_closes(metrics, plotter):
    time.sleep(0.5)  # past its imports, where the handler is set
    plotter.process.send_signal(signal.SIGINT)  # the terminal sends Ctrl-C to the whole group
    assert plotter.request("curves", metrics, "o", "t").png() == curves_png(metrics, "o", "t")
    assert plotter.process.poll() is None
    plotter.close()
    assert plotter.process.wait(timeout=10) == 0
