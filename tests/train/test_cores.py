"""``threads=auto`` (train/cores.py): a single run on one thread, a population on the cores the
other processes leave free, given back within a window when another job starts and taken
again when it ends; the thread count changes no number of a population's run on this host."""

import json
import subprocess
import sys

import pytest

from tests.helpers.configs import make_cfg
from ttt_research.errors import ConfigError
from ttt_research.train import cores, cpus
from ttt_research.train.run import train
from ttt_research.train.validate import validate


class Host:
    """A fake host: the busy CPU seconds of every process, this process's, and the clock,
    advanced by ``window(seconds, ours, others)`` (cores each used in it)."""

    def __init__(self):
        self.t, self.busy, self.mine = 100.0, 5000.0, 10.0

    def window(self, seconds: float, ours: float, others: float) -> None:
        self.t += seconds
        self.mine += ours * seconds
        self.busy += (ours + others) * seconds


class Logged:
    def __init__(self):
        self.values = []

    def log(self, name, value, **kwargs):
        self.values.append((name, value))


def share(host: Host, cpus: int = 2, calls: list | None = None) -> cores.CoreShare:
    calls = [] if calls is None else calls
    return cores.CoreShare(every_s=2.0, cpus=cpus, busy=lambda: host.busy, own=lambda: host.mine,
                           clock=lambda: host.t, set_threads=calls.append, jitter=0.0)


def test_threads_are_the_whole_cores_left_free():
    assert cores.threads_for(2.0) == 2 and cores.threads_for(1.95) == 2  # daemons: within the slack
    assert cores.threads_for(1.33) == 1  # another one-thread job beside our two threads
    assert cores.threads_for(0.2) == 1  # never none
    assert cores.threads_for(15.0) == cores.MOST  # a big host: at most MOST
    assert cores.threads_for(3.0, most=8) == 3


def test_a_population_takes_a_free_core_gives_it_back_and_takes_it_again():
    host, calls, module = Host(), [], Logged()
    cb = share(host, calls=calls)
    cb.on_train_start(None, module)
    assert calls == [1] and cb.threads == 1  # it starts on one thread

    def update(seconds, ours, others):
        host.window(seconds, ours, others)
        cb.on_train_batch_end(None, module, None, None, 0)

    update(0.2, 1.0, 0.05)
    assert cb.threads == 1  # under the first window (0.3 s): nothing decided yet
    update(0.2, 1.0, 0.05)  # 0.4 s since the start: the host is idle but for daemons
    assert cb.threads == 2 and calls == [1, 2] and cb.others == pytest.approx(0.05)  # taken
    update(1.0, 2.0, 0.05)
    assert cb.threads == 2 and calls == [1, 2]  # the windows after the first: 2 s, nothing read yet
    update(1.5, 2.0, 0.05)
    update(2.5, 1.33, 0.67)  # a second job starts: it gets 2/3 of a core beside our two threads
    assert cb.threads == 1 and calls == [1, 2, 1]  # given back at once
    update(2.5, 1.0, 1.0)  # beside it on one thread each: the fair share, kept
    update(2.5, 1.0, 1.0)
    assert cb.threads == 1 and calls == [1, 2, 1]
    windows = 0
    while cb.threads == 1 and windows < 10:  # it ended: the core is taken again after a hold
        update(2.5, 1.0, 0.0)  # of 1 to 4 windows (it had taken the core before the job came)
        windows += 1
    assert cb.threads == 2 and calls == [1, 2, 1, 2] and 2 <= windows <= 5
    logged = [v for _, v in module.values]
    assert logged == [1.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0] + [1.0] * (windows - 1) + [2.0]
    assert {name for name, _ in module.values} == {"perf/threads"}  # every update logs its threads


class Trainer:
    def __init__(self, world_size=1, num_nodes=1):
        self.world_size, self.num_nodes = world_size, num_nodes


def test_the_count_the_fit_started_on_comes_back_and_ddp_takes_a_share(monkeypatch):
    host, calls = Host(), []
    monkeypatch.setattr(cores.torch, "get_num_threads", lambda: 7)
    cb = share(host, cpus=4, calls=calls)
    cb.on_train_start(Trainer(world_size=2), Logged())
    assert cb.most == 2  # two processes on 4 usable CPUs: 2 threads each at most
    for _ in range(6):  # an idle host: it grows one thread at a time, to its share
        host.window(2.5, cb.threads, 0.0)
        cb.on_train_batch_end(None, Logged(), None, None, 0)
    assert cb.threads == 2 and calls == [1, 2]
    cb.on_train_end(None, Logged())
    assert calls == [1, 2, 7]  # the thread count before the fit


