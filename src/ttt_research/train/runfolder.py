"""One run per folder, and a folder checked before anything in it is touched.

``claim(run_dir, cfg)`` is held for a run's whole life (``train.train``):

1. **The lock.** ``run_dir/.lock``, an ``flock`` taken with ``filelock`` without waiting: a
   second run into the folder is refused while the first holds it. The kernel drops an
   ``flock`` when its process dies, however it dies (SIGKILL included), so a dead run's lock
   is simply taken by the next one: no stale lock to clean up by hand.
2. **The folder.** A fresh run (``resume=false``) into a folder that already holds a run (a
   checkpoint, ``eval.json``, ``metrics.csv``, ``run.json``, a saved config) is refused.
3. **The resume** (``resume=true``, or a SLURM job requeued into its own folder): the
   settings that define what is trained must equal the saved config's
   (``.hydra/config.yaml``) and the checkpoint's own record of its run (``run_identity``,
   written into every checkpoint by ``RunIdentity``); the checkpoint must load, and
   (``Claim.check_fits``, once the module is built) fit the network built from the config.
   Which keys may change is ``MAY_CHANGE``. A run stopped before its first checkpoint has
   nothing to continue: ``resume=true`` starts it again from the beginning in its folder
   (``restart``), after the same check of its settings.

A job of a multirun (``claim(..., sweep=True)``) with ``resume=true`` is part of a sweep
continued as a whole: a job that never started (its folder holds no run) starts (``fresh``), a
finished one is checked as any resume and left as it is (``finished``: its ``eval.json``).

Every refusal is one ``ConfigError`` line (exit 2) raised before the run writes anything:
only ``Claim.commit`` writes, after every check passed (Hydra's three ``.hydra`` files, which
``conf/config.yaml`` stops Hydra from writing itself: ``hydra.output_subdir: null``, kept so
by ``hydra_writes``), and removes the temporary files a killed session left, which the
checks only listed (``stale_temporaries``).

The other processes of a multi-process run (DDP ranks > 0, which Lightning starts with the
same ``hydra.run.dir``; SLURM tasks > 0) take no lock, refuse no folder and write nothing:
the first process does that for all of them (``secondary``). A rank in the environment alone
does not make a follower: a run whose trainer asks for one process is its own first process,
whatever ``RANK`` or ``SLURM_PROCID`` a shell or an allocation left set.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import lightning as L
from omegaconf import DictConfig, OmegaConf

from ttt_research.algos.spec import spec_of
from ttt_research.errors import ConfigError, is_int
from ttt_research.files.atomic import OutputError, describe_os_error, left_by_a_dead_process, write_atomic
from ttt_research.files.outputs import RUN_FILES  # what marks a folder as a run's
from ttt_research.train import hydra_writes
from ttt_research.train.csvlog import METRICS_FILE, check_rows
from ttt_research.train.runspec import processes

LOCK_NAME = ".lock"
CHECKPOINT = Path("checkpoints") / "last.ckpt"
# The keys a resume may change (a key, or every key under it); every other key defines what
# is trained and must equal the run's. The budget extends a run; cadence, trackers, console
# and threads change how it is watched and how fast it goes, not what it learns (threads
# change the order of float sums: resume with the same value for a byte-identical result).
# The trainer's device keys stay: the device, the processes and the precision change the
# games per update, the random streams or the arithmetic.
MAY_CHANGE = ("resume", "budget", "eval_every", "checkpoint_every", "logger", "progress", "threads", "league",
              "optimized_metric", "population.export", "trainer.enable_model_summary",
              "trainer.log_every_n_steps")
CHECKPOINT_KEYS = ("state_dict", "optimizer_states", "loops", "pytorch-lightning_version")
_ABSENT = object()


class FolderInUse(ConfigError):
    """Another live run holds the folder's lock (its folder is left strictly alone)."""


