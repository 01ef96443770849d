"""Side by side with the classic stack: SB3 + sb3-contrib MaskablePPO on our gym adapter.

``run_sb3`` trains what the PPO seed trained, the way the seed trained it: MaskablePPO with
separate policy and value networks of 9 -> 128 -> 128 (ReLU) and SB3's default PPO
hyperparameters (8 environments x 2,048 steps per rollout, minibatches of 64, 10 epochs,
Adam 3e-4, gamma 0.99, GAE 0.95, clip 0.2, no entropy bonus), the seed's reward table
(+1 / +0.5 / -1), both seats, against the rule-based player in 70% of games and a random
one otherwise (``ttt_research.env.gymnasium.TicTacToeEnv``). It reports what ``bench`` reports for
our PPO, measured the same way:

* ``steps_per_s``: learner environment steps per second of ``learn()``, updates included,
  evaluation time excluded.
* ``time_to_unbeatable_s``: training time until our exact evaluation (``evaluation/exact.py``, the
  whole game tree) first finds it unbeatable from both seats (``contract.unbeatable``: no
  opponent can beat it, the same as 0 losses against a random player); ``None``
  if that never happened within the budget. The evaluation runs after every
  ``eval_every`` steps, between SB3's updates (the policy only changes there).

SB3 collects whole rollouts, so the budget is rounded up to a multiple of
``n_envs * n_steps`` (16,384 by default): ``steps`` in the result is what was played.
Needs the optional extra ``compare`` (gymnasium, stable-baselines3, sb3-contrib);
``python -m ttt_research.baselines.sb3 --steps N`` prints a table.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch

from ttt_research.contract import EVAL_SEATS, REPORT_KEY, unbeatable
from ttt_research.errors import MissingExtra, UserError, command
from ttt_research.evaluation.exact import evaluate_policy
from ttt_research.evaluation.text import eval_table

# The PPO seed's setup (experiments/seed_ppo_repro): opponent, seat, reward table.
SEED_ENV = {"opponent": "mixed", "strong": "rules", "p_perfect": 0.7, "seat": "both",
            "reward": {"win": 1.0, "tie": 0.5, "loss": -1.0, "illegal": -10.0}}


def require_sb3():
    """Import the comparison's dependencies, or raise ``MissingExtra`` with one line."""
    try:
        import sb3_contrib
        import stable_baselines3

        from ttt_research.env import gymnasium as ttt_gym  # imports gymnasium, of the same extra
    except ImportError as e:
        raise MissingExtra("compare", "the SB3 comparison", e) from None
    return sb3_contrib, stable_baselines3, ttt_gym


def sb3_policy_fn(policy) -> Callable[[torch.Tensor], torch.Tensor]:
    """SB3's policy network as our ``PolicyFn``: (N, 9) float32 mover's-view boards ->
    (N, 9) masked logits (occupied cells at -1e9), as the ONNX contract has them."""

    def fn(boards: torch.Tensor) -> torch.Tensor:  # (N, 9) -> (N, 9)
        with torch.no_grad():
            obs = boards.to(policy.device, torch.float32)
            logits = policy.get_distribution(obs).distribution.logits  # log-softmax: same argmax
            return torch.where(obs == 0, logits, torch.full_like(logits, -1e9)).cpu()

    return fn


