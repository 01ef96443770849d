"""``algo=dqn``'s declaration (``algos/dqn.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttt_research.algos.spec import (
    PROBABILITY,
    PROBABILITY_FINAL,
    RATE,
    RATE_FINAL,
    SHARE,
    WEIGHT,
    AlgoSpec,
    Buffer,
    Settings,
    between,
    flag,
    games,
    integer,
    self_play,
    zero_sum,
)
from ttt_research.contract import GAMES_MAX, VALUE_MAX
from ttt_research.errors import need, value_of


def _check(cfg: Settings) -> None:
    capacity, batch = value_of(cfg, "algo.capacity"), value_of(cfg, "algo.batch_size")
    need(batch <= capacity, "algo.batch_size", f"at most algo.capacity ({capacity:,}): a "
         "minibatch is drawn from one member's replay", batch)
    if self_play(cfg):
        zero_sum(cfg, "with algo=dqn opponent=self (its negamax targets negate the opponent's value)")


@dataclass
class Hyper:
    """``algo=dqn``'s hyperparameters and their defaults (``algos/spec.py``: the schema of
    ``conf/algo/dqn.yaml``)."""

    _target_: str = "ttt_research.algos.dqn.DQN"
    games_per_update: Any = 256
    """complete games played per update, then gradient_steps steps"""
    lr: Any = 0.001
    """Adam ..."""
    lr_final: Any = 0.0001
    """... decayed linearly to this over the budget (null: constant): halved the final O loss vs a constant
    5e-4 (experiments/dqn)"""
    gamma: Any = 1.0
    """per learner step: undiscounted, values comparable with the game's"""
    epsilon: Any = 0.5
    """exploration at the start, annealed linearly over the budget ..."""
    epsilon_final: Any = 0.0
    """... to this"""
    epsilon_fraction: Any = 0.5
    """share of the budget epsilon anneals over, then held at epsilon_final: the second half plays greedy (10
    -> 14 of 16 seeds unbeatable)"""
    capacity: Any = 50000
    """replay transitions per member (a ring)"""
    batch_size: Any = 512
    """transitions per gradient step: 512 averages the noisy targets (a random reply) better than 256 (14 ->
    16 of 16 unbeatable)"""
    warmup_games: Any = 1024
    """games in the replay before the first gradient step"""
    gradient_steps: Any = 8
    """gradient steps per update (per batch of games)"""
    target_every: Any = 100
    """hard target update every this many gradient steps (tau null)"""
    tau: Any = None
    """a number in (0, 1]: Polyak averaging every step instead"""
    double: Any = True
    """double DQN: the online net picks a*, the target evaluates it"""
    n_step: Any = 1
    """n-step returns (learner steps); 3 learns faster early, then stalls (its returns hold the exploring
    moves' blunders)"""
    max_grad_norm: Any = 10.0
    """clip the gradient norm to this (0: no clipping)"""
    huber_delta: Any = 10.0
    """Huber loss: quadratic up to this TD error, linear beyond. 10 (a squared error over this table's range)
    took seeds unbeatable from 2 to 10 of 16: delta 1 clips the gradient of rare -5 losses"""
    symmetries: Any = False
    """learn each sampled transition turned by one of the board's symmetries, at random (8 on a
    square, 4 on a rectangle: a corner opening teaches all four corners)"""


SPEC = AlgoSpec(
    name="dqn",
    any_board=True,  # any m,n,k board (game=mnk): its rollouts, replay, nets and symmetries take the game
    hyper=Hyper,
    acting="epsilon-greedy on the online net's values at the scheduled epsilon",
    keys={"lr": RATE, "lr_final": RATE_FINAL, "gamma": SHARE, "epsilon": PROBABILITY,
          "epsilon_final": PROBABILITY_FINAL,
          "epsilon_fraction": between(0, 1, "a share of the budget in (0, 1] (epsilon anneals over "
                                      "it, then holds)", low_open=True),
          "capacity": games(), "batch_size": games(), "gradient_steps": games(), "target_every": games(),
          "warmup_games": integer(0, GAMES_MAX, f"an integer in [0, {GAMES_MAX:,}]"),
          "n_step": integer(1, 5, "an integer in [1, 5] (learner steps; a game has at most 5)"),
          "tau": between(0, 1, "null (hard target updates) or a number in (0, 1] (Polyak averaging)",
                         low_open=True, null=True),
          "double": flag(), "max_grad_norm": WEIGHT,
          "huber_delta": between(0, VALUE_MAX, f"a number in (0, {VALUE_MAX:g}]", low_open=True),
          "symmetries": flag()},
    varies=("lr", "lr_final", "epsilon"),
    check=_check,
    # A transition (algos/dqn.py's Replay): view and next view (a board of int8 each), action and
    # done (1 byte each), reward and discount (float32).
    buffers=(Buffer("algo.capacity", record=28, what="replay transitions"),),
)
