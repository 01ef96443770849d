"""The bench on bigger boards: an m,n,k game's tables and one exact evaluation, timed.

Each figure is a fresh process (``python -c``), so a build starts from an empty cache and
a peak resident size is the process's own (``bench/peak.py``: not its parent's):

* ``build_s``: the first time, in an empty cache folder: every reachable position solved
  and written (``Game.positions``), then the rule tables derived (``Game.tables``);
* ``load_s`` / ``tables_s``: after, the positions read back from the cache (checked) and
  the tables derived from them;
* ``prepare_s``: what a process does once before its first evaluation: the positions read
  from the cache, the tables derived, the solution and the evaluator's tree of the rows;
* ``eval_s``: one exact evaluation of an agent as a run's ``eval.json`` has it
  (``exploit.evaluate_agent``: the greedy report, its NashConv and the policy as trained at
  temperature 1), of the default training network's shape, ``net=mlp100`` (one hidden layer
  of 100 on ``planes18``, two inputs a cell; seeded, not trained: its forward pass costs what a
  trained one's does; before 2026-12-06 the bench used mlp128's shape, cells -> 128 -> 128),
  over every decision point of the board, its forward included, on as many torch threads as
  the host has cores (``--threads`` sets another count; since 2026-12-06 the evaluation shares its
  blocks among that many Python threads, ``tree.Workers``: before, it ran on one); ``eval_peak_gb``:
  the peak resident size of that process, tables included.

Medians of ``repeats`` processes (the build: ``build_repeats``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

# The child's code: one phase, its figures as one JSON line on stdout.
CHILD = """
import json, sys, time
import torch
from ttt_research.env.board import Game
phase, m, n, k = sys.argv[1], *map(int, sys.argv[2:5])
torch.set_num_threads(int(sys.argv[5]))
g = Game(m, n, k)
out = {}
if phase != "eval":  # the positions read (or built), then the tables derived from them
    from ttt_research.env import indexed
    t0 = time.perf_counter(); p = g.positions(); t1 = time.perf_counter(); indexed.build(g, p)
    out.update(positions_s=t1 - t0, tables_s=time.perf_counter() - t1)
else:
    from ttt_research.env.solver import solve
    from ttt_research.evaluation import exact, exploit
    from ttt_research.models.nets import MLP
    t0 = time.perf_counter(); g.tables(); solve(g=g); exact.tree("cpu", g)
    out["prepare_s"] = time.perf_counter() - t0  # tables (read and derived), solution, tree
    torch.manual_seed(0)
    net = MLP(hidden=[100], encoding="planes18", cells=g.cells)
    t0 = time.perf_counter(); exploit.evaluate_agent(net, exploit.Acting(1.0), game=g)
    out["eval_s"] = time.perf_counter() - t0
from ttt_research.bench.peak import peak_gb
out["peak_gb"] = peak_gb()
print(json.dumps(out))
"""
BOARDS = {False: ("3,4,3", "4,4,4"), True: ("3,4,3",)}  # by quick


def _child(phase: str, board: str, cache: str, threads: int) -> dict:
    env = {**os.environ, "TTT_RESEARCH_CACHE": cache}
    p = subprocess.run([sys.executable, "-c", CHILD, phase, *board.split(","), str(threads)],
                       capture_output=True, text=True, env=env, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"the {phase} of {board} failed: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def bench_board(board: str, repeats: int, build_repeats: int, threads: int | None, log=print) -> dict:
    """The figures of one board (``m,n,k``); see the module. ``threads``: torch's (None: one for
    the build and the load, a core each for the evaluation)."""
    builds, loads, evals = [], [], []
    eval_threads = threads or os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="ttt-bench-cache-") as root:
        for r in range(build_repeats):
            builds.append(_child("build", board, os.path.join(root, f"fresh{r}"), threads or 1))
            log(f"{board}: built in {builds[-1]['positions_s'] + builds[-1]['tables_s']:.1f} s")
        cache = os.path.join(root, "fresh0")
        for _ in range(repeats):
            loads.append(_child("load", board, cache, threads or 1))
        for _ in range(repeats):
            evals.append(_child("eval", board, cache, eval_threads))
            e = evals[-1]
            log(f"{board}: one exact evaluation {e['eval_s']:.2f} s ({eval_threads} threads), "
                f"peak {e['peak_gb']:.2f} GB")
    med = statistics.median
    return {
        "build_s": med(b["positions_s"] + b["tables_s"] for b in builds),
        "build_positions_s": med(b["positions_s"] for b in builds),
        "load_s": med(x["positions_s"] for x in loads),
        "tables_s": med(x["tables_s"] for x in loads),
        "load_peak_gb": med(x["peak_gb"] for x in loads),
        "prepare_s": med(x["prepare_s"] for x in evals),
        "eval_s": med(x["eval_s"] for x in evals),
        "eval_peak_gb": med(x["peak_gb"] for x in evals),
        "eval_threads": eval_threads,
        "per_run": {"build": builds, "load": loads, "eval": evals},
    }


def bench_boards(quick: bool, repeats: int, threads: int | None, log=print) -> dict:
    """``boards``: each board of ``BOARDS`` (4,4,4 unless ``quick``), by name."""
    return {b: bench_board(b, repeats, 1 if quick else 3, threads, log) for b in BOARDS[quick]}


def boards_lines(res: dict) -> list[str]:
    """The table's lines of ``boards`` (none when it did not run)."""
    return [f"{'board ' + b:<24} built {r['build_s']:.1f} s, loaded {r['load_s']:.2f} s + tables "
            f"{r['tables_s']:.2f} s; one exact evaluation {r['eval_s']:.2f} s on "
            f"{r.get('eval_threads', 1)} threads (after {r['prepare_s']:.2f} s once), peak "
            f"{r['eval_peak_gb']:.2f} GB" for b, r in res.items()]
