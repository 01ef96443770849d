"""``tournament_100_s``: an exact round robin of 100 agents, cross-play and ratings (the
bench's figure; its definition is in the bench's docstring)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from ttt_research.env import game
from ttt_research.evaluation.crossplay import cross_play
from ttt_research.evaluation.exact import decision_codes
from ttt_research.evaluation.ratings import fit_ratings

TOURNAMENT_AGENTS = 100


def random_policies(n: int, seed: int = 0) -> torch.Tensor:
    """(n, M, 9) float64 stochastic policies: random weights over the empty cells. Every move
    has positive probability, so no game is cut short: the DP's worst case."""
    g = torch.Generator().manual_seed(seed)
    codes = decision_codes()
    legal = game.tables().legal[codes]
    x = torch.rand(n, codes.numel(), game.CELLS, generator=g, dtype=torch.float64) * legal
    return x / x.sum(-1, keepdim=True)


def bench_tournament(repeats: int, n: int = TOURNAMENT_AGENTS,
                     log: Callable[[str], None] = print) -> dict:
    """Seconds for ``cross_play`` of n agents (n * n ordered pairs, exact) plus their ratings;
    the median of ``repeats``, the split between the two beside it."""
    probs = random_policies(n)
    names = [str(k) for k in range(n)]
    fit_ratings(cross_play(probs[:2]), names[:2])  # warm up the cached tables
    split = []
    for _ in range(repeats):
        start = time.perf_counter()
        results = cross_play(probs)
        played = time.perf_counter()
        fit_ratings(results, names)
        split.append((played - start, time.perf_counter() - played))
    total = statistics.median(a + b for a, b in split)
    log(f"tournament of {n} agents ({n * n:,d} ordered pairs, exact): {total:.2f} s")
    return {f"tournament_{n}_s": total,
            "tournament_phases_s": {"cross_play": statistics.median(a for a, _ in split),
                                    "ratings": statistics.median(b for _, b in split)},
            # Both run on one torch thread on the CPU (crossplay's docstring, "Threads").
            "tournament_setting": {"agents": n, "threads": 1}}
