"""Each algorithm declares itself in ``algos/NAME_spec.py`` (``algos/spec.py``), and nothing
outside ``algos/`` names one: the config check, the population and the shell ask the specs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ttt_research.algos.spec import GENERIC, spec_of, specs

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "ttt_research"
CONF = {p.stem: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "conf" / "algo").glob("*.yaml"))}
BY_NAME = {s.name: s for s in specs().values()}


def test_each_algo_option_has_its_spec_and_each_spec_its_option():
    assert sorted(BY_NAME) == sorted(CONF)
    for name, conf in CONF.items():
        assert BY_NAME[name].target == conf["algo"]["_target_"], name


@pytest.mark.parametrize("name", sorted(CONF))
def test_a_spec_rules_every_key_of_its_yaml_and_no_other(name):
    spec, keys = BY_NAME[name], set(CONF[name]["algo"]) - {"_target_"}
    assert sorted(k for k in keys if spec.rule(k) is None) == []  # a key nobody checks
    assert sorted(set(spec.keys) - keys) == []  # a rule for a key the algorithm does not have
    assert set(spec.varies) <= keys
    for key in keys:  # the shipped values pass their own rules
        spec.rule(key).check(f"algo.{key}", CONF[name]["algo"][key])


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
