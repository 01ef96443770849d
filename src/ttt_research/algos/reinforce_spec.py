"""``algo=reinforce``'s declaration (``algos/reinforce.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from omegaconf import DictConfig

from ttt_research.algos.spec import (
    OPTIMIZER,
    PROBABILITY,
    RATE,
    RATE_FINAL,
    TEMPERATURE,
    AlgoSpec,
    Memory,
    between,
    count,
    flag,
    rollouts_divide,
)
from ttt_research.errors import value_of


def _population(cfg: DictConfig) -> str | None:
    if not value_of(cfg, "algo.position_table"):
        return "algo=reinforce trains a population with algo.position_table=true only"
    return None


SPEC = AlgoSpec(
    name="reinforce",
    target="ttt_research.algos.reinforce.Reinforce",
    keys={"rollouts": count(), "minibatches": count(), "lr": RATE, "lr_final": RATE_FINAL,
          "momentum": between(0, 1, "a number in [0, 1)", high_open=True),
          "temperature": TEMPERATURE, "temperature_final": RATE_FINAL, "epsilon": PROBABILITY,
          "baseline": flag(), "masked_softmax": flag(), "position_table": flag(), "optimizer": OPTIMIZER},
    varies=("lr", "lr_final", "momentum", "temperature", "temperature_final", "epsilon"),
    check=rollouts_divide,
    population=_population,
    # Fitted once its table path stopped building (M, 9) targets (issue 25: 1 and 24 members,
    # batches of 2,048 and 8,192, mlp100 and mlp128, as O; within 6%).
    memory=Memory(per_member=5_500_000, per_game=120, per_game_unit=0, per_table_unit=13.5, batch="rollout"),
)
