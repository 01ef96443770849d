"""A stopped sweep continues with one command (train/hydra_writes.py, runfolder.Claim): the
line a stopped job prints is the sweep's own command with its folder and ``resume=true``;
run, it resumes the stopped job, starts the jobs that never started and leaves the finished
ones byte for byte as they were.

Before: the line named the stopped job alone (``hydra.run.dir=multirun/DATE/TIME/N
resume=true``), and the jobs after it had no command: ``resume=true`` with ``-m`` refused
a job that never started (no checkpoint) and rewrote the finished ones."""

from __future__ import annotations

import json
import os
import shlex
import signal

import pytest
from hydra.core.hydra_config import HydraConfig

from tests.helpers.command import checksums, cli
from ttt_research.train.callbacks import ExactEvaluation

TINY = ["debug=tiny", "progress=false", "threads=1", "checkpoint_every=1"]


@pytest.mark.slow  # four tiny jobs and a skipped one: ~10 s on the 2-core host
def test_a_stopped_sweep_continues_with_the_command_its_line_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = ExactEvaluation.on_train_batch_end

    def stop_job_1(self, trainer, module, outputs, batch, batch_idx):  # SIGTERM in job 1's update 2
        if batch_idx == 1 and HydraConfig.get().job.num == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        original(self, trainer, module, outputs, batch, batch_idx)

    with monkeypatch.context() as m:
        m.setattr(ExactEvaluation, "on_train_batch_end", stop_job_1)
        code, _, err = cli("-m", *TINY, "seed=0,1,2", "hydra.sweep.dir=sweep")
    assert code == 143, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("stopped by SIGTERM after 1,024 games: resume=true continues: ")
    command = shlex.split(line.split("continues: ", 1)[1])
    assert command == ["python", "-m", "ttt_research", "-m", *TINY, "seed=0,1,2", "hydra.sweep.dir=sweep",
                       "resume=true"]
    sweep = tmp_path / "sweep"
    assert sorted(p.name for p in sweep.iterdir()) == ["0", "1", "multirun.yaml"]  # job 2 never started
    assert (sweep / "0" / "eval.json").is_file() and not (sweep / "1" / "eval.json").exists()
    job0 = checksums(sweep / "0")

    code, _, err = cli(*command[3:])
    assert code == 0, err
    assert f"{sweep / '0'} finished already: left as it is" in err
    assert checksums(sweep / "0") == job0  # the finished job: not one byte rewritten
    assert (sweep / "1" / "eval.json").is_file() and (sweep / "2" / "eval.json").is_file()
    sessions = [json.loads((sweep / job / "run.json").read_text())["sessions"] for job in ("1", "2")]
    assert [[s["resumed"] for s in job] for job in sessions] == [[False, True], [False]]


@pytest.mark.slow  # two tiny jobs, then the third: ~8 s on the 2-core host
def test_a_sweep_stopped_as_a_job_starts_says_how_to_go_on(tmp_path, monkeypatch):
    """Found on a fresh clone: a signal between two jobs (job 2 loading) printed only "nothing was
    trained", with no command, while jobs 0 and 1 were finished; the sweep's command continues it."""
    from ttt_research.train import early_stop

    monkeypatch.chdir(tmp_path)
    check = early_stop.check

    def stop_as_job_2_starts():
        if HydraConfig.get().job.num == 2:
            raise early_stop.StoppedEarly(signal.SIGTERM)
        check()

    with monkeypatch.context() as m:
        m.setattr(early_stop, "check", stop_as_job_2_starts)
        code, _, err = cli("-m", *TINY, "seed=0,1,2", "hydra.sweep.dir=sweep")
    assert code == 143, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("stopped by SIGTERM before training started: nothing was trained in job 2 of "
                           "the sweep (the jobs before it are done): resume=true continues: python -m ")
    sweep = tmp_path / "sweep"
    assert sorted(p.name for p in sweep.iterdir()) == ["0", "1", "multirun.yaml"]
    code, _, err = cli(*shlex.split(line.split("continues: ", 1)[1])[3:])
    assert code == 0, err
    assert all((sweep / job / "eval.json").is_file() for job in ("0", "1", "2"))
