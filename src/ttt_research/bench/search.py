"""``search_us_per_game``: ``algo=alphazero``'s self-play search on one thread (the bench's
figure; its definition is in the bench's docstring)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import lightning as L
import torch
from hydra.utils import instantiate

from ttt_research.env.streams import Streams
from ttt_research.search.gumbel import subtrees
from ttt_research.train.confdir import compose

SEARCH_BATCH, SEARCH_SIMULATIONS = 4096, 16


def bench_search(device: str, repeats: int, batch: int = SEARCH_BATCH,
                 simulations: int = SEARCH_SIMULATIONS, log: Callable[[str], None] = print) -> dict:
    """``algo=alphazero``'s self-play speed on one thread (the figure in ``bench``'s docstring):
    ``batch`` self-play games, every move searched, per repeat; the median of ``repeats``."""
    cfg = compose(["algo=alphazero", f"algo.simulations={simulations}", f"algo.games_per_update={batch}"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        L.seed_everything(0, verbose=False)
        algo = instantiate(cfg.algo, _partial_=True)(net=instantiate(cfg.net)).to(device)
        opponent, streams = instantiate(cfg.opponent), Streams([0], device)
        sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
        algo.self_play(batch // 8, opponent, "both", device, streams, 1.0)  # warm up
        per_game, split = [], []
        for r in range(repeats):
            sync()
            start = time.perf_counter()
            algo.self_play(batch, opponent, "both", device, Streams([r], device), 1.0)
            sync()
            per_game.append((time.perf_counter() - start) / batch * 1e6)
            t0 = time.perf_counter()
            logits, values = algo.tables()
            t1 = time.perf_counter()
            subtrees(logits, values, simulations)
            split.append((t1 - t0, time.perf_counter() - t1))
        log(f"alphazero self-play, {batch:,d} games x {simulations} simulations: "
            f"{statistics.median(per_game):.1f} us a game")
    finally:
        torch.set_num_threads(threads)
    return {"search_us_per_game": statistics.median(per_game),
            "search_phases_ms": {"tables": 1e3 * statistics.median(t for t, _ in split),
                                 "subtrees": 1e3 * statistics.median(s for _, s in split)},
            "search_setting": {"batch": batch, "simulations": simulations, "threads": 1}}
