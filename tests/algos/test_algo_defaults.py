"""Each value is defined once: an algorithm's constructor defaults are its YAML's values.

``conf/algo/NAME.yaml`` is where an algorithm's hyperparameters are set; the constructor
keeps defaults so that tests and notebooks can build one by hand, and this test fails the
moment one of them says something else than the YAML.
"""

import inspect
from pathlib import Path

import pytest
import yaml
from hydra.utils import get_class

CONF = Path(__file__).resolve().parents[2] / "conf" / "algo"


@pytest.mark.parametrize("path", sorted(CONF.glob("*.yaml")), ids=lambda p: p.stem)
def test_constructor_defaults_are_the_yaml_values(path):
    algo = yaml.safe_load(path.read_text())["algo"]
    cls = get_class(algo["_target_"])
    params = inspect.signature(cls.__init__).parameters
    unknown = sorted(set(algo) - {"_target_"} - set(params))
    assert not unknown, f"{path.name} sets {unknown}, which {cls.__name__} does not take"
    differ = {name: (p.default, algo[name]) for name, p in params.items()
              if name in algo and p.default is not inspect.Parameter.empty and p.default != algo[name]}
    assert not differ, f"{cls.__name__}'s defaults (code, yaml) disagree with {path.name}: {differ}"
    missing = sorted(name for name, p in params.items() if name not in algo
                     and name not in ("self", "net") and p.default is not inspect.Parameter.empty
                     and p.kind is p.KEYWORD_ONLY)
    assert not missing, f"{path.name} does not set {missing}"
