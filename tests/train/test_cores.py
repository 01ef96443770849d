"""``threads=auto`` (train/cores.py): a single run on one thread, a population on the cores the
other processes leave free, given back within a window when another job starts and taken
again when it ends; the thread count changes no number of a population's run on this host."""

import json

import pytest

from tests.helpers.configs import make_cfg
from ttt_research.errors import ConfigError
from ttt_research.train import cores
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
                           clock=lambda: host.t, set_threads=calls.append)


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

    update(1.0, 1.0, 0.05)
    assert cb.threads == 1  # under a window: nothing decided yet
    update(1.5, 1.0, 0.05)  # 2.5 s since the start: the host is idle but for daemons
    assert cb.threads == 2 and calls == [1, 2] and cb.others == pytest.approx(0.05)
    update(2.5, 1.33, 0.67)  # a second job starts: it gets 2/3 of a core beside our two threads
    assert cb.threads == 1 and calls == [1, 2, 1]
    update(2.5, 1.0, 1.0)  # beside it on one thread each: the fair share, kept
    assert cb.threads == 1 and calls == [1, 2, 1]
    update(2.5, 1.0, 0.0)  # it ended
    assert cb.threads == 2 and calls == [1, 2, 1, 2]
    assert [v for _, v in module.values] == [1.0, 2.0, 1.0, 1.0, 2.0]  # perf/threads, every update
    assert {name for name, _ in module.values} == {"perf/threads"}


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
