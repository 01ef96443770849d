"""``algo=teacher``'s declaration (``algos/teacher.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttt_research.algos.spec import PROBABILITY, RATE, RATE_FINAL, AlgoSpec, Memory, count, integer


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
    recheck_every: Any = 100
    """updates between two walks of that tree (with hard > 0)"""
    epsilon: Any = 0.0
    """a share of its moves in those games played uniformly at random (off its greedy path)"""
    lr: Any = 0.001
    """Adam's learning rate at the start ..."""
    lr_final: Any = 0.0001
    """... decayed linearly to this over the budget (null: constant)"""


SPEC = AlgoSpec(
    name="teacher",
    any_board=True,  # any m,n,k board: the solver's optimal moves over the board's table rows
    hyper=Hyper,
    acting="greedy: the argmax of its masked logits (it learns from the solver's moves, not its own "
           "samples)",
    keys={"uniform": integer(0, 10_000_000, "an integer in [0, 10,000,000]"),
          "hard": integer(0, 10_000_000, "an integer in [0, 10,000,000]"),
          "recheck_every": count(), "epsilon": PROBABILITY,
          "lr": RATE, "lr_final": RATE_FINAL},
    # One agent a run: its batch is drawn from the board's tables, not from a stack's games.
    population=lambda cfg: "algo=teacher trains one agent a run (population.size=1)",
    one_process="its batch is drawn from the board's tables in one process",
    memory=Memory(per_member=5_500_000, per_game=120, per_game_unit=0, per_table_unit=13.5),
)
