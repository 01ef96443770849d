"""What the training command does around a Hydra job it refuses: a key that ``+key=value``
added and no part of the project reads is refused (``validate_added``), and the run folder
Hydra made before the job started is removed again when it holds nothing of a run
(``discard_run_dir``), so every refusal leaves no empty folder behind.

Like ``train/validate.py`` it imports neither torch nor Lightning: a refusal is as fast as
``--cfg job``.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ttt_research.errors import ConfigError, value_of


def discard_run_dir(run_dir: str | Path, job_name: str, cwd: str | Path,
                    sweep_dir: str | Path | None = None,
                    existed: Callable[[Path], bool] = lambda folder: False) -> bool:
    """Remove the run folder of a refused job if it holds nothing but what Hydra may have
    written for this job (``.hydra/`` with its three files, an empty ``JOB.log``), then its
    parent folders left empty, up to (not including) ``cwd``. Any other file (a checkpoint, an
    earlier run's log, a run's lock file) keeps the folder as it is. A sweep folder
    (``sweep_dir``, a multirun's) that is left with nothing but its ``multirun.yaml`` goes
    too. A folder that ``existed`` before the run (``confdir.existed_before``) stays, empty or
    not: it is the user's. True if the run folder was removed."""
    run_dir = Path(run_dir)
    if existed(run_dir):
        return False
    hydra_files = {"config.yaml", "hydra.yaml", "overrides.yaml"}
    log = run_dir / f"{job_name}.log"
    meta = run_dir / ".hydra"
    try:
        if not ({p.name for p in run_dir.iterdir()} <= {".hydra", log.name}
                and (not meta.exists() or {p.name for p in meta.iterdir()} <= hydra_files)
                and (not log.exists() or log.stat().st_size == 0)):
            return False
        if meta.exists():
            for name in hydra_files:
                (meta / name).unlink(missing_ok=True)
            meta.rmdir()
        log.unlink(missing_ok=True)
        run_dir.rmdir()
    except OSError:  # gone, not a folder, or written to meanwhile: leave what is left
        return False
    _discard_parents(run_dir.resolve().parents, sweep_dir, cwd, existed)
    return True


def discard_sweep_dir(sweep_dir: str | Path, cwd: str | Path,
                      existed: Callable[[Path], bool] = lambda folder: False) -> None:
    """A sweep stopped before its first job (the basic sweeper composes every job's config
    first): its folder goes if it holds nothing but the ``multirun.yaml`` this sweep wrote, then
    its parents left empty, as ``discard_run_dir`` leaves them."""
    sweep = Path(sweep_dir).resolve()
    _discard_parents([sweep, *sweep.parents], sweep_dir, cwd, existed)


def _discard_parents(parents, sweep_dir: str | Path | None, cwd: str | Path,
                     existed: Callable[[Path], bool]) -> None:
    sweep = Path(sweep_dir).resolve() if sweep_dir is not None else None
    cwd = Path(cwd).resolve()
    for parent in parents:  # e.g. outputs/DATE/, then outputs/
        if cwd not in parent.parents and parent != sweep:
            break
        try:
            record = parent / "multirun.yaml"  # the sweep's record of a sweep that ran nothing
            alone = parent == sweep and [p.name for p in parent.iterdir()] == [record.name]
            if alone and not existed(record):
                record.unlink()
            if cwd not in parent.parents or existed(parent):
                break
            parent.rmdir()  # only if empty
        except OSError:
            break


# Where `+key=value` may add a key the config does not declare: arguments passed on to another
# library (the Trainer's and the logger's, each checked there or by _trainer_keys), the
# population's blocks (checked by validate_population), an optimiser given as a partial, and
# Hydra's own settings.
MAY_ADD = ("trainer.", "logger.", "population.vary", "population.sample", "algo.optimizer", "hydra.")


def _leaves(node, prefix: str = "") -> list[str]:
    out = []
    for k, v in node.items() if isinstance(node, dict) else ():
        out.append(f"{prefix}{k}")
        out += _leaves(v, f"{prefix}{k}.")
    return out


def validate_added(cfg: DictConfig, overrides: list[str], groups) -> None:
    """Refuse a key that ``+key=value`` added to the config when no part of the project reads
    it (Hydra adds any key with a ``+``: a typo such as ``+algo.lrr=0.5`` would otherwise train
    and be written into the run's config, or fail later with a traceback). ``groups``: the
    config groups (``hydra.runtime.choices``), whose options ``+group=option`` adds."""
    import difflib

    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001  Hydra already refused a malformed override before the job
        return
    added = [o.key_or_group for o in parsed if o.is_add()]
    # An algorithm of the user's own (algo._target_ outside this package) takes keys of its own.
    own = not str(value_of(cfg, "algo._target_") or "").startswith("ttt_research.")
    known = None
    for key in added:
        if (key in groups or key.startswith(MAY_ADD) or key.split("/")[0] in groups
                or (own and key.startswith("algo."))):
            continue
        if known is None:
            tree = OmegaConf.to_container(cfg, resolve=False)
            known = [k for k in _leaves(tree) if k not in added and not k.startswith("population.")]
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}?" if near else ""
        raise ConfigError(f"+{key}: no such key in this config (a '+' adds a key, and nothing "
                          f"reads {key}){hint}")
