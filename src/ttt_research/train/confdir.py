"""Where the Hydra config tree lives: ``conf/`` at the top of a checkout, or inside the
package (``ttt_research/conf``) in a wheel.

A wheel ships the tree as the package ``ttt_research.conf`` (``pyproject.toml`` maps it to
the top-level ``conf/`` at build time); a checkout, installed editable or run with
``PYTHONPATH=src``, reads the top-level folder directly. Both are plain folders, so the
same absolute path serves ``@hydra.main``, the compose API in tests and the benchmark.

The tree uses two resolvers of its own, which ``config_dir()`` registers, so whoever finds
the tree can compose and resolve it: ``${ttt.direction:METRIC}`` (the Optuna presets'
``direction``: ``minimize`` for a metric to minimise, else ``maximize``) and
``${ttt.fresh:PATH}`` (the default run and sweep folders: ``PATH`` made now, or ``PATH-2``,
``PATH-3``... when a run started in the same second already made it, so two runs never
share a default folder).

``experiment`` and ``hparams_search`` have a ``null`` default in ``config.yaml``, so
``experiment=NAME`` picks one; Hydra then refuses ``+experiment=NAME`` (a second value for
the group), so ``python -m ttt_research`` and ``compose`` here read it as ``experiment=NAME``
(``plain_overrides``). Hydra's own ``compose`` takes only ``experiment=NAME``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from omegaconf import OmegaConf

from ttt_research.algos.spec import register as register_schemas
from ttt_research.evaluation.objectives import direction
from ttt_research.train.hydra_hooks import Hooks

NULL_DEFAULT_GROUPS = ("experiment", "hparams_search")


def plain_overrides(overrides: list[str]) -> list[str]:
    """``+experiment=NAME`` -> ``experiment=NAME`` (same for ``hparams_search``); others as given."""
    plus = tuple(f"+{group}=" for group in NULL_DEFAULT_GROUPS)
    return [o[1:] if o.startswith(plus) else o for o in overrides]


_made: dict[str, str] = {}  # PATH -> the folder this process made for it
_created: set[str] = set()  # every folder fresh_folder made, parents included (resolved paths)


def fresh_folder(path: str) -> str:
    """``${ttt.fresh:PATH}``: a folder no other run has, made here with an exclusive
    ``mkdir`` (atomic: of two processes asking at once, one gets ``PATH``, the other
    ``PATH-2``). A process makes one folder per ``PATH``, however often Hydra resolves it
    (``use_cache`` keeps the answer in the config, which Hydra copies to a sweep's jobs;
    ``_made`` keeps it for the process)."""
    if path in _made:
        return _made[path]
    base = Path(path)
    _created.update(str(a.resolve()) for a in base.parents if not a.exists())
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        candidate = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        _made[path] = str(candidate)
        _created.add(str(candidate.resolve()))
        return _made[path]
    raise AssertionError("unreachable")


class LogsBefore(Hooks):
    """A Hydra callback (``hydra.callbacks`` in ``config.yaml``): Hydra opens the job's log
    (``train.log``) in the run folder before the job runs, so a refused job would leave an
    empty log in a folder it must leave as it found it. This notes, before Hydra makes
    anything, which logs were there already; ``made_by_this_run`` tells the others.

    (``hydra_hooks.Hooks``, importable without torch: Hydra builds it at every start.)

    It also notes which folders on the way to the run's folder were there before the run
    (``existed_before``): a refusal removes the folders the run made, never the user's own,
    even empty ones (a ``runs/exp1/`` made by hand, the working folder itself)."""

    def on_run_start(self, config, **kwargs) -> None:
        folder = Path(str(config.hydra.run.dir))  # resolved here: ttt.fresh makes its folder now
        _note_logs(folder, config.hydra.job.name, "")
        _note_folders(folder, children=False)

    def on_multirun_start(self, config, **kwargs) -> None:
        folder = Path(str(config.hydra.sweep.dir))
        _note_logs(folder, config.hydra.job.name, "*/")
        _note_folders(folder, children=True)



_logs_before: set[str] = set()


def _note_logs(folder: Path, job_name: str, pattern: str) -> None:
    _logs_before.update(str(p.resolve()) for p in folder.glob(f"{pattern}{job_name}.log"))


_folders_before: set[str] = set()


def _note_folders(folder: Path, children: bool) -> None:
    """Note ``folder`` and its parents (and, for a sweep, what it holds: job folders, its
    ``multirun.yaml``) that exist and that ``fresh_folder`` did not make: they were the user's
    before this run."""
    _folders_before.clear()  # one run per note (the tests run many in one process)
    found = [folder, *folder.parents, *(folder.iterdir() if children and folder.is_dir() else ())]
    _folders_before.update(str(p.resolve()) for p in found
                           if p.exists() and str(p.resolve()) not in _created)


def existed_before(folder: Path) -> bool:
    """Whether ``folder`` (or a sweep's file) was there before this run (noted by
    ``LogsBefore``): not to be removed."""
    return str(Path(folder).resolve()) in _folders_before


def made_by_this_run(log: Path) -> bool:
    """Whether ``log`` is an empty job log that Hydra made for this process's job."""
    return (str(log.resolve()) not in _logs_before and log.is_file() and log.stat().st_size == 0)


