"""What a run tells its watcher off a terminal, and what run.json records of the host."""

import csv
import json
import re
import subprocess
import sys

import pytest

from ttt_research.evaluation.text import small
from ttt_research.train.console import opening_line

TINY = ["budget.games=5000", "algo.games_per_update=512", "eval_every=4"]


def test_the_opening_line_says_when_the_budget_is_rounded_up():
    assert opening_line("ppo", 100_000, 49, 2048) == (
        "training ppo: 100,352 games in 49 updates of 2,048 (budget.games=100,000 rounded up to "
        "whole updates)")
    assert opening_line("ppo", 4096, 2, 2048) == "training ppo: 4,096 games in 2 updates of 2,048"


@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_a_piped_run_prints_a_line_per_exact_evaluation_and_records_its_host(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ttt_research", *TINY, f"hydra.run.dir={tmp_path}"],
                         capture_output=True, text=True, timeout=300)  # stdout is a pipe: no TTY
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == ("training reinforce [128, 128] signed9, seat o vs random, seed 0: 5,120 games in "
                        "10 updates of 512 (budget.games=5,000 rounded up to whole updates)")
    progress = [ln for ln in lines if ln.startswith("[")]
    # Exact evaluations after updates 4, 8 and the last (10); each line shows what eval/* logged.
    with open(tmp_path / "metrics.csv", newline="") as f:
        evals = [r for r in csv.DictReader(f) if r.get("eval/o_random_win")]
    assert len(progress) == len(evals) == 3
    for line, row, update in zip(progress, evals, (4, 8, 10), strict=True):
        m = re.fullmatch(r"\[ ?(\d+)/10\] +([\d,]+) games +(\d+)%  [\d.,]+k games/s  exact vs random: "
                         r"O win (\S+) loss (\S+)  as trained: best response vs O (\S+)  ETA \S+", line)
        assert m, line
        assert int(m[1]) == update and int(m[2].replace(",", "")) == update * 512
        assert float(m[4]) == round(float(row["eval/o_random_win"]), 4)
        assert float(m[5]) == round(float(row["eval/o_random_loss"]), 4)
        assert float(m[6]) == float(small(float(row["eval/trained_o_best_response"])))  # as trained
    assert progress[-1].split()[-1] == "0s" and " 100%" in progress[-1]

    run = json.loads((tmp_path / "run.json").read_text())
    assert run["seed"] == 0 and run["host"]["cpu"] and run["host"]["torch_threads"] >= 1
    assert run["host"]["cpu_capability"] in ("DEFAULT", "VSX", "Z VECTOR", "NEON", "SVE256", "AVX2",
                                             "AVX512")
    assert [s["resumed"] for s in run["sessions"]] == [False]


@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_progress_false_prints_no_progress_lines(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ttt_research", *TINY, "progress=false",
                          f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert not [ln for ln in out.stdout.splitlines() if ln.startswith("[")]


@pytest.mark.slow  # a whole command under a pseudo-terminal
def test_on_a_terminal_progress_counts_games_and_shows_the_exact_figures(tmp_path):
    """Lightning's bar said "Epoch 0/0 ... 77/391 4.65it/s" with no win rates (issue 35)."""
    import os
    import pty

    main, child = pty.openpty()
    env = dict(os.environ, COLUMNS="110")
    proc = subprocess.Popen([sys.executable, "-m", "ttt_research", *TINY, f"hydra.run.dir={tmp_path}"],
                            stdout=child, stderr=child, env=env)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=300) == 0
    screen = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", b"".join(chunks).decode(errors="replace"))
    assert "5,120/5,120 games 100%" in screen and "games/s ETA" in screen
    assert re.search(r"exact vs random: O win \d\.\d{4} loss \d\.\d{4}  as trained: best response vs O",
                     screen)
    assert "Epoch" not in screen and "it/s" not in screen


def test_the_progress_bar_counts_games_with_separators_as_the_lines_do():
    import io

    from rich.console import Console
    from rich.progress import Progress

    from ttt_research.train.console import bar_columns

    out = io.StringIO()
    progress = Progress(*bar_columns(), console=Console(file=out, width=120, color_system=None))
    progress.add_task("training", total=4_014_080, completed=98_304, rate="516.8k games/s")
    progress.console.print(progress.make_tasks_table(progress.tasks))
    assert "98,304/4,014,080 games   2% 516.8k games/s ETA" in out.getvalue()


def test_the_speed_and_time_left_count_the_updates_not_the_start_or_the_evaluations(monkeypatch):
    # A resumed 4,4,4 run's first line said 0.5k games/s and 1h50m left: its clock held the
    # tables' load (the session's first update) and an exact evaluation. Here: 20 s to load,
    # then 100 updates of 256 games in 10 s, an evaluation of 30 s after update 100 of 400.
    from types import SimpleNamespace

    import torch

    from ttt_research.train import console
    from ttt_research.train.callbacks import ExactEvaluation

    evaluation = ExactEvaluation(every=100)
    evaluation.took = [(1030.0, 30.0)]  # began 30 s after the fit's start, took 30 s
    watcher = SimpleNamespace(evaluation=evaluation, seat="o", seats=("o",),
                              _start=(1000.0, 0), _first=(1020.0, 256))
    module = SimpleNamespace(games_played=25_600, games_per_update=256, budget_processes=1,
                             update_index=99, active_all=torch.ones(1))
    trainer = SimpleNamespace(num_training_batches=400)
    monkeypatch.setattr(console.time, "perf_counter", lambda: 1070.0)  # 50 s since the load, 30 evaluating
    st = console.status(watcher, trainer, module)
    assert st.rate == pytest.approx((25_600 - 256) / 20.0)  # the updates' 20 s, not 70 s
    # 300 updates left at that speed (60.6 s) and three evaluations still due (200, 300, 400) at 30 s
    assert st.eta == console._duration(300 * 256 / st.rate + 3 * 30.0)
    # Without a first update to start from (a line at the very first update), the fit's start.
    watcher._first = (1070.0, 25_600)
    assert console.status(watcher, trainer, module).rate == pytest.approx(25_600 / 40.0)
