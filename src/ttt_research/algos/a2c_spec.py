"""``algo=a2c``'s declaration (``algos/a2c.py``; ``algos/spec.py`` says what a spec is): PPO's
keys but the clip and the epochs, the same population rules and memory model."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttt_research.algos.ppo_spec import KEYS, population
from ttt_research.algos.ppo_spec import SPEC as PPO
from ttt_research.algos.spec import CELLS, AlgoSpec, count


@dataclass
class Hyper:
    """``algo=a2c``'s hyperparameters and their defaults (``algos/spec.py``: the schema of
    ``conf/algo/a2c.yaml``)."""

    _target_: str = "ttt_research.algos.a2c.A2C"
    games_per_update: Any = 256
    """complete games per gradient step (about 1,100 learner moves from both seats)"""
    lr: Any = 0.002
    """Adam's learning rate at the start ... (0.002 and 0.003 tied on the tuning seeds 1000-1001; 0.001
    left O beatable)"""
    lr_final: Any = 0.0001
    """... decayed linearly to this over the budget (null: constant)"""
    gamma: Any = 1.0
    """discount per own move"""
    gae_lambda: Any = 1.0
    """1: the Monte-Carlo return minus the value (SB3's A2C default); below 1, GAE's trade of bias
    for variance"""
    ent_coef: Any = 0.08
    """entropy bonus, as PPO's ..."""
    ent_final: Any = 0.0
    """... annealed linearly to this (null: constant)"""
    vf_coef: Any = 0.5
    """weight of the value loss beside the policy's"""
    minibatches: Any = 8
    """gradient steps per batch, each on its own share of the moves (one pass over them): 8 made all 4
    tuning runs unbeatable by 155k games, 1 and 4 half of them at 800k (experiments/a2c)"""
    max_grad_norm: Any = 0.5
    """clip the gradient norm to this (0: no clipping)"""
    masking: Any = True
    """false: occupied cells can be chosen and forfeit (reward.illegal)"""
    shared_trunk: Any = False
    """true: value head on the policy's last hidden layer"""
    norm_adv: Any = False
    """normalise advantages per step (SB3's A2C: off)"""
    optimizer: Any = None
    """null = Adam; or a partial"""


SPEC = AlgoSpec(
    name="a2c",
    any_board=True,  # any m,n,k board (game=mnk): PPO's rollouts, nets and heads, which take the game
    hyper=Hyper,
    acting="a sample of its policy: the softmax of the masked logits (temperature 1)",
    keys={**KEYS, "minibatches": count()},
    varies=PPO.varies,
    population=population("a2c"),
    no_cell={"mlp25": f"{CELLS}#algoa2c-algoalphazero-algodqn-on-one-layer"},  # at best 3 of 8 seeds
    memory=PPO.memory,  # the same networks and batch of moves
)
