"""Reliability: a crashed run resumes where it stopped (opponent pool and curriculum
included), the same seed gives the same run, a non-finite value stops the run at the update
that made it and keeps the last good checkpoint, and bad configs are refused up front."""

import csv
import subprocess
import sys
import textwrap

import pytest
import torch

from tests.helpers.resume import Crash, crash_after_first_checkpoint, metric_rows, train_killed
from ttt_research.errors import ConfigError
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.policy_file import load_policy
from ttt_research.train.callbacks import PeriodicCheckpoint
from ttt_research.train.confdir import compose
from ttt_research.train.module import RLModule
from ttt_research.train.run import train
from ttt_research.train.validate import validate

# 10 updates of 256 games, one minibatch pass each: a second or two per run.
SMALL = ["budget.games=2560", "algo.games_per_update=256", "eval_every=3", "checkpoint_every=5",
         "progress=false"]
REINFORCE = ["algo.rollouts=1", "algo.minibatches=2"]
PPO = ["algo=ppo", "algo.epochs=2", "algo.minibatches=2", "threads=1"]


def make_cfg(*overrides):
    return compose([*SMALL, *overrides])


# ----------------------------------------------------------------------------- resume


@pytest.mark.parametrize("overrides", [
    [*PPO, "opponent=pool", "opponent.every=2", "opponent.size=2"],
    [*REINFORCE, "opponent=curriculum"],  # random -> mixed -> mixed with a snapshot pool
], ids=["ppo-pool", "reinforce-curriculum"])
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_resumed_pool_or_curriculum_run_ends_as_an_uninterrupted_one(tmp_path, monkeypatch, overrides):
    whole = train(make_cfg(*overrides), tmp_path / "whole")

    train_killed(make_cfg(*overrides), tmp_path / "killed", monkeypatch)
    ckpt = torch.load(tmp_path / "killed" / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["games_played"] == 5 * 256  # stopped after update 5 of 10
    opponent = ckpt["opponent_state"]
    if "names" in opponent:  # the pool: snapshots at updates 0, 2, 4 (0-based), the last 2 kept
        assert opponent["names"] == ["snapshot@2", "snapshot@4"]
    else:  # the curriculum: update 5 began at 4/10 of the budget, in stage 2 (until 0.6)
        assert opponent["index"] == 1
        assert opponent["stages"][2]["weak"]["names"] == ["snapshot@0"]

    resumed = train(make_cfg(*overrides, "resume=true"), tmp_path / "killed")
    assert resumed == whole
    assert (tmp_path / "killed" / "eval.json").read_text() == (tmp_path / "whole" / "eval.json").read_text()
    assert metric_rows(tmp_path / "killed") == metric_rows(tmp_path / "whole")


@pytest.mark.parametrize("overrides", [PPO, REINFORCE], ids=["ppo", "reinforce"])
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_run_killed_well_after_a_checkpoint_resumes_without_repeating_rows(tmp_path, monkeypatch,
                                                                             overrides):
    """Killed at update 9 of 10 with the checkpoint of update 5 on disk: updates 6-8 are
    played again on resume, and metrics.csv holds each update once, as an uninterrupted run."""
    whole = train(make_cfg(*overrides), tmp_path / "whole")
    crash_after_first_checkpoint(monkeypatch, later=3)
    with pytest.raises(Crash, match="3 updates after the checkpoint of update 5"):
        train(make_cfg(*overrides), tmp_path / "killed")
    monkeypatch.undo()
    with open(tmp_path / "killed" / "metrics.csv", newline="") as f:
        assert max(float(r["train/games"]) for r in csv.DictReader(f) if r["train/games"]) == 8 * 256
    assert train(make_cfg(*overrides, "resume=true"), tmp_path / "killed") == whole
    rows = metric_rows(tmp_path / "killed")
    assert sum(1 for r in rows if r.get("rollout/win_rate")) == 10  # one row per update, none twice
    assert rows == metric_rows(tmp_path / "whole")


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_resume_killed_in_its_turn_keeps_the_rows_from_before_it(tmp_path, monkeypatch):
    """Killed at update 9 (checkpoint of update 5), resumed and killed again at update 8,
    resumed to the end: metrics.csv still holds each of the 10 updates once, as an
    uninterrupted run's (the second resume must not set aside the first one's partial file
    in place of the original rows)."""
    whole = train(make_cfg(*REINFORCE), tmp_path / "whole")
    train_killed(make_cfg(*REINFORCE), tmp_path / "killed", monkeypatch, later=3)
    start = RLModule.on_train_batch_start

    def dying(self, batch, batch_idx):
        if batch_idx == 7:
            raise Crash("the resumed run killed at update 8")
        start(self, batch, batch_idx)

    monkeypatch.setattr(RLModule, "on_train_batch_start", dying)
    with pytest.raises(Crash, match="resumed run killed"):
        train(make_cfg(*REINFORCE, "resume=true"), tmp_path / "killed")
    monkeypatch.undo()
    assert train(make_cfg(*REINFORCE, "resume=true"), tmp_path / "killed") == whole
    rows = metric_rows(tmp_path / "killed")
    assert sum(1 for r in rows if r.get("rollout/win_rate")) == 10
    assert rows == metric_rows(tmp_path / "whole")
    assert not (tmp_path / "killed" / "metrics.before-resume.csv").exists()


def test_the_checkpoint_holds_optimiser_opponent_counters_and_generators(tmp_path):
    train(make_cfg(*PPO, "opponent=pool", "opponent.every=3", "opponent.size=8"), tmp_path)
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    # Adam's moments for every parameter, after 10 updates x 2 epochs x 2 minibatches.
    (adam,) = ckpt["optimizer_states"]
    n_params = sum(1 for k in ckpt["state_dict"] if k.startswith(("net.", "value_net.")))
    assert len(adam["state"]) == n_params
    assert all(int(s["step"]) == 40 and {"exp_avg", "exp_avg_sq"} <= set(s) for s in adam["state"].values())
    assert ckpt["opponent_state"]["names"] == ["snapshot@0", "snapshot@3", "snapshot@6", "snapshot@9"]
    assert ckpt["games_played"] == 2560 and ckpt["games_by_process"] == [2560]
    assert ckpt["env_steps"] > 2560  # PPO's learner moves: at least two per game
    assert ckpt["loops"]["fit_loop"]["epoch_loop.batch_progress"]["total"]["ready"] == 10
    # The generator has moved on from its seed (seed 0, rank 0): 10 updates of draws.
    (state,) = ckpt["generator_states"]
    assert not torch.equal(state, torch.Generator().manual_seed(0).get_state())
    assert [h[0] for h in ckpt["callbacks"]["ExactEvaluation"]["history"]] == [768, 1536, 2304, 2560]


# ----------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("algo", [REINFORCE, PPO], ids=["reinforce", "ppo"])
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_same_config_and_seed_give_identical_eval_and_metrics(tmp_path, algo):
    a = train(make_cfg(*algo, "seed=11"), tmp_path / "a")
    b = train(make_cfg(*algo, "seed=11"), tmp_path / "b")
    assert (tmp_path / "a" / "eval.json").read_bytes() == (tmp_path / "b" / "eval.json").read_bytes()
    rows = metric_rows(tmp_path / "a")
    assert rows == metric_rows(tmp_path / "b")
    assert sum(1 for r in rows if r.get("rollout/win_rate")) == 10  # one row per update, all compared
    # ... and the seed matters: another seed plays other games.
    train(make_cfg(*algo, "seed=12"), tmp_path / "c")
    assert [r["rollout/win_rate"] for r in metric_rows(tmp_path / "c")] != \
        [r["rollout/win_rate"] for r in rows]
    assert a == b


# ----------------------------------------------------------------------------- NaN guard

POISON_LOSS = """
    from ttt_research.env.reward import Reward
    honest, calls = Reward.of, [0]
    def poisoned(self, *args):  # update 5's rewards, hence its loss, are NaN (one call per update)
        calls[0] += 1
        out = honest(self, *args)
        return out * float("nan") if calls[0] == 5 else out
    Reward.of = poisoned
"""
POISON_WEIGHT = """
    import torch
    honest, calls = torch.optim.Adam.step, [0]
    def poisoned(self, *args, **kwargs):  # the 5th optimiser step leaves an infinite weight
        out = honest(self, *args, **kwargs)
        calls[0] += 1
        if calls[0] == 5:
            with torch.no_grad():
                self.param_groups[0]["params"][0][0, 0] = float("inf")
        return out
    torch.optim.Adam.step = poisoned
"""


@pytest.mark.parametrize("poison,overrides,what", [
    (POISON_LOSS, ["algo.rollouts=1", "algo.minibatches=1"], "train/loss = nan"),
    (POISON_WEIGHT, ["algo=ppo", "algo.epochs=1", "algo.minibatches=1", "threads=1"],
     "parameter net.body.0.weight"),
], ids=["nan-loss", "inf-weight"])
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_non_finite_value_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, poison, overrides,
                                                                             what):
    script = textwrap.dedent(poison) + "from ttt_research.__main__ import main\nmain()\n"
    args = [*SMALL, "checkpoint_every=2", *overrides, f"hydra.run.dir={tmp_path}"]
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 3, out.stderr
    ckpt_path = tmp_path / "checkpoints" / "last.ckpt"
    assert out.stderr.strip().splitlines() == [
        f"error: non-finite value at update 5 of 10 (after 1,280 games): {what}; training stopped;"
        f" the last good checkpoint is kept: {ckpt_path} (update 4)"]
    assert not (tmp_path / "eval.json").exists() and not (tmp_path / "policy.onnx").exists()
    assert not list((tmp_path / "checkpoints").glob("*.tmp"))  # no temporary checkpoint left
    ckpt = torch.load(ckpt_path, weights_only=True)
    assert ckpt["games_played"] == 4 * 256  # update 4's checkpoint, not overwritten
    assert all(torch.isfinite(w).all() for w in ckpt["state_dict"].values())
    policy, _ = load_policy(ckpt_path)  # and it still evaluates
    assert ev.evaluate_policy(policy)["decision_points"] > 0


