"""The one number a sweep optimises: ``optimized_metric``, read from the exact evaluation.

Every job of a multirun (Hydra's basic or joblib launcher, the Optuna sweeper, a W&B sweep)
returns ``objective(report, seat, name)``, computed from ``eval.json`` and never from
sampled games, so two trials are compared on what they are, not on luck. Higher is better
for every name except those marked *minimise* (their Optuna presets say ``minimize``).

- ``score`` (default): the lowest ``win - loss`` vs random over the trained seats, minus 1
  if the agent can be beaten from any trained seat. Every unbeatable agent (score = its
  worst seat's win rate, 0 losses) ranks above every beatable one; among each, more wins
  rank higher.
- ``win``: the lowest win rate vs random over the trained seats.
- ``loss``: the highest loss rate vs random over the trained seats (*minimise*).
- ``optimal_move_rate``: the share of decision points where the move keeps the minimax value.
- ``eval/...``: any exact metric of the contract, e.g. ``eval/o_random_win``.

Standard library only: ``config.py`` imports it to validate the name before any work.
"""

from __future__ import annotations

SEAT_KEYS = {"x": ("as_x",), "o": ("as_o",), "both": ("as_x", "as_o")}
WORST_VALUE = {"win": 1.0, "draw": 0.0, "loss": -1.0}

# The eval/* names of the contract (ARCHITECTURE.md, "Metric names").
EVAL_NAMES = tuple(
    [f"eval/{s}_random_{o}" for s in "xo" for o in ("win", "loss", "tie")]
    + [f"eval/{s}_perfect_loss" for s in "xo"]
    + [f"eval/{s}_worst_case" for s in "xo"]
    + ["eval/optimal_move_rate"])
NAMES = ("score", "win", "loss", "optimal_move_rate", *EVAL_NAMES)
MINIMISE = ("loss", "eval/x_random_loss", "eval/o_random_loss", "eval/x_perfect_loss",
            "eval/o_perfect_loss")


def _eval_value(report: dict, name: str) -> float:
    if name == "eval/optimal_move_rate":
        return float(report["optimal_move_rate"])
    seat, what = name[len("eval/"):].split("_", 1)  # "o", "random_win"
    side = report[f"as_{seat}"]
    if what == "worst_case":
        return WORST_VALUE[side["worst_case"]]
    opponent, outcome = what.split("_")
    return float(side[f"vs_{opponent}"][outcome])


def objective(report: dict, seat: str, name: str = "score") -> float:
    """``optimized_metric`` ``name`` of an ``eval.json`` report, for a learner trained as ``seat``."""
    if name not in NAMES:
        raise ValueError(f"optimized_metric must be one of {', '.join(NAMES)}, got {name!r}")
    sides = [report[k] for k in SEAT_KEYS[seat]]
    if name == "win":
        return min(float(s["vs_random"]["win"]) for s in sides)
    if name == "loss":
        return max(float(s["vs_random"]["loss"]) for s in sides)
    if name == "optimal_move_rate":
        return float(report["optimal_move_rate"])
    if name == "score":
        margin = min(float(s["vs_random"]["win"] - s["vs_random"]["loss"]) for s in sides)
        beatable = any(s["worst_case"] == "loss" for s in sides)
        return margin - 1.0 if beatable else margin
    return _eval_value(report, name)


def direction(name: str) -> str:
    """``maximize`` or ``minimize``: how a sweeper should treat ``name``."""
    return "minimize" if name in MINIMISE else "maximize"
