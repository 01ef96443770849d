"""Benchmark harness: ``python -m ttt_research.bench [--json] [--device cpu|cuda] [--quick]``.

Measures speed, never correctness (the tests do that). Each figure is the median of
several repeats, so one noisy moment on a shared machine does not decide it. Figures:

* ``env_games_per_s``: complete random-vs-random games per second with auto-reset, at
  the best of a few batch sizes (both players draw with ``game.random_moves``).
* ``eval_s``: one exact evaluation of a greedy policy (forward pass plus the DPs).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import torch

from . import __version__, game
from .evaluate import evaluate_policy


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def env_games_per_s(batch: int, steps: int, device: torch.device, seed: int = 0) -> float:
    """Games per second of random-vs-random play over ``steps`` moves of ``batch`` games."""
    g = game.Games(batch, device)
    gen = torch.Generator(device=device).manual_seed(seed)
    finished = torch.zeros((), dtype=torch.long, device=device)
    for _ in range(10):  # warm up: games in flight at every stage, caches hot
        g.step(game.random_moves(g.code, gen, g.t))
    _sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        s = g.step(game.random_moves(g.code, gen, g.t))
        finished += s.ended.sum()  # stays on the device: no sync per move
    _sync(device)
    return finished.item() / (time.perf_counter() - start)


def bench_env(device: torch.device, quick: bool, repeats: int) -> dict:
    batches = [2**16, 2**18] if quick else [2**14, 2**16, 2**18, 2**20, 2**22]
    if device.type == "cuda":
        batches += [2**24]
    best = {}
    for b in batches:
        steps = max(20, min(200, 2**24 // b * 4))
        best[b] = statistics.median(env_games_per_s(b, steps, device, seed=r) for r in range(repeats))
    top = max(best, key=best.get)
    return {"env_games_per_s": best[top], "env_best_batch": top,
            "env_by_batch": {str(b): round(v) for b, v in best.items()}}


def bench_eval(repeats: int) -> dict:
    net = torch.nn.Sequential(torch.nn.Linear(9, 64), torch.nn.ReLU(), torch.nn.Linear(64, 9))
    evaluate_policy(net)  # warm up the cached tables
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        evaluate_policy(net)
        times.append(time.perf_counter() - start)
    return {"eval_s": statistics.median(times)}


def run(device: str = "cpu", quick: bool = False, threads: int | None = None) -> dict:
    dev = torch.device(device)
    if threads:
        torch.set_num_threads(threads)
    repeats = 3 if quick else 5
    out = {"device": str(dev), "threads": torch.get_num_threads()}
    out.update(bench_env(dev, quick, repeats))
    out.update(bench_eval(repeats))
    out["versions"] = {"ttt_research": __version__, "torch": torch.__version__,
                       "python": platform.python_version()}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ttt_research.bench", description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (about a minute)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device is available", file=sys.stderr)
        return 2
    res = run(args.device, args.quick, args.threads)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"device {res['device']}, {res['threads']} thread(s), torch {res['versions']['torch']}")
        print(f"{'env_games_per_s':<22} {res['env_games_per_s']:>14,.0f}  (batch {res['env_best_batch']})")
        print(f"{'eval_s':<22} {res['eval_s']:>14.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
