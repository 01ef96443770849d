"""One line per population run folder: how many members are unbeatable from both seats, their
exact win rates vs random (median, min) and the games until the first unbeatable evaluation.

    python experiments/dqn/summary.py RUN_DIR [RUN_DIR ...]
"""

import json
import statistics
import sys
from pathlib import Path

CEILING = {"as_x": 0.9948, "as_o": 0.9164}


def line(run: Path) -> str:
    members = json.loads((run / "population.json").read_text())["members"]
    evals = [m["eval"] for m in members]
    safe = sum(all(e[s]["worst_case"] != "loss" for s in CEILING) for e in evals)
    as_x, as_o = (sum(e[s]["worst_case"] != "loss" for e in evals) for s in CEILING)
    at_ceiling = sum(all(e[s]["vs_random"]["win"] >= CEILING[s] - 0.005 for s in CEILING) for e in evals)
    first = [m["first_unbeatable_games"] for m in members]
    reached = sorted(g for g in first if g is not None)
    wins = {s: [e[s]["vs_random"]["win"] for e in evals] for s in CEILING}
    return (f"{run.name}: unbeatable {safe}/{len(evals)} (as X {as_x}, as O {as_o}), "
            f"both wins within 0.005 of the ceilings "
            f"{at_ceiling}/{len(evals)}; X win median {statistics.median(wins['as_x']):.4f} "
            f"min {min(wins['as_x']):.4f}; O win median {statistics.median(wins['as_o']):.4f} "
            f"min {min(wins['as_o']):.4f}; first unbeatable (games) median "
            f"{statistics.median(reached) if reached else None} of {len(reached)} reached")


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(line(Path(path)))
