"""Training a population: N agents in one module, each as its own seed's single run would be.

Member k's first update plays exactly the games of ``seed=<its seed>`` alone (its own random
stream, its own initial weights, its own hyperparameters); the members differ; each member's
row in population.json is what the evaluator says of its exported policy; a member that goes
non-finite is stopped alone; a killed population resumes to the uninterrupted result; a
population of one is the plain run."""

import csv
import json
import re

import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.resume import evals_rows, metric_rows, train_killed
from tests.helpers.updates import first_update, rates
from ttt_research.analysis.scan import find_runs
from ttt_research.analysis.summary import records, summarise
from ttt_research.contract import unbeatable
from ttt_research.errors import ConfigError
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.policy_file import load_policy
from ttt_research.train.run import train
from ttt_research.train.validate import validate

CASES = {
    # (population overrides, [single-run overrides of each member])
    "reinforce-seeds": (["population.seeds=[0,5,9]"], [["seed=0"], ["seed=5"], ["seed=9"]]),
    "reinforce-mixed-grid": (
        ["opponent=mixed", "seed=3", "population.vary.opponent.p_perfect=[0.2,0.8]",
         "population.vary.reward.tie=[0,0.5]"],
        [["opponent=mixed", "seed=3", "opponent.p_perfect=0.2", "reward.tie=0"],
         ["opponent=mixed", "seed=3", "opponent.p_perfect=0.2", "reward.tie=0.5"],
         ["opponent=mixed", "seed=3", "opponent.p_perfect=0.8", "reward.tie=0"],
         ["opponent=mixed", "seed=3", "opponent.p_perfect=0.8", "reward.tie=0.5"]]),
    "reinforce-greedy-member": (
        ["population.size=2", "population.vary.algo.temperature=[0,1]", "algo.temperature_final=null"],
        [["seed=0", "algo.temperature=0", "algo.temperature_final=null"],
         ["seed=1", "algo.temperature=0", "algo.temperature_final=null"],
         ["seed=0", "algo.temperature=1", "algo.temperature_final=null"],
         ["seed=1", "algo.temperature=1", "algo.temperature_final=null"]]),
    "reinforce-temperature-final": (  # annealed per batch: the first update's later batches differ
        ["population.size=2", "population.vary.algo.temperature_final=[0.05,0.5]"],
        [["seed=0", "algo.temperature_final=0.05"], ["seed=1", "algo.temperature_final=0.05"],
         ["seed=0", "algo.temperature_final=0.5"], ["seed=1", "algo.temperature_final=0.5"]]),
    "reinforce-epsilon": (  # a member exploring with epsilon 0 draws nothing extra, as alone
        ["population.size=2", "population.vary.algo.epsilon=[0,0.2]"],
        [["seed=0", "algo.epsilon=0"], ["seed=1", "algo.epsilon=0"],
         ["seed=0", "algo.epsilon=0.2"], ["seed=1", "algo.epsilon=0.2"]]),
    "reinforce-symmetries": (  # the turned positions' pass goes member by member too
        ["population.size=2", "algo.symmetries=true"],
        [["seed=0", "algo.symmetries=true"], ["seed=1", "algo.symmetries=true"]]),
    "ppo-seeds-and-ent": (
        ["algo=ppo", "population.size=2", "population.vary.algo.ent_coef=[0.01,0.1]"],
        [["algo=ppo", "seed=0", "algo.ent_coef=0.01"], ["algo=ppo", "seed=1", "algo.ent_coef=0.01"],
         ["algo=ppo", "seed=0", "algo.ent_coef=0.1"], ["algo=ppo", "seed=1", "algo.ent_coef=0.1"]]),
    "ppo-pool": (["algo=ppo", "opponent=pool", "population.seeds=[4,2]"],
                 [["algo=ppo", "opponent=pool", "seed=4"], ["algo=ppo", "opponent=pool", "seed=2"]]),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_each_members_first_update_is_its_single_run(case):
    """Same games (the sampled rates of 512 games), and after the update the same weights up
    to float order (a batched matmul per member vs one matmul)."""
    pop_overrides, singles = CASES[case]
    pop = first_update(*pop_overrides)
    assert pop.n == len(singles)
    for k, single_overrides in enumerate(singles):
        one = first_update(*single_overrides)
        assert rates(pop.last_update, k) == rates(one.last_update), f"member {k}"
        mine = pop.net.member(k).state_dict()
        for name, value in one.net.state_dict().items():
            torch.testing.assert_close(mine[name], value, atol=2e-5, rtol=1e-4,
                                       msg=f"member {k} {name}")
    by_seed = {m.seed: json.dumps(rates(pop.last_update, m.index)) for m in pop.members}
    assert len(set(by_seed.values())) == len(by_seed)  # members of different seeds play differently


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_members_differ_and_each_row_is_its_exported_policys_evaluation(tmp_path, capsys):
    report = train(make_cfg("population.size=3", "population.export=all"), tmp_path)
    # the members' objective says what it measures (it printed "score: median -0.1836 ...")
    assert "  score (worst trained seat's win - loss vs random, minus 1 if beatable): median " in (
        capsys.readouterr().out)
    data = json.loads((tmp_path / "population.json").read_text())
    rows = data["members"]
    assert [r["seed"] for r in rows] == [0, 1, 2] and [r["games"] for r in rows] == [2048] * 3
    assert len({json.dumps(r["eval"], sort_keys=True) for r in rows}) == 3
    for r in rows:
        onnx = tmp_path / "members" / f"{r['index']:03d}" / "policy.onnx"
        mine = ev.evaluate_policy(load_policy(onnx)[0])
        for side in ("as_x", "as_o"):
            for opp in ("vs_random", "vs_perfect"):
                for outcome, value in mine[side][opp].items():
                    assert abs(value - r["eval"][side][opp][outcome]) <= 1e-6
            assert mine[side]["worst_case"] == r["eval"][side]["worst_case"]
    best = data["aggregate"]["best"]
    assert report["population"]["best_member"] == best
    assert json.loads((tmp_path / "eval.json").read_text()) == report
    assert {k: v for k, v in report.items() if k != "population"} == rows[best]["eval"]
    with open(tmp_path / "population.csv", newline="") as f:
        assert [int(r["seed"]) for r in csv.DictReader(f)] == [0, 1, 2]
    with open(tmp_path / "population_evals.csv", newline="") as f:
        evals = list(csv.DictReader(f))
    assert [(int(r["games"]), int(r["member"])) for r in evals] == [
        (g, k) for g in (1024, 2048) for k in range(3)]
    # metrics.csv holds the aggregate series: the median of the members' exact win rates
    with open(tmp_path / "metrics.csv", newline="") as f:
        last = [r for r in csv.DictReader(f) if r.get("eval/o_random_win")][-1]
    wins = sorted(r["eval"]["as_o"]["vs_random"]["win"] for r in rows)
    assert float(last["eval/o_random_win"]) == pytest.approx(wins[1], abs=1e-12)
    assert float(last["eval/o_random_win_min"]) == pytest.approx(wins[0], abs=1e-12)
    # report reads the folder as one configuration of three seeds, each a member's final report
    keys, groups, _ = summarise(find_runs(tmp_path), reps=200)
    (row,) = records(keys, groups)
    assert (row["seeds"], row["jobs"]) == (3, 1)
    assert row["o_random_win_iqm"] == pytest.approx(sum(wins) / 3, abs=1e-12)  # 3 seeds: nothing cut
    assert row["o_random_win_median"] == pytest.approx(wins[1], abs=1e-12)
    assert row["unbeatable"] == sum(unbeatable(r["eval"], "o") for r in rows)


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_population_of_one_is_the_plain_run_of_its_seed(tmp_path):
    one = train(make_cfg("population.seeds=[7]"), tmp_path / "pop")
    plain = train(make_cfg("seed=7"), tmp_path / "plain")
    assert one == plain
    assert metric_rows(tmp_path / "pop") == metric_rows(tmp_path / "plain")
    assert not (tmp_path / "pop" / "population.json").exists()


def test_a_poisoned_member_is_stopped_alone_and_the_others_go_on(tmp_path):
    report = train(make_cfg("population.size=2", "population.vary.algo.lr=[0.5,1e30]"), tmp_path)
    rows = json.loads((tmp_path / "population.json").read_text())["members"]
    assert [r["hparams"]["algo.lr"] for r in rows] == [0.5, 0.5, 1e30, 1e30]
    assert [r["stopped"] is None for r in rows] == [True, True, False, False]
    for r in rows[2:]:
        assert "non-finite" in r["stopped"] and "update 1 of 4" in r["stopped"]
        # the guard is a single run's (guards.check): it names what it found as the log does
        assert re.fullmatch(r"non-finite (train/\S+ = \S+|parameter \S+) at update 1 of 4 "
                            r"\(after 512 games\)", r["stopped"]), r["stopped"]
        assert r["games"] == 512  # it played its first update, then stopped
    assert [r["games"] for r in rows[:2]] == [2048, 2048]
    assert report["population"]["best_member"] in (0, 1)
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())
    agg = json.loads((tmp_path / "population.json").read_text())["aggregate"]
    assert agg["stopped"] == [2, 3] and agg["evaluated"] == 2


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_killed_population_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
    """Killed two updates after the checkpoint of update 2 (of 4), resumed."""
    overrides = ["population.size=3", "checkpoint_every=2", "algo=ppo", "opponent=pool",
                 "opponent.every=1"]
    train(make_cfg(*overrides), tmp_path / "whole")
    train_killed(make_cfg(*overrides), tmp_path / "killed", monkeypatch, later=1)
    train(make_cfg(*overrides, "resume=true"), tmp_path / "killed")
    for name in ("population.json", "eval.json"):
        assert (tmp_path / "killed" / name).read_text() == (tmp_path / "whole" / name).read_text(), name
    assert evals_rows(tmp_path / "killed") == evals_rows(tmp_path / "whole")
    assert metric_rows(tmp_path / "killed") == metric_rows(tmp_path / "whole")