@pytest.mark.parametrize("n,cpus", [(3, 4), (5, 8)])
def test_several_auto_populations_settle_instead_of_swinging_together(n, cpus):
    """Populations on a few CPUs, each using cores in proportion to its threads: with the
    jittered windows and the backoff after a core taken in vain, they settle on as many threads
    as CPUs (growing and shrinking in step swung between 3 and 6 on four CPUs; a forgiving
    slack held 9 threads on 8)."""
    import random

    rng = random.Random(1)
    t, busy, mine, calls = [0.0], [0.0], [0.0] * n, [[] for _ in range(n)]
    shares = [cores.CoreShare(every_s=2.0, cpus=cpus, busy=lambda: busy[0], own=lambda k=k: mine[k],
                              clock=lambda: t[0], set_threads=calls[k].append) for k in range(n)]
    for s in shares:
        s._draw = random.Random(rng.random())
        s.on_train_start(Trainer(), Logged())
    totals = []
    for _ in range(3000):  # 0.1 s steps: each process uses min(1, cpus / all threads) per thread
        threads = [s.threads for s in shares]
        speed = min(1.0, cpus / sum(threads))
        t[0] += 0.1
        for k in range(n):
            mine[k] += 0.1 * threads[k] * speed
        busy[0] += 0.1 * sum(threads) * speed
        for s in shares:
            s.on_train_batch_end(None, Logged(), None, None, 0)
        totals.append(sum(s.threads for s in shares))
    last = totals[-1500:]  # the last 150 s
    assert last == [cpus] * len(last), totals[-300:]
    assert sum(x > cpus for x in totals) / len(totals) < 0.05  # oversubscribed seldom, even early


def test_a_busy_host_keeps_a_population_on_one_thread():
    host, calls = Host(), []
    cb = share(host, calls=calls)
    cb.on_train_start(None, Logged())
    for _ in range(5):  # a sweep's other job holds a core throughout
        host.window(2.5, 1.0, 1.0)
        cb.on_train_batch_end(None, Logged(), None, None, 0)
    assert calls == [1] and cb.threads == 1


def test_without_the_hosts_figures_auto_is_one_thread():
    calls = []
    cb = cores.CoreShare(busy=lambda: None, set_threads=calls.append)
    cb.on_train_start(None, Logged())
    cb.on_train_batch_end(None, Logged(), None, None, 0)
    assert calls == [1] and cb.threads == 1


def test_the_hosts_busy_seconds_are_read_from_proc_stat():
    busy = cores.host_busy_seconds()
    if busy is None:
        pytest.skip("no /proc/stat on this host")
    assert 0 < busy <= cores.host_busy_seconds()  # since boot, never going back


def test_auto_starts_every_run_on_one_thread_and_a_number_fixes_it():
    assert make_cfg().threads == "auto" and cores.starting_threads("auto") == 1
    assert cores.starting_threads(3) == 3 and cores.starting_threads(None) is None
    validate(make_cfg("threads=2"))
    validate(make_cfg("threads=null"))
    with pytest.raises(ConfigError, match=r"^threads must be auto, a positive integer or null, got 'many'$"):
        validate(make_cfg("threads=many"))


def test_threads_are_bounded_by_the_cpus_the_process_may_use(monkeypatch):
    """Before: threads=100000000 passed the check and the run died of a segmentation fault (exit
    139) once its folder was claimed."""
    monkeypatch.setattr(cpus, "affinity", lambda: {0, 1, 2})
    validate(make_cfg("threads=3"))
    for n in (4, 100000000):
        with pytest.raises(ConfigError) as e:
            validate(make_cfg(f"threads={n}"))
        assert str(e.value) == ("threads must be at most 3, the CPUs this process may use "
                                f"(os.sched_getaffinity), or auto, got {n}")
    monkeypatch.setattr(cpus, "affinity", lambda: None)  # the OS does not say: the host's count
    monkeypatch.setattr(cpus.os, "cpu_count", lambda: 5)
    assert cpus.allowed() == 5 and cpus.usable_cpus() <= 5
    validate(make_cfg("threads=5"))


@pytest.mark.slow  # a command in a subprocess (~3 s)
def test_too_many_threads_are_refused_before_torch_without_a_folder(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ttt_research", "threads=100000000",
                          f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.splitlines() == [f"error: threads must be at most {cpus.allowed()}, the CPUs this "
                                       "process may use (os.sched_getaffinity), or auto, got 100000000"]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # two populations of three trained: over 3 s on the 2-core host
def test_the_thread_count_changes_no_number_of_a_populations_run(tmp_path):
    """What makes ``auto`` safe to change mid-run on this host: at 1 and 2 threads a population
    ends with the same population.json (the members' evaluations, game counts, first
    unbeatable games), as the snapshot of experiments/house_in_layers/ runs it."""
    for threads in (1, 2):
        train(make_cfg("population.size=3", "algo=ppo", f"threads={threads}"), tmp_path / str(threads))
    one, two = (json.loads((tmp_path / str(t) / "population.json").read_text()) for t in (1, 2))
    assert one == two
    assert (tmp_path / "1" / "eval.json").read_bytes() == (tmp_path / "2" / "eval.json").read_bytes()


def test_auto_shares_the_cores_in_a_population_only_and_run_json_says_auto(tmp_path):
    """The shell attaches ``CoreShare`` to a population under ``auto`` (its threads in
    metrics.csv, every update), not to a single run, nor to a population on a fixed count."""
    import csv

    def threads_column(folder):
        with open(folder / "metrics.csv") as f:
            return [r["perf/threads"] for r in csv.DictReader(f) if r.get("perf/threads")]

    train(make_cfg("population.size=2"), tmp_path / "pop")
    logged = threads_column(tmp_path / "pop")
    assert len(logged) == 4 and all(float(v) >= 1 for v in logged)  # debug=tiny: 4 updates
    session = json.loads((tmp_path / "pop" / "run.json").read_text())["sessions"][-1]
    assert session["threads"] == "auto"
    train(make_cfg(), tmp_path / "single")
    train(make_cfg("population.size=2", "threads=1"), tmp_path / "fixed")
    assert threads_column(tmp_path / "single") == [] and threads_column(tmp_path / "fixed") == []
