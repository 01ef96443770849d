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

For a population (many agents in one job, ``population.size``), a job's objective can be an
aggregate over its members, so that a sweeper ranks settings on many seats at once:

- ``population_median_score``, ``population_median_win``, ``population_median_loss``
  (*minimise*): the median over the members of ``score``, ``win``, ``loss``;
- ``population_iqm_score``, ``population_iqm_win``, ``population_iqm_loss`` (*minimise*):
  the interquartile mean (``stats.iqm``: the mean of the middle half, robust to a runaway
  member) over the members of the same;
- ``population_unbeatable_fraction``: the share of members that cannot be beaten;
- ``population_unbeatable_ci_low``: the lower end of that share's Wilson 95% interval, which
  ranks 30 of 32 unbeatable above 3 of 3 (a share that might be luck).

A single run is a population of one for these names (its own value; 1 or 0 unbeatable).
Any other name, given to a population, is the *best* member's value (the member whose
``eval.json`` the run folder holds); a population's members are ranked by that name, or
by the per-member name under an aggregate (``score`` under ``population_median_score``).

Standard library at import: ``train/validate.py`` imports it to validate the name before any
work (``stats.py`` imports numpy and scipy only inside its functions).
"""

from __future__ import annotations

import statistics

from ttt_research.contract import EVAL_NAMES, SEAT_KEYS, better, eval_metrics, learner_loss, unbeatable
from ttt_research.evaluation.stats import iqm, wilson

# What each per-member name measures, in a few words, for the lines and tables that show it.
MEANING = {
    "score": "worst trained seat's win - loss vs random, minus 1 if beatable",
    "win": "worst trained seat's win rate vs random",
    "loss": "highest loss rate vs random, over the trained seats",
    "optimal_move_rate": "share of decision points where the move keeps the minimax value",
}


def meaning(name: str) -> str:
    """A few words on what the objective ``name`` measures (its per-member name's, for an
    aggregate such as ``population_median_score``); "" for an ``eval/...`` metric."""
    for prefix in ("population_median_", "population_iqm_"):
        if name.startswith(prefix):
            return MEANING.get(name.removeprefix(prefix), "")
    if name == "population_unbeatable_fraction":
        return "share of members nobody can beat"
    if name == "population_unbeatable_ci_low":
        return "lower end of the unbeatable share's Wilson 95% interval"
    return MEANING.get(name, "")


# Aggregates over a population's members, and the per-member name each aggregates.
POPULATION_NAMES = {"population_median_score": "score", "population_median_win": "win",
                    "population_median_loss": "loss", "population_iqm_score": "score",
                    "population_iqm_win": "win", "population_iqm_loss": "loss",
                    "population_unbeatable_fraction": "score", "population_unbeatable_ci_low": "score"}
NAMES = ("score", "win", "loss", "optimal_move_rate", *EVAL_NAMES, *POPULATION_NAMES)
# The names a sweep minimises (loss rates): those ``contract.better`` says are lower-is-better.
MINIMISE = tuple(n for n in NAMES if better(n) == "lower")


def member_name(name: str) -> str:
    """The per-member objective that ranks a population's members under ``name``."""
    return POPULATION_NAMES.get(name, name)


def population_objectives(reports: list[dict | None], seat: str) -> dict[str, float]:
    """The ``POPULATION_NAMES`` over members' reports (None: a member stopped without one,
    counted among the members, never unbeatable, but in no median or IQM). Medians of an even
    count: the mean of the middle two."""
    ranked = [r for r in reports if r is not None]
    safe = sum(unbeatable(r, seat) for r in ranked)
    out = {}
    for name, per_member in POPULATION_NAMES.items():
        values = [objective(r, seat, per_member) for r in ranked]
        if name == "population_unbeatable_fraction":
            out[name] = safe / max(1, len(reports))
        elif name == "population_unbeatable_ci_low":
            out[name] = wilson(safe, max(1, len(reports)))[0]
        elif not values:
            out[name] = float("nan")
        else:
            average = iqm if name.startswith("population_iqm_") else statistics.median
            out[name] = float(average(values))
    return out


def objective(report: dict, seat: str, name: str = "score") -> float:
    """``optimized_metric`` ``name`` of an ``eval.json`` report, for a learner trained as ``seat``."""
    if name not in NAMES:
        raise ValueError(f"optimized_metric must be one of {', '.join(NAMES)}, got {name!r}")
    if name in POPULATION_NAMES:  # a population's eval.json carries them; one run is its own
        held = report.get("population", {}).get("objectives", {})
        return float(held[name]) if name in held else population_objectives([report], seat)[name]
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
