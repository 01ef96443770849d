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

from tests.helpers.resume import evals_rows
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.policy_file import load_policy

# 8 updates; each update, each of the 2 processes plays 256 games (512 in all).
ARGS = ["trainer=ddp", "trainer.devices=2", "budget.games=4096", "algo.games_per_update=256",
        "eval_every=3", "checkpoint_every=3", "progress=false", "threads=1"]


@pytest.mark.parametrize("algo", [["algo.rollouts=1", "algo.minibatches=2"],
                                  ["algo=ppo", "algo.epochs=2", "algo.minibatches=2"]],
                         ids=["reinforce", "ppo"])
@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
@pytest.mark.alone  # two training processes: one per core
def test_two_processes_both_play_and_the_run_evaluates_once(tmp_path, algo):
    out = subprocess.run([sys.executable, "-m", "ttt_research", *ARGS, *algo,
                          f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    # Both processes share the console: the evaluation is printed (and written) once.
    assert out.stdout.count("Exact evaluation after 4,096 games") == 1
    # Rank 1 printed nothing, so it left no train_ddp_process_1.log (a job's log is opened at
    # its first line, joblog.py); that it played is in the checkpoint (games_by_process).
    assert not (tmp_path / "train_ddp_process_1.log").exists()

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
        greedy = json.loads(json.dumps(ev.evaluate_policy(policy)))
        assert greedy == {k: report[k] for k in greedy}  # the greedy report (as_trained beside it)


POPULATION = ["debug=tiny", "budget.games=4096", "population.size=3", "checkpoint_every=2",
              "progress=false", "threads=1"]  # 8 updates of 512 games per member


def run_folder_files(run_dir):
    """What a DDP population writes as one process does: the files, and the exact evaluations
    (population_evals.csv but its wall-clock column, elapsed_s)."""
    return {**{name: (run_dir / name).read_text() for name in ("population.json", "eval.json")},
            "population_evals.csv": evals_rows(run_dir)}


@pytest.mark.slow  # three commands in subprocesses, two of them with two processes each
@pytest.mark.alone  # two training processes: one per core
def test_ddp_shares_a_population_out_and_resumes_it(tmp_path):
    """trainer=ddp gives each process its share of the members (2 and 1 of 3): the members
    are independent, so the run folder is the one-process population's, byte for byte; a
    DDP population killed after a checkpoint resumes to the same files."""
    import os
    import signal
    import time

    def command(run_dir, *extra):
        return [sys.executable, "-m", "ttt_research", *POPULATION, *extra, f"hydra.run.dir={run_dir}"]

    alone = subprocess.run(command(tmp_path / "alone"), capture_output=True, text=True, timeout=300)
    assert alone.returncode == 0, alone.stderr[-3000:]
    shared = subprocess.run(command(tmp_path / "ddp", "trainer=ddp", "trainer.devices=2"),
                            capture_output=True, text=True, timeout=300)
    assert shared.returncode == 0, shared.stderr[-3000:]
    assert shared.stdout.count("Population of 3 after 4,096 games each") == 1  # rank 0 writes
    assert run_folder_files(tmp_path / "ddp") == run_folder_files(tmp_path / "alone")

    ckpt = torch.load(tmp_path / "ddp" / "checkpoints" / "last.ckpt", weights_only=False)
    shards = ckpt["member_shards"]
    assert [len(s["population"]["member_games"]) for s in shards] == [2, 1]

    # Killed (the whole process group) as soon as the first checkpoint is on disk.
    killed = tmp_path / "killed"
    proc = subprocess.Popen(command(killed, "trainer=ddp", "trainer.devices=2"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while not (killed / "checkpoints" / "last.ckpt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "population.json").exists()  # it did not finish
    resumed = subprocess.run(command(killed, "trainer=ddp", "trainer.devices=2", "resume=true"),
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed after" in resumed.stdout
    assert run_folder_files(killed) == run_folder_files(tmp_path / "alone")


def test_a_finished_run_leaves_its_process_group_before_writing_its_outputs(tmp_path, monkeypatch):
    """A finished trainer=ddp process used to leave its gloo group to the exit: rank 1, done
    first, was now and then ended by gloo ("terminate called without an active exception")
    while rank 0 wrote the outputs, and Lightning then killed rank 0 (exit -9, once in CI).
    Every process now parts ways after the fit, finished or stopped, before rank 0 writes."""
    from tests.helpers.configs import make_cfg
    from ttt_research.train import run

    calls = []
    monkeypatch.setattr(run, "part_ways", lambda: calls.append("part_ways"))
    write_outputs = run.write_outputs
    monkeypatch.setattr(run, "write_outputs", lambda *a: (calls.append("write_outputs"), write_outputs(*a)))
    run.train(make_cfg("threads=1"), tmp_path)
    assert calls == ["part_ways", "write_outputs"]


def test_part_ways_closes_the_process_group():
    """The group is destroyed after the barrier (a one-process gloo group here), and a
    process without one has nothing to leave."""
    dist = torch.distributed
    from ttt_research.train.signals import part_ways

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    part_ways()
    assert not dist.is_initialized()
    part_ways()  # nothing to leave: no error
