#!/usr/bin/env python3
"""Where the exact evaluation of one agent on a board spends its time, phase by phase.

    TTT_RESEARCH_CACHE=... PYTHONPATH=src python experiments/any_board/profile_phases.py 4,4,4 [ENCODING] [HIDDEN...]

The agent: ``MLP(hidden=HIDDEN, encoding=ENCODING)`` (default planes18 [100]: ``net=mlp100``;
``signed9 128 128`` is ``net=mlp128``), seeded,
not trained. Loading (positions, tables, solution, tree) is timed first; then
``exploit.evaluate_agent`` runs once with its inner functions wrapped to add up their wall
time. Prints one JSON line: seconds per phase, the evaluation's total, its peak RSS (VmHWM,
reset after loading) and the figures (to compare before/after). Torch's threads: as set by
``OMP_NUM_THREADS`` (the bench's default: 1).
"""

import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from ttt_research.env.board import Game
from ttt_research.env.solver import solve
from ttt_research.evaluation import exact, exploit
from ttt_research.models.nets import MLP


def hwm_gb(key: str = "VmHWM") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 2**20
    return float("nan")


SPENT: dict[str, float] = defaultdict(float)


def timed(module, name: str, label: str) -> None:
    fn = getattr(module, name)

    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            SPENT[label] += time.perf_counter() - t

    setattr(module, name, wrapper)


def main() -> None:
    m, n, k = (int(x) for x in sys.argv[1].split(","))
    args = sys.argv[2:]
    encoding = args.pop(0) if args and not args[0].isdigit() else "planes18"
    hidden = [int(h) for h in args] or [100]
    threads = torch.get_num_threads()
    g = Game(m, n, k)
    load = {}
    t = time.perf_counter(); g.positions(); load["positions"] = time.perf_counter() - t
    t = time.perf_counter(); g.tables(); load["tables"] = time.perf_counter() - t
    t = time.perf_counter(); solve(g=g); load["solve"] = time.perf_counter() - t
    t = time.perf_counter(); exact.tree("cpu", g); load["tree"] = time.perf_counter() - t
    t = time.perf_counter(); exact.decision_codes(g); load["decision_codes"] = time.perf_counter() - t
    load_peak = hwm_gb()
    torch.manual_seed(0)
    net = MLP(hidden=hidden, encoding=encoding, cells=g.cells)
    Path("/proc/self/clear_refs").write_text("5")
    if hasattr(exact, "checked_greedy"):  # this branch: one masked pass checks and picks
        timed(exploit, "decision_logits", "forward")
        timed(exploit, "checked_greedy", "check + greedy")
        if hasattr(exploit, "window") and hasattr(exploit.window, "at_empty_cells"):  # kept at the empty cells
            timed(exploit.window, "at_empty_cells", "logits at empty cells")
    else:  # before: the check, then the greedy moves
        timed(exploit, "check_policy", "forward+check")
        timed(exact, "check_logits", "check")
        timed(exploit, "_greedy", "greedy")
    timed(exact, "_reach", "reach")
    timed(exact, "_outcomes", "greedy outcomes")
    timed(exact, "_worst_case", "worst case")
    timed(exploit, "evaluate_actions", "greedy report")
    timed(exploit, "trained_blocks", "as trained")
    t = time.perf_counter()
    report = exploit.evaluate_agent(net, exploit.Acting(1.0), game=g)
    total = time.perf_counter() - t
    phases = dict(SPENT)
    if "forward+check" in phases:
        phases["forward"] = phases.pop("forward+check") - phases["check"]
        phases["check + greedy"] = phases.pop("check") + phases.pop("greedy")
    print(json.dumps({"threads": threads, "load": load, "load_peak_gb": load_peak, "phases": phases, "eval_s": total,
                      "eval_peak_gb": hwm_gb(), "report": report}))


if __name__ == "__main__":
    main()
