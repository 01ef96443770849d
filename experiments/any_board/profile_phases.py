#!/usr/bin/env python3
"""Where the exact evaluation of one agent on a board spends its time, phase by phase.

    TTT_RESEARCH_CACHE=... PYTHONPATH=src python experiments/any_board/profile_phases.py 4,4,4 [HIDDEN...]

The agent: ``MLP(hidden=HIDDEN, encoding="planes18")`` (default [100], ``net=mlp100``), seeded,
not trained. Loading (positions, tables, solution, tree) is timed first; then
``exploit.evaluate_agent`` runs once with its inner functions wrapped to add up their wall
time. Prints one JSON line: seconds per phase, the evaluation's total, its peak RSS (VmHWM,
reset after loading) and the figures (to compare before/after).
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
    hidden = [int(h) for h in sys.argv[2:]] or [100]
    g = Game(m, n, k)
    load = {}
    t = time.perf_counter(); g.positions(); load["positions"] = time.perf_counter() - t
    t = time.perf_counter(); g.tables(); load["tables"] = time.perf_counter() - t
    t = time.perf_counter(); solve(g=g); load["solve"] = time.perf_counter() - t
    t = time.perf_counter(); exact.tree("cpu", g); load["tree"] = time.perf_counter() - t
    t = time.perf_counter(); exact.decision_codes(g); load["decision_codes"] = time.perf_counter() - t
    load_peak = hwm_gb()
    torch.manual_seed(0)
    net = MLP(hidden=hidden, encoding="planes18", cells=g.cells)
    Path("/proc/self/clear_refs").write_text("5")
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
    phases = {"forward": SPENT["forward+check"] - SPENT["check"], **SPENT}
    del phases["forward+check"]
    print(json.dumps({"load": load, "load_peak_gb": load_peak, "phases": phases, "eval_s": total,
                      "eval_peak_gb": hwm_gb(), "report": report}))


if __name__ == "__main__":
    main()
