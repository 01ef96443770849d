"""Defaults per (algorithm, network): ``conf/tuned/ALGO_NET.yaml``, an optional group that
``config.yaml`` chooses from both (``optional tuned: ${algo}_${net}``). A cell's values apply to
that pair only, after the algorithm's own defaults; a command-line value still wins; ``~tuned``
composes without them; ``docs/configuration.md`` lists every cell and what it sets. A run's
first line names its pair's cell, or says it has none (with the page: ``train/cells.py``); a
cell of another algorithm is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.helpers.command import checksums, cli, one_error_line
from tests.helpers.configs import make_cfg
from tests.test_docs import anchors
from ttt_research.algos.spec import CELLS as CELLS_PAGE
from ttt_research.algos.spec import specs
from ttt_research.train.cells import Note, note
from ttt_research.train.confdir import compose, config_dir
from ttt_research.train.runfolder import flatten

TUNED = config_dir() / "tuned"
CELLS = sorted(TUNED.glob("*.yaml"))
BY_NAME = {spec.name: spec for spec in specs().values()}  # specs() is keyed by the class's path
NETS = sorted(p.stem for p in (config_dir() / "net").glob("*.yaml"))
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "configuration.md"


def settings(path: Path) -> dict[str, object]:
    """What a cell's file sets (it is a ``_global_`` package: keys from the root)."""
    text = path.read_text()
    assert text.startswith("# @package _global_\n"), path.name
    return flatten(yaml.safe_load(text))


def pair(path: Path) -> tuple[str, str]:
    algo, _, net = path.stem.rpartition("_")
    return algo, net


def select(cfg, key: str):
    node = cfg
    for part in key.split("."):
        node = node[part]
    return node


def test_there_are_cells_and_each_names_an_algorithm_and_a_network_it_takes():
    assert CELLS
    for path in CELLS:
        algo, net = pair(path)
        assert algo in BY_NAME and net in NETS, path.name
        kind = "table" if net == "qtable" else "mlp"
        assert kind in BY_NAME[algo].nets, path.name
        assert settings(path), f"{path.name} sets nothing"


@pytest.mark.parametrize("path", CELLS, ids=[p.stem for p in CELLS])
def test_a_cell_applies_to_its_pair_only_and_the_command_line_wins(path):
    algo, net = pair(path)
    chosen = settings(path)
    cfg = compose([f"algo={algo}", f"net={net}"], hydra=True)
    assert cfg.hydra.runtime.choices.tuned == path.stem
    for key, value in chosen.items():
        assert select(cfg, key) == value, key
    # without the cell (~tuned) at least one value differs: the file changes something
    plain = compose([f"algo={algo}", f"net={net}", "~tuned"])
    assert any(select(plain, key) != value for key, value in chosen.items())
    # another network of the same algorithm composes without this cell
    other = next(n for n in ("mlp25", "mlp100", "mlp128")
                 if n != net and not (TUNED / f"{algo}_{n}.yaml").exists())
    elsewhere = compose([f"algo={algo}", f"net={other}"], hydra=True)
    assert elsewhere.hydra.runtime.choices.tuned == f"{algo}_{other}"  # a pair without a file
    assert any(select(elsewhere, key) != value for key, value in chosen.items())
    # an explicit value on the command line beats the cell's (the first numeric key)
    key, value = next((k, v) for k, v in chosen.items()
                      if isinstance(v, int | float) and not isinstance(v, bool))
    mine = value * 2
    assert select(make_cfg(f"algo={algo}", f"net={net}", f"{key}={mine}"), key) == mine


def test_the_docs_list_every_cell_and_what_it_sets():
    text = DOCS.read_text().split("### Defaults per (algorithm, network)")[1].split("\n## ")[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*?) \|", text, re.M))
    assert set(rows) == {p.stem for p in CELLS}
    for path in CELLS:
        listed = dict(re.findall(r"`([\w.]+)=([^`]+)`", rows[path.stem]))
        # as typed on the command line: YAML's true/false, not Python's True/False
        typed = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in settings(path).items()}
        assert listed == typed, path.stem


