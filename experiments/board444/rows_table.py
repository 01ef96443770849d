"""The pilot's rows (``rows/*.json``) as the README's table, one line per exact evaluation
(a curve of optimal_move_rate_all and holds_value against the run's clock); ``--write`` puts
it in README.md under the table's header."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pilot  # beside this file: where the runs are, how a curve is read

HERE = Path(__file__).resolve().parent
HEADER = "| seed | setting | min (run clock) | updates | optimal_move_rate_all | holds X / O |"
GAMES_PER_UPDATE = {"uniform128": 16, "play1024": 1024}  # the others: 256


def rows() -> list[dict]:
    """The row files, and the cells still running (their checkpoints' evaluations so far)."""
    done = {p.stem: json.loads(p.read_text()) for p in HERE.glob("rows/*.json")}
    for run in sorted(p for p in pilot.RUNS.glob("*_*") if p.is_dir()):
        if run.name not in done or not done[run.name].get("done"):
            setting, seed = run.name.rsplit("_", 1)
            done[run.name] = {"setting": setting, "seed": int(seed), "curve": pilot.curve(run)}
    return [done[k] for k in sorted(done)]


def lines() -> list[str]:
    out = []
    for row in rows():
        per = GAMES_PER_UPDATE.get(row["setting"], 256)
        state = "" if row.get("done") else " (running)"
        for point in row.get("curve", []):
            yes = {True: "yes", False: "no"}
            out.append(f"| {row['seed']} | {row['setting']}{state} | {point['train_s'] / 60:.1f} | "
                       f"{point['games'] // per:,} | {point['optimal_move_rate_all']:.4f} | "
                       f"{yes[point['holds_x']]} / {yes[point['holds_o']]} |")
        if row.get("done"):
            ended = row["ended"].replace("|", "\\|")  # a table cell
            out.append(f"| {row['seed']} | {row['setting']}: ended ({ended}), "
                       f"{row['wall_s'] / 60:.1f} min wall | | | | |")
    return out


def main() -> None:
    table = lines()
    if "--write" not in sys.argv:
        print("\n".join(table))
        return
    readme = HERE / "README.md"
    text = readme.read_text().split("\n")
    at = text.index(HEADER) + 2  # after the header and its rule
    end = at
    while end < len(text) and text[end].startswith("|") or (end < len(text) and text[end] == "ROWS"):
        end += 1
    readme.write_text("\n".join(text[:at] + table + text[end:]))


if __name__ == "__main__":
    main()
