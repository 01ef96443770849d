"""What a population is, before any tensor: its members (seed and hyperparameters each) read
from the ``population:`` block of the config, and the files that report on them.

A member is one independent agent. The population is a **grid** of hyperparameter values
(``population.vary``) crossed with **seeds** (``population.size`` of them, or
``population.seeds`` named); each member may also **draw** values of its own
(``population.sample``). Only continuous values that keep every tensor's shape can differ
between members (``VARIABLE``); the net, the games per update and the algorithm stay a
Hydra multirun: ``-m net=mlp25,mlp100 population.size=64`` is one process per net, 64
agents each.

Spellings (the same on the command line and in a config file)::

    python -m ttt_research population.size=64                 # seeds 0..63 (seed + k)
    python -m ttt_research seed=100 population.size=64        # seeds 100..163
    python -m ttt_research population.seeds=[3,5,8]           # three members, these seeds
    python -m ttt_research population.vary.algo.lr=[0.5,1,2] population.size=16
                                                              # 3 grid points x 16 seeds = 48
    python -m ttt_research population.sample.algo.lr={low:0.1,high:4,log:true} population.size=32
                                                              # 32 members, each its own lr
    python -m ttt_research algo=ppo population.vary.algo.ent_coef=[0.01,0.08] \\
        population.sample.reward.tie={low:0,high:0.5} population.size=8

``config.yaml`` declares every key that can vary, as ``null`` (not varied), under both
``vary`` and ``sample``, so these spellings need no ``+``; with a ``+`` they work as well
(Hydra adds a list or a dict over a ``null``). A key that cannot vary is not declared, so
Hydra refuses it without a ``+`` ("Key 'net' is not in struct"); with the ``+`` the config
check names the keys that can. A dict of dotted keys works too, on the command line
(``'+population.vary={algo.lr:[0.5,1,2]}'``, quoted for the shell) and in a file::

    population:                     # e.g. in conf/experiment/NAME.yaml (# @package _global_)
      size: 16
      vary:
        algo: {lr: [0.5, 1, 2]}     # or, the same:  algo.lr: [0.5, 1, 2]
      sample:
        reward.tie: {low: 0.0, high: 0.5, log: false}

Rules (``config.validate`` refuses anything else, in one line naming the key):

- ``vary.<key>``: a non-empty list of distinct numbers, each valid for the key. Grid points
  are the product of the lists, keys in alphabetical order, the last key changing fastest.
- ``sample.<key>``: ``{low, high, log}``, ``low < high``, both valid for the key; ``log``
  (default false) draws log-uniformly and needs ``low > 0``, else uniformly. A key is
  varied or sampled, not both. Draws are seeded by ``seed``: the same config gives the
  same draws; member (grid point g, seed position s) draws from its own stream named by
  ``seed``, g, s and the key, so a larger ``size`` keeps the earlier members' draws.
- ``size``: seeds *per grid point*, so the population has (grid points) x ``size`` members
  (no grid: ``size`` members). Seeds default to ``seed + k``, k = 0..size-1. Every grid
  point runs the same seeds: a comparison of values is paired, seed for seed.
- ``seeds``: distinct non-negative integers; they fix the number of seeds, so ``size``
  must then be 1 (its default) or their number.
- Member order: grid points slowest, seeds fastest: member ``g * S + s`` is grid point
  ``g`` with the ``s``-th seed (S seeds per grid point).
- A key must exist in the composed config: ``algo.temperature`` and ``algo.momentum`` are
  REINFORCE's, ``algo.ent_coef`` PPO's, ``opponent.p_perfect`` is ``opponent=mixed``'s.

Files of a population run (pure functions over plain dicts, so a test or a report can
write and read them without torch): ``population.json`` (``write_population_json``: a row
per member and the ``aggregate``) and ``population.csv`` (``write_population_csv``).
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path

from ttt_research.contract import EVAL_NAMES, eval_metrics, unbeatable
from ttt_research.evaluation.objectives import direction, member_name, objective, population_objectives
from ttt_research.files.atomic import write_atomic
from ttt_research.population.spec import Member

# population.json: the keys of a member's row.
ROW_KEYS = ("index", "seed", "hparams", "games", "eval", "first_unbeatable_games", "stopped")


def member_row(member: Member, games: int, report: dict | None,
               first_unbeatable_games: int | None = None, stopped: str | None = None) -> dict:
    """A member's row of ``population.json``: ``report`` is its ``eval.json`` report (None
    if it never had one), ``stopped`` why it was stopped early (None: it ran to the end)."""
    return {"index": member.index, "seed": member.seed, "hparams": dict(member.hparams),
            "games": int(games), "eval": report, "first_unbeatable_games": first_unbeatable_games,
            "stopped": stopped}


def _counted(row: dict) -> bool:
    # A stopped member's last report was made before it failed: it is listed, not ranked.
    return row["eval"] is not None and row["stopped"] is None


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": float(statistics.median(values)), "min": min(values), "max": max(values)}


def aggregate(rows: list[dict], seat: str, name: str = "score") -> dict:
    """The ``aggregate`` of ``population.json`` over member rows (``member_row``), for
    learners trained as ``seat``, ranked by the objective ``name`` (``objectives.NAMES``).

    ``{"members": N, "evaluated": members ranked, "stopped": [indices],
    "unbeatable": count, "unbeatable_fraction": count / N,
    "objective": {"name", "median", "min", "max"}, "best": index or null,
    "metrics": {eval/* name: {"median", "min", "max"}}}``. Stopped members and members
    without a report count in N (never as unbeatable) but not in the medians nor for
    ``best``; ``best`` is the highest objective (the lowest for a loss), ties to the lowest
    index. A median of an even count is the mean of the middle two."""
    ranked = [r for r in rows if _counted(r)]
    per_member = member_name(name)  # population_median_score ranks members by score
    scores = [objective(r["eval"], seat, per_member) for r in ranked]
    n_unbeatable = sum(unbeatable(r["eval"], seat) for r in ranked)
    sign = -1.0 if direction(per_member) == "minimize" else 1.0
    best = None
    if ranked:
        best = ranked[max(range(len(ranked)), key=lambda i: (sign * scores[i], -i))]["index"]
    metrics = [eval_metrics(r["eval"]) for r in ranked]
    return {
        "members": len(rows),
        "evaluated": len(ranked),
        "stopped": [r["index"] for r in rows if r["stopped"] is not None],
        "unbeatable": n_unbeatable,
        "unbeatable_fraction": n_unbeatable / len(rows) if rows else 0.0,
        "objective": {"name": name, "per_member": per_member, **_spread(scores)},
        "objectives": population_objectives([r["eval"] if _counted(r) else None for r in rows], seat),
        "best": best,
        "metrics": {m: _spread([pm[m] for pm in metrics]) for m in EVAL_NAMES},
    }


def _check_rows(rows: list[dict]) -> None:
    for r in rows:
        missing = [k for k in ROW_KEYS if k not in r]
        if missing:
            raise ValueError(f"a population row lacks {', '.join(missing)}: {sorted(r)}")


def write_population_json(path: str | Path, rows: list[dict], aggregate: dict) -> None:
    """``population.json``: ``{"members": [rows, in index order], "aggregate": {...}}``."""
    _check_rows(rows)
    data = {"members": sorted(rows, key=lambda r: r["index"]), "aggregate": aggregate}
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def csv_columns(rows: list[dict]) -> list[str]:
    """``population.csv``'s header: index, seed, each varied key (alphabetical), games, the
    ``eval/*`` metrics, unbeatable, first_unbeatable_games, stopped."""
    hparams = sorted({k for r in rows for k in r["hparams"]})
    return ["index", "seed", *hparams, "games", *EVAL_NAMES, "unbeatable",
            "first_unbeatable_games", "stopped"]


def write_population_csv(path: str | Path, rows: list[dict], seat: str) -> None:
    """``population.csv``: one row per member (``csv_columns``); a member without a report
    has empty metric cells; ``unbeatable`` is judged from ``seat``, and is False for a
    stopped member (its metrics are those of its last report), as in ``aggregate``."""
    _check_rows(rows)
    columns = csv_columns(rows)
    f = io.StringIO(newline="")  # written whole, then renamed into place (atomic.write_atomic)
    out = csv.DictWriter(f, columns, restval="")
    out.writeheader()
    for r in sorted(rows, key=lambda r: r["index"]):
        line = {"index": r["index"], "seed": r["seed"], **r["hparams"], "games": r["games"],
                "first_unbeatable_games": "" if r["first_unbeatable_games"] is None
                else r["first_unbeatable_games"], "stopped": r["stopped"] or ""}
        if r["eval"] is not None:
            line.update(eval_metrics(r["eval"]))
            line["unbeatable"] = _counted(r) and unbeatable(r["eval"], seat)
        out.writerow(line)
    write_atomic(path, f.getvalue())
