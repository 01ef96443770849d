"""The bench per board: training speed and one exact evaluation of the trained agent, on
tic-tac-toe and bigger m,n,k boards, in one run (issue 61's item 6).

Each figure is a fresh process (``python -c``) that trains one algorithm's default config on
one board (``game=...``) for a fixed budget without a run folder (``bench/fitting.fit``, one
torch thread unless ``threads``), then evaluates the trained agent once as a run's
``eval.json`` does (``train/callbacks.exact_reports``), so a board's tables are loaded once
per process and never counted in the training time:

* ``games_per_s``: training games over the training loop's wall time (updates included);
  PPO also ``steps_per_s`` (the learner's moves: its own figure in the 3x3 bench);
* ``eval_s``: that one exact evaluation (greedy report, NashConv, the policy as trained) of
  the trained REINFORCE agent, its forward included; ``peak_gb`` the process's peak resident
  size (tables, training and evaluation).

Medians of ``repeats`` processes per (board, algorithm). The budgets are sized so that a
process trains for a few seconds on each board (``BUDGETS``); a bigger board's games are
longer and its tables larger, so fewer games.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

# The child: train ALGO on BOARD for GAMES, then one exact evaluation; one JSON line on stdout.
CHILD = """
import json, sys, time
import torch
from ttt_research.bench.fitting import fit
from ttt_research.train.callbacks import exact_reports
algo, board, games, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m, n, k = board.split(",")
game = ["game=ttt"] if board == "3,3,3" else ["game=mnk", f"game.m={m}", f"game.n={n}", f"game.k={k}"]
overrides = [f"algo={algo}", *game, f"budget.games={games}", "seed=0", "trainer=cpu"]
module, clock = fit(overrides, threads=threads)
out = {"games": module.games_played, "train_s": clock.train_s}
out["games_per_s"] = module.games_played / clock.train_s
if algo == "ppo":
    out["steps_per_s"] = module.env_steps / clock.train_s
t0 = time.perf_counter(); exact_reports(module); out["eval_s"] = time.perf_counter() - t0
from ttt_research.bench.peak import peak_gb
out["peak_gb"] = peak_gb()
print(json.dumps(out))
"""

ALGOS = ("reinforce", "ppo")
BOARDS = {False: ("3,3,3", "3,4,3", "4,4,4"), True: ("3,3,3", "3,4,3")}  # by quick
# Training games per (board, algorithm): a few seconds of training each on the 2-core host.
BUDGETS = {"3,3,3": {"reinforce": 262_144, "ppo": 65_536},
           "3,4,3": {"reinforce": 131_072, "ppo": 32_768},
           "4,4,4": {"reinforce": 65_536, "ppo": 16_384}}


def _child(algo: str, board: str, games: int, threads: int) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, algo, board, str(games), str(threads)],
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"training {algo} on {board} failed: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def bench_board_training(quick: bool, repeats: int, threads: int | None, log=print) -> dict:
    """``board_training``: per board (4,4,4 unless ``quick``), per algorithm, the medians of
    ``repeats`` fresh processes; see the module."""
    res: dict = {}
    for board in BOARDS[quick]:
        res[board] = {}
        for algo in ALGOS:
            runs = [_child(algo, board, BUDGETS[board][algo], threads or 1) for _ in range(repeats)]
            figures = {key: statistics.median(r[key] for r in runs) for key in runs[0] if key != "games"}
            res[board][algo] = {**figures, "games": runs[0]["games"], "per_run": runs}
            log(f"{board} {algo}: {figures['games_per_s']:,.0f} games/s, one exact evaluation "
                f"{figures['eval_s']:.2f} s, peak {figures['peak_gb']:.2f} GB")
    return res


def board_training_lines(res: dict) -> list[str]:
    """The table's lines of ``board_training`` (none when it did not run)."""
    rows = []
    for board, algos in res.items():
        rf, ppo = algos["reinforce"], algos["ppo"]
        rows.append(f"{'board ' + board + ' training':<24} REINFORCE {rf['games_per_s']:,.0f} games/s, "
                    f"PPO {ppo['games_per_s']:,.0f} games/s ({ppo['steps_per_s']:,.0f} steps/s); exact "
                    f"evaluation of the trained REINFORCE agent {rf['eval_s']:.2f} s, "
                    f"peak {rf['peak_gb']:.2f} GB")
    return rows
