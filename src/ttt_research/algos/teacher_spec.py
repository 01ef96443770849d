"""``algo=teacher``'s declaration (``algos/teacher.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttt_research.algos.spec import (
    PROBABILITY,
    PROBABILITY_FINAL,
    RATE,
    RATE_FINAL,
    AlgoSpec,
    Memory,
    Rule,
    count,
    integer,
)


@dataclass
class Hyper:
    """``algo=teacher``'s hyperparameters and their defaults (``algos/spec.py``: the schema of
    ``conf/algo/teacher.yaml``)."""

    _target_: str = "ttt_research.algos.teacher.Teacher"
    games_per_update: Any = 256
    """games its greedy policy plays an update against a uniformly random opponent, half as X, half
    as O: the positions where it moved go into the batch (the positions its worst case depends on)"""
    uniform: Any = 2048
    """... and this many decision positions drawn uniformly over every one of the board's (0: none)"""
    hard: Any = 0
    """... and this many drawn from the positions where its greedy move is not optimal, in the tree its greedy
    policy spans against every opponent reply from either seat (0: none; the walk costs about an update's
    worth of passes over that tree)"""
    hard_from: Any = "wrong"
    """which of that tree's rows are hard: wrong (every one where its greedy move is not optimal) or value
    (only those where it gives up the value of the game for its seat: a drawn game's draw, a won game's
    win; none of those is exactly holds_value for a seat the game does not lose; a lost seat is not
    walked)"""
    recheck_every: Any = 100
    """updates between two walks of that tree (with hard > 0)"""
    freeze_after: Any = None
    """null: never; a share of the budget in [0, 1]: once it is played, the first walk that finds no hard row
    freezes the net (no more steps or walks; with hard_from=value it then holds the game's value from every
    seat the game does not lose, exactly) and the run ends there"""
    epsilon: Any = 0.0
    """a share of its moves in those games played uniformly at random (off its greedy path)"""
    lr: Any = 0.001
    """Adam's learning rate at the start ..."""
    lr_final: Any = 0.0001
    """... decayed linearly to this over the budget (null: constant)"""


HARD_FROM = ("wrong", "value")  # algo.hard_from's choices (teacher.wrong_rows' ``keep``)

SPEC = AlgoSpec(
    name="teacher",
    any_board=True,  # any m,n,k board: the solver's optimal moves over the board's table rows
    hyper=Hyper,
    acting="greedy: the argmax of its masked logits (it learns from the solver's moves, not its own "
           "samples)",
    keys={"uniform": integer(0, 10_000_000, "an integer in [0, 10,000,000]"),
          "hard": integer(0, 10_000_000, "an integer in [0, 10,000,000]"),
          "hard_from": Rule(lambda v: v in HARD_FROM, "wrong or value"),
          "recheck_every": count(), "freeze_after": PROBABILITY_FINAL, "epsilon": PROBABILITY,
          "lr": RATE, "lr_final": RATE_FINAL},
    # One agent a run: its batch is drawn from the board's tables, not from a stack's games.
    population=lambda cfg: "algo=teacher trains one agent a run (population.size=1)",
    one_process="its batch is drawn from the board's tables in one process",
    memory=Memory(per_member=5_500_000, per_game=120, per_game_unit=0, per_table_unit=13.5),
)
