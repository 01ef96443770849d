"""``python -m ttt_research [overrides]`` (or ``ttt-train``): train one agent (Hydra app;
``-m`` for sweeps; ``--help`` lists every command of the project).

Examples::

    python -m ttt_research                                  # REINFORCE as O vs random
    python -m ttt_research net=mlp25 seed=3 budget.games=200000
    python -m ttt_research experiment=antirez_repro         # the seed program, faithfully
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from ttt_research.train import early_stop

if __name__ == "__main__":  # python -m ttt_research: stop signals noted before anything loads
    early_stop.install()

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from ttt_research.errors import ConfigError, IllegalMoveError, NonFiniteError, UserError, reader_gone  # noqa: E402
from ttt_research.evaluation.objectives import objective  # noqa: E402
from ttt_research.train import hydra_errors, hydra_writes  # noqa: E402
from ttt_research.train.confdir import app_help, config_dir, existed_before, made_by_this_run, plain_overrides  # noqa: E402
from ttt_research.train.hydra_hooks import Refused  # noqa: E402
from ttt_research.train.refusal import discard_run_dir, discard_sweep_dir, validate_added  # noqa: E402
from ttt_research.train.validate import validate  # noqa: E402


def refuse(error: Exception, discard: bool = True) -> None:
    """One line on stderr, exit 2, and no run folder (nor a sweep folder) left behind that
    holds nothing. ``discard=False``: a folder refused as it is (another run's) stays untouched."""
    if discard:
        leave_nothing()
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)


def leave_nothing() -> None:
    """The job's run folder (and a sweep folder) removed if it holds nothing but what Hydra
    wrote for it; in a folder kept, the empty log Hydra opened goes. A continued sweep's
    record goes back as it was if no job of the sweep wrote anything (``hydra_writes``)."""
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    if multirun:
        hydra_writes.put_back_record()
    if not discard_run_dir(hc.runtime.output_dir, hc.job.name, hc.runtime.cwd,
                           sweep_dir=hc.sweep.dir if multirun else None, existed=existed_before):
        log = Path(hc.runtime.output_dir) / f"{hc.job.name}.log"
        if made_by_this_run(log):  # the empty log Hydra opened in a folder kept as it was
            log.unlink()


def resume_command(hc) -> str:
    """The command that continues this job: its own overrides, its folder, ``resume=true``
    (a new command would otherwise make a new folder and find nothing to resume). A job of a
    sweep: the sweep's command, its folder, ``resume=true``, which continues this job and
    runs the jobs after it (``hydra_writes.sweep_resume``), where this process knows it."""
    import shlex

    if hc.mode == RunMode.MULTIRUN and (sweep := hydra_writes.sweep_resume(hc.sweep.dir, hc.runtime.cwd)):
        return sweep
    own = [o for o in plain_overrides(list(hc.overrides.task))
           if not o.lstrip("+").startswith(("hydra.run.dir=", "resume="))]
    folder = Path(hc.runtime.output_dir)
    try:
        folder = folder.relative_to(Path(hc.runtime.cwd))
    except ValueError:
        pass
    return shlex.join(["python", "-m", "ttt_research", *own, f"hydra.run.dir={folder}", "resume=true"])


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def app(cfg: DictConfig) -> float:
    try:
        early_stop.check()  # a stop before training starts is one line (train/early_stop.py)
        return job(cfg)
    except early_stop.StoppedEarly as e:  # torch was loading, or the folder was being checked
        leave_nothing()
        hc = HydraConfig.get()
        if hc.mode == RunMode.MULTIRUN and hc.job.num > 0:  # the jobs before it are done: say how to go on
            print(f"{e} in job {hc.job.num} of the sweep (the jobs before it are done): resume=true "
                  f"continues: {resume_command(hc)}", file=sys.stderr)
        else:
            print(e, file=sys.stderr)
        sys.exit(e.code)
    finally:
        early_stop.rearm()


