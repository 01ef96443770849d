"""``algo=alphazero``'s declaration (``algos/alphazero.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttt_research.algos.spec import (
    CELLS,
    RATE,
    RATE_FINAL,
    TEMPERATURE,
    WEIGHT,
    AlgoSpec,
    Buffer,
    Memory,
    Settings,
    between,
    flag,
    games,
    integer,
    zero_sum,
)
from ttt_research.contract import MAX_CELLS, VALUE_MAX
from ttt_research.errors import need, value_of

NUMBER = between(0, VALUE_MAX, f"a number in [0, {VALUE_MAX:g}]")
SIMULATIONS = integer(1, 1024, "an integer in [1, 1024] (simulations per searched move)")


def _check(cfg: Settings) -> None:
    zero_sum(cfg, "with algo=alphazero (its values are game results, +1 / 0 / -1)")
    win = value_of(cfg, "reward.win")
    need(win == 1, "reward.win", "1 with algo=alphazero (its value head is a tanh: results in [-1, 1])", win)


@dataclass
class Hyper:
    """``algo=alphazero``'s hyperparameters and their defaults (``algos/spec.py``: the schema of
    ``conf/algo/alphazero.yaml``)."""

    _target_: str = "ttt_research.algos.alphazero.AlphaZero"
    games_per_update: Any = 50
    """self-play games per update, then gradient_steps steps: 50 updates of 50 spend the budget exactly, and
    beat 40 of 64 (experiments/alphazero)"""
    simulations: Any = 16
    """simulations per searched move (self-play): 16 beat 8 (experiments/alphazero)"""
    test_simulations: Any = 4
    """the deterministic search evaluated exactly at the end (eval.json's search)"""
    max_considered: Any = 9
    """moves the root's Gumbel top-k considers (9: all on tic-tac-toe; a bigger board's 16 for all)"""
    lr: Any = 0.003
    """Adam ..."""
    lr_final: Any = 0.0003
    """... decayed linearly to this over the budget (null: constant)"""
    temperature: Any = 2.0
    """scale of the root's Gumbel noise (0: a deterministic search): 2 explores"""
    temperature_final: Any = 2.0
    """... annealed linearly to this (2 -> 1 hurt the search: experiments/alphazero)"""
    value_coef: Any = 2.0
    """weight of the value's squared error beside the policy's cross-entropy"""
    value_mix: Any = 0.0
    """value target: (1 - mix) * the game's result + mix * the search's value"""
    weight_decay: Any = 0.0
    """L2 on every weight, in the loss (1e-4 and 1e-3 hurt: experiments/alphazero)"""
    capacity: Any = 20000
    """replay positions per member (a ring)"""
    batch_size: Any = 256
    """positions per gradient step"""
    gradient_steps: Any = 32
    """gradient steps per update: 32 beat 8, 64 and 128 (experiments/alphazero)"""
    max_grad_norm: Any = 5.0
    """clip the gradient norm to this (0: no clipping)"""
    symmetries: Any = True
    """each learned position turned by a random one of the board's 8 symmetries"""


SPEC = AlgoSpec(
    name="alphazero",
    any_board=True,  # any m,n,k board: its tables, search and symmetries are the board's (algos/alphazero.py)
    hyper=Hyper,
    acting="the search's choice; as_trained scores the raw network's softmax (temperature 1)",
    keys={"simulations": SIMULATIONS, "test_simulations": SIMULATIONS,
          "max_considered": integer(1, MAX_CELLS, f"an integer in [1, {MAX_CELLS}] (moves at the root; "
                                                  "all the legal ones where there are fewer)"),
          "lr": RATE, "lr_final": RATE_FINAL, "temperature": TEMPERATURE, "temperature_final": RATE_FINAL,
          "value_coef": NUMBER, "value_mix": between(0, 1, "a share in [0, 1] (of the value target)"),
          "weight_decay": NUMBER, "capacity": games(), "batch_size": games(), "gradient_steps": games(),
          "max_grad_norm": WEIGHT, "symmetries": flag()},
    varies=("lr", "lr_final", "temperature", "temperature_final"),
    # the defaults' fit on tic-tac-toe; on another board a member's whole-tree search (its net's
    # tables, the subtrees' nodes, children, visits and values, the final search policies): 4,4,4
    # debug=tiny, one member, peaked at 10.26 GB where this estimates 10.1 GB
    memory=Memory(per_position_cell=44),
    check=_check,
    no_cell={"mlp25": f"{CELLS}#algoa2c-algoalphazero-algodqn-on-one-layer"},  # at best 2 of 8 seeds
    # A position (algos/alphazero.py's replay): the view (a board of int8), the search's policy
    # over the cells (float32 each) and the game's result (float32).
    buffers=(Buffer("algo.capacity", record=49, what="replay positions"),),
)
