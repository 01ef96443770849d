"""``algo=dqn``'s declaration (``algos/dqn.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from omegaconf import DictConfig

from ttt_research.algos.spec import (
    PROBABILITY,
    PROBABILITY_FINAL,
    RATE,
    RATE_FINAL,
    SHARE,
    WEIGHT,
    AlgoSpec,
    between,
    flag,
    games,
    integer,
    self_play,
    zero_sum,
)
from ttt_research.contract import GAMES_MAX, VALUE_MAX
from ttt_research.errors import need, value_of


def _check(cfg: DictConfig) -> None:
    capacity, batch = value_of(cfg, "algo.capacity"), value_of(cfg, "algo.batch_size")
    need(batch <= capacity, "algo.batch_size", f"at most algo.capacity ({capacity:,}): a "
         "minibatch is drawn from one member's replay", batch)
    if self_play(cfg):
        zero_sum(cfg, "with algo=dqn opponent=self (its negamax targets negate the opponent's value)")


SPEC = AlgoSpec(
    name="dqn",
    target="ttt_research.algos.dqn.DQN",
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
          "huber_delta": between(0, VALUE_MAX, f"a number in (0, {VALUE_MAX:g}]", low_open=True)},
    varies=("lr", "lr_final", "epsilon"),
    check=_check,
)
