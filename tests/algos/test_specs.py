"""Each algorithm declares itself in ``algos/NAME_spec.py`` (``algos/spec.py``), and nothing
outside ``algos/`` names one: the config check, the population and the shell ask the specs."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from ttt_research.algos.spec import GENERIC, spec_of, specs

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "ttt_research"
OPTIONS = sorted(p.stem for p in (ROOT / "conf" / "algo").glob("*.yaml"))
BY_NAME = {s.name: s for s in specs().values()}


def composed(name: str) -> dict:
    """``algo=NAME``'s algo block as the command composes it."""
    from omegaconf import OmegaConf

    from ttt_research.train.confdir import compose

    # ~tuned: without the cell of (algorithm, the default net), conf/tuned/, which may change a default
    return OmegaConf.to_container(compose([f"algo={name}", "~tuned"]).algo)


def test_each_algo_option_has_its_spec_and_each_spec_its_option():
    assert sorted(BY_NAME) == OPTIONS
    for name in OPTIONS:
        assert BY_NAME[name].target == composed(name)["_target_"], name


@pytest.mark.parametrize("name", OPTIONS)
def test_the_composed_algo_block_is_the_specs_defaults_in_their_order(name):
    """conf/algo/NAME.yaml sets no hyperparameter itself: it places the spec's (Hyper) at algo."""
    spec = BY_NAME[name]
    assert composed(name) == {"_target_": spec.target, **spec.defaults()}
    assert list(composed(name)) == [f.name for f in dataclasses.fields(spec.hyper)]
    assert "\nalgo:" not in (ROOT / "conf" / "algo" / f"{name}.yaml").read_text()


@pytest.mark.parametrize("name", OPTIONS)
def test_a_spec_rules_every_hyperparameter_and_no_other(name):
    spec, keys = BY_NAME[name], set(spec_defaults := BY_NAME[name].defaults())
    assert sorted(k for k in keys if spec.rule(k) is None) == []  # a key nobody checks
    assert sorted(set(spec.keys) - keys) == []  # a rule for a key the algorithm does not have
    assert set(spec.varies) <= keys
    for key in keys:  # the defaults pass their own rules
        spec.rule(key).check(f"algo.{key}", spec_defaults[key])


@pytest.mark.parametrize("name", OPTIONS)
def test_the_constructor_takes_each_hyperparameter_and_restates_no_default(name):
    """Each default is written once, in the spec: the class takes every hyperparameter,
    keyword-only, and defaults none of them (its companion networks aside)."""
    from hydra.utils import get_class

    params = inspect.signature(get_class(BY_NAME[name].target).__init__).parameters
    hyper = set(BY_NAME[name].defaults())
    assert hyper <= set(params)
    assert [k for k in hyper if params[k].default is not inspect.Parameter.empty] == []
    assert all(params[k].kind is inspect.Parameter.KEYWORD_ONLY for k in hyper)
    # the board (an algorithm of any board: the run's game, built once, not a hyperparameter)
    assert sorted(set(params) - hyper - {"self", "net", "game"}) == sorted(
        k for k in params if k.endswith(("_net", "_head")))  # built by companion_nets


def test_the_specs_load_without_torch():
    code = ("import sys; from ttt_research.algos.spec import specs; specs(); "
            "print(sorted(m for m in ('torch', 'lightning', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_a_users_algorithm_takes_the_spec_of_its_nearest_base_class():
    assert spec_of("tests.helpers.valued.KnownValues") is BY_NAME["reinforce"]  # a Reinforce
    assert spec_of("collections.OrderedDict") is GENERIC  # no algorithm: the keys all have
    assert spec_of("no_such_module.Algo") is GENERIC  # instantiating it says what is wrong


# The layers below algos/ and the two above it that configure and run one: none may name an
# algorithm (its class, its module or its algo= option); prose in docstrings and comments may.
OUTSIDE = ("contract.py", "errors.py", "files", "env", "models", "evaluation", "population", "train")


def _code_names(path: Path) -> list[str]:
    """Identifiers, imported modules and string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, owners) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.append(node.id)
        elif isinstance(node, ast.Attribute):
            out.append(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out += [getattr(node, "module", None) or "", *(a.name for a in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.append(node.value)
    return out


def test_nothing_outside_algos_names_an_algorithm():
    classes = {s.target.rsplit(".", 1)[1] for s in specs().values()}
    modules = {s.target.rsplit(".", 2)[1] for s in specs().values()}
    found = []
    for where in OUTSIDE:
        for path in sorted((PKG / where).rglob("*.py")) if (PKG / where).is_dir() else [PKG / where]:
            for name in _code_names(path):
                hits = [c for c in classes if c == name or f".{c}" in name or f"{c}(" in name]
                hits += [m for m in modules if f"algos.{m}" in name and f"algos.{m}_spec" not in name]
                hits += [s for s in BY_NAME if f"algo={s}" in name]
                found += [f"{path.relative_to(PKG)}: {h} in {name!r}" for h in hits]
    assert found == []


# An algorithm of the user's own, with its spec beside it (tests/helpers/greedy_reinforce*.py).
MINE = ["debug=tiny", "progress=false", "threads=1",
        "algo._target_=tests.helpers.greedy_reinforce.GreedyReinforce"]


def test_a_users_algorithm_takes_the_spec_declared_beside_it():
    from tests.helpers.greedy_reinforce_spec import SPEC

    assert spec_of("tests.helpers.greedy_reinforce.GreedyReinforce") is SPEC


def test_a_users_algorithm_is_validated_and_sized_by_its_own_spec():
    from tests.helpers.configs import make_cfg
    from ttt_research.errors import ConfigError
    from ttt_research.population.spec import BASE_BYTES
    from ttt_research.train.runspec import memory_estimate
    from ttt_research.train.validate import validate

    with pytest.raises(ConfigError, match=r"^algo.lr must be a step in \(0, 4\] for greedy_reinforce, got 5"):
        validate(make_cfg(*MINE[1:], "algo.lr=5"))
    validate(make_cfg(*MINE[1:], "algo.lr=3"))  # REINFORCE's rule would take 5 as well
    with pytest.raises(ConfigError, match="members cannot set algo.momentum for themselves"):
        validate(make_cfg(*MINE[1:], "population.vary.algo.momentum=[0.5,0.9]"))
    estimate = memory_estimate(make_cfg(*MINE[1:], "population.size=3"))
    shipped = memory_estimate(make_cfg("population.size=3")).per_member  # REINFORCE: ~13 MB
    assert (estimate.members, estimate.base) == (3, BASE_BYTES) and shipped < 2 * 10**7
    assert 10**9 < estimate.per_member < 10**9 + 10**6  # its own model, plus the weights' bytes


def test_a_users_algorithm_trains_and_is_evaluated_like_the_shipped_ones(tmp_path):
    import json

    from tests.helpers.command import cli

    code, out, err = cli(*MINE, f"hydra.run.dir={tmp_path / 'run'}")
    assert code == 0, err
    report = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert 0 <= report["nashconv"] <= 2 and 0 <= report["as_trained"]["nashconv"] <= 2
    assert "Exact evaluation after 2,048 games (greedy_reinforce" in out


def test_the_algorithms_reference_is_written_from_the_specs():
    """docs/algorithms.md is python -m ttt_research.algos.reference's output: regenerate it
    after changing a spec (every default, range and docstring comes from there)."""
    from ttt_research.algos.reference import markdown

    assert (ROOT / "docs" / "algorithms.md").read_text() == markdown()
    for spec in BY_NAME.values():
        assert f"## `algo={spec.name}`" in markdown()
