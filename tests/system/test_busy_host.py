"""Busy hosts: every shipped config runs one torch thread (two threads per run fight any other
job for a 2-core host: 236k games/s alone fell to ~69k each beside a second run), and the bench
records the host's load before it starts, in its JSON and its table, and warns on stderr when
the host is busy. No speed is measured here (the test host is shared)."""

import os

import pytest

from tests.helpers.configs import make_cfg
from ttt_research import bench
from ttt_research.train import host
from ttt_research.train.confdir import config_dir

ALGOS = sorted(p.stem for p in (config_dir() / "algo").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("overrides", [[], *([f"algo={a}"] for a in ALGOS),
                                       *([f"experiment={e}"] for e in EXPERIMENTS)])
def test_every_shipped_config_runs_one_torch_thread(overrides):
    assert ALGOS == ["alphazero", "dqn", "ppo", "qlearning", "reinforce", "reinforce_faithful"]
    assert make_cfg(*overrides).threads == 1
    assert make_cfg(*overrides, "threads=2").threads == 2  # the option stays


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
    # Every figure stubbed: only the bench's own bookkeeping runs.
    monkeypatch.setattr(bench, "bench_env", lambda *a: said.append("engine") or
                        {"env_games_per_s": 1e7, "env_best_batch": 65536})
    monkeypatch.setattr(bench, "bench_reinforce", lambda *a: {
        "reinforce_games_per_s": 2e5, "reinforce_threads": 1, "reinforce_games_per_s_per_run": [2e5]})
    monkeypatch.setattr(bench, "bench_ppo", lambda *a: {
        "ppo_steps_per_s": 1e5, "time_to_unbeatable_s": None, "details_ppo_unbeatable_s": [None],
        "ppo_threads": 1})
    monkeypatch.setattr(bench, "bench_eval", lambda *a: {"eval_s": 0.01})
    monkeypatch.setattr(bench, "bench_search", lambda *a, **k: {
        "search_us_per_game": 20.0, "search_phases_ms": {"tables": 7.0, "subtrees": 10.0},
        "search_setting": {"batch": 4096, "simulations": 16, "threads": 1}})
    monkeypatch.setattr(bench, "bench_latency", lambda *a: {"move_latency_ms": {"torch": 0.02,
                                                                               "onnxruntime": 0.01}})
    res = bench.run(quick=True, populations=False)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("bench: warning: the host is busy before the bench starts (load 3.25")
    assert err[1] == "bench: engine" and said == ["engine"]  # the warning came first
    assert res["host"]["load"] == {"1min": 3.25, "5min": 2.0, "15min": 1.0, "logical_cpus": 2, "busy": True}
    row = bench.format_table(res).splitlines()[1]
    assert row == ("load before the run: 3.25 / 2.00 / 1.00 (1 / 5 / 15 min) on 2 logical CPU(s) - BUSY: "
                   "other work shared the cores, figures are low")
