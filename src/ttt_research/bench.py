"""Benchmark harness: ``python -m ttt_research.bench [--json] [--device cpu|cuda] [--quick]``.

Measures speed, never correctness (the tests do that). Each figure is the median of
several repeats, so one noisy moment on a shared machine does not decide it. Figures:

* ``env_games_per_s``: complete random-vs-random games per second with auto-reset, at
  the best of a few batch sizes (both players draw with ``game.random_moves``).
* ``reinforce_games_per_s``: training games per second of the default batched REINFORCE
  (``algo=reinforce``, its own config), updates included: games played over the training
  loop's wall time.
* ``ppo_steps_per_s`` and ``time_to_unbeatable_s``: the flagship PPO (``algo=ppo
  net=mlp128``): learner environment steps per second, updates included, and the training
  loop's wall time until the exact evaluation (run after every update, its own time not
  counted) first shows 0 losses vs random from both seats; ``null`` if the budget ends first.
* ``eval_s``: one exact evaluation of a greedy policy (forward pass plus the DPs).
* ``move_latency_ms``: one greedy move for one board with the flagship's network,
  ``{"torch": ..., "onnxruntime": ...}`` (the exported ``policy.onnx`` graph).

``--compare sb3`` adds SB3 + sb3-contrib MaskablePPO with the seed's network on the gym
adapter (``compare_sb3.py``, the ``compare`` extra) and the ratios to it. Reference rows
(antirez's C program, SB3 as measured in FACTS.md) are printed beside the table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import torch

from . import __version__, game
from .evaluate import evaluate_policy
from .nets import MLP

# Reference figures measured on this project's machine (../shared/reference/FACTS.md).
REFERENCES = {
    "reinforce_games_per_s": ("antirez's C ttt-rl", 89_000),
    "ppo_steps_per_s": ("SB3 MaskablePPO (seed)", 700),
    "time_to_unbeatable_s": ("SB3 MaskablePPO: not unbeatable as O after 300k steps (~420 s)", None),
}
DEFAULT_GAMES = {"reinforce": (6_000_000, 500_000), "ppo": (800_000, 800_000)}  # (full, quick)


def _say(msg: str) -> None:
    """Progress on stderr, so ``--json`` output stays clean."""
    print(f"bench: {msg}", file=sys.stderr, flush=True)


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


def compose(overrides: list[str]):
    """The training config of ``python -m ttt_research OVERRIDES``."""
    from .confdir import compose as compose_config

    return compose_config(overrides)


class Clock(L.Callback):
    """The training loop's wall time; with ``watch``, also the time at which the exact
    evaluation, run after every update (and not counted), first shows 0 losses vs random
    from both seats, where it stops the run."""

    def __init__(self, watch: bool = False):
        self.watch = watch
        self.unbeatable_s: float | None = None
        self.train_s = 0.0
        self._start = self._excluded = 0.0

    def on_train_start(self, trainer, module):
        self._start, self._excluded = time.perf_counter(), 0.0

    def _elapsed(self) -> float:
        return time.perf_counter() - self._start - self._excluded

    def on_train_batch_end(self, trainer, module, *args):
        if not self.watch or self.unbeatable_s is not None:
            return
        at = self._elapsed()
        t0 = time.perf_counter()
        report = evaluate_policy(module.policy_logits)
        self._excluded += time.perf_counter() - t0
        if report["as_x"]["vs_random"]["loss"] == 0 and report["as_o"]["vs_random"]["loss"] == 0:
            self.unbeatable_s = at
            trainer.should_stop = True

    def on_train_end(self, trainer, module):
        self.train_s = self._elapsed()


def fit(overrides: list[str], watch: bool = False, threads: int | None = None):
    """Train the config of ``overrides`` without a run folder; returns (module, clock)."""
    from hydra.utils import instantiate

    from .train import build, quiet_lightning

    cfg = compose(overrides)
    quiet_lightning()
    torch.set_num_threads(threads or cfg.threads or 1)
    L.seed_everything(cfg.seed, verbose=False)
    module = build(cfg)
    clock = Clock(watch)
    trainer = instantiate(cfg.trainer, logger=False, callbacks=[clock], enable_checkpointing=False,
                          enable_progress_bar=False, limit_train_batches=module.total_updates)
    trainer.fit(module)
    return module, clock


def bench_reinforce(device: str, games: int, repeats: int, threads: int | None) -> dict:
    rates = []
    for r in range(repeats):
        module, clock = fit([f"budget.games={games}", f"seed={r}", f"trainer={_trainer(device)}"],
                            threads=threads)
        rates.append(module.games_played / clock.train_s)
        _say(f"reinforce run {r + 1}/{repeats}: {rates[-1]:,.0f} games/s")
    return {"reinforce_games_per_s": statistics.median(rates)}


def bench_ppo(device: str, games: int, repeats: int, threads: int | None) -> dict:
    rates, times = [], []
    for r in range(repeats):
        module, clock = fit(["algo=ppo", "net=mlp128", f"budget.games={games}", f"seed={r}",
                             f"trainer={_trainer(device)}"], watch=True, threads=threads)
        rates.append(module.env_steps / clock.train_s)
        times.append(clock.unbeatable_s)
        when = "never" if clock.unbeatable_s is None else f"{clock.unbeatable_s:.1f} s"
        _say(f"ppo run {r + 1}/{repeats}: {rates[-1]:,.0f} steps/s, unbeatable at {when}")
    reached = [t for t in times if t is not None]
    # The median over runs that got there; null when fewer than half did.
    ttu = statistics.median(reached) if len(reached) * 2 > len(times) else None
    return {"ppo_steps_per_s": statistics.median(rates), "time_to_unbeatable_s": ttu,
            "details_ppo_unbeatable_s": times}


def _trainer(device: str) -> str:
    return "gpu" if device == "cuda" else "cpu"


def bench_latency(repeats: int, calls: int = 2000) -> dict:
    """Median time of one greedy move for one board, torch and onnxruntime, in ms."""
    import numpy as np
    import onnxruntime as ort

    from .export import export

    net = MLP([128, 128], "signed9").eval()
    board = torch.zeros(1, 9)
    board[0, 4] = -1.0  # a position after the opponent took the centre

    def per_call(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - start) / calls * 1e3)
        return statistics.median(times)

    with torch.inference_mode():
        torch_ms = per_call(lambda: int(net(board).argmax(-1)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy.onnx"
        export(net, path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1  # one board: threads only cost
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        x = board.numpy()
        ort_ms = per_call(lambda: int(np.argmax(session.run(None, {"board": x})[0])))
    return {"move_latency_ms": {"torch": torch_ms, "onnxruntime": ort_ms}}


def bench_sb3(steps: int, threads: int | None, ours: dict) -> dict:
    from .compare_sb3 import run_sb3

    r = run_sb3(steps, seed=0, threads=threads or 1, log=_say)
    out = {"steps": r["steps"], "steps_per_s": r["steps_per_s"],
           "time_to_unbeatable_s": r["time_to_unbeatable_s"]}
    out["ratio_steps_per_s"] = ours["ppo_steps_per_s"] / r["steps_per_s"]
    if ours["time_to_unbeatable_s"] and r["time_to_unbeatable_s"]:
        out["ratio_time_to_unbeatable"] = r["time_to_unbeatable_s"] / ours["time_to_unbeatable_s"]
    return out


def run(device: str = "cpu", quick: bool = False, threads: int | None = None,
        reinforce_games: int | None = None, ppo_games: int | None = None,
        compare: str | None = None, sb3_steps: int = 50_000) -> dict:
    dev = torch.device(device)
    repeats = 3 if quick else 5
    train_repeats = 1 if quick else 3
    pick = 1 if quick else 0
    out: dict = {"device": str(dev), "threads": threads or torch.get_num_threads()}
    _say("engine")
    if threads:
        torch.set_num_threads(threads)
    env = bench_env(dev, quick, repeats)
    out["env_games_per_s"] = env.pop("env_games_per_s")
    _say("training: default REINFORCE")
    out.update(bench_reinforce(device, reinforce_games or DEFAULT_GAMES["reinforce"][pick],
                               train_repeats, threads))
    _say("training: flagship PPO until unbeatable")
    ppo = bench_ppo(device, ppo_games or DEFAULT_GAMES["ppo"][pick], train_repeats, threads)
    out["details"] = {**env, "ppo_unbeatable_s_per_run": ppo.pop("details_ppo_unbeatable_s")}
    out.update(ppo)
    if threads:
        torch.set_num_threads(threads)
    out.update(bench_eval(repeats))
    _say("move latency")
    out.update(bench_latency(repeats))
    if compare == "sb3":
        _say(f"SB3 MaskablePPO, {sb3_steps:,d} steps")
        out["compare_sb3"] = bench_sb3(sb3_steps, threads, out)
    out["versions"] = {"ttt_research": __version__, "torch": torch.__version__,
                       "python": platform.python_version()}
    return out


def format_table(res: dict) -> str:
    """The figures, with the reference rows beside them."""
    lat = res["move_latency_ms"]
    ttu = res["time_to_unbeatable_s"]
    rows = [f"device {res['device']}, {res['threads']} thread(s), torch {res['versions']['torch']}",
            f"{'figure':<24} {'ours':>14}  reference",
            f"{'env_games_per_s':<24} {res['env_games_per_s']:>14,.0f}  "
            f"(batch {res['details']['env_best_batch']})"]
    for key, fmt in (("reinforce_games_per_s", ",.0f"), ("ppo_steps_per_s", ",.0f")):
        name, ref = REFERENCES[key]
        rows.append(f"{key:<24} {res[key]:>14{fmt}}  {name}: ~{ref:,} ({res[key] / ref:.0f}x)")
    rows.append(f"{'time_to_unbeatable_s':<24} {'never' if ttu is None else f'{ttu:.1f}':>14}  "
                f"{REFERENCES['time_to_unbeatable_s'][0]}")
    rows.append(f"{'eval_s':<24} {res['eval_s']:>14.4f}")
    rows.append(f"{'move_latency_ms torch':<24} {lat['torch']:>14.4f}")
    rows.append(f"{'move_latency_ms onnxrt':<24} {lat['onnxruntime']:>14.4f}  seed web agent: ~10 ms")
    if "compare_sb3" in res:
        c = res["compare_sb3"]
        sttu = c["time_to_unbeatable_s"]
        rows.append(f"SB3 MaskablePPO here, {c['steps']:,d} steps: {c['steps_per_s']:,.0f} steps/s "
                    f"(ours {c['ratio_steps_per_s']:.0f}x), unbeatable "
                    f"{'never' if sttu is None else f'at {sttu:.1f} s'}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ttt_research.bench", description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (about a minute)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: each config's own: 1 for REINFORCE, 2 for PPO)")
    p.add_argument("--reinforce-games", type=int, default=None, help="REINFORCE budget in games")
    p.add_argument("--ppo-games", type=int, default=None, help="PPO budget in games (cap)")
    p.add_argument("--compare", choices=["sb3"], default=None,
                   help="also train SB3 MaskablePPO (extra 'compare') and report the ratios")
    p.add_argument("--sb3-steps", type=int, default=50_000, help="SB3 steps for --compare")
    args = p.parse_args(argv)
    for name in ("threads", "reinforce_games", "ppo_games", "sb3_steps"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            print(f"error: --{name.replace('_', '-')} must be a positive integer, got {value}",
                  file=sys.stderr)
            return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device is available", file=sys.stderr)
        return 2
    if args.compare == "sb3":
        from .compare_sb3 import MissingExtra, _require_sb3

        try:
            _require_sb3()
        except MissingExtra as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    res = run(args.device, args.quick, args.threads, args.reinforce_games, args.ppo_games,
              args.compare, args.sb3_steps)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
