"""Training: every config option composes and trains a tiny budget; the run folder of the
contract; bad values refused with one line; the update checked against hand-computed numbers."""

import json
import subprocess
import sys
from functools import partial

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.configs import make_cfg
from tests.helpers.updates import Stepping
from ttt_research.algos.reinforce import antirez_loss, antirez_targets, learner_moves, move_importance
from ttt_research.env import game
from ttt_research.errors import ConfigError
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.policy_file import load_policy
from ttt_research.train.confdir import config_dir
from ttt_research.train.run import build, train
from ttt_research.train.validate import validate

CONF = config_dir()




def options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


GROUP_OPTIONS = [(g, o) for g in ("algo", "net", "reward", "opponent", "seat", "logger")
                 for o in options(g)] + [("trainer", "cpu")]


@pytest.mark.parametrize("group,option", GROUP_OPTIONS)
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_every_group_option_composes_and_trains(tmp_path, group, option):
    # A table is only learned by tabular Q-learning (validate.py refuses it to the others).
    partner = ["algo=qlearning"] if (group, option) == ("net", "qtable") else []
    report = train(make_cfg(f"{group}={option}", *partner), tmp_path)
    assert json.loads((tmp_path / "eval.json").read_text()) == json.loads(json.dumps(report))
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.parametrize("name", options("experiment"))
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_every_experiment_composes_and_trains(tmp_path, name):
    cfg = make_cfg(f"experiment={name}", "budget.games=300", "algo.games_per_update=96")  # 8 rollouts
    assert cfg.budget.games == 300
    train(cfg, tmp_path)
    assert (tmp_path / "eval.json").is_file()


def test_ppo_without_masking_forfeits_and_reports_raw_illegal_choices(tmp_path):
    from ttt_research.env.rollout import play_batch

    cfg = make_cfg("algo=ppo", "algo.masking=false", "reward=seed_ppo")
    module = build(cfg)
    module.streams = torch.Generator().manual_seed(0)
    ep = play_batch(512, partial(module.algo.act, streams=module.streams), module.opponent, "both", "cpu",
                    module.streams)
    assert ep.forfeit.any()  # an untrained net picks occupied cells...
    assert (ep.outcome[ep.forfeit] == -1).all()  # ...and loses those games,
    assert (module.reward.of(ep.outcome, ep.forfeit)[ep.forfeit] == -10.0).all()  # at -10
    report = train(cfg, tmp_path)
    assert 0.0 < report["raw_illegal_move_rate"] <= 1.0


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_masked_policies_never_choose_an_occupied_cell(seed):
    """Property: with masking on, PPO's and REINFORCE's sampled moves are legal on every
    reachable position, whatever the (random) weights."""
    torch.manual_seed(seed)
    codes = ev.decision_codes()
    t = game.tables()
    for algo in ("ppo", "reinforce"):
        module = build(make_cfg(f"algo={algo}", f"seed={seed}"))
        moves = module.algo.act(t.view[codes].float(), t.legal[codes], torch.Generator().manual_seed(seed))
        assert t.legal[codes, moves].all()


