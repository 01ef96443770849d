"""Wall seconds to the first unbeatable agent (both seats), tabular Q vs the flagship PPO,
timed in one process on one host, alternating, as ``bench`` times PPO (``bench.fit``
with ``watch``: an exact evaluation after every update, not counted in the time; the run
stops at the first unbeatable one).

    PYTHONPATH=$PWD/src python experiments/qlearning/time_to_unbeatable.py --seeds 7000 7001 7002

Seeds 7000-7099 are the tuning seeds of this folder (never 5000-5099: the leaderboard's).
"""

from __future__ import annotations

import argparse
import json
import statistics

from ttt_research.bench import fit

PPO = ["algo=ppo", "net=mlp128", "budget.games=400000"]  # bench's PPO: the flagship's net
QLEARNING = ["algo=qlearning"]


def once(overrides: list[str], seed: int) -> dict:
    module, clock = fit([*overrides, f"seed={seed}"], watch=True, threads=1)
    return {"seed": seed, "unbeatable_s": clock.unbeatable_s, "games": module.games_played,
            "train_s": clock.train_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[7000, 7001, 7002])
    args = parser.parse_args()
    out: dict[str, list] = {"qlearning": [], "ppo": []}
    for i, seed in enumerate(args.seeds):  # alternate which goes first: a drift hits both
        for name in (("qlearning", "ppo") if i % 2 == 0 else ("ppo", "qlearning")):
            row = once(QLEARNING if name == "qlearning" else PPO, seed)
            out[name].append(row)
            print(json.dumps({"algo": name, **row}), flush=True)
    for name, rows in out.items():
        reached = [r["unbeatable_s"] for r in rows if r["unbeatable_s"] is not None]
        median = statistics.median(reached) if reached else None
        print(f"{name}: unbeatable in {len(reached)} of {len(rows)} runs; median "
              f"{median if median is None else round(median, 2)} s; games at the stop: "
              f"{[r['games'] for r in rows]}")


if __name__ == "__main__":
    main()