@pytest.mark.parametrize("override, needle", [
    ("algo=reinforce_faithful", "one game at a time"),
    ("algo.position_table=false", "position_table=true"),
    ("trainer.devices=3", "3 processes need at least as many members"),
    ("trainer.strategy=ddp_spawn", "with strategy ddp only"),
])
def test_what_a_population_cannot_train_is_refused_in_one_line(override, needle):
    ddp = ["trainer=ddp"] if override.startswith("trainer.") else []
    with pytest.raises(ConfigError, match=needle):
        validate(make_cfg("population.size=2", *ddp, override))
    validate(make_cfg("population.size=1", *ddp, override))  # one agent: fine


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_population_checkpoint_is_refused_by_evaluate_in_one_line(tmp_path):
    import subprocess
    import sys

    train(make_cfg("population.size=2", "budget.games=512"), tmp_path)
    out = subprocess.run([sys.executable, "-m", "ttt_research.evaluate",
                          str(tmp_path / "checkpoints" / "last.ckpt")], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "a population's checkpoint (2 members" in out.stderr
    assert "members/NNN" in out.stderr


def test_a_population_with_antirez_softmax_over_all_cells_trains():
    """algo.masked_softmax=false (the seed's softmax over all 9 cells): acting still masks,
    block by block of the population's table."""
    pop = first_update("population.size=2", "algo.masked_softmax=false")
    one = first_update("seed=1", "algo.masked_softmax=false")
    assert rates(pop.last_update, 1) == rates(one.last_update)


@pytest.mark.parametrize("overrides", [
    ["population.vary.algo.temperature=[0.5,1]", "population.vary.algo.epsilon=[0,0.1]",
     "population.vary.algo.lr=[1,2]"],
    ["algo=ppo", "population.vary.algo.ent_coef=[0,0.01]", "population.vary.algo.lr_final=[0.0001,0.001]"],
])
def test_the_members_own_values_go_where_the_games_are(overrides):
    """A population's (N,) values are plain attributes of its algorithm, which ``Module.to``
    does not move: ``values_to`` (called as the fit starts) moves every one (a GPU run would
    otherwise mix a CPU (N,) into the games' tensors) and nothing else."""
    from ttt_research.train.run import build

    algo = build(make_cfg(*overrides)).algo
    own = {k for k, v in vars(algo).items() if isinstance(v, torch.Tensor)}
    assert len(own) >= 2
    algo.values_to(torch.device("meta"))
    assert all(getattr(algo, k).device.type == "meta" for k in own)
    assert all(p.device.type == "cpu" for p in algo.parameters())


def test_the_fit_moves_the_members_values_as_it_starts(tmp_path, monkeypatch):
    from ttt_research.algos.base import Algorithm

    moved = []
    monkeypatch.setattr(Algorithm, "values_to", lambda self, device: moved.append(torch.device(device)))
    train(make_cfg("population.vary.algo.temperature=[0.5,1]"), tmp_path)
    assert moved == [torch.device("cpu")]
