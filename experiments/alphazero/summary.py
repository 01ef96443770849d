"""One line per alphazero population folder: how many members are unbeatable from both
seats, by the raw network and by the test-time search, and their optimal-move rates; with
``--table``, the study's Markdown row per folder instead (Wilson 95% intervals, games and
wall seconds per agent to the first unbeatable evaluation).

    python experiments/alphazero/summary.py runs/az/A runs/az/B
    python experiments/alphazero/summary.py --table runs/az-study/2 runs/az-study/4
"""

import csv
import json
import statistics
import sys
from pathlib import Path

from omegaconf import OmegaConf

from ttt_research.evaluation.stats import wilson


def safe(report: dict) -> bool:
    return report["as_x"]["worst_case"] != "loss" and report["as_o"]["worst_case"] != "loss"


def on_target(report: dict) -> bool:
    """The issue's quality bar: unbeatable from both seats, the minimax move at >= 99% of
    its decision points."""
    return safe(report) and report["optimal_move_rate"] >= 0.99


def members(folder: Path) -> list[dict]:
    return [m for m in json.loads((folder / "population.json").read_text())["members"] if m["eval"]]


def line(folder: Path) -> str:
    rows = [m["eval"] for m in members(folder)]
    raw = sum(safe(r) for r in rows)
    searched = sum(safe(r["search"]) for r in rows)
    rate = statistics.median(r["optimal_move_rate"] for r in rows)
    rate_s = statistics.median(r["search"]["optimal_move_rate"] for r in rows)
    k = rows[0]["search"]["simulations"]
    target = sum(on_target(r) for r in rows)
    return (f"{folder.name}: {len(rows)} seeds; unbeatable raw {raw}, search ({k} sims) {searched}; "
            f"optimal-move rate median raw {rate:.4f}, search {rate_s:.4f}; "
            f"unbeatable with rate >= 0.99 (the target) {target}")


def share(k: int, n: int) -> str:
    low, high = wilson(k, n)
    return f"{k}/{n} [{low:.2f}, {high:.2f}]"


def spread(values: list[float], fmt: str) -> str:
    """median [IQR] of what got there."""
    if not values:
        return "-"
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return f"{format(q[1], fmt)} [{format(q[0], fmt)}, {format(q[2], fmt)}]"


def table_row(folder: Path) -> str:
    ms = members(folder)
    n = len(ms)
    rows = [m["eval"] for m in ms]
    # The training clock at each evaluation (population_evals.csv), per agent.
    with open(folder / "population_evals.csv", newline="") as f:
        clock = {int(r["games"]): float(r["elapsed_s"]) for r in csv.DictReader(f) if r["elapsed_s"]}
    first_raw = [m["first_unbeatable_games"] for m in ms if m["first_unbeatable_games"] is not None]
    first_s = [r["search"].get("first_unbeatable_games") for r in rows]
    first_s = [g for g in first_s if g is not None]
    seconds = lambda games: [clock[g] / n for g in games if g in clock]  # noqa: E731
    sims = OmegaConf.load(folder / ".hydra" / "config.yaml").algo.simulations
    return (f"| {folder.name} | {sims} | {share(sum(on_target(r) for r in rows), n)} | "
            f"{share(sum(safe(r) for r in rows), n)} | {share(sum(safe(r['search']) for r in rows), n)} | "
            f"{statistics.median(r['optimal_move_rate'] for r in rows):.4f} / "
            f"{statistics.median(r['search']['optimal_move_rate'] for r in rows):.4f} | "
            f"{spread(first_raw, ',.0f')}, never {n - len(first_raw)} | "
            f"{spread(first_s, ',.0f')}, never {n - len(first_s)} | "
            f"{spread(seconds(first_raw), '.2f')} | {spread(seconds(first_s), '.2f')} | "
            f"{max(clock.values()):,.0f} |")


HEADER = ("| run | simulations | raw on target (unbeatable, rate >= 0.99) | raw unbeatable | "
          "search (4 sims) unbeatable | optimal-move rate, median: raw / search | "
          "games to first unbeatable, raw: median [IQR] | the same, search | "
          "wall s per agent to first unbeatable, raw | the same, search | training wall s (population) |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--table":
        print(HEADER)
        for path in args[1:]:
            print(table_row(Path(path)))
    else:
        for path in args:
            print(line(Path(path)))
