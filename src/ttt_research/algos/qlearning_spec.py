"""``algo=qlearning``'s declaration (``algos/qlearning.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttt_research.algos.spec import (
    PROBABILITY,
    PROBABILITY_FINAL,
    SHARE,
    AlgoSpec,
    Memory,
    between,
    count,
    flag,
    rollouts_divide,
)
from ttt_research.errors import ConfigError

# A step towards a batch's mean target: at most all the way.
STEP = "a step size in (0, 1] for algo=qlearning (1: the batch's mean target)"


# The most its tables may hold on another board: values and visit counts of every member, and
# the view -> row map (models/qtable.py); a table past it is refused before the run starts.
TABLE_LIMIT = 2 * 2**30  # bytes
VALUE = ROW = 4  # bytes a value or a count (float32), a row number (int32)


def table_bytes(game, members: int, rows: int) -> int:
    """The bytes of ``members`` tables of ``game`` (an ``mnk.MNK``) of ``rows`` rows, its
    reachable positions (a value and a visit count per cell), and of their shared view -> row map."""
    return members * 2 * rows * game.cells * VALUE + ROW * 3**game.cells


def table_fits(game, members: int, positions) -> None:
    """Refuse (``ConfigError``, one line with the size it needs) a board whose tables would not
    fit in ``TABLE_LIMIT``; ``positions(game)``: its solved positions (``env.cache.positions``:
    built the first time, as training would; read here, the spec loads neither torch nor numpy)."""
    rows = len(positions(game).codes)
    need = table_bytes(game, members, rows)
    if need > TABLE_LIMIT:
        who = f"{members} tables" if members > 1 else "its table"
        raise ConfigError(
            f"algo=qlearning on the {game.name} board needs {need / 2**30:.2f} GB for {who} ({rows:,} "
            f"positions x {game.cells} cells, a value and a visit count each, and a map of "
            f"{3**game.cells:,} view codes), more than the {TABLE_LIMIT / 2**30:g} GB a run's tables may hold; "
            "train fewer members (population.size), a smaller board, or algo=ppo")


@dataclass
class Hyper:
    """``algo=qlearning``'s hyperparameters and their defaults (``algos/spec.py``: the schema of
    ``conf/algo/qlearning.yaml``)."""

    _target_: str = "ttt_research.algos.qlearning.QLearning"
    games_per_update: Any = 1024
    """complete games per update (each member), played as `rollouts` batches"""
    rollouts: Any = 8
    """batches of 128: each is one backup step, and small ones learn more per game; grouped 8 to an update,
    as the shell's cost per update is fixed"""
    lr: Any = 0.1
    """the step's floor (running_mean) or the step (towards the batch's mean target)"""
    lr_final: Any = 0.02
    """linear decay of the floor to this: late values average ~50 batches"""
    epsilon: Any = 0.6
    """chance of a uniformly random legal move, at the start"""
    epsilon_final: Any = 0.0
    """linear decay to this over the budget (null: constant)"""
    gamma: Any = 1.0
    """undiscounted: values comparable with game-theoretic ones"""
    running_mean: Any = True
    """step max(lr, 1/visits): the mean of all targets, then rate lr"""


SPEC = AlgoSpec(
    name="qlearning",
    hyper=Hyper,
    acting="epsilon-greedy on the table at the scheduled epsilon",
    keys={"rollouts": count(), "lr": between(0, 1, STEP, low_open=True),
          "lr_final": between(0, 1, STEP, null=True), "epsilon": PROBABILITY,
          "epsilon_final": PROBABILITY_FINAL, "gamma": SHARE, "running_mean": flag()},
    varies=("lr", "lr_final", "epsilon"),
    nets=("table",),
    tuned_on="qtable",
    net_why="learns a table of action values",
    one_process="one that trains in several processes (qlearning writes its table in place, outside "
                "DDP's averaging: use trainer=cpu)",
    check=rollouts_divide,
    any_board=True,  # a table over the board's reachable positions, where it fits (table_fits)
    board=table_fits,
    # tic-tac-toe's (3^9, 9) table of values and one of visits; another board's, a value and a
    # count per (position, cell) (``table_bytes``)
    memory=Memory(table=2 * 3**9 * 9, per_position_cell=2 * VALUE),
)
