"""The three ways to run the project find the same config tree: a checkout (PYTHONPATH=src),
a built wheel (its ``ttt_research/conf`` package) and the installed package, each from a
folder that is not the checkout; and the wheel declares the console scripts."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.helpers.scripts import SCRIPTS

REPO = Path(__file__).resolve().parents[2]


def cfg_job(cwd: Path, pythonpath: str | None) -> tuple[dict, str]:
    """``python -m ttt_research --cfg job`` run from ``cwd``: the composed config, and where
    the package and its config tree came from."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run([sys.executable, "-m", "ttt_research", "--cfg", "job"], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    where = subprocess.run(
        [sys.executable, "-c",
         "import ttt_research.train.confdir as c; print(c.__file__); print(c.config_dir())"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    return yaml.safe_load(out.stdout), where.stdout


def assert_default_job(cfg: dict) -> None:
    assert cfg["seed"] == 0 and cfg["optimized_metric"] == "score"
    assert cfg["algo"]["_target_"] == "ttt_research.algos.reinforce.Reinforce"
    assert cfg["net"]["hidden"] == [128, 128] and cfg["seat"]["side"] == "o"


def test_checkout_runs_from_another_folder(tmp_path):
    cfg, where = cfg_job(tmp_path, str(REPO / "src"))
    assert_default_job(cfg)
    assert where.splitlines() == [str(REPO / "src" / "ttt_research" / "train" / "confdir.py"),
                                  str(REPO / "conf")]


def test_installed_package_runs_from_another_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([sys.executable, "-c", "import ttt_research; print(ttt_research.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    if found.returncode != 0 or not Path(found.stdout.strip()).is_relative_to(REPO):
        pytest.skip(f"the installed ttt_research is not this checkout's: {found.stdout or found.stderr}")
    cfg, where = cfg_job(tmp_path, None)
    assert_default_job(cfg)
    assert Path(where.splitlines()[1]) == REPO / "conf"  # an editable install reads the checkout's tree


@pytest.mark.slow
def test_wheel_ships_the_config_tree_the_page_and_console_scripts(installed_wheel, tmp_path):
    wheel, target = installed_wheel
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = z.read(entry_points).decode()
    conf = {p.relative_to(REPO).as_posix() for p in (REPO / "conf").rglob("*.yaml")}
    assert {f"ttt_research/{p}" for p in conf} <= names  # every config file, at ttt_research/conf/...
    page = {f"ttt_research/web/{n}" for n in ("index.html", "app.js", "rules.js", "style.css")}
    assert page <= names  # the browser game: play --web works from the wheel
    # every module of the package, subpackages included (pyproject lists them by hand)
    src = {p.relative_to(REPO / "src").as_posix() for p in (REPO / "src" / "ttt_research").rglob("*.py")}
    assert src <= names, sorted(src - names)
    assert sorted(line for line in scripts.splitlines() if line.startswith("ttt-")) == sorted(
        f"{name} = {entry}" for name, entry in SCRIPTS.items())

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cfg, where = cfg_job(elsewhere, str(target))
    assert_default_job(cfg)
    assert where.splitlines() == [str(target / "ttt_research" / "train" / "confdir.py"),
                                  str(target / "ttt_research" / "conf")]
