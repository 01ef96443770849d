"""Stop signals while a command starts (train/early_stop.py): noted, then acted on at safe points;
a DDP process of rank > 0 leaves its note to the run; an ignored signal stays ignored; a sweep
under another launcher gets its signals back, a noted one delivered again. (The whole command:
tests/train/test_signals.py.)"""

from __future__ import annotations

import signal

import pytest
from omegaconf import OmegaConf

from ttt_research.train import early_stop


@pytest.fixture
def handlers():
    """SIGINT and SIGTERM as the test found them, and a recorder of what reaches SIGTERM's."""
    before = {s: signal.getsignal(s) for s in early_stop.SIGNALS}
    early_stop.uninstall()  # none left installed by an earlier command run in this process
    # SIGINT as an interactive Python has it (a worker process may have been started ignoring it)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    got: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    yield got
    early_stop.uninstall()
    for s, h in before.items():
        signal.signal(s, h)


def test_a_noted_signal_ends_the_job_at_its_check_and_is_forgotten_after(handlers):
    early_stop.install()
    early_stop.check()  # nothing noted: nothing happens
    signal.raise_signal(signal.SIGTERM)
    assert handlers == [] and early_stop.noted == signal.SIGTERM  # noted, not acted on
    with pytest.raises(early_stop.StoppedEarly) as e:
        early_stop.check()
    assert e.value.code == 143 and str(e.value).startswith("stopped by SIGTERM before training started")
    assert early_stop.uninstall() == signal.SIGTERM and early_stop.noted == 0
    signal.raise_signal(signal.SIGTERM)
    assert handlers == [signal.SIGTERM]  # the handler found before is back


def test_a_process_of_rank_above_0_leaves_its_note_to_the_run(handlers, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    early_stop.install()
    signal.raise_signal(signal.SIGINT)
    early_stop.check()  # rank 0 trains already: the two stop together, after the first update
    assert early_stop.pending() == signal.SIGINT and early_stop.noted == 0


def test_an_ignored_signal_stays_ignored(handlers):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a job a shell started in the background
    early_stop.install()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert early_stop.is_ours(signal.getsignal(signal.SIGTERM))


@pytest.mark.parametrize("launcher, back", [
    ("hydra._internal.core_plugins.basic_launcher.BasicLauncher", False),
    ("hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", True),
])
def test_another_launcher_gives_the_signals_back(handlers, launcher, back):
    early_stop.install()
    signal.raise_signal(signal.SIGTERM)  # Ctrl-C as the sweep is composed
    config = OmegaConf.create({"hydra": {"launcher": {"_target_": launcher}}})
    early_stop.OtherLaunchers().on_multirun_start(config)
    assert handlers == ([signal.SIGTERM] if back else [])  # delivered again to the handler found
    assert early_stop.is_ours(signal.getsignal(signal.SIGTERM)) is not back


def test_a_second_install_keeps_the_note(handlers):
    """``python -m ttt_research`` installs as its module loads, then ``main`` again: a signal
    noted in between must not be forgotten."""
    early_stop.install()
    signal.raise_signal(signal.SIGTERM)
    early_stop.install()
    assert early_stop.noted == signal.SIGTERM
