"""The population block (``population.py``, ``config.validate_population``): its spellings
on the command line and in files, members in their documented order, seeded draws, refusals
in one line, and the ``population.json`` / ``population.csv`` writers on real reports."""

import csv
import json
import math
import subprocess
import sys
import textwrap

import pytest
import torch
from omegaconf import OmegaConf

from ttt_research.contract import EVAL_NAMES, eval_metrics, unbeatable
from ttt_research.env import game
from ttt_research.errors import ConfigError
from ttt_research.evaluation.exact import evaluate_actions
from ttt_research.evaluation.objectives import objective
from ttt_research.population import results
from ttt_research.population import spec as pop
from ttt_research.population.spec import Member
from ttt_research.train import runspec
from ttt_research.train.confdir import compose
from ttt_research.train.validate import validate

LR3 = [0.5, 1.0, 2.0]


def members(*overrides):
    cfg = compose(list(overrides))
    validate(cfg)
    return runspec.members(cfg)


def test_config_yaml_declares_each_variable_key_as_null_and_one_agent_by_default():
    block = OmegaConf.to_container(compose([]).population)
    assert block == {"size": 1, "seeds": None, "vary": pop.declared(), "sample": pop.declared(),
                     "export": "best"}
    declared = sorted(f"{g}.{k}" for g, keys in pop.declared().items() for k in keys)
    assert declared == sorted(pop.every_variable())
    assert members() == [Member(0, 0, {})]


@pytest.mark.parametrize("spelling", [
    ["population.vary.algo.lr=[0.5,1,2]"],                  # the documented one: no +
    ["+population.vary.algo.lr=[0.5,1,2]"],                 # Hydra's append works over the null
    ["++population.vary.algo.lr=[0.5,1,2]"],
    ["population.vary.algo={lr:[0.5,1,2]}"],
    ["population.vary={algo:{lr:[0.5,1,2]}}"],
    ["+population.vary={algo.lr:[0.5,1,2]}"],               # a dotted key in a dict literal
])
def test_grid_spellings_on_the_command_line_give_the_same_members(spelling):
    got = members(*spelling, "population.size=2", "seed=7")
    assert [(m.index, m.seed, m.hparams) for m in got] == [
        (0, 7, {"algo.lr": 0.5}), (1, 8, {"algo.lr": 0.5}),
        (2, 7, {"algo.lr": 1.0}), (3, 8, {"algo.lr": 1.0}),
        (4, 7, {"algo.lr": 2.0}), (5, 8, {"algo.lr": 2.0})]


@pytest.mark.parametrize("spelling", [
    "population.sample.algo.lr={low:0.1,high:4,log:true}",
    "+population.sample.algo.lr={low:0.1,high:4,log:true}",
    "+population.sample={algo.lr:{low:0.1,high:4,log:true}}",
])
def test_sample_spellings_on_the_command_line_give_the_same_draws(spelling):
    base = members("population.sample.algo.lr={low:0.1,high:4,log:true}", "population.size=3")
    assert members(spelling, "population.size=3") == base
    assert len({m.hparams["algo.lr"] for m in base}) == 3


EXPERIMENTS = {
    "pop_nested": """
        population:
          size: 2
          vary:
            algo: {lr: [0.5, 1, 2]}
          sample:
            reward: {tie: {low: 0.0, high: 0.5}}
        """,
    "pop_dotted": """
        population:
          size: 2
          vary:
            algo.lr: [0.5, 1, 2]
          sample:
            reward.tie: {low: 0.0, high: 0.5, log: false}
        """,
}


@pytest.fixture
def config_dir(tmp_path):
    (tmp_path / "experiment").mkdir()
    for name, text in EXPERIMENTS.items():
        (tmp_path / "experiment" / f"{name}.yaml").write_text(
            "# @package _global_\n" + textwrap.dedent(text))
    return tmp_path


