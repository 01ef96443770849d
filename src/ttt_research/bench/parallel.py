"""``population_vs_parallel_singles``: N agents trained as one population (one process, the
config's threads) against the same N agents trained as single runs two at a time (two
processes, one thread each, each training its half of the seeds one after the other): what a
user gets from ``population.size=N`` instead of a shell loop over seeds on a 2-core host.

Both sides train the same seeds on the same budget per agent in the same bench run. Each
worker process imports everything, says it is ready, and starts when both are (so neither
side pays Python's and torch's start-up, which a real shell loop pays on every run on top);
the singles' wall time is the slower worker's, from the start to its last run's end, each
run's build and Trainer included. Rates are summed over the agents: games per second for
REINFORCE, learner steps per second for PPO.

    python -m ttt_research.bench.parallel ALGO GAMES SEED [SEED ...]   # one worker (internal)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

from ttt_research.bench.fitting import fit, trainer_for

WORKERS = 2  # the host this figure is about has two cores
SIZES = ((16, 64, 100), (16,))  # (full, quick)
GAMES = {"reinforce": (131_072, 65_536), "ppo": (20_480, 10_240)}  # per agent (full, quick)
ALGO_OVERRIDES = {"reinforce": [], "ppo": ["algo=ppo", "net=mlp128"]}


def _done(algo: str, module) -> int:
    """What a run's rate counts: games for REINFORCE (each member's), learner steps for PPO."""
    return module.env_steps if algo == "ppo" else module.games_played * module.n


def population(device: str, algo: str, n: int, games: int, threads: int | None) -> dict:
    """N agents in one population, in this process: seeds 1000..1000+N-1."""
    start = time.perf_counter()
    module, clock = fit([*ALGO_OVERRIDES[algo], f"population.size={n}", "seed=1000", f"budget.games={games}",
                         f"trainer={trainer_for(device)}"], threads=threads)
    wall = time.perf_counter() - start
    return {"done": _done(algo, module), "train_s": clock.train_s, "wall_s": wall,
            "rate": _done(algo, module) / wall}


def singles(algo: str, n: int, games: int) -> dict:
    """The same N agents as single runs, ``WORKERS`` processes side by side."""
    seeds = [1000 + k for k in range(n)]
    shares = [seeds[w::WORKERS] for w in range(WORKERS)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [subprocess.Popen([sys.executable, "-m", "ttt_research.bench.parallel", algo, str(games),
                               *map(str, share)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for share in shares if share]
    try:
        for p in procs:  # each imports, then says so
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a worker of population_vs_parallel_singles failed before training "
                                   f"(exit {p.poll()})")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=3600)
            if p.returncode != 0:
                raise RuntimeError(f"a worker of population_vs_parallel_singles exited {p.returncode}: "
                                   f"{err.strip().splitlines()[-1] if err.strip() else ''}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:  # never leave a worker training on its own
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    done = sum(r["done"] for r in results)
    wall = max(r["wall_s"] for r in results)
    return {"done": done, "wall_s": wall, "rate": done / wall, "workers": len(procs)}


def bench_parallel(device: str, algos: tuple[str, ...], sizes: tuple[int, ...], quick: bool,
                   threads: int | None, log: Callable[[str], None], per_agent: int | None = None) -> dict:
    """``{algo: {N: {population, singles, ratio}}}``: rates summed over the agents, and the
    population's rate over the parallel singles' (above 1: the population pays); ``per_agent``:
    the games each agent trains (default ``GAMES``)."""
    out: dict = {}
    for algo in algos:
        games = per_agent or GAMES[algo][1 if quick else 0]
        out[algo] = {}
        for n in sizes:
            pop = population(device, algo, n, games, threads)
            one = singles(algo, n, games)
            unit = "steps" if algo == "ppo" else "games"
            log(f"{algo}, {n} agents x {games:,d} games: population {pop['rate']:,.0f} {unit}/s "
                f"({pop['wall_s']:.1f} s), {one['workers']} single runs at a time {one['rate']:,.0f} "
                f"({one['wall_s']:.1f} s): {pop['rate'] / one['rate']:.2f}x")
            out[algo][str(n)] = {"games_per_agent": games, "population": pop, "singles": one,
                                 "ratio": pop["rate"] / one["rate"]}
    return out


def format_lines(res: dict) -> list[str]:
    rows = ["population_vs_parallel_singles: N agents as one population (1 process) / the same N as "
            f"single runs {WORKERS} at a time"]
    for algo, by_n in res.items():
        unit = "steps/s" if algo == "ppo" else "games/s"
        for n, r in by_n.items():
            pop, one = r["population"], r["singles"]
            rows.append(f"  {algo:<9} N={n:<4} {pop['rate']:>12,.0f} vs {one['rate']:>12,.0f} "
                        f"{unit}: {r['ratio']:.2f}x ({pop['wall_s']:.1f} s vs "
                        f"{one['wall_s']:.1f} s, {r['games_per_agent']:,d} games an agent)")
    return rows


def worker(argv: list[str]) -> None:
    """Train single runs of ``seeds`` one after the other, one thread, once told to start."""
    algo, games, seeds = argv[0], int(argv[1]), [int(s) for s in argv[2:]]
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":  # the bench is gone: train nothing
        sys.exit(2)
    start, done = time.perf_counter(), 0
    for seed in seeds:
        overrides = [*ALGO_OVERRIDES[algo], f"seed={seed}", f"budget.games={games}", "trainer=cpu"]
        module, _ = fit(overrides, threads=1)
        done += _done(algo, module)
    print(json.dumps({"done": done, "wall_s": time.perf_counter() - start}), flush=True)


if __name__ == "__main__":
    worker(sys.argv[1:])
