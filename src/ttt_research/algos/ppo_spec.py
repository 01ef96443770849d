"""``algo=ppo``'s declaration (``algos/ppo.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ttt_research.algos.spec import (
    OPTIMIZER,
    RATE,
    RATE_FINAL,
    SHARE,
    WEIGHT,
    AlgoSpec,
    Memory,
    Settings,
    count,
    flag,
)
from ttt_research.errors import value_of

# The keys PPO shares with the actor-critics built on it (algos/a2c_spec.py).
KEYS = {"lr": RATE, "lr_final": RATE_FINAL, "gamma": SHARE, "gae_lambda": SHARE,
        "ent_coef": WEIGHT, "ent_final": RATE_FINAL, "vf_coef": WEIGHT, "max_grad_norm": WEIGHT,
        "masking": flag(), "shared_trunk": flag(), "norm_adv": flag(), "optimizer": OPTIMIZER}


def population(name: str) -> Callable[[Settings], str | None]:
    """Why a population of the actor-critic ``algo=NAME`` cannot train (None: it can)."""
    def why(cfg: Settings) -> str | None:
        if value_of(cfg, "algo.shared_trunk"):
            return f"algo={name} trains a population with algo.shared_trunk=false only"
        return None
    return why


@dataclass
class Hyper:
    """``algo=ppo``'s hyperparameters and their defaults (``algos/spec.py``: the schema of
    ``conf/algo/ppo.yaml``)."""

    _target_: str = "ttt_research.algos.ppo.PPO"
    games_per_update: Any = 2048
    """complete games played per update"""
    epochs: Any = 4
    """passes over each batch of moves"""
    minibatches: Any = 4
    """minibatches per pass"""
    lr: Any = 0.001
    """Adam's learning rate at the start"""
    lr_final: Any = 0.0001
    """linear decay to this over the budget (null: constant)"""
    gamma: Any = 1.0
    """discount per own move"""
    gae_lambda: Any = 0.95
    """GAE's lambda: how far each advantage looks past the value's estimate"""
    clip: Any = 0.2
    """the surrogate's clip range on the probability ratio"""
    ent_coef: Any = 0.08
    """explore every opening long enough to find X's best (a corner)"""
    ent_final: Any = 0.0
    """linear schedule for the entropy bonus (null: constant); 0 lets the last updates resolve reward gaps of
    ~0.004 (corner vs centre)"""
    vf_coef: Any = 0.5
    """weight of the value loss beside the policy's"""
    max_grad_norm: Any = 0.5
    """clip the gradient norm to this (0: no clipping)"""
    masking: Any = True
    """false: occupied cells can be chosen and forfeit (reward.illegal)"""
    shared_trunk: Any = False
    """true: value head on the policy's last hidden layer"""
    norm_adv: Any = True
    """normalise advantages per minibatch"""
    optimizer: Any = None
    """null = Adam; or a partial"""


SPEC = AlgoSpec(
    name="ppo",
    any_board=True,  # any m,n,k board (game=mnk): its rollouts, nets and updates take the game
    hyper=Hyper,
    acting="a sample of its policy: the softmax of the masked logits (temperature 1)",
    keys={**KEYS, "epochs": count(), "minibatches": count(), "clip": SHARE},
    varies=("lr", "lr_final", "ent_coef"),
    population=population("ppo"),
    # Fitted on populations of 1 to 128 members, batches of 512 to 8,192 games, mlp25, mlp100
    # and mlp128, seat o and both (each measurement within 8%); a value network beside the policy.
    memory=Memory(per_member=0, per_game=1540, per_game_unit=13, per_table_unit=1.3, nets=2),
)
