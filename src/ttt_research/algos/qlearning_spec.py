"""``algo=qlearning``'s declaration (``algos/qlearning.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from ttt_research.algos.spec import (
    PROBABILITY,
    PROBABILITY_FINAL,
    SHARE,
    AlgoSpec,
    Memory,
    between,
    count,
    flag,
    rollouts_divide,
)

# A step towards a batch's mean target: at most all the way.
STEP = "a step size in (0, 1] for algo=qlearning (1: the batch's mean target)"

SPEC = AlgoSpec(
    name="qlearning",
    target="ttt_research.algos.qlearning.QLearning",
    keys={"rollouts": count(), "lr": between(0, 1, STEP, low_open=True),
          "lr_final": between(0, 1, STEP, null=True), "epsilon": PROBABILITY,
          "epsilon_final": PROBABILITY_FINAL, "gamma": SHARE, "running_mean": flag()},
    varies=("lr", "lr_final", "epsilon"),
    nets=("table",),
    net_why="learns a table of action values",
    one_process="one that trains in several processes (qlearning writes its table in place, outside "
                "DDP's averaging: use trainer=cpu)",
    check=rollouts_divide,
    memory=Memory(table=2 * 3**9 * 9),  # a (3^9, 9) table of values and one of visits
)
