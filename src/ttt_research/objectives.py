"""The one number a sweep optimises: ``optimized_metric``, read from the exact evaluation.

Every job of a multirun (Hydra's basic or joblib launcher, the Optuna sweeper, a W&B sweep)
returns ``objective(report, seat, name)``, computed from ``eval.json`` and never from
sampled games, so two trials are compared on what they are, not on luck. Higher is better
for every name except those marked *minimise* (their Optuna presets say ``minimize``).

- ``score`` (default): the lowest ``win - loss`` vs random over the trained seats, minus 1
  if the agent can be beaten from any trained seat (``contract.unbeatable``). Every
  unbeatable agent (score = its worst seat's win rate, 0 losses) ranks above every
  beatable one; among each, more wins rank higher.
- ``win``: the lowest win rate vs random over the trained seats.
- ``loss``: the highest loss rate vs random over the trained seats (*minimise*).
- ``optimal_move_rate``: the share of decision points where the move keeps the minimax value.
- ``eval/...``: any exact metric of the contract (``contract.EVAL_NAMES``), e.g.
  ``eval/o_random_win``.

Standard library only: ``config.py`` imports it to validate the name before any work.
"""

from __future__ import annotations

from .contract import EVAL_NAMES, SEAT_KEYS, eval_metrics, learner_loss, unbeatable

NAMES = ("score", "win", "loss", "optimal_move_rate", *EVAL_NAMES)
# Loss rates are the names a sweep minimises; every other name is maximised.
MINIMISE = ("loss", *(n for n in EVAL_NAMES if n.endswith("_loss")))


def objective(report: dict, seat: str, name: str = "score") -> float:
    """``optimized_metric`` ``name`` of an ``eval.json`` report, for a learner trained as ``seat``."""
    if name not in NAMES:
        raise ValueError(f"optimized_metric must be one of {', '.join(NAMES)}, got {name!r}")
    sides = [report[k] for k in SEAT_KEYS[seat]]
    if name == "win":
        return min(float(s["vs_random"]["win"]) for s in sides)
    if name == "loss":
        return learner_loss(report, seat)
    if name == "optimal_move_rate":
        return float(report["optimal_move_rate"])
    if name == "score":
        margin = min(float(s["vs_random"]["win"] - s["vs_random"]["loss"]) for s in sides)
        return margin if unbeatable(report, seat) else margin - 1.0
    return eval_metrics(report)[name]


def direction(name: str) -> str:
    """``maximize`` or ``minimize``: how a sweeper should treat ``name``."""
    return "minimize" if name in MINIMISE else "maximize"
