"""What every test gets: W&B kept offline, the ``installed_wheel`` fixture (built once) and
``own_positions_cache`` for the modules that build another board's positions."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Tests never upload: a developer's W&B key must not turn test runs (logger=wandb) into
# online runs of their account. Tests of the automatic mode clear this themselves.
os.environ.setdefault("WANDB_MODE", "offline")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory):
    """(the wheel, a folder it is installed into with ``pip install --target``), built once
    per test session from a copy of the checkout (so no build/ or egg-info is left in it)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src_copy"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("src", "conf"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), str(src)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp / "dist").glob("ttt_research-*.whl")
    target = tmp / "target"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    return wheel, target


@pytest.fixture(scope="module")
def own_positions_cache(tmp_path_factory):
    """Another board's positions built into a folder of the module's own (seconds for 3,4,3),
    never read from or written to the user's cache (``TTT_RESEARCH_CACHE``). A module asks for
    it with ``pytestmark = pytest.mark.usefixtures("own_positions_cache")``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TTT_RESEARCH_CACHE", str(tmp_path_factory.mktemp("positions")))
        yield