def job(cfg: DictConfig) -> float:
    """One training job: its config checked, then trained (``train.run.train``)."""
    try:
        hc = HydraConfig.get()
        if Path(hc.runtime.output_dir).resolve() == Path(hc.runtime.cwd).resolve():  # hydra.run.dir= or .
            raise ConfigError("hydra.run.dir names the current folder, where a run would spread its files "
                              "(eval.json, checkpoints/, ...); name a folder of its own, e.g. "
                              "hydra.run.dir=runs/NAME")
        validate_added(cfg, hc.overrides.task, hc.runtime.choices)
        validate(cfg)  # the run's one validation, before torch and Lightning load: ~1 s, not ~9
    except ConfigError as e:
        refuse(e)
    # Imported once the config passed: these load torch and Lightning (~4-8 s), which a refused
    # value never waits for.
    from ttt_research.train.run import train
    from ttt_research.train.runfolder import FolderInUse, secondary
    from ttt_research.train.signals import Stopped
    from ttt_research.train.tracking import finish

    # What those imports made lives as long as the process: moved out of the collector's sight,
    # it is not traversed by every full collection, nor once more at exit (a process that
    # imported Lightning took ~1.1 s to exit; ~0.15 s frozen). Once per process, before the
    # first job: a later job of a multirun would freeze the garbage of the jobs before it.
    if gc.get_freeze_count() == 0:
        gc.freeze()
    try:
        hc = HydraConfig.get()
        report = train(cfg, hc.runtime.output_dir, hydra_files=True, validated=True,
                       sweep=hc.mode == RunMode.MULTIRUN)
    except FolderInUse as e:  # another run's folder: not one thing in it is ours to remove
        refuse(e, discard=False)
    except ConfigError as e:  # found once the folder is read, e.g. a resume that does not match it
        refuse(e)
    except (NonFiniteError, IllegalMoveError) as e:  # the numerical guard (train/guards.py), or
        print(f"error: {e}", file=sys.stderr)      # a policy left without a legal move: exit 3
        sys.exit(3)
    except UserError as e:  # e.g. a full or read-only disk (atomic.OutputError): one line, exit 2
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except Stopped as e:  # SIGTERM, SIGINT, SLURM's warning: checkpointed after the update (signals.py)
        e.command = resume_command(HydraConfig.get())
        if not secondary(cfg):
            print(e, file=sys.stderr)
        if e.chain is not None:  # e.g. submitit's handler: it requeues the job, then exits
            e.chain(e.signum, None)
        sys.exit(e.code)
    except BrokenPipeError:  # `... | head`: the reader left, as a shell's SIGPIPE would end us;
        sys.exit(reader_gone())  # the last checkpoint stays, resume=true goes on from it
    finally:
        early_stop.release()  # training began (and ended): a signal from here is no early stop
        finish()  # a W&B run never outlives its job, even a failed one (multiruns: one run per job)
    # What sweepers (Optuna, W&B) optimise: `optimized_metric` of the exact evaluation.
    return objective(report, cfg.seat.side, cfg.optimized_metric)


def main() -> None:
    """``python -m ttt_research`` and ``ttt-train``: the Hydra app on the command line, where
    ``+experiment=NAME`` also works (``confdir.plain_overrides``) and Hydra's own errors are
    one line (``hydra_errors``)."""
    sys.argv[1:] = hydra_errors.flags_first(plain_overrides(sys.argv[1:]))
    if sys.argv[1:] in (["--help"], ["-h"]) and (text := app_help()) is not None:
        try:  # Hydra's text, written without composing the tree once per group (confdir.app_help)
            print(text)
        except BrokenPipeError:  # `--help | head`
            sys.exit(reader_gone())
        return
    early_stop.install()  # from here, not only once a job starts: composing takes a second
    try:
        hydra_errors.run(app)  # Hydra's own errors (net=mlp999, a missing plugin): one line, exit 2
    except Refused as e:  # refused before Hydra wrote anything (train/hydra_writes.py)
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except early_stop.StoppedEarly as e:  # while the sweeper composed its jobs (early_stop.Composing)
        hydra_writes.put_back_record()
        if early_stop.composing is not None:
            discard_sweep_dir(early_stop.composing, Path.cwd(), existed=existed_before)
        print(e, file=sys.stderr)
        sys.exit(e.code)
    except BrokenPipeError:  # `--help | head`
        sys.exit(reader_gone())
    finally:
        signum = early_stop.uninstall()
    if signum:  # as the last job ended: what it made is whole
        sys.exit(128 + signum)
    gc.freeze()  # every job is done: what the runs left dies with the process, uncollected at exit


if __name__ == "__main__":
    main()
