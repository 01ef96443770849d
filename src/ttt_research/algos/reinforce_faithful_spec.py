"""``algo=reinforce_faithful``'s declaration (``algos/reinforce_faithful.py``; ``algos/spec.py``
says what a spec is)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ttt_research.algos.reinforce_spec import SPEC as BATCHED
from ttt_research.algos.spec import RATE, AlgoSpec


@dataclass
class Hyper:
    """``algo=reinforce_faithful``'s hyperparameters and their defaults (``algos/spec.py``: the schema of
    ``conf/algo/reinforce_faithful.yaml``)."""

    _target_: str = "ttt_research.algos.reinforce_faithful.ReinforceFaithful"
    games_per_update: Any = 1000
    """games per training step (one log row); each game still updates on its own"""
    lr: Any = 0.1
    """plain SGD, as the seed"""


SPEC = AlgoSpec(
    name="reinforce_faithful",
    any_board=True,  # any m,n,k board (game=mnk): planes18 gives 2 x cells inputs, the loop plays the game
    hyper=Hyper,
    acting="greedy, as the seed",
    tuned_on="mlp100",  # the seed's network
    keys={"lr": RATE},
    one_process="a batched algorithm with several processes (reinforce_faithful plays one game at a "
                "time and updates the weights outside DDP's gradient averaging)",
    population=lambda cfg: "algo=reinforce_faithful plays one game at a time; use algo=reinforce",
    memory=replace(BATCHED.memory, batch="game"),  # REINFORCE's model, one game a batch
)
