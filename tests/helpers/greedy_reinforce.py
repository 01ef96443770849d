"""An algorithm the shell has never heard of, declared the way a user declares one: the class
here, its spec beside it (``greedy_reinforce_spec.py``, torch-free). REINFORCE under another
name, whose spec differs from REINFORCE's where a test can see it: its own rule for ``lr``,
members that may vary ``lr`` only, and a memory model of its own. Train it with
``algo._target_=tests.helpers.greedy_reinforce.GreedyReinforce``."""

from __future__ import annotations

from ttt_research.algos.reinforce import Reinforce

TARGET = f"{__name__}.GreedyReinforce"


class GreedyReinforce(Reinforce):
    name = "greedy_reinforce"