def test_run_folder_follows_the_contract(tmp_path):
    report = train(make_cfg("seed=3"), tmp_path)
    for name in ("metrics.csv", "eval.json", "policy.onnx", "curves.png", "checkpoints/last.ckpt",
                 ".hydra/config.yaml" if (tmp_path / ".hydra").exists() else "metrics.csv"):
        assert (tmp_path / name).stat().st_size > 0
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    for metric in ("rollout/win_rate", "rollout/loss_rate", "rollout/tie_rate", "train/loss",
                   "perf/games_per_s", "eval/x_random_win", "eval/o_random_loss",
                   "eval/x_perfect_loss", "eval/o_worst_case", "eval/optimal_move_rate",
                   "train/elapsed_s"):
        assert metric in header
    assert "value_accuracy" not in report  # REINFORCE learns no action values
    # The checkpoint and the ONNX file both evaluate to exactly the run's eval.json.
    for file in ("checkpoints/last.ckpt", "policy.onnx"):
        policy, meta = load_policy(tmp_path / file)
        greedy = ev.evaluate_policy(policy)
        assert greedy == {k: report[k] for k in greedy}  # the greedy report; as_trained beside it
    assert meta["algo"] == "reinforce" and meta["seed"] == "3" and meta["games_trained"] == "2048"


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_evaluate_cli_accepts_a_checkpoint(tmp_path):
    report = train(make_cfg(), tmp_path)
    out = subprocess.run([sys.executable, "-m", "ttt_research.evaluate",
                          str(tmp_path / "checkpoints" / "last.ckpt"), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got, want = json.loads(out.stdout), json.loads(json.dumps(report))
    del got["policy"], want["as_trained"]  # the greedy policy's figures; the stochastic ones differ in kind
    assert got == want


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_same_seed_same_evaluation(tmp_path):
    a = train(make_cfg("seed=7"), tmp_path / "a")
    b = train(make_cfg("seed=7"), tmp_path / "b")
    c = train(make_cfg("seed=8"), tmp_path / "c")
    assert a == b
    assert a != c


def test_a_short_run_measurably_improves_the_exact_evaluation(tmp_path):
    cfg = make_cfg("budget.games=120000", "algo.games_per_update=4096", "eval_every=100")
    untrained = ev.evaluate_policy(build(cfg).policy_logits)
    trained = train(cfg, tmp_path)
    before, after = untrained["as_o"]["vs_random"], trained["as_o"]["vs_random"]
    assert after["loss"] < before["loss"] - 0.05
    assert after["win"] > before["win"] + 0.05


@pytest.mark.parametrize("override,needle", [
    ("budget.games=0", "budget.games must be a positive integer"),
    ("budget.games=-5", "budget.games must be a positive integer"),
    ("net.hidden=[0]", "net.hidden must be a non-empty list of positive integers"),
    ("net.hidden=[]", "net.hidden must be a non-empty list of positive integers"),
    ("reward.win=abc", "reward.win must be a finite number"),
    ("opponent=mixed opponent.p_perfect=1.5", "opponent.p_perfect must be a probability in [0, 1]"),
    ("net.encoding=onehot27", "net.encoding must be one of planes18, signed9"),
    ("algo.lr=-0.1", "algo.lr must be a positive number"),
    ("algo.momentum=1.0", "algo.momentum must be a number in [0, 1"),
    ("algo.position_table=maybe", "algo.position_table must be true or false"),
    ("eval_every=0", "eval_every must be a positive integer"),
])
def test_bad_values_are_refused_with_one_line(override, needle):
    with pytest.raises(ConfigError, match="^" + needle.replace("[", r"\[").replace("]", r"\]")):
        validate(make_cfg(*override.split()))


def _run_cli(*args):
    return subprocess.run([sys.executable, "-m", "ttt_research", *args, "progress=false"],
                          capture_output=True, text=True, timeout=120)


def test_cli_bad_value_exits_2_with_one_line_and_no_traceback(tmp_path):
    out = _run_cli("budget.games=-5", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert lines == ["error: budget.games must be a positive integer, got -5"]
    assert not (tmp_path / "checkpoints").exists()  # refused before any work


def test_cli_unknown_option_lists_the_choices(tmp_path):
    out = _run_cli("net=mlp999", f"hydra.run.dir={tmp_path}")
    assert out.returncode != 0
    assert "mlp999" in out.stderr and "mlp128" in out.stderr and "Traceback" not in out.stderr


def test_resume_without_a_checkpoint_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="no checkpoint"):
        train(make_cfg("resume=true"), tmp_path)


# ----------------------------------------------------------------- the update, by hand


def test_move_importance_and_targets_by_hand():
    #  ply 1 of 5 moves -> 0.5 + 0.5 * 1/5 = 0.6; ply 4 of 5 -> 0.9
    assert move_importance(torch.tensor([1, 4]), torch.tensor([5, 5])).tolist() == pytest.approx([0.6, 0.9])
    legal = torch.tensor([[True, False, True, True, False, False, False, False, False]] * 2)
    t = antirez_targets(torch.tensor([2, 2]), legal, torch.tensor([0.6, -1.2]))
    assert t[0].tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 0]  # rewarded: the move played
    assert t[1].tolist() == [0.5, 0, 0, 0.5, 0, 0, 0, 0, 0]  # punished: the other legal cells


def test_antirez_loss_gradient_is_antirez_delta():
    """d loss / d logits = |r| * (softmax - target): antirez's output deltas."""
    logits = torch.tensor([[0.2, -0.1, 0.5, 0.0, 0.3, -0.4, 0.1, 0.0, 0.2]], requires_grad=True)
    target = torch.zeros(1, 9)
    target[0, 4] = 1.0
    weight = torch.tensor([1.8])
    antirez_loss(logits, target, weight, 1.0).backward()
    expected = 1.8 * (torch.softmax(logits.detach(), -1) - target)
    assert torch.allclose(logits.grad, expected, atol=1e-7)
    # And the loss value itself: -1.8 * log softmax(logits)[4].
    value = antirez_loss(logits.detach(), target, weight, 1.0)
    assert value.item() == pytest.approx(-1.8 * torch.log_softmax(logits.detach(), -1)[0, 4].item())


def test_one_game_batch_equals_antirez_manual_backprop(tmp_path):
    """One batched SGD step on one game = antirez's backprop summed over the learner's moves,
    written out by hand (hidden ReLU layer, softmax deltas) for a tiny 18 -> 3 -> 9 net."""
    cfg = make_cfg("net.hidden=[3]", "algo.games_per_update=1", "algo.minibatches=1", "algo.rollouts=1",
                   "algo.lr=0.1", "algo.masked_softmax=false", "budget.games=1", "seed=5")
    module = build(cfg)
    module.streams = torch.Generator().manual_seed(0)
    w = {k: v.detach().clone() for k, v in module.net.state_dict().items()}
    # Play the game the module will learn from, with the same generator state.
    from ttt_research.env.rollout import play_batch

    state = module.streams.get_state()
    views, row_of = module.positions()  # the update acts from the position table's distributions
    table = module.net(views).detach()  # masked: acting always is
    act = partial(module.algo.act_from_table, table=table, row_of=row_of, streams=module.streams,
                  cdf=module.algo.table_cdf(table))
    ep = play_batch(1, act, module.opponent, "o", "cpu", module.streams)
    view, legal, action, scaled, _ = learner_moves(ep, module.reward)
    targets = antirez_targets(action, legal, scaled)
    # antirez's backprop, by hand, gradients summed over the moves.
    W1, b1, W2, b2 = w["body.0.weight"], w["body.0.bias"], w["body.2.weight"], w["body.2.bias"]
    gW1, gb1, gW2, gb2 = (torch.zeros_like(t) for t in (W1, b1, W2, b2))
    x_all = module.net.encode(view)
    for x, tgt, r in zip(x_all, targets, scaled, strict=True):
        h = torch.relu(W1 @ x + b1)
        p = torch.softmax(W2 @ h + b2, -1)
        d_out = (p - tgt) * r.abs()
        d_hid = (W2.T @ d_out) * (h > 0)
        gW2 += torch.outer(d_out, h)
        gb2 += d_out
        gW1 += torch.outer(d_hid, x)
        gb1 += d_hid
    # Now let the module take its step from the same state.
    module.streams.set_state(state)
    sgd = Stepping(torch.optim.SGD(module.net.parameters(), lr=0.1))
    module.optimizers = lambda: sgd  # steps like Lightning's wrapper of it, without a Trainer
    module.manual_backward = lambda loss: loss.backward()
    assert module.algo.update(module).games == 1
    new = module.net.state_dict()
    assert torch.allclose(new["body.2.weight"], W2 - 0.1 * gW2, atol=1e-6)
    assert torch.allclose(new["body.2.bias"], b2 - 0.1 * gb2, atol=1e-6)
    assert torch.allclose(new["body.0.weight"], W1 - 0.1 * gW1, atol=1e-6)
    assert torch.allclose(new["body.0.bias"], b1 - 0.1 * gb1, atol=1e-6)


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_short_ppo_run_improves_the_exact_evaluation_from_both_seats(tmp_path):
    cfg = make_cfg("algo=ppo", "net=mlp128", "budget.games=30000", "algo.games_per_update=2048",
                   "eval_every=100")
    untrained = ev.evaluate_policy(build(cfg).policy_logits)
    trained = train(cfg, tmp_path)
    for seat in ("as_x", "as_o"):
        before, after = untrained[seat]["vs_random"], trained[seat]["vs_random"]
        assert after["loss"] < before["loss"] - 0.05
        assert after["win"] > before["win"] + 0.05


@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_a_run_killed_and_resumed_ends_as_an_uninterrupted_one(tmp_path):
    """SIGKILL once a checkpoint exists, rerun with resume=true: same eval.json as a run that
    was never interrupted (the generator state and game counter are in the checkpoint), and
    metrics.csv keeps the rows from before the kill."""
    import csv
    import os
    import signal
    import time

    args = ["budget.games=200000", "algo.games_per_update=512", "algo.rollouts=1",
            "checkpoint_every=10", "eval_every=50"]
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    proc = subprocess.Popen([sys.executable, "-m", "ttt_research", *args, "progress=false",
                             f"hydra.run.dir={killed}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ckpt = killed / "checkpoints" / "last.ckpt"
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert ckpt.exists() and not (killed / "eval.json").exists()  # killed mid-run
    resumed = _run_cli(*args, "resume=true", f"hydra.run.dir={killed}")
    assert resumed.returncode == 0, resumed.stderr
    assert _run_cli(*args, f"hydra.run.dir={whole}").returncode == 0
    assert (killed / "eval.json").read_text() == (whole / "eval.json").read_text()
    with open(killed / "metrics.csv", newline="") as f:
        games = [float(r["train/games"]) for r in csv.DictReader(f) if r.get("train/games")]
    assert games[0] == 512 and max(games) >= 200000
