#!/usr/bin/env python3
"""Time and memory of the exact evaluation of one agent on any board (issue 59, item 4).

    TTT_RESEARCH_CACHE=... PYTHONPATH=src python experiments/any_board/evaluate_one_agent.py 4,4,4 [HIDDEN]

The agent: an MLP of the board's cells -> HIDDEN -> HIDDEN -> cells (ReLU; default 128, the
shape of ``net=mlp128``), its weights drawn from seed 0, its logits masked by the evaluator.
What ``exploit.evaluate_agent`` does for a run's eval.json, phase by phase: the forward over
every decision position (``exact.decision_logits``), the check and the greedy report, then the
policy as trained (softmax at temperature 1, as PPO acts). The tables, the solution and the
tree are loaded first and timed apart (the positions come from the cache). Peak memory: the
process's high-water mark (VmHWM) over the whole run, and over the evaluation alone (the mark
is reset once the tables are in: /proc/self/clear_refs).
"""

import sys
import time
from pathlib import Path

import torch

from ttt_research.env.board import Game
from ttt_research.env.solver import solve
from ttt_research.evaluation import exact, exploit


def hwm_gb(key: str = "VmHWM") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 2**20
    return float("nan")


def main() -> None:
    m, n, k = (int(x) for x in sys.argv[1].split(","))
    hidden = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    g = Game(m, n, k)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(g.cells, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
              torch.nn.ReLU(), torch.nn.Linear(hidden, g.cells)]
    net = torch.nn.Sequential(*layers)
    t0, c0 = time.perf_counter(), time.process_time()
    g.tables(), solve(g=g), exact.tree("cpu", g)
    print(f"tables + solution + tree: {time.perf_counter() - t0:.2f} s wall, peak {hwm_gb():.2f} GB, "
          f"then resident {hwm_gb('VmRSS'):.2f} GB", flush=True)
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM: the evaluation's own peak from here
    phases = {}
    t = time.perf_counter()
    logits = exact.decision_logits(net, game=g)
    phases["forward"] = time.perf_counter() - t
    print(f"after the forward: peak {hwm_gb():.2f} GB", flush=True)
    t = time.perf_counter()
    exact.check_logits(logits, game=g)
    report = exact.evaluate_actions(exact._greedy(logits, g)[0], g)
    phases["check + greedy report"] = time.perf_counter() - t
    print(f"after the greedy report: peak {hwm_gb():.2f} GB", flush=True)
    t = time.perf_counter()
    trained = exploit.trained_blocks(logits[None], exploit.Acting(1.0), game=g)[0]
    phases["as trained (T=1)"] = time.perf_counter() - t
    total = sum(phases.values())
    cpu = time.process_time() - c0
    print(" | ".join(f"{k} {v:.2f} s" for k, v in phases.items()) + f" | total {total:.2f} s wall")
    print(f"evaluation peak RSS {hwm_gb():.2f} GB (tables included); process CPU {cpu:.1f} s")
    print({k: report[k] for k in ("optimal_move_rate", "decision_points", "optimal_move_rate_all")},
          "nashconv as trained", round(trained["nashconv"], 6))


if __name__ == "__main__":
    main()
