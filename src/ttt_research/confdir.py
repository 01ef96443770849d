"""Where the Hydra config tree lives: ``conf/`` at the top of a checkout, or inside the
package (``ttt_research/conf``) in a wheel.

A wheel ships the tree as the package ``ttt_research.conf`` (``pyproject.toml`` maps it to
the top-level ``conf/`` at build time); a checkout, installed editable or run with
``PYTHONPATH=src``, reads the top-level folder directly. Both are plain folders, so the
same absolute path serves ``@hydra.main``, the compose API in tests and the benchmark.
"""

from __future__ import annotations

from pathlib import Path


def config_dir() -> Path:
    """The folder holding ``config.yaml`` and the config groups."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "conf", here.parents[1] / "conf"):  # wheel, then checkout
        if (candidate / "config.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"no Hydra config tree (conf/config.yaml) beside {here} or in its checkout")


def compose(overrides: list[str] | tuple[str, ...] = ()):
    """The config of ``python -m ttt_research OVERRIDES``, composed without running it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        return hydra_compose("config", overrides=list(overrides))
