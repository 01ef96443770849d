"""``algo=ppo``'s declaration (``algos/ppo.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig

from ttt_research.algos.spec import (
    OPTIMIZER,
    RATE,
    RATE_FINAL,
    SHARE,
    WEIGHT,
    AlgoSpec,
    Memory,
    count,
    flag,
)
from ttt_research.errors import value_of

# The keys PPO shares with the actor-critics built on it (algos/a2c_spec.py).
KEYS = {"lr": RATE, "lr_final": RATE_FINAL, "gamma": SHARE, "gae_lambda": SHARE,
        "ent_coef": WEIGHT, "ent_final": RATE_FINAL, "vf_coef": WEIGHT, "max_grad_norm": WEIGHT,
        "masking": flag(), "shared_trunk": flag(), "norm_adv": flag(), "optimizer": OPTIMIZER}


def population(name: str) -> Callable[[DictConfig], str | None]:
    """Why a population of the actor-critic ``algo=NAME`` cannot train (None: it can)."""
    def why(cfg: DictConfig) -> str | None:
        if value_of(cfg, "algo.shared_trunk"):
            return f"algo={name} trains a population with algo.shared_trunk=false only"
        return None
    return why


SPEC = AlgoSpec(
    name="ppo",
    target="ttt_research.algos.ppo.PPO",
    keys={**KEYS, "epochs": count(), "minibatches": count(), "clip": SHARE},
    varies=("lr", "lr_final", "ent_coef"),
    population=population("ppo"),
    # Fitted on populations of 1 to 128 members, batches of 512 to 8,192 games, mlp25, mlp100
    # and mlp128, seat o and both (each measurement within 8%); a value network beside the policy.
    memory=Memory(per_member=0, per_game=1540, per_game_unit=13, per_table_unit=1.3, nets=2),
)
