"""trainer=ddp: two CPU processes (gloo) train one agent. Each plays its own games with its
own random stream, DDP averages the gradients, the rollout numbers are averaged across
processes and logged once, and only rank 0 writes the run folder's outputs."""

import csv
import json
import subprocess
import sys
from fractions import Fraction

import pytest
import torch

from ttt_research import evaluate as ev
from ttt_research.policy_file import load_policy

# 8 updates; each update, each of the 2 processes plays 256 games (512 in all).
ARGS = ["trainer=ddp", "trainer.devices=2", "budget.games=4096", "algo.games_per_update=256",
        "eval_every=3", "checkpoint_every=3", "progress=false", "threads=1"]


@pytest.mark.parametrize("algo", [["algo.rollouts=1", "algo.minibatches=2"],
                                  ["algo=ppo", "algo.epochs=2", "algo.minibatches=2"]],
                         ids=["reinforce", "ppo"])
@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_two_processes_both_play_and_the_run_evaluates_once(tmp_path, algo):
    out = subprocess.run([sys.executable, "-m", "ttt_research", *ARGS, *algo,
                          f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    # Both processes share the console: the evaluation is printed (and written) once.
    assert out.stdout.count("Exact evaluation after 4,096 games") == 1
    assert (tmp_path / "train_ddp_process_1.log").is_file()  # rank 1 ran in this run folder

    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["games_played"] == 4096
    assert ckpt["games_by_process"] == [2048, 2048]  # both processes played their share
    rank0, rank1 = ckpt["generator_states"]  # ... each from its own random stream
    assert not torch.equal(rank0, rank1)

    # One row per update, counting both processes' games; the sampled rates are means over
    # the 512 games of an update, so some are odd multiples of 1/512, which a single
    # process's 256 games could not give.
    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("rollout/win_rate")]
    assert [float(r["train/games"]) for r in rows] == [512.0 * k for k in range(1, 9)]
    fractions = [Fraction(r[k]) for r in rows for k in ("rollout/win_rate", "rollout/loss_rate")]
    assert all((f * 512).denominator == 1 for f in fractions)
    assert any((f * 512).numerator % 2 == 1 for f in fractions)

    # The run evaluates: eval.json is the exact evaluation of the saved weights and of the
    # exported policy (DDP kept the two processes' weights equal: base.on_train_end checks).
    report = json.loads((tmp_path / "eval.json").read_text())
    for file in ("checkpoints/last.ckpt", "policy.onnx"):
        policy, _ = load_policy(tmp_path / file)
        assert json.loads(json.dumps(ev.evaluate_policy(policy))) == report