def test_a_cell_typed_by_hand_that_does_not_exist_is_one_line_and_no_folder(tmp_path):
    # The group is optional, so Hydra alone would train without the settings asked for.
    run_dir = tmp_path / "run"
    code, _, err = cli("tuned=ppo_mlp99", "debug=tiny", f"hydra.run.dir={run_dir}")
    line = one_error_line(err)
    assert code == 2 and line.startswith("error: tuned must be one of ") and "got 'ppo_mlp99'" in line
    assert all(f"{p.stem}" in line for p in CELLS) and not run_dir.exists()
    # a cell named on purpose applies to another network of its algorithm (its file, whatever net is)
    path = next(p for p in CELLS if pair(p)[1] != "mlp25")
    cfg = compose([f"algo={pair(path)[0]}", "net=mlp25", f"tuned={path.stem}"])
    assert all(select(cfg, k) == v for k, v in settings(path).items())


def test_a_cell_of_another_algorithm_is_one_line_and_nothing_written(tmp_path):
    # tuned=ppo_mlp25 algo=reinforce would set PPO's settings on REINFORCE's keys (issue 58).
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("mine")
    before = checksums(tmp_path)
    cell = next(p.stem for p in CELLS if pair(p)[0] != "reinforce")
    code, out, err = cli(f"tuned={cell}", "algo=reinforce", "debug=tiny", f"hydra.run.dir={run_dir}")
    line = one_error_line(err)
    assert code == 2 and out == "" and checksums(tmp_path) == before
    assert line.startswith(f"error: tuned={cell} is a cell of algo={pair(Path(cell))[0]} ")
    assert "this run trains algo=reinforce" in line


PAIRS = [(s.name, net) for s in BY_NAME.values() for net in NETS
         if ("table" if net == "qtable" else "mlp") in s.nets]


@pytest.mark.parametrize("algo,net", PAIRS, ids=[f"{a}-{n}" for a, n in PAIRS])
def test_the_first_lines_say_what_each_pair_trains_with(algo, net):
    """Each pair the specs take: its cell named, or nothing on the algorithm's own network, or
    'no tuned cell' with the page (a pair known not to reach a useful agent: the page that shows
    it, whose heading exists)."""
    own = TUNED / f"{algo}_{net}.yaml"
    got = note(algo, net, f"{algo}_{net}")
    spec = BY_NAME[algo]
    if own.exists():
        assert net not in spec.no_cell and net != spec.tuned_on
        assert got == Note(f"tuned={own.stem}")
        assert note(algo, net, None) == Note(f"without this pair's tuned={own.stem}")  # ~tuned
    elif net == spec.tuned_on:
        assert got == Note()
    else:
        page = spec.no_cell.get(net, CELLS_PAGE)
        assert got.tag == "no tuned cell"
        assert got.line.startswith(f"no tuned cell for algo={algo} net={net}: ")
        assert got.line.endswith(f"({page})")
        file, _, anchor = page.partition("#")
        assert (ROOT / file).is_file() and (not anchor or anchor in anchors(ROOT / file))


def test_a2c_on_mlp25_says_it_reaches_no_useful_agent_and_a_cell_is_named():
    # the run (then reinforce on mlp25, a cell since): it lost 7% as O and said nothing
    got = note("a2c", "mlp25", "a2c_mlp25")
    assert got.tag == "no tuned cell" and "no settings tried reached a useful agent" in got.line
    assert "experiments/cells/README.md#" in got.line
    assert note("ppo", "mlp25", "ppo_mlp25") == Note("tuned=ppo_mlp25")
    assert note("ppo", "mlp25", "ppo_mlp100").tag == "tuned=ppo_mlp100, not this pair's tuned=ppo_mlp25"
    assert note(None, None, None) == Note()  # outside Hydra (the compose API): nothing said
    assert got.line in DOCS.read_text().splitlines()  # docs/configuration.md's example


