"""``algo=reinforce_faithful``'s declaration (``algos/reinforce_faithful.py``; ``algos/spec.py``
says what a spec is)."""
from __future__ import annotations

from dataclasses import replace

from ttt_research.algos.reinforce_spec import SPEC as BATCHED
from ttt_research.algos.spec import RATE, AlgoSpec

SPEC = AlgoSpec(
    name="reinforce_faithful",
    target="ttt_research.algos.reinforce_faithful.ReinforceFaithful",
    keys={"lr": RATE},
    one_process="a batched algorithm with several processes (reinforce_faithful plays one game at a "
                "time and updates the weights outside DDP's gradient averaging)",
    population=lambda cfg: "algo=reinforce_faithful plays one game at a time; use algo=reinforce",
    memory=replace(BATCHED.memory, batch="game"),  # REINFORCE's model, one game a batch
)
