"""Review experiments: each member's first update equals its single run in harder cases."""
import pytest
import torch

from tests.helpers.updates import first_update, rates


def check(pop_overrides, singles, nets=("net", "value_net")):
    pop = first_update(*pop_overrides)
    assert pop.n == len(singles)
    for k, single in enumerate(singles):
        one = first_update(*single)
        assert rates(pop.last_update, k) == rates(one.last_update), f"member {k}"
        assert not pop.stopped, pop.stopped
        for name, value in one.last_update.terms.items():
            mine = torch.as_tensor(pop.last_update.terms[name]).reshape(-1)
            mine = mine[k] if mine.numel() > 1 else mine[0]
            torch.testing.assert_close(mine.float(), torch.as_tensor(value).float().reshape(()),
                                       atol=2e-5, rtol=1e-4, msg=f"member {k} term {name}")
        for attr in nets:
            if not hasattr(one, attr):
                continue
            mine = getattr(pop, attr).member(k).state_dict()
            for name, value in getattr(one, attr).state_dict().items():
                torch.testing.assert_close(mine[name], value, atol=2e-5, rtol=1e-4,
                                           msg=f"member {k} {attr}.{name}")


PPO_MIXED = ["algo=ppo", "opponent=mixed", "seed=3"]
CASES = {
    "ppo-mixed-p01": (
        [*PPO_MIXED, "population.vary.opponent.p_perfect=[0,1]"],
        [[*PPO_MIXED, "opponent.p_perfect=0"], [*PPO_MIXED, "opponent.p_perfect=1"]]),
    "ppo-mb3-small": (
        [*PPO_MIXED, "algo.minibatches=3", "algo.games_per_update=64", "budget.games=64",
         "population.vary.opponent.p_perfect=[0,1]"],
        [[*PPO_MIXED, "algo.minibatches=3", "algo.games_per_update=64", "budget.games=64",
          f"opponent.p_perfect={p}"] for p in (0, 1)]),
    "ppo-ep2-mb7-small": (
        [*PPO_MIXED, "algo.minibatches=7", "algo.epochs=2", "algo.games_per_update=16", "budget.games=16",
         "population.vary.opponent.p_perfect=[0,1]"],
        [[*PPO_MIXED, "algo.minibatches=7", "algo.epochs=2", "algo.games_per_update=16", "budget.games=16",
          f"opponent.p_perfect={p}"] for p in (0, 1)]),
    "ppo-self": (["algo=ppo", "opponent=self", "population.seeds=[1,2]"],
                 [["algo=ppo", "opponent=self", "seed=1"], ["algo=ppo", "opponent=self", "seed=2"]]),
    "reinforce-self": (["opponent=self", "population.seeds=[1,2]"],
                       [["opponent=self", "seed=1"], ["opponent=self", "seed=2"]]),
    "reinforce-seat-both": (["seat=both", "population.seeds=[1,2]"],
                            [["seat=both", "seed=1"], ["seat=both", "seed=2"]]),
    "reinforce-curriculum": (["opponent=curriculum", "population.seeds=[1,2]"],
                             [["opponent=curriculum", "seed=1"], ["opponent=curriculum", "seed=2"]]),
    "ppo-curriculum": (["algo=ppo", "opponent=curriculum", "population.seeds=[1,2]"],
                       [["algo=ppo", "opponent=curriculum", f"seed={s}"] for s in (1, 2)]),
    "ppo-seat-both-mixed": (
        ["algo=ppo", "seat=both", *PPO_MIXED[1:], "population.vary.opponent.p_perfect=[0,1]"],
        [["algo=ppo", "seat=both", *PPO_MIXED[1:], f"opponent.p_perfect={p}"] for p in (0, 1)]),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_first_update_matches_single(case):
    check(*CASES[case])


def _tiny(seed, p, g):
    return ["algo=ppo", "opponent=mixed", f"seed={seed}", f"algo.games_per_update={g}", f"budget.games={g}",
            "algo.minibatches=4", "algo.epochs=4", f"opponent.p_perfect={p}"]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("g", [1, 2])
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_tiny_ragged(seed, g):
    pop = _tiny(seed, 0, g)[:-1] + ["population.vary.opponent.p_perfect=[0,1]"]
    check(pop, [_tiny(seed, 0, g), _tiny(seed, 1, g)])


def test_poisoned_ppo_member(tmp_path):
    import json

    from tests.helpers.configs import make_cfg
    from ttt_research.train.run import train
    pop = first_update("algo=ppo", "population.vary.algo.lr=[0.001,1e30]")
    assert list(pop.stopped) == [1], pop.stopped
    one = first_update("algo=ppo", "seed=0", "algo.lr=0.001")
    for attr in ("net", "value_net"):
        mine = getattr(pop, attr).member(0).state_dict()
        for name, value in getattr(one, attr).state_dict().items():
            torch.testing.assert_close(mine[name], value, atol=2e-5, rtol=1e-4)
    train(make_cfg("algo=ppo", "population.vary.algo.lr=[0.001,1e30]"), tmp_path)
    rows = json.loads((tmp_path / "population.json").read_text())["members"]
    assert rows[0]["stopped"] is None and rows[0]["games"] == 2048
    assert "non-finite" in rows[1]["stopped"]


MORE = {
    "ppo-unmasked": ["algo=ppo", "algo.masking=false"],
    "ppo-noclip-nonorm": ["algo=ppo", "algo.max_grad_norm=0", "algo.norm_adv=false"],
    "ppo-schedules": ["algo=ppo", "algo.lr_final=0.0001", "algo.ent_final=0"],
    "reinforce-rollouts-momentum": ["algo.rollouts=3", "algo.games_per_update=510", "algo.momentum=0.9",
                                    "algo.lr_final=0.01"],
    "reinforce-baseline-both": ["algo.baseline=true", "seat=both"],
}


@pytest.mark.parametrize("case", MORE)
def test_more_first_updates(case):
    base = MORE[case]
    check([*base, "population.seeds=[1,2]"], [[*base, "seed=1"], [*base, "seed=2"]])


def test_ppo_rewards_vary():
    base = ["algo=ppo", "seed=4"]
    check([*base, "population.vary.reward.tie=[0,0.5]", "population.vary.reward.loss=[-1,-2]"],
          [[*base, f"reward.tie={t}", f"reward.loss={l}"] for l in (-1, -2) for t in (0, 0.5)])  # keys sorted
