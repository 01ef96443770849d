"""The pilot's rows (``rows/*.json``) as the README's table, one line per exact evaluation
(a curve of optimal_move_rate_all and holds_value against the run's clock); ``--write`` puts
it in README.md under the table's header. ``--summary``: the fresh seeds' figures against the
issue's targets (the final evaluation of each finished cell; IQM with its 95% bootstrap
interval, ``evaluation/stats.py``)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pilot  # beside this file: where the runs are, how a curve is read

from ttt_research.evaluation.stats import bootstrap_ci, iqm

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
            froze = f", froze at update {row['froze_at']:,}" if row.get("froze_at") else ""
            out.append(f"| {row['seed']} | {row['setting']}: ended ({ended}{froze}), "
                       f"{row['wall_s'] / 60:.1f} min wall | | | | |")
    return out


FRESH = {"teacher444": range(62100, 62110), "teacher443": range(62200, 62210)}  # never tuned on


def summary() -> list[str]:
    """Per preset, over its fresh seeds that finished: the seeds holding the value (4,4,4: the
    draw from both seats; 4,4,3: X's forced win), optimal_move_rate_all's IQM with its
    interval, and the wall minutes a seed."""
    out = []
    for setting, seeds in FRESH.items():
        done = [r for r in rows() if r["setting"] == setting and r["seed"] in seeds and r.get("done")
                and r.get("curve")]
        if not done:
            out.append(f"{setting}: no fresh seed finished yet")
            continue
        last = [r["curve"][-1] for r in done]
        held = sum(p["holds_x"] and (p["holds_o"] or setting == "teacher443") for p in last)
        share = [p["optimal_move_rate_all"] for p in last]
        lo, hi = bootstrap_ci(share) if len(share) > 1 else (share[0], share[0])
        walls = [r["wall_s"] / 60 for r in done]
        out.append(f"{setting}: {len(done)} fresh seeds ({', '.join(str(r['seed']) for r in done)}); "
                   f"holds the value in {held}; optimal_move_rate_all IQM {iqm(share):.4f} "
                   f"[{lo:.4f}, {hi:.4f}] (min {min(share):.4f}, max {max(share):.4f}); "
                   f"wall {min(walls):.1f}-{max(walls):.1f} min a seed")
    return out


def main() -> None:
    if "--summary" in sys.argv:
        print("\n".join(summary()))
        return
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
