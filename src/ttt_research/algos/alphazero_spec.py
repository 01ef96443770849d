"""``algo=alphazero``'s declaration (``algos/alphazero.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from omegaconf import DictConfig

from ttt_research.algos.spec import (
    RATE,
    RATE_FINAL,
    TEMPERATURE,
    WEIGHT,
    AlgoSpec,
    between,
    flag,
    games,
    integer,
    zero_sum,
)
from ttt_research.contract import VALUE_MAX
from ttt_research.errors import need, value_of

NUMBER = between(0, VALUE_MAX, f"a number in [0, {VALUE_MAX:g}]")
SIMULATIONS = integer(1, 1024, "an integer in [1, 1024] (simulations per searched move)")


def _check(cfg: DictConfig) -> None:
    zero_sum(cfg, "with algo=alphazero (its values are game results, +1 / 0 / -1)")
    win = value_of(cfg, "reward.win")
    need(win == 1, "reward.win", "1 with algo=alphazero (its value head is a tanh: results in [-1, 1])", win)


SPEC = AlgoSpec(
    name="alphazero",
    target="ttt_research.algos.alphazero.AlphaZero",
    keys={"simulations": SIMULATIONS, "test_simulations": SIMULATIONS,
          "max_considered": integer(1, 9, "an integer in [1, 9] (moves at the root)"),
          "lr": RATE, "lr_final": RATE_FINAL, "temperature": TEMPERATURE, "temperature_final": RATE_FINAL,
          "value_coef": NUMBER, "value_mix": between(0, 1, "a share in [0, 1] (of the value target)"),
          "weight_decay": NUMBER, "capacity": games(), "batch_size": games(), "gradient_steps": games(),
          "max_grad_norm": WEIGHT, "symmetries": flag()},
    varies=("lr", "lr_final", "temperature", "temperature_final"),
    check=_check,
)
