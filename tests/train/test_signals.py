"""A stop signal ends a run at the end of the update it arrived in, with a checkpoint that
``resume=true`` continues to the uninterrupted result (signals.py): SIGTERM exits 143, SIGINT
130, each with one line; a population stops the same way; SLURM's warning signal chains to
submitit's handler and a requeued job continues its own folder; a multirun stops non-zero.

Before: SIGTERM ended a run with exit code 0 (Lightning's SIGTERMException), no message, no
checkpoint, no eval.json, and a multirun went on to its next jobs; SIGINT exited 1."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.helpers.configs import make_cfg
from ttt_research.errors import ConfigError
from ttt_research.train import launch
from ttt_research.train.callbacks import ExactEvaluation
from ttt_research.train.population import PopulationEvaluation
from ttt_research.train.run import train
from ttt_research.train.signals import Stopped

FAST = ["threads=1", "checkpoint_every=100"]  # 4 updates of 512 games; the checkpoint only at the end


def send_during(monkeypatch, signum: int, update: int) -> None:
    """This process gets ``signum`` during update ``update`` (1-based), from the exact
    evaluation callback, which runs before the update's checkpoint and stop callbacks."""
    for cls in (ExactEvaluation, PopulationEvaluation):
        original = cls.on_train_batch_end

        def hook(self, trainer, module, outputs, batch, batch_idx, original=original):
            if batch_idx + 1 == update:
                os.kill(os.getpid(), signum)
            original(self, trainer, module, outputs, batch, batch_idx)

        monkeypatch.setattr(cls, "on_train_batch_end", hook)


def games_in(checkpoint) -> int:
    return int(torch.load(checkpoint, map_location="cpu", weights_only=True)["games_played"])


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_checkpoints_the_update_and_resume_ends_as_an_uninterrupted_run(
        tmp_path, monkeypatch, signum, code):
    whole = train(make_cfg(*FAST), tmp_path / "whole")
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with monkeypatch.context() as m:
        send_during(m, signum, 2)
        with pytest.raises(Stopped) as stopped:  # not Lightning's SIGTERMException (a SystemExit 0)
            train(make_cfg(*FAST), tmp_path / "stopped")
    name = signal.Signals(signum).name
    assert str(stopped.value) == f"stopped by {name} after 1,024 games: resume=true continues"
    assert stopped.value.code == code
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers
    assert games_in(tmp_path / "stopped" / "checkpoints" / "last.ckpt") == 1024  # update 2, not 4
    assert not (tmp_path / "stopped" / "eval.json").exists()
    assert train(make_cfg(*FAST, "resume=true"), tmp_path / "stopped") == whole


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_population_stops_the_same_way(tmp_path, monkeypatch):
    overrides = [*FAST, "population.size=2"]
    whole = train(make_cfg(*overrides), tmp_path / "whole")
    with monkeypatch.context() as m:
        send_during(m, signal.SIGTERM, 3)
        with pytest.raises(Stopped, match="stopped by SIGTERM after 1,536 games: resume=true continues"):
            train(make_cfg(*overrides), tmp_path / "stopped")
    assert not (tmp_path / "stopped" / "population.json").exists()
    assert train(make_cfg(*overrides, "resume=true"), tmp_path / "stopped") == whole
    members = [json.loads((tmp_path / d / "population.json").read_text())["members"]
               for d in ("whole", "stopped")]
    assert [m["eval"] for m in members[0]] == [m["eval"] for m in members[1]]


