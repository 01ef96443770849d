"""A rank variable no launch set (``train/launch.py``): ``LOCAL_RANK=1`` left in the shell with
``trainer=ddp trainer.devices=2`` waited 30 minutes for a first process nobody started, deaf to
SIGTERM; now it is refused in one line, and a process the run started itself waits for its
first process in Python, signals heard, for seconds at most."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.helpers.configs import make_cfg
from ttt_research.errors import ConfigError
from ttt_research.train import launch
from ttt_research.train.validate import validate

DDP = ["trainer=ddp", "trainer.devices=2"]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for var in ("LOCAL_RANK", "RANK", launch.MARK, "TORCHELASTIC_RUN_ID", "SLURM_NTASKS", "SLURM_PROCID",
                "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("var,value", [("LOCAL_RANK", "1"), ("LOCAL_RANK", "0"), ("RANK", "1")])
def test_a_rank_variable_no_launch_set_is_refused(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as e:
        validate(make_cfg(*DDP))
    assert str(e.value) == (f"{var}={value} is set in the environment, but nothing launched this run with "
                            f"it: trainer=ddp starts its own 2 processes (run without it: env -u {var} "
                            "python -m ttt_research ...; to start each process yourself, use torchrun)")
    if value != "0":  # one process: Lightning would log nothing (rank_zero_only reads it)
        with pytest.raises(ConfigError, match=f"^{var}={value} is set .* this run is one process"):
            validate(make_cfg())


def test_a_launchers_rank_variables_are_its_own(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv(launch.MARK, str(os.getppid()))  # Lightning started it for this run's first process
    validate(make_cfg(*DDP))
    monkeypatch.setenv(launch.MARK, "999999999")  # another process's mark (an earlier run's): stray again
    with pytest.raises(ConfigError):
        validate(make_cfg(*DDP))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "run")  # torchrun's
    validate(make_cfg(*DDP))
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_PROCID", "1")  # a SLURM step's
    validate(make_cfg(*DDP))
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.delenv("SLURM_NTASKS")
    monkeypatch.setenv("RANK", "0")  # rank 0 says nothing wrong
    validate(make_cfg(*DDP))


def test_the_first_process_marks_the_ones_it_starts_and_its_own_later_jobs(monkeypatch):
    """Lightning sets LOCAL_RANK=0 and the address in the first process's own environment and
    leaves them: the next job of a multirun meets the processes it started there."""
    launch.mark(False)
    assert launch.MARK not in os.environ
    monkeypatch.setenv(launch.MARK, "")  # so that the mark mark() sets directly goes with the test
    launch.mark(True)
    assert os.environ[launch.MARK] == str(os.getpid())
    monkeypatch.setenv("LOCAL_RANK", "0")
    validate(make_cfg(*DDP))  # its own leftover, not a stray one
    assert launch.ours() and not launch.started()
    assert launch.wait_for_first(lambda: 0, wait_s=0.1) == 0  # the first process waits for nobody


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_launched_process_waits_for_its_first_one_in_seconds(monkeypatch):
    monkeypatch.setenv(launch.MARK, str(os.getppid()))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))  # nobody listens
    start = time.monotonic()
    with pytest.raises(launch.FirstGone, match=r"did not answer at 127\.0\.0\.1:\d+ within 0\.5 s$"):
        launch.wait_for_first(lambda: 0, wait_s=0.5, poll_s=0.05)
    assert time.monotonic() - start < 5
    assert launch.wait_for_first(lambda: 15, wait_s=30, poll_s=0.05) == 15  # a signal ends the wait
    with socket.socket() as server:  # the first process listens: no wait
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("MASTER_PORT", str(server.getsockname()[1]))
        assert launch.wait_for_first(lambda: 15, wait_s=30) == 0


@pytest.mark.slow  # a command in a subprocess (~2 s)
def test_a_stray_local_rank_is_refused_at_once_without_a_folder(tmp_path):
    """Before: this waited 30 minutes for a rendezvous, and SIGTERM (twice) did not end it."""
    env = {**os.environ, "LOCAL_RANK": "1"}
    out = subprocess.run([sys.executable, "-m", "ttt_research", *DDP, f"hydra.run.dir={tmp_path / 'run'}"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr[-2000:]
    assert len(out.stderr.splitlines()) == 1 and "LOCAL_RANK=1 is set in the environment" in out.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # a command in a subprocess (~8 s: torch loads before the wait)
def test_sigterm_ends_a_launched_process_while_it_waits(tmp_path):
    """A process the run started (as Lightning starts rank 1), whose first process does not
    answer: it says it waits, and SIGTERM ends it at once with one line."""
    env = {**os.environ, "LOCAL_RANK": "1", launch.MARK: str(os.getpid()), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    env.pop("RANK", None)
    proc = subprocess.Popen([sys.executable, "-m", "ttt_research", *DDP, "debug=tiny",
                             f"hydra.run.dir={tmp_path / 'run'}"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()  # printed after a second of waiting
        assert first.startswith("LOCAL_RANK=1: waiting for the run's first process at 127.0.0.1:"), first
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 128 + signal.SIGTERM
        rest = proc.stderr.read().splitlines()
        assert rest == ["stopped by SIGTERM before training started: nothing was trained"]
    finally:
        proc.kill()
        proc.wait()