def register_resolvers() -> None:
    """Register the resolvers the config tree uses (idempotent)."""
    if not OmegaConf.has_resolver("ttt.direction"):
        OmegaConf.register_new_resolver("ttt.direction", direction)
    if not OmegaConf.has_resolver("ttt.fresh"):
        OmegaConf.register_new_resolver("ttt.fresh", fresh_folder, use_cache=True)


def config_dir() -> Path:
    """The folder holding ``config.yaml`` and the config groups (and its resolvers registered,
    and the algorithms' hyperparameters stored where ``conf/algo/NAME.yaml`` finds them)."""
    register_resolvers()
    register_schemas()
    package = Path(__file__).resolve().parents[1]  # src/ttt_research (this file is train/confdir.py)
    for candidate in (package / "conf", package.parents[1] / "conf"):  # wheel, then checkout
        if (candidate / "config.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"no Hydra config tree (conf/config.yaml) in {package} or in its checkout")


def compose(overrides: list[str] | tuple[str, ...] = (), hydra: bool = False):
    """The config of ``python -m ttt_research OVERRIDES``, composed without running it
    (``hydra=True``: with Hydra's own ``hydra`` node, e.g. the sweeper's settings)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        return hydra_compose("config", overrides=plain_overrides(list(overrides)),
                             return_hydra_config=hydra)


def app_help() -> str | None:
    """``python -m ttt_research --help`` as Hydra writes it, without Hydra: the template of
    ``hydra.help`` in ``config.yaml`` with ``$APP_CONFIG_GROUPS`` filled from the config tree's
    folders (``group: option, ...``, sorted, nested groups as ``experiment/leaderboard``).
    Hydra fills every placeholder whether the template uses it or not, and lists the groups
    by composing the tree once per group (~0.6 s of a --help that took 0.9-1.2 s). None where
    the template asks for more than the groups (then Hydra writes it)."""
    import string

    import yaml

    root = config_dir()
    text = yaml.safe_load((root / "config.yaml").read_text())["hydra"]["help"]["template"]
    template = string.Template(text)
    names = {m.group("named") or m.group("braced") for m in template.pattern.finditer(text)}  # 3.10's
    if not names - {None} <= {"APP_CONFIG_GROUPS"}:  # get_identifiers(); None: "$$" or a lone "$"
        return None
    groups = sorted(str(d.relative_to(root).as_posix()) for d in root.rglob("*") if d.is_dir()
                    and d.name != "__pycache__" and d.relative_to(root).parts[0] != "hydra"
                    and any(d.glob("*.yaml")))
    lines = "".join(f"{g}: {', '.join(sorted(p.stem for p in (root / g).glob('*.yaml')))}\n" for g in groups)
    return template.substitute(APP_CONFIG_GROUPS=lines)
