"""Where the Hydra config tree lives: ``conf/`` at the top of a checkout, or inside the
package (``ttt_research/conf``) in a wheel.

A wheel ships the tree as the package ``ttt_research.conf`` (``pyproject.toml`` maps it to
the top-level ``conf/`` at build time); a checkout, installed editable or run with
``PYTHONPATH=src``, reads the top-level folder directly. Both are plain folders, so the
same absolute path serves ``@hydra.main``, the compose API in tests and the benchmark.

The tree uses one resolver of its own, ``${ttt.direction:METRIC}`` (the Optuna presets'
``direction``: ``minimize`` for a metric to minimise, else ``maximize``); ``config_dir()``
registers it, so whoever finds the tree can compose and resolve it.

``experiment`` and ``hparams_search`` have a ``null`` default in ``config.yaml``, so
``experiment=NAME`` picks one; Hydra then refuses ``+experiment=NAME`` (a second value for
the group), so ``python -m ttt_research`` and ``compose`` here read it as ``experiment=NAME``
(``plain_overrides``). Hydra's own ``compose`` takes only ``experiment=NAME``.
"""

from __future__ import annotations

from pathlib import Path

NULL_DEFAULT_GROUPS = ("experiment", "hparams_search")


def plain_overrides(overrides: list[str]) -> list[str]:
    """``+experiment=NAME`` -> ``experiment=NAME`` (same for ``hparams_search``); others as given."""
    plus = tuple(f"+{group}=" for group in NULL_DEFAULT_GROUPS)
    return [o[1:] if o.startswith(plus) else o for o in overrides]


def register_resolvers() -> None:
    """Register the resolvers the config tree uses (idempotent)."""
    from omegaconf import OmegaConf

    from .objectives import direction

    if not OmegaConf.has_resolver("ttt.direction"):
        OmegaConf.register_new_resolver("ttt.direction", direction)


def config_dir() -> Path:
    """The folder holding ``config.yaml`` and the config groups (and its resolvers registered)."""
    register_resolvers()
    here = Path(__file__).resolve().parent
    for candidate in (here / "conf", here.parents[1] / "conf"):  # wheel, then checkout
        if (candidate / "config.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"no Hydra config tree (conf/config.yaml) beside {here} or in its checkout")


def compose(overrides: list[str] | tuple[str, ...] = (), hydra: bool = False):
    """The config of ``python -m ttt_research OVERRIDES``, composed without running it
    (``hydra=True``: with Hydra's own ``hydra`` node, e.g. the sweeper's settings)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        return hydra_compose("config", overrides=plain_overrides(list(overrides)),
                             return_hydra_config=hydra)
