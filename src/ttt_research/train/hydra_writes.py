"""What Hydra itself writes before a job runs, checked before Hydra writes it.

Hydra writes two things of its own ahead of the project's checks: a job's ``.hydra/`` files
(``hydra.output_subdir``: ``run_job`` saves them before the job's first callback) and a
sweep's record, ``multirun.yaml`` (the basic sweeper, before its first job). A run refused by
the project afterwards would leave them changed: a finished run's ``.hydra/config.yaml``
saying ``seed: 7`` for a seed-0 run, an old sweep's record naming the jobs of a refused one.
``FirstChecks``, the first of ``hydra.callbacks``, runs before both (Hydra calls
``on_run_start`` / ``on_multirun_start`` before it writes anything) and refuses, with the
folders as they were (``Refused``, one line, exit 2):

- ``hydra.output_subdir`` other than null: the run writes Hydra's three files itself, into
  ``.hydra/``, once its folder passed its checks (``runfolder.Claim.commit``);
- a new sweep into a ``hydra.sweep.dir`` that holds a sweep's ``multirun.yaml`` (one sweep per
  sweep folder, as one run per run folder): ``resume=true`` continues that sweep;
- ``resume=true`` with ``-m`` where ``hydra.sweep.dir`` holds no sweep to continue.

A sweep continued with ``resume=true`` rewrites its record (the command now says
``resume=true``) as its jobs start; the record as it was is kept here, and a job refused
before any job of the sweep wrote anything puts it back (``put_back_record``). The sweep's
command is kept too, for the line a stopped job prints (``sweep_resume``).

Nothing here imports torch: Hydra builds the callbacks at every start.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from omegaconf import OmegaConf

from ttt_research.files.atomic import write_atomic
from ttt_research.train import launch
from ttt_research.train.hydra_hooks import Hooks, Refused

RECORD = "multirun.yaml"
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
_UNSET = object()


class _Sweep:
    """The sweep this process runs (one at a time; the tests run many in one process)."""

    def __init__(self):
        self.record: Path | None = None  # hydra.sweep.dir/multirun.yaml
        self.before: object = _UNSET  # its bytes before the sweep (None: there was none)
        self.wrote = False  # a job of the sweep got past its checks and wrote into its folder
        self.command: list[str] | None = None  # the sweep's overrides, hydra's then the task's


_sweep = _Sweep()


class FirstChecks(Hooks):
    """A Hydra callback, the first of ``hydra.callbacks`` (``config.yaml``): the checks of
    what Hydra would write before the project's own checks (see the module's docstring)."""

    def on_run_start(self, config, **kwargs) -> None:
        _check_output_subdir(config)

    def on_multirun_start(self, config, **kwargs) -> None:
        global _sweep
        _sweep = _Sweep()
        _check_output_subdir(config)
        if launch.started():  # a trainer=ddp process the job started reruns the sweep's command:
            return  # its folder and record are the first process's, made a moment ago
        resume = OmegaConf.select(config, "resume", default=False) is True
        if str(OmegaConf.select(config, "hydra.sweeper._target_", default="")) == BASIC_SWEEPER:
            hydra = [o for o in config.hydra.overrides.hydra
                     if not str(o).startswith(("hydra.sweep.dir=", "hydra.mode="))]
            task = [o for o in config.hydra.overrides.task if not str(o).lstrip("+").startswith("resume=")]
            _sweep.command = [str(o) for o in (*hydra, *task)]
        raw = config.hydra.sweep._get_node("dir")._value()  # unresolved: ttt.fresh would make it
        if isinstance(raw, str) and "${ttt.fresh:" in raw:  # the default: a folder made now
            if resume:
                raise Refused("resume=true with -m continues a sweep in its folder: name it, "
                              "hydra.sweep.dir=multirun/DATE/TIME (the default is a new folder)")
            return
        folder = Path(str(config.hydra.sweep.dir))
        record = folder / RECORD
        if not resume and record.exists():
            raise Refused(f"{folder} already holds a sweep ({record}): resume=true continues its "
                          "jobs; choose another hydra.sweep.dir for a new sweep")
        if resume and not record.is_file():
            raise Refused(f"resume=true with -m continues the sweep in hydra.sweep.dir, and {folder} "
                          f"holds none (no {RECORD}): name the stopped sweep's folder, e.g. "
                          "hydra.sweep.dir=multirun/DATE/TIME")
        if resume:
            _sweep.record, _sweep.before = record, record.read_bytes()


def _check_output_subdir(config) -> None:
    subdir = OmegaConf.select(config, "hydra.output_subdir", default=None)
    if subdir is not None:
        raise Refused(f"hydra.output_subdir={subdir}: the run writes Hydra's files into .hydra/ itself, "
                      "once its folder passed its checks (so that a refused run changes nothing); "
                      "leave hydra.output_subdir at null")


def job_wrote() -> None:
    """A job got past its checks and writes into its folder (``runfolder.Claim.commit``): the
    sweep's new record now describes what was done, and stays."""
    _sweep.wrote = True


def put_back_record() -> None:
    """A job of a continued sweep was refused: its record back as it was before the sweep,
    if no job of the sweep wrote anything (nothing was done under the new record)."""
    if _sweep.record is None or _sweep.wrote or not isinstance(_sweep.before, bytes):
        return
    try:
        now = _sweep.record.read_bytes()
    except OSError:
        now = None
    if now != _sweep.before:
        write_atomic(_sweep.record, _sweep.before)


def sweep_resume(sweep_dir: str | Path, cwd: str | Path) -> str | None:
    """The command that continues the sweep this process runs (basic sweeper): its own
    overrides, its folder and ``resume=true``; None where it is not known here (another
    sweeper, or a job launched in another process)."""
    if _sweep.command is None:
        return None
    folder = Path(sweep_dir)
    try:
        folder = folder.relative_to(Path(cwd))
    except ValueError:
        pass
    return shlex.join(["python", "-m", "ttt_research", "-m", *_sweep.command,
                       f"hydra.sweep.dir={folder}", "resume=true"])