@pytest.mark.slow  # two tiny trainings (~4 s)
def test_a_run_without_a_cell_says_so_once_in_its_first_lines_a_population_resumed_too(tmp_path):
    run_dir = tmp_path / "run"
    args = ["algo=a2c", "net=mlp25", "debug=tiny", "progress=lines", "threads=1",
            "population.size=2", f"hydra.run.dir={run_dir}"]
    for extra, after in (([], ""), (["resume=true"], "; resumed after 2,048 games")):
        code, out, err = cli(*args, *extra)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("training a2c [25] planes18 (no tuned cell), seat both vs random, ")
        assert lines[0].endswith(after)
        said = note("a2c", "mlp25", "a2c_mlp25").line
        assert lines[1] == said and out.count("no tuned cell") == 2  # the tag and the line, once


def test_a_cells_reward_on_another_reward_table_is_refused_unless_typed(tmp_path, monkeypatch):
    """A cell's value of another group (a reward's tie) was tuned with that group's default
    option: on another option it would replace that option's own value unasked."""
    import shutil

    from ttt_research.errors import ConfigError
    from ttt_research.train import cells as cells_module

    conf = tmp_path / "conf"
    shutil.copytree(config_dir(), conf)
    (conf / "tuned" / "reinforce_mlp25.yaml").write_text(
        "# @package _global_\nalgo:\n  rollouts: 128\nreward:\n  tie: 0.5\n")
    monkeypatch.setattr(cells_module, "config_dir", lambda: conf)
    assert cells_module.default_choices()["reward"] == "antirez"
    choices = {"algo": "reinforce", "net": "mlp25", "reward": "zero_sum", "tuned": "reinforce_mlp25"}
    with pytest.raises(ConfigError) as refused:
        cells_module.check_groups("reinforce_mlp25", choices, {"algo", "net", "reward"})
    said = str(refused.value)
    assert said.startswith("tuned=reinforce_mlp25 sets reward.tie=0.5 for reward=antirez ")
    assert "chose reward=zero_sum" in said and "(reward.tie=0.0 is zero_sum's own)" in said
    assert "~tuned" in said
    # typed, or the table the cell was tuned with, or no cell: nothing to refuse
    cells_module.check_groups("reinforce_mlp25", choices, {"reward", "reward.tie"})
    cells_module.check_groups("reinforce_mlp25", {**choices, "reward": "antirez"}, set())
    cells_module.check_groups(None, choices, set())
    # the pair's own groups are the cell's to set (a cell of algo=ppo is not "another algo")
    cells_module.check_groups("reinforce_mlp25", {**choices, "reward": "antirez", "algo": "ppo"}, set())


def test_the_cells_that_pay_another_tie_refuse_another_table_in_one_line(tmp_path):
    """The real cells: each that sets a reward value refuses a run on another reward table that
    does not type it, before anything is written."""
    paying = [p for p in CELLS if "reward" in yaml.safe_load(p.read_text())]
    assert paying  # reinforce_mlp25 pays ties 0.5 on antirez's table
    for path in paying:
        algo, net = pair(path)
        run_dir = tmp_path / path.stem
        code, out, err = cli(f"algo={algo}", f"net={net}", "reward=zero_sum", "debug=tiny",
                             f"hydra.run.dir={run_dir}")
        line = one_error_line(err)
        assert code == 2 and out == "" and not run_dir.exists()
        assert line.startswith(f"error: tuned={path.stem} sets reward.") and "reward=zero_sum" in line
        cfg = make_cfg(f"algo={algo}", f"net={net}", "reward=zero_sum", "reward.tie=0")
        assert cfg.reward.tie == 0 and cfg.reward.loss == -1  # typed: zero_sum's, as asked