def test_a_config_file_spells_the_block_nested_or_dotted(config_dir):
    found = [members(f"hydra.searchpath=[file://{config_dir}]", f"experiment={name}") for name in EXPERIMENTS]
    assert found[0] == found[1]
    assert [m.hparams["algo.lr"] for m in found[0]] == [0.5, 0.5, 1.0, 1.0, 2.0, 2.0]
    assert all(0.0 <= m.hparams["reward.tie"] <= 0.5 for m in found[0])


def test_the_command_line_prints_what_the_spellings_compose(config_dir, tmp_path):
    overrides = ["population.vary.reward.loss=[-1,-2]", "population.seeds=[3,5]",
                 "population.sample.reward.win={low:0.5,high:1.5,log:true}"]
    out = subprocess.run(
        [sys.executable, "-m", "ttt_research", "--config-dir", str(config_dir), "+experiment=pop_dotted",
         *overrides, "--cfg", "job"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    block = OmegaConf.create(out.stdout).population
    assert list(block.vary["algo.lr"]) == [0.5, 1, 2] and list(block.vary.reward.loss) == [-1, -2]
    assert OmegaConf.to_container(block.sample.reward.win) == {"low": 0.5, "high": 1.5, "log": True}
    assert list(block.seeds) == [3, 5]
    cfg = compose([f"hydra.searchpath=[file://{config_dir}]", "experiment=pop_dotted", *overrides])
    assert cfg.population == block
    got = runspec.members(cfg)
    assert len(got) == 3 * 2 * 2 and [m.seed for m in got[:4]] == [3, 5, 3, 5]


def test_grid_crosses_keys_alphabetically_then_seeds_fastest():
    got = members("population.vary.reward.tie=[0,0.5]", "population.vary.algo.lr=[1,2]",
                  "population.size=3", "seed=10")
    assert len(got) == pop.count(runspec.plan(compose(["population.vary.reward.tie=[0,0.5]",
                                          "population.vary.algo.lr=[1,2]", "population.size=3"]))) == 12
    assert [m.index for m in got] == list(range(12))
    assert [(m.hparams["algo.lr"], m.hparams["reward.tie"], m.seed) for m in got] == [
        (lr, tie, s) for lr in (1.0, 2.0) for tie in (0.0, 0.5) for s in (10, 11, 12)]
    assert all(list(m.hparams) == ["algo.lr", "reward.tie"] for m in got)


def test_named_seeds_fix_the_count():
    assert [m.seed for m in members("population.seeds=[3,5,8]")] == [3, 5, 8]
    assert [m.seed for m in members("population.seeds=[3,5,8]", "population.size=3")] == [3, 5, 8]
    with pytest.raises(ConfigError, match=r"^population.size must be 1 or 3 .*got 4$"):
        members("population.seeds=[3,5,8]", "population.size=4")


@pytest.mark.parametrize("log", [False, True])
def test_draws_are_seeded_within_bounds_and_log_uniform_when_asked(log):
    spec = f"population.sample.algo.lr={{low:0.01,high:4,log:{str(log).lower()}}}"
    got = [m.hparams["algo.lr"] for m in members(spec, "population.size=400")]
    assert got == [m.hparams["algo.lr"] for m in members(spec, "population.size=400")]
    assert all(0.01 <= v <= 4 for v in got) and len(set(got)) == 400
    # Half the draws below the middle: the geometric mean for a log draw, else the mean.
    middle = math.sqrt(0.01 * 4) if log else (0.01 + 4) / 2
    assert 0.4 < sum(v < middle for v in got) / 400 < 0.6
    # A larger population keeps the earlier draws; `seed` names the draws, the members'
    # own seeds (population.seeds) do not.
    def first5(*more):
        return [m.hparams["algo.lr"] for m in members(spec, *more)]

    assert first5("population.size=5") == first5("population.seeds=[1,2,3,4,5]") == got[:5]
    assert all(a != b for a, b in zip(first5("population.size=5", "seed=1"), got[:5], strict=True))


def test_a_draw_is_the_documented_uniform():
    v = pop.draw(0, 0, 0, "algo.lr", 1.0, 3.0, False)
    import random

    assert v == 1.0 + 2.0 * random.Random("ttt_research.population/0/0/0/algo.lr").random()


@pytest.mark.parametrize("overrides,message", [
    (["+population.vary.net.hidden=[3]"],
     "population.vary.net.hidden: only these keys can differ between members: algo.lr, "),
    (["+population.sample.algo.games_per_update={low:1,high:2}"], "stay a Hydra multirun"),
    (["population.vary.algo.ent_coef=[0.1]"],
     "population.vary.algo.ent_coef: this config has no algo.ent_coef to vary (a key of algo="),
    (["population.vary.algo.ent_coef=[0.1]"], "algo=ppo"),  # among the algorithms that have it
    (["algo=ppo", "population.vary.algo.temperature=[1]"], "algo=reinforce"),
    (["population.vary.opponent.p_perfect=[0.5]"], "a key of opponent=mixed"),
    (["population.vary.algo.lr=[0,1]"],
     "population.vary.algo.lr must be a non-empty list of distinct numbers, each a positive number up to "
     "1e+30, got [0, 1]"),
    (["population.vary.algo.lr=1"], "population.vary.algo.lr must be a non-empty list"),
    (["population.vary.algo.lr=[]"], "population.vary.algo.lr must be a non-empty list"),
    (["population.vary.algo.lr=[1,1]"], "distinct"),
    (["opponent=mixed", "population.vary.opponent.p_perfect=[0.5,1.5]"], "each a probability in [0, 1]"),
    (["population.vary.algo.lr={low:1,high:2}"], "population.vary.algo.lr must be a non-empty list"),
    (["population.sample.algo.lr=[1,2]"], "population.sample.algo.lr must be {low: NUMBER, high: NUMBER"),
    (["population.sample.algo.lr={low:2,high:1}"], "population.sample.algo.lr must be low < high"),
    (["population.sample.algo.lr={low:0,high:1}"], "bounds that are each a positive number"),
    (["population.sample.reward.tie={low:0,high:1,log:true}"], "low > 0 with log: true"),
    (["population.sample.reward.tie={low:0.1,high:1,log:maybe}"], "population.sample.reward.tie.log must be "
                                                                  "true or false, got 'maybe'"),
    (["population.sample.reward.tie={low:0.1,high:1,step:2}"], "(log is optional)"),
    # what bash hands Hydra for an unquoted population.sample.algo.lr={low:0.1,high:4}
    (["population.sample.algo.lr=low:0.1", "population.sample.algo.lr=high:4"],
     "quote the braces for the shell: 'population.sample.algo.lr={low:0.1,high:4}'"),
    (["population.vary.algo.lr=[1]", "population.sample.algo.lr={low:1,high:2}"], "not both"),
    (["+population.vary={algo.lr:[1,2]}", "population.vary.algo.lr=[3]"], "given twice"),
    (["population.size=0"], "population.size must be a positive integer, got 0"),
    (["population.seeds=[3,3]"], "population.seeds must be null or a non-empty list of distinct"),
    (["population.seeds=[-1]"], "non-negative"),
    (["population.export=some"], "population.export must be one of best, all, got 'some'"),
    (["population.vary=null", "population.sample=3"], "population.sample must be keys with ranges"),
])
def test_bad_blocks_are_refused_in_one_line_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as e:
        validate(compose(overrides))
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("key,start", [
    ("population.vary.algo.lr", "population.vary.algo.lr must be a non-empty list of distinct numbers"),
    ("+population.sample.algo.lr", "population.sample.algo.lr must be {low: NUMBER, high: NUMBER"),
])
def test_a_refused_grid_of_15_kb_is_echoed_cut_to_one_short_line(key, start):
    # Issue 58: a grid of thousands of values, refused (here: not distinct, or not under a
    # key), was echoed whole, a 14.8 KB line; the line shows its first SHOWN characters and how
    # many values it had.
    grid = "[" + ",".join(["0.5"] * 3750) + "]"
    assert len(grid) > 15_000
    with pytest.raises(ConfigError) as e:
        validate(compose([f"{key}={grid}"]))
    line = str(e.value)
    assert line.startswith(start) and ", got [0.5, 0.5, 0.5, " in line, line[:300]
    assert line.endswith("... (3,750 items)") and len(line) < 400 and "\n" not in line


def test_a_block_that_is_a_long_list_is_echoed_cut():
    # A config file's population.vary written as a list, not keys: the same cut.
    with pytest.raises(ConfigError, match=r"^population.vary must be keys with lists of values, .*, got "
                                          r"\[0.5, 0.5, .{150,}\.\.\. \(3,750 items\)$"):
        pop.parse([0.5] * 3750, "vary")


def test_python_m_ttt_research_refuses_a_bad_block_with_exit_2(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ttt_research", "+population.vary.net.hidden=[25,100]",
         f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: population.vary.net.hidden: only these keys")
    assert "-m net=mlp25,mlp100 population.size=64" in lines[0]
    assert not (tmp_path / "run").exists()


def test_member_config_is_the_single_run_of_that_member():
    cfg = compose(["population.vary.algo.lr=[0.5,1]", "population.sample.reward.tie={low:0,high:0.5}",
                   "population.size=2", "seed=4", "population.export=all"])
    m = runspec.members(cfg)[3]
    assert (m.seed, m.hparams["algo.lr"]) == (5, 1.0)
    alone = compose(["seed=5", "algo.lr=1.0", f"reward.tie={m.hparams['reward.tie']!r}",
                     "population.export=all"])
    assert runspec.member_config(cfg, m) == alone
    assert runspec.members(runspec.member_config(cfg, m)) == [Member(0, 5, {})]
    assert OmegaConf.to_container(cfg.population.vary.algo.lr) == [0.5, 1]  # the input is untouched


# --------------------------------------------------------------------------- the writers

T = game.tables()


def preference(order: list[int]) -> torch.Tensor:
    """(N,) the greedy move of fixed cell preferences (highest ``order``; ties: lowest cell)."""
    return torch.where(T.legal, torch.tensor(order, dtype=torch.float64), -torch.inf).argmax(-1)


@pytest.fixture(scope="module")
def rows():
    from ttt_research.env.solver import solve

    perfect = evaluate_actions(solve().optimal.to(torch.int8).argmax(-1))   # unbeatable both ways
    centre = evaluate_actions(preference([3, 1, 3, 1, 5, 1, 3, 1, 3]))     # beatable (a fork)
    first = evaluate_actions(preference([8, 7, 6, 5, 4, 3, 2, 1, 0]))      # the lowest empty cell
    members = [Member(i, 10 + i, {"algo.lr": lr}) for i, lr in enumerate([0.5, 1.0, 2.0, 4.0])]
    return [results.member_row(members[0], 1000, centre),
            results.member_row(members[1], 1000, perfect, first_unbeatable_games=600),
            results.member_row(members[2], 1000, first),
            results.member_row(members[3], 400, perfect, stopped="non-finite loss at update 3")]


def test_aggregate_ranks_the_reports_it_is_given(rows):
    agg = results.aggregate(rows, "both", "score")
    ranked = [r["eval"] for r in rows[:3]]  # the stopped member is listed, not ranked
    assert unbeatable(rows[1]["eval"]) and not unbeatable(rows[0]["eval"]) and not unbeatable(rows[2]["eval"])
    assert agg["members"] == 4 and agg["evaluated"] == 3 and agg["stopped"] == [3]
    assert agg["unbeatable"] == 1 and agg["unbeatable_fraction"] == 0.25
    assert agg["best"] == 1
    scores = sorted(objective(r, "both", "score") for r in ranked)
    assert agg["objective"] == {"name": "score", "per_member": "score", "median": scores[1],
                                "min": scores[0], "max": scores[2]}
    assert agg["objectives"]["population_median_score"] == scores[1]
    assert agg["objectives"]["population_unbeatable_fraction"] == 0.25
    # 3 ranked members: the IQM cuts nothing (the mean); Wilson's 1 of 4 from its formula.
    assert agg["objectives"]["population_iqm_score"] == pytest.approx(sum(scores) / 3, abs=1e-12)
    wins = [min(r[s]["vs_random"]["win"] for s in ("as_x", "as_o")) for r in ranked]
    assert agg["objectives"]["population_iqm_win"] == pytest.approx(sum(wins) / 3, abs=1e-12)
    z2 = 1.959963984540054 ** 2
    low = (0.25 + z2 / 8 - 1.959963984540054 * (0.25 * 0.75 / 4 + z2 / 64) ** 0.5) / (1 + z2 / 4)
    assert agg["objectives"]["population_unbeatable_ci_low"] == pytest.approx(low, abs=1e-12)
    assert set(agg["metrics"]) == set(EVAL_NAMES)
    for name in EVAL_NAMES:
        values = sorted(eval_metrics(r)[name] for r in ranked)
        assert agg["metrics"][name] == {"median": values[1], "min": values[0], "max": values[2]}
    # A loss is minimised: the best is the member that loses least as O.
    o_losses = [eval_metrics(r)["eval/o_random_loss"] for r in ranked]
    assert results.aggregate(rows, "both", "eval/o_random_loss")["best"] == o_losses.index(min(o_losses))
    # Medians of an even count: the mean of the middle two.
    two = results.aggregate(rows[:2], "both", "optimal_move_rate")["objective"]["median"]
    assert two == (ranked[0]["optimal_move_rate"] + ranked[1]["optimal_move_rate"]) / 2


def test_population_json_has_the_issue_schema(rows, tmp_path):
    agg = results.aggregate(rows, "o")
    results.write_population_json(tmp_path / "population.json", list(reversed(rows)), agg)
    data = json.loads((tmp_path / "population.json").read_text())
    assert set(data) == {"members", "aggregate"} and data["aggregate"] == json.loads(json.dumps(agg))
    assert [m["index"] for m in data["members"]] == [0, 1, 2, 3]
    assert all(list(m) == list(results.ROW_KEYS) for m in data["members"])
    assert data["members"][1]["eval"] == json.loads(json.dumps(rows[1]["eval"]))
    assert [m["first_unbeatable_games"] for m in data["members"]] == [None, 600, None, None]
    assert data["members"][3]["stopped"] == "non-finite loss at update 3"
    with pytest.raises(ValueError, match="lacks stopped"):
        results.write_population_json(tmp_path / "bad.json", [{k: 0 for k in results.ROW_KEYS[:-1]}], agg)


def test_population_csv_has_one_row_per_member(rows, tmp_path):
    results.write_population_csv(tmp_path / "population.csv", rows, "both")
    with open(tmp_path / "population.csv") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == ["index", "seed", "algo.lr", "games", *EVAL_NAMES, "unbeatable",
                              "first_unbeatable_games", "stopped"]
    assert [r["index"] for r in table] == ["0", "1", "2", "3"]
    assert [float(r["algo.lr"]) for r in table] == [0.5, 1.0, 2.0, 4.0]
    assert [r["unbeatable"] for r in table] == ["False", "True", "False", "False"]  # stopped: False
    assert [r["first_unbeatable_games"] for r in table] == ["", "600", "", ""]
    assert table[3]["stopped"] == "non-finite loss at update 3" and table[0]["stopped"] == ""
    for row, member in zip(table, rows, strict=True):
        assert {n: float(row[n]) for n in EVAL_NAMES} == eval_metrics(member["eval"])
