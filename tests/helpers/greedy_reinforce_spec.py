"""``GreedyReinforce``'s declaration (``greedy_reinforce.py``): read by the shell before torch
loads, as the specs of ``ttt_research/algos`` are."""

from __future__ import annotations

from dataclasses import replace

from ttt_research.algos.reinforce_spec import SPEC as REINFORCE
from ttt_research.algos.spec import Memory, between

SPEC = replace(
    REINFORCE,
    name="greedy_reinforce",
    target="tests.helpers.greedy_reinforce.GreedyReinforce",
    keys={**REINFORCE.keys, "lr": between(0, 4, "a step in (0, 4] for greedy_reinforce", low_open=True)},
    varies=("lr",),
    memory=Memory(per_member=1_000_000_000, per_game=0, per_game_unit=0, per_table_unit=0),
)
