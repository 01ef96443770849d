"""The files that report on a population run: ``population.json`` (``write_population_json``:
a row per member, ``member_row``, and the ``aggregate`` over them) and ``population.csv``
(``write_population_csv``: the same rows as a table, one column per varied value and
``eval/*`` metric).

Pure functions over plain dicts, so a test or a report can write and read them without
torch. A member that stopped (the numerical guard, alone in its population) keeps its last
report's metrics but is never counted unbeatable. What a population *is* (its members,
their seeds and values) is ``spec.py``'s.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path

from ttt_research.contract import EVAL_NAMES, EXPLOIT_NAMES, eval_metrics, exploit_metrics, unbeatable
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
    metrics = [{**eval_metrics(r["eval"]), **exploit_metrics(r["eval"])} for r in ranked]
    return {
        "members": len(rows),
        "evaluated": len(ranked),
        "stopped": [r["index"] for r in rows if r["stopped"] is not None],
        "unbeatable": n_unbeatable,
        "unbeatable_fraction": n_unbeatable / len(rows) if rows else 0.0,
        "objective": {"name": name, "per_member": per_member, **_spread(scores)},
        "objectives": population_objectives([r["eval"] if _counted(r) else None for r in rows], seat),
        "best": best,
        "metrics": {m: _spread([pm[m] for pm in metrics]) for m in (*EVAL_NAMES, *EXPLOIT_NAMES)
                    if all(m in pm for pm in metrics)},
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
    ``eval/*`` metrics, unbeatable, first_unbeatable_games, stopped, then the exploitability
    metrics (``contract.EXPLOIT_NAMES``) the reports have."""
    hparams = sorted({k for r in rows for k in r["hparams"]})
    have = {m for r in rows if r["eval"] is not None for m in exploit_metrics(r["eval"])}
    return ["index", "seed", *hparams, "games", *EVAL_NAMES, "unbeatable",
            "first_unbeatable_games", "stopped", *(m for m in EXPLOIT_NAMES if m in have)]


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
            line.update(exploit_metrics(r["eval"]))
            line["unbeatable"] = _counted(r) and unbeatable(r["eval"], seat)
        out.writerow(line)
    write_atomic(path, f.getvalue())
