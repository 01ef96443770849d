"""Where a training run's time goes: a run (a single agent, or a population) trained without a
run folder under cProfile, its time split into the parts of an update (issue 48).

    python experiments/populations/where_time_goes.py                          # REINFORCE, 16 agents
    python experiments/populations/where_time_goes.py --size 1 -- algo=ppo net=mlp128 budget.games=20480

Each part is the inclusive time of the functions named for it (``PARTS``): the training loop,
its updates, and in them the games played (``env.rollout.play_batch``, which holds the board
tables looked up, ``game.at``, and the forward passes made to act), every forward pass of the
networks, the backward passes, the optimiser steps and the shell's accounting after each
update. The bench's ``fit``: no exact evaluation during training (``eval_s`` in the bench is
one). One thread, as the configs run.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import torch

from ttt_research.bench.fitting import fit

# part -> the (file suffix, function) pairs whose inclusive time it is
PARTS = {
    "fit": [("lightning/pytorch/trainer/trainer.py", "_run_stage")],
    "update": [("train/module.py", "training_step")],
    "rollout": [("env/rollout.py", "play_batch")],
    "tables": [("env/game.py", "at")],
    "forward": [("models/nets.py", "forward")],
    "backward": [("torch/_tensor.py", "backward")],
    "optimizer": [("torch/optim/optimizer.py", "wrapper"), ("models/member_optim.py", "step")],
    "shell": [("train/accounting.py", "account")],
}


def inclusive(stats: pstats.Stats, pairs) -> float:
    """The inclusive seconds of the functions ``pairs`` name."""
    return sum(ct for (file, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.stats.items()
               if any(file.endswith(f) and name == n for f, n in pairs))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=16, help="population.size (1: a single run)")
    p.add_argument("overrides", nargs="*", help="more overrides, e.g. algo=ppo net=mlp128")
    args = p.parse_args()
    overrides = [*args.overrides, f"population.size={args.size}", "seed=1000"]
    if not any(o.startswith("budget.games=") for o in overrides):
        overrides.append("budget.games=262144")
    torch.set_num_threads(1)
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    module, clock = fit(overrides, threads=1)
    prof.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(prof)
    t = {k: inclusive(stats, v) for k, v in PARTS.items()}
    done = module.env_steps if module.env_steps else module.games_played * module.n
    print(f"{' '.join(overrides)}: {done:,} {'steps' if module.env_steps else 'games'} in "
          f"{clock.train_s:.2f} s of training ({wall:.2f} s with the build), under cProfile; "
          "inclusive seconds (a part may hold another: the rollout holds the tables and the "
          "forward passes made to act)")
    rows = [("training loop (Trainer._run_stage)", t["fit"]), ("  updates (training_step)", t["update"]),
            ("    rollout (play_batch)", t["rollout"]), ("      tables (game.at)", t["tables"]),
            ("    forward passes, anywhere (nets' forward)", t["forward"]),
            ("    backward", t["backward"]), ("    optimizer step", t["optimizer"]),
            ("    shell: count, guard, log (accounting)", t["shell"])]
    if t["fit"] <= 0:
        raise SystemExit("error: no time found in Lightning's training loop (Trainer._run_stage): "
                         "has Lightning renamed it? PARTS names the functions read")
    for name, v in rows:
        print(f"  {name:<56} {v:8.2f} s  {100 * v / t['fit']:5.1f}%")


if __name__ == "__main__":
    main()
