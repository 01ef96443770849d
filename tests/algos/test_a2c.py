"""algo=a2c: its policy term by hand; one update is exactly PPO's first step on the same batch
(at the first step PPO's ratio is 1, where the clipped surrogate's gradient is A2C's); a tiny
run, a population that is its seeds' single runs, a resume that is the uninterrupted run, and
the validation of its keys, all through the shell with no code of A2C's own outside algos/."""

import json

import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.resume import metric_rows, train_killed
from tests.helpers.updates import first_update, rates
from ttt_research.algos.a2c import policy_gradient_loss
from ttt_research.errors import ConfigError
from ttt_research.train.run import train
from ttt_research.train.validate import validate

A2C = ["algo=a2c", "net=mlp25"]


def test_policy_gradient_loss_by_hand():
    logp = torch.tensor([[-0.5, -1.0, -2.0], [-0.1, -0.2, -0.3]])  # (N=2, M=3)
    adv = torch.tensor([[1.0, -2.0, 4.0], [3.0, 0.0, -1.0]])
    valid = torch.tensor([[True, True, False], [True, True, True]])
    # member 0, its two real moves: -(1 * -0.5 + -2 * -1.0) / 2 = -(-0.5 + 2.0) / 2 = -0.75
    # member 1: -(3 * -0.1 + 0 * -0.2 + -1 * -0.3) / 3 = -(-0.3 + 0.3) / 3 = 0
    assert policy_gradient_loss(logp, adv, valid).tolist() == pytest.approx([-0.75, 0.0])


def test_one_update_is_ppos_first_step_on_the_same_batch():
    """Same seed, net, batch and settings; PPO with one epoch, one minibatch, GAE lambda 1 and
    raw advantages: its ratio is 1 at its only step, so both take the same gradient step."""
    a2c = first_update(*A2C, "algo.minibatches=1", "algo.lr=0.001")
    ppo = first_update("algo=ppo", "net=mlp25", "algo.lr=0.001", "algo.epochs=1", "algo.minibatches=1",
                       "algo.gae_lambda=1.0", "algo.norm_adv=false", "algo.games_per_update=512")
    assert rates(a2c.last_update) == rates(ppo.last_update)  # the same games
    for name, value in ppo.algo.state_dict().items():
        torch.testing.assert_close(a2c.algo.state_dict()[name], value, atol=1e-6, rtol=1e-5, msg=name)
    for term in ("value_loss", "entropy"):  # the policy terms differ in value, not in gradient
        assert float(a2c.last_update.terms[term]) == pytest.approx(float(ppo.last_update.terms[term]),
                                                                   rel=1e-5, abs=1e-6)


def test_a_tiny_run_learns_and_reports(tmp_path):
    report = train(make_cfg(*A2C), tmp_path)
    assert report["decision_points"] > 0 and "as_trained" in report
    head = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    for name in ("train/policy_loss", "train/value_loss", "train/entropy", "train/explained_variance",
                 "train/lr", "train/ent_coef"):
        assert name in head
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["algo"] == "a2c" and "value_net.body.0.weight" in ckpt["state_dict"]


@pytest.mark.slow  # a few seconds on the 2-core host
def test_each_members_first_update_is_its_single_run():
    pop = first_update(*A2C, "population.size=2", "population.vary.algo.ent_coef=[0.0,0.2]")
    assert pop.n == 4
    for k, (seed, ent) in enumerate([(0, 0.0), (1, 0.0), (0, 0.2), (1, 0.2)]):
        one = first_update(*A2C, f"seed={seed}", f"algo.ent_coef={ent}")
        assert rates(pop.last_update, k) == rates(one.last_update), f"member {k}"
        mine = pop.net.member(k).state_dict()
        for name, value in one.net.state_dict().items():
            torch.testing.assert_close(mine[name], value, atol=2e-5, rtol=1e-4, msg=f"{k} {name}")


@pytest.mark.slow  # a few seconds on the 2-core host
def test_a_killed_run_resumes_to_the_uninterrupted_one(tmp_path, monkeypatch):
    overrides = [*A2C, "checkpoint_every=2"]
    whole = train(make_cfg(*overrides), tmp_path / "whole")
    train_killed(make_cfg(*overrides), tmp_path / "killed", monkeypatch)
    assert train(make_cfg(*overrides, "resume=true"), tmp_path / "killed") == whole
    assert json.loads((tmp_path / "killed" / "eval.json").read_text()) == whole
    assert metric_rows(tmp_path / "killed") == metric_rows(tmp_path / "whole")


@pytest.mark.parametrize("override, needle", [
    ("algo.gae_lambda=2", "algo.gae_lambda must be a number in (0, 1]"),
    ("algo.minibatches=0", "algo.minibatches must be a positive integer"),
    ("algo.ent_coef=-1", "algo.ent_coef must be a number >= 0"),
    ("algo.shared_trunk=maybe", "algo.shared_trunk must be true or false"),
])
def test_bad_values_are_refused_naming_the_key(override, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        validate(make_cfg("algo=a2c", override))