def secondary(cfg: DictConfig) -> bool:
    """Whether this process is a DDP rank > 0 or a SLURM task > 0 of a run whose first
    process owns the folder (Lightning reruns the command for local ranks > 0 with
    ``LOCAL_RANK`` set; torchrun and SLURM set ``RANK`` / ``SLURM_PROCID`` for every task).
    Only a trainer of several processes has followers: with one (``trainer=cpu``, the
    default), a rank left in the environment (a SLURM allocation's ``SLURM_PROCID=1``) would
    otherwise skip the lock and the check of the folder, and overwrite a finished run."""
    if not several_processes(cfg):
        return False
    for var in ("LOCAL_RANK", "RANK", "NODE_RANK", "SLURM_PROCID"):
        value = os.environ.get(var, "0")
        if value.isdigit() and int(value) > 0:
            return True
    return False


def several_processes(cfg: DictConfig) -> bool:
    """Whether the trainer config may run more than one process: a count above 1, or a GPU
    count only known at run time (``auto``, ``-1``)."""
    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    unknown = devices in ("auto", -1, "-1") and OmegaConf.select(cfg, "trainer.accelerator") != "cpu"
    return processes(cfg) > 1 or unknown


def requeued() -> int:
    """How many times SLURM has requeued this job (``SLURM_RESTART_COUNT``; 0 if none)."""
    value = os.environ.get("SLURM_RESTART_COUNT", "0")
    return int(value) if value.isdigit() else 0


# ------------------------------------------------------------------------- identity


def flatten(tree, prefix: str = "") -> dict[str, object]:
    """``{"net": {"hidden": [100]}}`` -> ``{"net.hidden": [100]}`` (lists are values)."""
    if isinstance(tree, dict) and tree:
        out: dict[str, object] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: tree}


def may_change(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in MAY_CHANGE)


def defining(tree: dict) -> dict[str, object]:
    """The keys of a config (as a plain dict) that define what is trained."""
    return {k: v for k, v in flatten(tree).items() if not may_change(k)}


