"""Busy hosts: every shipped config runs a single run on one torch thread (two threads per run
fight any other job for a 2-core host: 236k games/s alone fell to ~69k each beside a second run),
a population takes a second core only while no other job uses it (tests/train/test_cores.py
follows it through a job starting and ending), and the bench
records the host's load before it starts, in its JSON and its table, and warns on stderr when
the host is busy. No speed is measured here (the test host is shared)."""

import os

import pytest

from tests.helpers.bench_stubs import stub_figures
from tests.helpers.configs import make_cfg
from ttt_research.algos.spec import specs
from ttt_research.bench import suite as bench  # the figures (the package parses the options)
from ttt_research.train import cores, host
from ttt_research.train.confdir import config_dir

ALGOS = sorted(p.stem for p in (config_dir() / "algo").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("overrides", [[], *([f"algo={a}"] for a in ALGOS),
                                       *([f"experiment={e}"] for e in EXPERIMENTS)])
def test_every_shipped_config_runs_one_torch_thread(overrides):
    assert ALGOS == sorted(s.name for s in specs().values())  # every algorithm is tried
    assert make_cfg(*overrides).threads == "auto" and cores.starting_threads("auto") == 1
    assert make_cfg(*overrides, "threads=2").threads == 2  # the option stays


def test_a_population_beside_another_job_stays_on_one_thread(monkeypatch):
    """The fair share: another job holds one of the two cores, so a population's ``auto``
    never takes it (its other job is counted from the host's busy time, less its own)."""
    clock, busy, mine, calls = [0.0], [0.0], [0.0], []
    share = cores.CoreShare(every_s=2.0, cpus=2, busy=lambda: busy[0], own=lambda: mine[0],
                            clock=lambda: clock[0], set_threads=calls.append)

    class Quiet:
        def log(self, *args, **kwargs):
            pass

    share.on_train_start(None, Quiet())
    for _ in range(10):
        clock[0] += 3.0
        mine[0] += 3.0  # one core ours
        busy[0] += 6.0  # and one the other job's
        share.on_train_batch_end(None, Quiet(), None, None, 0)
    assert calls == [1]


def fake_load(monkeypatch, load, cpus=2):
    monkeypatch.setattr(os, "getloadavg", lambda: load)
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)


def test_the_hosts_load_is_recorded_and_a_busy_host_named(monkeypatch):
    fake_load(monkeypatch, (1.5, 0.8, 0.4))
    load = host.machine()["load"]
    assert load == {"1min": 1.5, "5min": 0.8, "15min": 0.4, "logical_cpus": 2, "busy": True}
    assert host.busy_warning(load) == (
        "warning: the host is busy before the bench starts (load 1.50 over 1 min on 2 logical CPU(s), "
        "above 0.5 per CPU): other work shares the cores and every figure will be low; rerun on an "
        "idle host")
    fake_load(monkeypatch, (1.0, 3.0, 3.0))  # exactly 0.5 per CPU: not yet busy
    assert host.machine()["load"]["busy"] is False and host.busy_warning(host.machine()["load"]) is None

    def no_load():
        raise OSError("no load average")
    monkeypatch.setattr(os, "getloadavg", no_load)
    assert host.machine()["load"] is None and host.busy_warning(None) is None


def test_bench_warns_before_measuring_and_prints_the_load(monkeypatch, capsys):
    fake_load(monkeypatch, (3.25, 2.0, 1.0))
    said = []
    stub_figures(monkeypatch, bench, antirez=False, said=said)  # only the bench's own bookkeeping runs
    res = bench.run(quick=True, populations=False)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("bench: warning: the host is busy before the bench starts (load 3.25")
    assert err[1] == "bench: engine" and said == ["engine"]  # the warning came first
    assert res["host"]["load"] == {"1min": 3.25, "5min": 2.0, "15min": 1.0, "logical_cpus": 2, "busy": True}
    row = bench.format_table(res).splitlines()[1]
    assert row == ("load before the run: 3.25 / 2.00 / 1.00 (1 / 5 / 15 min) on 2 logical CPU(s) - BUSY: "
                   "other work shared the cores, figures are low")