def run_sb3(steps: int, seed: int = 0, threads: int = 1, eval_every: int = 16_384,
            n_envs: int = 8, n_steps: int = 2048, batch_size: int = 64,
            log: Callable[[str], None] | None = None) -> dict:
    """Train SB3 MaskablePPO (the seed's setup) for ``steps`` learner environment steps.

    Args:
        steps: the budget in learner moves (rounded up to whole rollouts, see the module).
        seed: seeds SB3 (torch, numpy, the environments).
        threads: torch threads during training (restored afterwards). 1 is SB3's fastest
            here, as measured for the project's benchmarks: minibatches of 64 gain nothing from a second
            thread, and on a shared 2-core machine two threads ran about 10x slower.
        eval_every: exact evaluation period, in environment steps (checked between updates).
        n_envs, n_steps, batch_size: SB3's rollout and minibatch sizes (the seed's defaults;
            tests shrink them).
        log: called with one line per evaluation (the CLI prints them).

    Returns:
        ``steps``, ``steps_per_s``, ``train_s``, ``time_to_unbeatable_s``,
        ``steps_to_unbeatable``, ``eval_s`` (all evaluations), ``evals`` (one row per
        evaluation), ``final`` (the last exact evaluation, ``eval.json`` schema),
        ``unbeatable``, ``threads``, ``seed``, ``config`` and ``versions``.
    """
    if steps < 1 or eval_every < 1:
        raise ValueError(f"steps and eval_every must be positive integers, got {steps}, {eval_every}")
    sb3_contrib, sb3, ttt_gym = require_sb3()
    import gymnasium
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    class ExactEval(BaseCallback):
        """Times ``learn()`` minus evaluations; evaluates exactly between updates."""

        def __init__(self):
            super().__init__()
            self.rows: list[dict] = []
            self.eval_s = 0.0
            self.next_eval = eval_every
            self.first_unbeatable: dict | None = None

        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def train_s(self) -> float:
            return time.perf_counter() - self.start - self.eval_s

        def evaluate(self) -> dict:
            t0 = time.perf_counter()
            report = evaluate_policy(sb3_policy_fn(self.model.policy))
            self.eval_s += time.perf_counter() - t0
            row = {"steps": int(self.num_timesteps), "train_s": round(self.train_s(), 3),
                   **{f"{s}_random_{o}": report[REPORT_KEY[s]]["vs_random"][o]
                      for o in ("loss", "win") for s in EVAL_SEATS},
                   "optimal_move_rate": report["optimal_move_rate"]}
            self.rows.append(row)
            self.last = report
            if self.first_unbeatable is None and unbeatable(report, "both"):
                self.first_unbeatable = row
            if log:
                log(f"{row['steps']:>9,d} steps {row['train_s']:8.1f} s   loss vs random: "
                    f"X {row['x_random_loss']:.4f}  O {row['o_random_loss']:.4f}")
            return report

        def _on_rollout_start(self) -> None:  # after an update: the policy just changed
            if self.num_timesteps >= self.next_eval:
                self.evaluate()
                while self.next_eval <= self.num_timesteps:
                    self.next_eval += eval_every

        def _on_step(self) -> bool:
            return True

    def make_env():
        return ttt_gym.TicTacToeEnv(**SEED_ENV)

    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        env = DummyVecEnv([make_env] * n_envs)
        # SB3's defaults, spelled out where the seed relied on them; the net is the seed's.
        model = MaskablePPO(
            "MlpPolicy", env, n_steps=n_steps, batch_size=batch_size, n_epochs=10,
            learning_rate=3e-4, gamma=0.99, gae_lambda=0.95, clip_range=0.2, ent_coef=0.0,
            vf_coef=0.5, max_grad_norm=0.5, seed=seed, device="cpu", verbose=0,
            policy_kwargs={"net_arch": {"pi": [128, 128], "vf": [128, 128]},
                           "activation_fn": torch.nn.ReLU})
        cb = ExactEval()
        model.learn(total_timesteps=steps, callback=cb)
        train_s = cb.train_s()
        # The last update is followed by no rollout: evaluate it here (it may be the first
        # unbeatable one). Training time stops before it.
        final = cb.evaluate() if not cb.rows or cb.rows[-1]["steps"] != model.num_timesteps \
            else cb.last
    finally:
        torch.set_num_threads(old_threads)

    done = int(model.num_timesteps)
    first = cb.first_unbeatable
    return {
        "steps": done,
        "steps_per_s": done / train_s,
        "train_s": train_s,
        "time_to_unbeatable_s": first["train_s"] if first else None,
        "steps_to_unbeatable": first["steps"] if first else None,
        "unbeatable": unbeatable(final, "both"),
        "eval_s": cb.eval_s,
        "evals": cb.rows,
        "final": final,
        "threads": threads,
        "seed": seed,
        "config": {"n_envs": n_envs, "n_steps": n_steps, "batch_size": batch_size,
                   "eval_every": eval_every, **SEED_ENV},
        "versions": {"stable_baselines3": sb3.__version__, "sb3_contrib": sb3_contrib.__version__,
                     "gymnasium": gymnasium.__version__, "torch": torch.__version__},
    }


def compare(steps: int, threads: int | None, ours: dict, log: Callable[[str], None] | None = None) -> dict:
    """``bench --compare sb3``: SB3 trained ``steps`` steps here and now, and the ratios of
    ``ours`` (bench's PPO figures of this run) to it."""
    r = run_sb3(steps, seed=0, threads=threads or 1, log=log)
    out = {"steps": r["steps"], "steps_per_s": r["steps_per_s"],
           "time_to_unbeatable_s": r["time_to_unbeatable_s"], "threads": threads or 1}
    out["ratio_steps_per_s"] = ours["ppo_steps_per_s"] / r["steps_per_s"]
    if ours["time_to_unbeatable_s"] and r["time_to_unbeatable_s"]:
        out["ratio_time_to_unbeatable"] = r["time_to_unbeatable_s"] / ours["time_to_unbeatable_s"]
    return out


def format_result(r: dict) -> str:
    """The result as a small text table, then the final exact evaluation."""
    ttu = "never" if r["time_to_unbeatable_s"] is None else \
        f"{r['time_to_unbeatable_s']:.1f} s ({r['steps_to_unbeatable']:,d} steps)"
    rows = [
        "SB3 MaskablePPO (the PPO seed's setup) on ttt_research.gym",
        f"steps played          {r['steps']:,d}",
        f"steps per second      {r['steps_per_s']:,.0f}  (learn(), updates included, "
        f"{r['threads']} threads)",
        f"training time         {r['train_s']:.1f} s  (+ {r['eval_s']:.1f} s of exact evaluations)",
        f"time to unbeatable    {ttu}",
        "",
        eval_table(r["final"]),
    ]
    return "\n".join(rows)


@command()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ttt_research.baselines.sb3",
        description="Train SB3 MaskablePPO with the PPO seed's setup on our gym adapter and "
                    "evaluate it exactly (needs the 'compare' extra).")
    parser.add_argument("--steps", type=int, default=100_000, help="learner env steps (default 100000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: SB3's fastest on this machine)")
    parser.add_argument("--eval-every", type=int, default=16_384,
                        help="exact evaluation period in env steps (default: every update)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.eval_every < 1 or args.threads < 1:
        raise UserError("--steps, --eval-every and --threads must be positive integers")
    result = run_sb3(args.steps, args.seed, args.threads, args.eval_every,
                     log=None if args.json else print)
    print(json.dumps(result, indent=2) if args.json else format_result(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