def test_the_checkpoint_callback_refuses_non_finite_weights(tmp_path):
    """The second line of defence: even if a module skipped its own check, no NaN weights
    reach last.ckpt."""
    from ttt_research.errors import NonFiniteError
    from ttt_research.train.run import build

    module = build(make_cfg())
    with torch.no_grad():
        module.net.body[0].bias[0] = float("nan")

    class Trainer:
        lightning_module = module
        is_global_zero = True

        def save_checkpoint(self, path):  # pragma: no cover - must not be reached
            raise AssertionError("a non-finite module was saved")

    with pytest.raises(NonFiniteError, match="non-finite parameters at update 7"):
        PeriodicCheckpoint(str(tmp_path), 1).save(Trainer(), 7)
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- configs


@pytest.mark.parametrize("override,needle", [
    ("seed=abc", "seed must be a non-negative integer, got 'abc'"),
    ("algo.games_per_update=1.5", "algo.games_per_update must be a positive integer, got 1.5"),
    ("algo.rollouts=0", "algo.rollouts must be a positive integer, got 0"),
    ("algo.baseline=maybe", "algo.baseline must be true or false, got 'maybe'"),
    ("algo.temperature_final=-1", "algo.temperature_final must be a number >= 0, or null"),
    ("algo.optimizer=adam", "algo.optimizer must be null or a partial optimizer"),
    ("algo=ppo algo.lr_final=fast", "algo.lr_final must be a number >= 0, or null"),
    ("opponent=mixed opponent.strong=[1,2]", "opponent.strong must be random, minimax or rules"),
    ("opponent=curriculum opponent.stages.1.until=0.2",
     "opponent.stages[1].until must be a number in (0.3, 1]"),
    ("opponent=curriculum opponent.stages=[]", "opponent.stages must be a non-empty list"),
    ("trainer.devices=abc", "trainer.devices must be a positive integer, -1 (all), auto"),
    ("trainer.devices=0", "trainer.devices must be a positive integer"),
    ("trainer=ddp trainer.num_nodes=0", "trainer.num_nodes must be a positive integer, got 0"),
    ("trainer=ddp trainer.strategy=warp", "trainer.strategy must be a Lightning strategy"),
    ("trainer.accelerator=tpu9", "trainer.accelerator must be one of cpu, gpu, cuda, mps, auto"),
    ("+trainer.max_stepz=3", "trainer.max_stepz must be an argument of lightning.Trainer"),
    ("trainer=ddp experiment=antirez_repro", "algo must be a batched algorithm with several processes"),
])
def test_configs_with_wrong_types_or_ranges_are_refused(override, needle):
    with pytest.raises(ConfigError) as e:
        validate(make_cfg(*override.split()))
    assert str(e.value).startswith(needle.replace("[1,2]", "[1, 2]"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_cli_refuses_a_gpu_trainer_without_a_gpu_before_any_work(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ttt_research", "trainer=gpu", "progress=false",
                          f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: trainer.accelerator must be cpu here (no CUDA GPU is visible to torch on this "
        "machine), got 'gpu'"]
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "metrics.csv").exists()
