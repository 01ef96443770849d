"""Defaults per (algorithm, network): ``conf/tuned/ALGO_NET.yaml``, an optional group that
``config.yaml`` chooses from both (``optional tuned: ${algo}_${net}``). A cell's values apply to
that pair only, after the algorithm's own defaults; a command-line value still wins; ``~tuned``
composes without them; ``docs/configuration.md`` lists every cell and what it sets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.helpers.command import cli, one_error_line
from tests.helpers.configs import make_cfg
from ttt_research.algos.spec import specs
from ttt_research.train.confdir import compose, config_dir
from ttt_research.train.runfolder import flatten

TUNED = config_dir() / "tuned"
CELLS = sorted(TUNED.glob("*.yaml"))
BY_NAME = {spec.name: spec for spec in specs().values()}  # specs() is keyed by the class's path
NETS = sorted(p.stem for p in (config_dir() / "net").glob("*.yaml"))
DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


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
        assert listed == {k: str(v) for k, v in settings(path).items()}, path.stem


def test_a_cell_typed_by_hand_that_does_not_exist_is_one_line_and_no_folder(tmp_path):
    # The group is optional, so Hydra alone would train without the settings asked for.
    run_dir = tmp_path / "run"
    code, _, err = cli("tuned=ppo_mlp99", "debug=tiny", f"hydra.run.dir={run_dir}")
    line = one_error_line(err)
    assert code == 2 and line.startswith("error: tuned must be one of ") and "got 'ppo_mlp99'" in line
    assert all(f"{p.stem}" in line for p in CELLS) and not run_dir.exists()
    # a cell named on purpose applies to another pair (its file, whatever algo and net are)
    cfg = compose(["net=mlp25", f"tuned={CELLS[0].stem}"])
    assert all(select(cfg, k) == v for k, v in settings(CELLS[0]).items())
