"""One line per alphazero population folder: how many members are unbeatable from both
seats, by the raw network and by the test-time search, and their optimal-move rates.

    python experiments/alphazero/summary.py runs/az/A runs/az/B
"""

import json
import statistics
import sys
from pathlib import Path


def safe(report: dict) -> bool:
    return report["as_x"]["worst_case"] != "loss" and report["as_o"]["worst_case"] != "loss"


def line(folder: Path) -> str:
    members = [m["eval"] for m in json.loads((folder / "population.json").read_text())["members"] if m["eval"]]
    raw = sum(safe(r) for r in members)
    searched = sum(safe(r["search"]) for r in members)
    rate = statistics.median(r["optimal_move_rate"] for r in members)
    rate_s = statistics.median(r["search"]["optimal_move_rate"] for r in members)
    k = members[0]["search"]["simulations"]
    return (f"{folder.name}: {len(members)} seeds; unbeatable raw {raw}, search ({k} sims) {searched}; "
            f"optimal-move rate median raw {rate:.4f}, search {rate_s:.4f}")


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(line(Path(path)))
