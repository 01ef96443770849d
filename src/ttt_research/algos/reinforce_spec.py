"""``algo=reinforce``'s declaration (``algos/reinforce.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttt_research.algos.spec import (
    OPTIMIZER,
    PROBABILITY,
    PROBABILITY_FINAL,
    RATE,
    RATE_FINAL,
    TEMPERATURE,
    AlgoSpec,
    Memory,
    Settings,
    between,
    count,
    flag,
    rollouts_divide,
)
from ttt_research.errors import ConfigError, value_of

SHARE_OR_NULL = between(0, 1, "a share of the budget in (0, 1], or null (the whole budget)",
                        low_open=True, null=True)


def _check(cfg: Settings) -> None:
    """The rules across keys: the rollouts divide an update; ``symmetries_until`` needs symmetries."""
    rollouts_divide(cfg)
    if value_of(cfg, "algo.symmetries_until") is not None and not value_of(cfg, "algo.symmetries"):
        raise ConfigError("algo.symmetries_until is set but algo.symmetries is false: it says until when "
                          "the turned positions are learned; add algo.symmetries=true, or drop it")


def _population(cfg: Settings) -> str | None:
    if not value_of(cfg, "algo.position_table"):
        return "algo=reinforce trains a population with algo.position_table=true only"
    return None


@dataclass
class Hyper:
    """``algo=reinforce``'s hyperparameters and their defaults (``algos/spec.py``: the schema of
    ``conf/algo/reinforce.yaml``)."""

    _target_: str = "ttt_research.algos.reinforce.Reinforce"
    games_per_update: Any = 16384
    """games per training step (one Lightning step, one log row)"""
    rollouts: Any = 2
    """... played as 2 batches of 8,192, each learned from before the next (one pass over the positions
    reached per ply of a batch: larger batches, fewer passes)"""
    minibatches: Any = 1
    """SGD steps per batch (only without the position table)"""
    lr: Any = 2.0
    """SGD's learning rate at the start, annealed linearly to lr_final"""
    lr_final: Any = 1.0
    """linear anneal of the learning rate over the budget (null: constant)"""
    momentum: Any = 0.9
    """SGD momentum: big, exact batch gradients; slow directions carried along"""
    temperature: Any = 1.0
    """softmax sampling while training; 0 = greedy, as the seed"""
    temperature_final: Any = 0.5
    """linear anneal over the budget (null: constant); 0.5 keeps exploring rare positions
    (experiments/reinforce_default: tuned on seeds 1000-1047)"""
    epsilon: Any = 0.0
    """a share of moves played uniformly at random (over the legal cells)"""
    epsilon_final: Any = None
    """linear anneal of epsilon over the budget (null: constant)"""
    baseline: Any = False
    """subtract the batch's mean reward"""
    masked_softmax: Any = True
    """softmax over empty cells only (the seed: over all 9)"""
    position_table: Any = True
    """one forward/backward per distinct position, one SGD step per batch"""
    optimizer: Any = None
    """null = SGD; or a partial, e.g. {_target_: torch.optim.Adam, _partial_: true}"""
    symmetries: Any = False
    """also learn every position turned by the board's symmetries (8 on a square, 4 on a rectangle),
    each turn weighing 1/S (a game's step is unchanged; a rare turn learns from its common siblings)"""
    symmetries_until: Any = None
    """with symmetries: the share of the budget after which positions are learned unturned only
    (null: the whole budget)"""


SPEC = AlgoSpec(
    name="reinforce",
    any_board=True,  # any m,n,k board (game=mnk): its rollouts, nets and updates take the game
    hyper=Hyper,
    acting="the softmax of its masked logits at the scheduled temperature (temperature -> "
           "temperature_final), epsilon of moves uniform",
    keys={"rollouts": count(), "minibatches": count(), "lr": RATE, "lr_final": RATE_FINAL,
          "momentum": between(0, 1, "a number in [0, 1)", high_open=True),
          "temperature": TEMPERATURE, "temperature_final": RATE_FINAL, "epsilon": PROBABILITY,
          "epsilon_final": PROBABILITY_FINAL,
          "baseline": flag(), "masked_softmax": flag(), "position_table": flag(), "optimizer": OPTIMIZER,
          "symmetries": flag(), "symmetries_until": SHARE_OR_NULL},
    varies=("lr", "lr_final", "momentum", "temperature", "temperature_final", "epsilon"),
    check=_check,
    population=_population,
    # Fitted once its table path stopped building (M, 9) targets (issue 25: 1 and 24 members,
    # batches of 2,048 and 8,192, mlp100 and mlp128, as O; within 6%).
    memory=Memory(per_member=5_500_000, per_game=120, per_game_unit=0, per_table_unit=13.5, batch="rollout"),
)
