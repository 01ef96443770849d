#!/usr/bin/env python3
"""The leaderboard per board as a markdown table, from each row's population.json here.

    python experiments/boards/rows_table.py   # a table per board (experiments/boards/README.md)

Per row: the seats it trains, how many of its 30 seeds hold the game's value from each seat
(eval.json's ``holds_value``: X forces the win on a board X wins, O loses only to a perfect X;
Wilson 95%), the IQM over the seeds of the share of optimal moves over every decision point
and of the trained seats' loss rate vs random (stratified bootstrap 95%), and the row's wall time
and peak memory (walls.txt: niced, on the shared 2-core host). A row refused before training
(``refused.txt``: the run's one-line error) says so in its row. Rows are named BOARD_ALGO, BOARD
the board's m, n, k (343: 3,4,3).
"""

import json
from pathlib import Path

import numpy as np

from ttt_research.contract import JUDGED_SEATS, REPORT_KEY
from ttt_research.evaluation.stats import iqm_ci, wilson

HERE = Path(__file__).parent


def cell(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} [{lo:.2f}, {hi:.2f}]"


def spread(values) -> str:
    mid, lo, hi = iqm_ci(np.asarray(values, dtype=float))
    return f"{mid:.4f} [{lo:.4f}, {hi:.4f}]"


def main() -> None:
    lines = (HERE / "walls.txt").read_text().splitlines()
    walls = dict(line.split(": ", 1) for line in lines if ": " in line)
    rows = sorted([*HERE.glob("*/population.json"), *HERE.glob("*/refused.txt")],
                  key=lambda p: p.parent.name)
    for board in sorted({p.parent.name.split("_")[0] for p in rows}):
        print(f"\n**{','.join(board)}**\n")
        print("| row | trains | seeds | X holds the value | O holds the value | every trained seat | optimal "
              "moves over every point, IQM | trained seats' loss vs random, IQM | wall, peak memory |")
        print("|---|---|---|---|---|---|---|---|---|")
        for path in rows:
            if path.parent.name.split("_")[0] == board:
                print(refused_row(path) if path.name == "refused.txt" else row(path, walls))


def refused_row(path: Path) -> str:
    why = path.read_text().strip().removeprefix("error: ").split(";")[0]  # the need, not the advice
    return f"| {path.parent.name} | refused before training: {why} |" + " |" * 7


def row(path: Path, walls: dict) -> str:
    members = json.loads(path.read_text())["members"]
    seat = members[0].get("seat") or ("o" if "reinforce" in path.parent.name else "both")
    n = len(members)
    ev = [m["eval"] for m in members]
    holds = {s: sum(e[REPORT_KEY[s]]["holds_value"] for e in ev) for s in ("x", "o")}
    both = sum(all(e[REPORT_KEY[s]]["holds_value"] for s in JUDGED_SEATS[seat]) for e in ev)
    loss = [max(e[REPORT_KEY[s]]["vs_random"]["loss"] for s in JUDGED_SEATS[seat]) for e in ev]
    seeds = f"{members[0]['seed']}-{members[-1]['seed']}"
    return (f"| {path.parent.name} | {seat} | {seeds} | {cell(holds['x'], n)} | {cell(holds['o'], n)} | "
            f"{cell(both, n)} | {spread([e['optimal_move_rate_all'] for e in ev])} | {spread(loss)} | "
            f"{walls.get(path.parent.name, '').split(' (')[0]} |")


if __name__ == "__main__":
    main()