def test_a_stopped_run_resumes_with_a_larger_budget(tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        send_during(m, signal.SIGTERM, 2)
        with pytest.raises(Stopped):
            train(make_cfg(*FAST), tmp_path)
    train(make_cfg(*FAST, "budget.games=3072", "resume=true"), tmp_path)
    assert games_in(tmp_path / "checkpoints" / "last.ckpt") == 3072


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_slurms_warning_signal_chains_to_submitit_and_a_requeued_job_continues(tmp_path, monkeypatch):
    """submitit asks SLURM for SIGUSR2 before the time limit and requeues from its handler:
    ours checkpoints first, then hands over (Stopped.chain); the requeued job reruns the same
    command (resume=false) and continues its folder, checked as a resume."""
    whole = train(make_cfg(*FAST), tmp_path / "whole")
    calls = []

    def submitit_handler(signum, frame):
        calls.append(signum)

    previous = signal.signal(signal.SIGUSR2, submitit_handler)
    try:
        with monkeypatch.context() as m:
            send_during(m, signal.SIGUSR2, 2)
            with pytest.raises(Stopped) as stopped:
                train(make_cfg(*FAST), tmp_path / "job")
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert calls == [] and stopped.value.chain is submitit_handler and stopped.value.code == 128 + 12
    with pytest.raises(ConfigError, match="already holds a run"):  # not requeued: a fresh run is refused
        train(make_cfg(*FAST), tmp_path / "job")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert train(make_cfg(*FAST), tmp_path / "job") == whole


@pytest.mark.slow  # two commands in subprocesses
def test_sigterm_stops_a_multirun_non_zero_and_its_command_continues_the_sweep(tmp_path):
    args = ["budget.games=2000000", "algo.games_per_update=512", "eval_every=5", "checkpoint_every=1000",
            "progress=lines", "threads=1"]
    sweep = tmp_path / "sweep"
    # A fresh command's environment: an earlier in-process DDP test of this worker may have left
    # its launch mark and rank variables in os.environ (launch.mark keeps them, by design).
    env = {k: v for k, v in os.environ.items()
           if k not in (launch.MARK, "LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.Popen([sys.executable, "-m", "ttt_research", "-m", "seed=0,1", *args,
                             f"hydra.sweep.dir={sweep}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    deadline = time.time() + 240
    seen = []
    for line in proc.stdout:  # job 0's opening line: its training is starting
        seen.append(line)
        if line.startswith("training ") or time.time() > deadline:
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, (err[-1500:], "".join(seen)[-1500:], out[-500:])
    assert err.strip().splitlines()[-1].startswith("stopped by SIGTERM after ")
    job = sweep / "0"
    # The line says how the sweep continues: its own command, its folder, resume=true.
    hint = err.strip().splitlines()[-1].split("games: resume=true continues: ", 1)[1]
    assert hint == shlex.join(["python", "-m", "ttt_research", "-m", "seed=0,1", *args,
                               f"hydra.sweep.dir={sweep}", "resume=true"])
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0"]  # job 1 never started
    assert games_in(job / "checkpoints" / "last.ckpt") > 0 and not (job / "eval.json").exists()
    command = shlex.split(hint)
    resumed = subprocess.run([sys.executable, *command[1:], "budget.games=20480"], capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (job / "eval.json").is_file() and (sweep / "1" / "eval.json").is_file()  # job 1 ran too


@pytest.mark.slow  # two DDP commands (two processes each) in subprocesses
@pytest.mark.alone  # two training processes: one per core
def test_sigterm_stops_every_ddp_process_after_the_same_update(tmp_path):
    """SIGTERM to rank 0 only: both processes stop after the same update (they decide
    together), the checkpoint is written, the command exits 143, and the resume finishes."""
    args = ["algo.games_per_update=512", "eval_every=5", "checkpoint_every=1000", "progress=lines",
            "threads=1", "trainer=ddp", "trainer.devices=2", f"hydra.run.dir={tmp_path}"]
    proc = subprocess.Popen([sys.executable, "-m", "ttt_research", "budget.games=4000000", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for line in proc.stdout:  # the first progress line: both processes are training
            if line.startswith("["):
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, err[-2000:]
    games = games_in(tmp_path / "checkpoints" / "last.ckpt")
    assert err.strip().splitlines()[-1].startswith(f"stopped by SIGTERM after {games:,} games: resume=true "
                                                   f"continues: python -m ttt_research ")
    assert games % 1024 == 0 and 0 < games < 1_024_000  # an update's end, before any regular checkpoint
    resumed = subprocess.run([sys.executable, "-m", "ttt_research", f"budget.games={games + 4096}", *args,
                              "resume=true"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert games_in(tmp_path / "checkpoints" / "last.ckpt") == games + 4096


def _foreground() -> None:
    """In the child before it starts: SIGINT as a shell's foreground command has it. A test
    worker may run with SIGINT ignored, and its child would then keep ignoring it, as a
    command started in the background does (``early_stop``): it trained, exit 0."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_while_the_command_starts_is_one_line_and_leaves_no_folder(tmp_path, signum):
    """Ctrl-C or kill while torch and Lightning load (Hydra has made the run folder, training
    has not started): one line, exit 128 + the signal, the folder gone. Before: a
    KeyboardInterrupt traceback from inside an import (SIGINT) or a silent exit (SIGTERM), and
    the folder with its log left behind."""
    run = tmp_path / "outputs" / "run"
    proc = subprocess.Popen([sys.executable, "-m", "ttt_research", "budget.games=4000000",
                             f"hydra.run.dir={run}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, preexec_fn=_foreground)
    try:
        deadline = time.monotonic() + 60
        while not run.exists():  # Hydra made the job's folder: the job started, torch loads
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, err[-2000:]
    assert err == f"stopped by {name} before training started: nothing was trained\n"
    assert not (tmp_path / "outputs").exists()


def test_a_signal_noted_as_the_folder_is_claimed_stops_after_the_first_update(tmp_path, monkeypatch):
    """Past the start's last check (``early_stop.check``), a noted signal is the run's to act on:
    it stops after its first update with a checkpoint, as a signal during training does."""
    from ttt_research.train import early_stop, runfolder

    claim = runfolder.claim

    def noting_claim(*args, **kwargs):
        monkeypatch.setattr(early_stop, "noted", int(signal.SIGTERM))  # the note the handler makes
        return claim(*args, **kwargs)

    monkeypatch.setattr(runfolder, "claim", noting_claim)
    with pytest.raises(Stopped, match="stopped by SIGTERM after 512 games: resume=true continues"):
        train(make_cfg(*FAST), tmp_path)
    assert early_stop.noted == 0  # handed over to the run's own handling
    assert games_in(tmp_path / "checkpoints" / "last.ckpt") == 512
    monkeypatch.setattr(early_stop, "noted", int(signal.SIGINT))  # before the start's last check
    with pytest.raises(early_stop.StoppedEarly, match="stopped by SIGINT before training started"):
        train(make_cfg(*FAST), tmp_path / "other")
    assert not (tmp_path / "other").exists()


@pytest.mark.slow
@pytest.mark.parametrize("resume", [False, True])
def test_a_stop_while_a_big_sweep_composes_its_jobs_is_at_once(tmp_path, resume):
    """Hydra's basic sweeper composes every job's config before the first job starts (about a
    quarter of a second each here: 12 minutes for a grid of 3,000), a stretch without a safe
    point. A stop signal there ends the command at once: one line, exit 143, the sweep's new
    folder gone, a continued sweep's multirun.yaml put back byte for byte. Before: the signal
    was noted and the command went on composing (a SIGTERM 40 s in ended it after 276 s)."""
    sweep = tmp_path / "multirun" / "grid"
    record = sweep / "multirun.yaml"
    old = b"# a stopped sweep's record\n"
    if resume:
        sweep.mkdir(parents=True)
        record.write_bytes(old)
    grid = ",".join(str(i) for i in range(1, 3001))
    proc = subprocess.Popen([sys.executable, "-m", "ttt_research", "-m", "debug=tiny", f"seed={grid}",
                             f"hydra.sweep.dir={sweep}", *(["resume=true"] if resume else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not record.exists() or record.read_bytes() == old:  # the sweeper wrote its record: it composes
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-2000:]
    assert err == "stopped by SIGTERM before training started: nothing was trained\n"
    assert took < 10  # not the minutes the rest of the grid would take to compose
    if resume:
        assert sorted(p.name for p in sweep.iterdir()) == ["multirun.yaml"] and record.read_bytes() == old
    else:
        assert not (tmp_path / "multirun").exists()


def test_a_stop_signal_is_acknowledged_when_its_update_runs_on(capfd, monkeypatch):
    # A 4,4,4 run's first update reads its tables (10-60 s): a Ctrl-C there said nothing until
    # the update ended. Now one line once Stop.ACK_S has passed; a short update's stop prints none.
    from ttt_research.train import signals

    monkeypatch.setattr(signals.Stop, "ACK_S", 0.05)
    long = signals.Stop()
    long.handler(signal.SIGINT, None)
    time.sleep(0.5)
    assert capfd.readouterr().err == ("SIGINT noted: the run stops with a checkpoint once this update ends "
                                      "(another SIGINT stops it now)\n")
    short = signals.Stop()
    short.handler(signal.SIGTERM, None)
    short.acted()  # StopOnSignal, at the update's end
    time.sleep(0.5)
    assert capfd.readouterr().err == ""
    outputs = signals.Stop()
    outputs.trained = True  # the fit ended: the final evaluation and the outputs are left
    outputs.handler(signal.SIGTERM, None)
    time.sleep(0.5)
    assert capfd.readouterr().err == ("SIGTERM noted: the run has trained: it stops once its outputs are "
                                      "written (another SIGTERM stops it now)\n")
    outputs.restore()