def identity(cfg: DictConfig) -> dict:
    """What a checkpoint records of its run: the defining keys, resolved, and their digest."""
    keys = defining(OmegaConf.to_container(cfg, resolve=True))
    digest = hashlib.sha256(json.dumps(keys, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return {"digest": digest, "keys": keys}


def differences(now: dict, run: dict) -> list[str]:
    """``key=now (the run: then)`` for every key whose value differs, in the run's order. An
    algorithm's key the run predates (a new option) counts as the same when it is at its
    default, which is what the run trained with: a run started before ``algo.symmetries``
    existed resumes as it was."""
    out = []
    for key in [*run, *(k for k in now if k not in run)]:
        a, b = now.get(key, _ABSENT), run.get(key, _ABSENT)
        if a != b and not (b is _ABSENT and _added_at_default(key, a, now)):
            out.append(f"{key}={_show(a)} (the run: {_show(b)})")
    return out


def _added_at_default(key: str, value, now: dict) -> bool:
    """Whether ``key`` is a hyperparameter of the config's algorithm left at its default."""
    group, _, leaf = key.partition(".")
    if group != "algo" or not isinstance(now.get("algo._target_"), str):
        return False
    spec = spec_of(now["algo._target_"])  # a class it cannot read: the generic spec, no defaults
    defaults = spec.defaults() if spec.hyper is not None else {}
    return leaf in defaults and defaults[leaf] == value


def _show(value) -> str:
    if value is _ABSENT:
        return "absent"
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


class RunIdentity(L.Callback):
    """Writes the run's ``identity`` into every checkpoint (``checkpoint["run_identity"]``),
    so that a checkpoint carried into another run's folder is recognised as foreign."""

    def __init__(self, cfg: DictConfig):
        self.identity = identity(cfg)

    def on_save_checkpoint(self, trainer, module, checkpoint: dict) -> None:
        checkpoint["run_identity"] = self.identity


# ------------------------------------------------------------------------- the claim


class Claim:
    """What ``claim`` found: the checkpoint to resume from (or None), the checks left to do
    once the module exists, and the one place that writes into the folder before training."""

    def __init__(self, run_dir: Path, cfg: DictConfig, primary: bool, sweep: bool = False):
        self.run_dir = run_dir
        self.cfg = cfg
        self.primary = primary
        self.sweep = sweep  # a job of a multirun (-m): resume=true continues the whole sweep
        self.resume_from: Path | None = None
        self.checkpoint: dict | None = None
        self.requeued = 0
        self.restart = False  # resume=true on a run stopped before its first checkpoint
        self.fresh = False  # resume=true on a job of a sweep that never started: it starts now
        self.finished: Path | None = None  # resume=true on a finished job of a sweep: its eval.json
        self.stale: list[Path] = []  # temporary files a killed session left (removed at commit)
        self.committed = False

    # -- checks, in order: folder, saved config, checkpoint file, checkpoint's run

    def check_folder(self) -> None:
        ckpt = self.run_dir / CHECKPOINT
        resume = bool(self.cfg.resume)
        if not resume and requeued() and ckpt.is_file():
            # A SLURM job requeued after preemption or a time limit reruns its command as it
            # was (submitit: the same overrides): its own folder is continued, checked as a resume.
            resume, self.requeued = True, requeued()
        if resume:
            if ckpt.is_file():
                self.resume_from = ckpt
                if self.sweep and (self.run_dir / "eval.json").is_file():
                    # A finished job of a continued sweep: checked as a resume, then left as it is.
                    self.finished = self.run_dir / "eval.json"
            elif (self.run_dir / ".hydra" / "config.yaml").is_file() and not (
                    self.run_dir / "eval.json").exists():
                # Stopped before its first checkpoint: nothing to continue, so the run starts
                # again from its beginning, in its folder, once its settings are checked.
                self.restart = True
            elif self.sweep and not any((self.run_dir / name).exists() for name in RUN_FILES):
                # A job of a continued sweep that never started (the sweep stopped before it).
                self.fresh = True
            else:
                raise ConfigError(f"resume=true but there is no checkpoint at {ckpt}: this is not a "
                                  "run's folder (hydra.run.dir)")
            return
        if self.primary:
            found = [name for name in RUN_FILES if (self.run_dir / name).exists()]
            if found:
                raise ConfigError(f"{self.run_dir} already holds a run ({', '.join(found)}): "
                                  "resume=true continues it; choose another hydra.run.dir for a new run")

    def check_saved_config(self) -> None:
        saved = self.run_dir / ".hydra" / "config.yaml"
        if (self.resume_from is None and not self.restart) or not saved.is_file():
            return
        try:  # never resolved: compared as written (an interpolation is its own text)
            run = OmegaConf.to_container(OmegaConf.load(saved), resolve=False)
        except Exception as e:  # bad YAML, not a mapping: the saved config cannot vouch for the run
            raise ConfigError(f"cannot read {saved}: {_first_line(e)}") from None
        if not isinstance(run, dict):
            raise ConfigError(f"cannot read {saved}: not a mapping of settings")
        diffs = differences(defining(OmegaConf.to_container(self.cfg, resolve=False)), defining(run))
        if diffs:
            raise ConfigError(f"resume=true with settings that differ from the run in {self.run_dir}: "
                              f"{'; '.join(diffs)}; resume with the run's settings (docs/reliability.md "
                              "lists the keys that may change), or choose another hydra.run.dir "
                              "for a new run")

    def check_checkpoint(self) -> None:
        if self.resume_from is None:
            return
        self.checkpoint = load_checkpoint(self.resume_from)
        self.check_budget()
        stored = self.checkpoint.get("run_identity")
        if isinstance(stored, dict) and isinstance(stored.get("keys"), dict):
            diffs = differences(identity(self.cfg)["keys"], stored["keys"])
            if diffs:
                raise ConfigError(f"{self.resume_from} is another run's checkpoint: {'; '.join(diffs)}; "
                                  "put back this run's checkpoint, or resume that run with its own settings")

    def check_budget(self) -> None:
        """A new budget extends a run that stopped before its end; the checkpoint of a run that
        reached its end closes its only epoch, after which Lightning trains nothing more (and a
        larger budget would only relabel the same results)."""
        ckpt, budget = self.checkpoint, int(self.cfg.budget.games)
        played = int(ckpt.get("games_played", 0))
        loops = ckpt["loops"] if isinstance(ckpt["loops"], dict) else {}
        progress = (loops.get("fit_loop") or {}).get("epoch_loop.batch_progress") or {}
        finished = bool(progress.get("is_last_batch", False))
        if finished and budget > played:
            raise ConfigError(f"{self.resume_from} is the end of a finished run ({played:,} games): a larger "
                              "budget.games extends only a run stopped before its end; train a new run "
                              "(another hydra.run.dir) for more games")
        # A finished run's schedules were spread over its own budget (module.progress): any
        # other would relabel the same weights, and .hydra/ would then say what was not trained.
        own = (ckpt.get("hyper_parameters") or {}).get("budget_games")
        if finished and is_int(own) and budget != own:
            raise ConfigError(f"budget.games={budget} is not the budget of the finished run in "
                              f"{self.run_dir} ({own}, {played:,} games played): resume a finished run "
                              f"with its own budget.games={own}, or train a new run (another hydra.run.dir)")
        if not finished and budget < played:
            raise ConfigError(f"budget.games={budget} is below the {played:,} games the run has played; "
                              f"resume with budget.games >= {played}")

    def check_records(self) -> None:
        """What a resume reads and rewrites before training (``metrics.csv``, ``run.json``)
        is readable to the end, so that a damaged file is refused now, with the folder as it
        was, and not after training, or after ``.hydra/`` was rewritten."""
        if self.resume_from is None and not self.restart:
            return
        if self.resume_from is not None:
            check_rows(self.run_dir / METRICS_FILE)
            sessions(self.run_dir / "run.json")
        self.stale = stale_temporaries(self.run_dir)

    def check_fits(self, module) -> None:
        """The checkpoint's tensors fit the module built from the config (names and shapes),
        and it was trained by the same algorithm; for a population shared out over processes,
        by as many processes."""
        ckpt = self.checkpoint
        if ckpt is None:
            return
        if ckpt.get("algo") not in (None, module.name):
            raise ConfigError(f"{self.resume_from} was trained by {ckpt['algo']}, not {module.name} (algo)")
        state = ckpt["state_dict"]
        shards = ckpt.get("member_shards")
        if shards is not None:
            world = processes(self.cfg)
            if not isinstance(shards, list) or len(shards) != world:
                n = len(shards) if isinstance(shards, list) else "?"
                raise ConfigError(f"{self.resume_from} holds a population trained by {n} process(es); "
                                  f"resume it with as many (trainer.devices), not {world}")
            state = shards[module.shard_rank or 0].get("state_dict", {})
        mine = module.state_dict()
        problems = [f"{k} is absent from the checkpoint" for k in mine if k not in state]
        problems += [f"{k} is in the checkpoint, not in the module" for k in state if k not in mine]
        problems += [f"{k} is {list(state[k].shape)} in the checkpoint, {list(mine[k].shape)} here"
                     for k in mine if k in state and hasattr(state[k], "shape")
                     and tuple(state[k].shape) != tuple(mine[k].shape)]
        if problems:
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            raise ConfigError(f"{self.resume_from} does not fit the network of this config: "
                              f"{'; '.join(problems[:3])}{more}")

    # -- the one write before training

    def commit(self, cfg: DictConfig, hydra_files: bool) -> None:
        """Every check passed: ``.hydra/`` (Hydra's own three files, as Hydra writes them:
        the task config, Hydra's config and the task overrides, unresolved), atomically; the
        temporary files a killed session left go."""
        self.committed = True
        if not self.primary:
            return
        hydra_writes.job_wrote()
        for path in self.stale:  # what the stopped session was writing when it died
            try:
                path.unlink(missing_ok=True)
            except OSError as e:
                raise OutputError(f"cannot remove {path}: {describe_os_error(e)}") from None
        if not hydra_files:
            return
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return
        hydra_cfg = HydraConfig.instance().cfg
        meta = self.run_dir / ".hydra"
        write_atomic(meta / "config.yaml", OmegaConf.to_yaml(cfg))
        write_atomic(meta / "hydra.yaml", OmegaConf.to_yaml(hydra_cfg))
        write_atomic(meta / "overrides.yaml", OmegaConf.to_yaml(hydra_cfg.hydra.overrides.task))


def stale_temporaries(run_dir: Path) -> list[Path]:
    """The temporary files (``atomic.temporary``: ``.NAME.PID.tmp``) that a process no longer
    alive left in the run folder, its ``checkpoints/`` and ``members/NNN/``, found without
    changing anything (the claim looks among its checks; ``commit`` removes them). A name whose
    number is no process id, a live process's file, a folder or a link is left alone."""
    found = []
    for folder in [run_dir, run_dir / "checkpoints", *sorted(run_dir.glob("members/*"))]:
        if folder.is_dir() and not folder.is_symlink():
            found += sorted(p for p in folder.glob(".*.tmp") if left_by_a_dead_process(p))
    return found


def sessions(path: Path) -> list:
    """The sessions ``run.json`` records (``train.run.record_run`` appends one per session);
    [] when there is no file. A file that is not such a record is refused in one line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path} ({_first_line(e)}); nothing was changed") from None
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ConfigError(f"{path} is not JSON ({_first_line(e)}): remove it or put back the run's "
                          "own; nothing was changed") from None
    found = record.get("sessions", []) if isinstance(record, dict) else None
    if not isinstance(found, list):
        raise ConfigError(f"{path} is not a run record of this project (its sessions are not a list): "
                          "remove it or put back the run's own; nothing was changed")
    return found


def load_checkpoint(path: Path) -> dict:
    """A checkpoint read the safe way (``weights_only``), or one line saying why it is not one."""
    import torch

    try:
        ckpt = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, garbage, a pickle that would run code, ...
        raise ConfigError(f"{path} does not load ({_first_line(e)}): it is truncated or not a "
                          "checkpoint of this project; nothing was changed") from None
    missing = [k for k in CHECKPOINT_KEYS if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        raise ConfigError(f"{path} is not a Lightning checkpoint of this project "
                          f"(no {', '.join(missing)}); nothing was changed")
    return ckpt


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    return line if len(line) <= 160 else line[:157] + "..."


@contextlib.contextmanager
def claim(run_dir: str | Path, cfg: DictConfig, sweep: bool = False) -> Iterator[Claim]:
    """Hold ``run_dir`` for a run (see the module's docstring); yields the ``Claim``.
    ``sweep``: the run is a job of a multirun, which ``resume=true`` continues as a whole (a
    job that never started starts, a finished one is checked and left as it is).

    A refused claim (an exception before ``commit``) leaves the folder as it found it: the
    lock file goes again if this claim made it."""
    from filelock import FileLock, Timeout

    run_dir = Path(run_dir)
    primary = not secondary(cfg)
    c = Claim(run_dir, cfg, primary, sweep)
    if not primary:  # the first process holds the folder; the checks only read
        c.check_folder()
        c.check_saved_config()
        c.check_checkpoint()
        c.check_records()
        yield c
        return
    path = run_dir / LOCK_NAME
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # Hydra made it; a caller of train() may pass any path
        raise ConfigError(f"cannot make the run folder {run_dir}: {describe_os_error(e)}") from None
    if path.is_symlink() or (path.exists() and not path.is_file()):
        kind = "a symbolic link" if path.is_symlink() else "a folder" if path.is_dir() else "not a file"
        raise ConfigError(f"{path} is {kind}, not a lock file of this project: remove it (a run's lock is "
                          "an empty file); nothing was changed")
    existed = path.exists()
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise FolderInUse(f"{run_dir} is in use by another run (it holds {path}): wait for it to end, "
                          "or choose another hydra.run.dir") from None
    except OSError as e:  # a read-only folder, a lock file this user may not open, ...
        raise ConfigError(f"cannot take the lock {path}: {describe_os_error(e)}; nothing was "
                          "changed") from None
    try:
        c.check_folder()
        c.check_saved_config()
        c.check_checkpoint()
        c.check_records()
        yield c
    finally:
        if not c.committed and not existed:
            with contextlib.suppress(OSError):
                path.unlink()  # before the release: a waiter on this inode sees it unlinked
        lock.release()
