"""The metric contract in one place: names of seats, of ``eval.json`` keys and ``eval/*``
metrics, and what "unbeatable" means. Every other module imports these; none redefines them.

Standard library only, so the config validation, the report and the sweep objective can
use it without importing torch.

An ``eval.json`` report (``evaluate.py``) has one block per seat, ``as_x`` and ``as_o``,
each with exact ``vs_random`` and ``vs_perfect`` rates and a ``worst_case`` against a
best-response opponent. A learner is trained from a *training seat*: ``x``, ``o`` or
``both``; the report's blocks for that training seat are ``SEAT_KEYS[seat]``.
"""

from __future__ import annotations

# Seats a learner trains from (``seat.side``), and the two seats a report evaluates.
TRAINING_SEATS = ("x", "o", "both")
EVAL_SEATS = ("x", "o")
# eval.json block of each evaluated seat, and the blocks a training seat is judged on.
REPORT_KEY = {"x": "as_x", "o": "as_o"}
SEAT_KEYS = {"x": ("as_x",), "o": ("as_o",), "both": ("as_x", "as_o")}

OUTCOMES = ("win", "loss", "tie")
# eval/*_worst_case as a number: +1 the agent wins whatever the opponent does, 0 it draws
# at worst, -1 some opponent beats it.
WORST_VALUE = {"win": 1.0, "draw": 0.0, "loss": -1.0}

# The eval/* metric names (logged every eval_every updates; the README's metric table).
EVAL_NAMES = tuple(
    [f"eval/{s}_random_{o}" for s in EVAL_SEATS for o in OUTCOMES]
    + [f"eval/{s}_perfect_loss" for s in EVAL_SEATS]
    + [f"eval/{s}_worst_case" for s in EVAL_SEATS]
    + ["eval/optimal_move_rate"])

# The network encodings ``net.encoding`` may name (``encodings.ENCODINGS`` implements them).
ENCODING_NAMES = ("planes18", "signed9")


def eval_metrics(report: dict) -> dict[str, float]:
    """The ``eval/*`` metrics of an ``eval.json`` report, by the names of ``EVAL_NAMES``."""
    m: dict[str, float] = {}
    for seat in EVAL_SEATS:
        side = report[REPORT_KEY[seat]]
        for outcome in OUTCOMES:
            m[f"eval/{seat}_random_{outcome}"] = float(side["vs_random"][outcome])
        m[f"eval/{seat}_perfect_loss"] = float(side["vs_perfect"]["loss"])
        m[f"eval/{seat}_worst_case"] = WORST_VALUE[side["worst_case"]]
    m["eval/optimal_move_rate"] = float(report["optimal_move_rate"])
    return m


def unbeatable(report: dict, seat: str = "both") -> bool:
    """No opponent, however it plays, can beat the agent from the training seat ``seat``
    (its worst case is a draw or a win). Equivalent to losing no game to the random
    player, who plays every line with positive probability."""
    return all(report[k]["worst_case"] != "loss" for k in SEAT_KEYS[seat])


def learner_loss(report: dict, seat: str) -> float:
    """The exact loss rate vs random of the training seat ``seat`` (the worse of two)."""
    return max(float(report[k]["vs_random"]["loss"]) for k in SEAT_KEYS[seat])
