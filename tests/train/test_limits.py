"""Limits checked up front (``config.py``): a value that passes validation never overflows
later. Seeds, budgets, learning rates, rewards and population sizes are bounded by what the
code holds, a population's memory is estimated from its shapes and refused when the machine
cannot hold it, and an update's shape that would play past the budget is refused. Each
refusal is one line naming the key and its range, before torch is imported."""

import re
import subprocess
import sys

import pytest

from tests.helpers.configs import make_cfg
from ttt_research.contract import GAMES_MAX, SEED_MAX
from ttt_research.errors import ConfigError
from ttt_research.train import runspec
from ttt_research.train import validate as config
from ttt_research.train.validate import validate


@pytest.mark.parametrize("overrides,message", [
    (["seed=4294967296"], "seed must be at most 4294967295 (numpy's seed range: 32 bits), got 4294967296"),
    (["seed=4294967290", "population.size=8"], "seed + population.size - 1 must be at most 4294967295 "
     "(the members' seeds are seed + k, k < size; numpy's seed range), got 4294967290 + 8 - 1 = 4294967297"),
    (["population.seeds=[1,4294967296]"], "population.seeds must be null or a non-empty list of distinct "
     "non-negative integers up to 4294967295, e.g. [3, 5, 8], got [1, 4294967296]"),
    (["budget.games=1000000000000000000000000000000"], "budget.games must be at most 10,000,000,000,000 "
     "(64-bit game counters and random seeds derived from them), got 1000000000000000000000000000000"),
    (["algo.games_per_update=100000000000000", "algo.rollouts=1"], "algo.games_per_update must be at most "
     "10,000,000,000,000 (64-bit game counters and random seeds derived from them), got 100000000000000"),
    (["algo.lr=1e308"], "algo.lr must be a positive number up to 1e+30 (training runs in float32), "
     "got 1e+308"),
    (["algo=ppo", "algo.lr=1e308"], "algo.lr must be a positive number up to 1e+30 (training runs in "
     "float32), got 1e+308"),
    (["reward.win=1e308"], "reward.win must be a finite number in [-1e+30, 1e+30] (training runs in "
     "float32), got 1e+308"),
    (["reward.loss=-1e31"], "reward.loss must be a finite number in [-1e+30, 1e+30] (training runs in "
     "float32), got -1e+31"),
    (["algo=ppo", "algo.ent_coef=1e300"], "algo.ent_coef must be a number >= 0 up to 1e+30 (training runs in "
     "float32), got 1e+300"),
    (["population.vary.reward.win=[1,1e308]"], "population.vary.reward.win must be a non-empty list of "
     "distinct numbers, each a finite number in [-1e+30, 1e+30], got [1, 1e+308]"),
    (["population.size=1001"], "population.size must be at most 1,000 (members of one process), got 1001"),
    (["population.size=501", "population.vary.algo.lr=[1,2]"],  # with MEMBERS_MAX = 1,000 below
     "a population of 1,002 members (grid points x seeds) is more than 1,000, the most one process trains"),
    # An update plays `rollouts` equal batches: 4 games in 8 batches would be 8 games an update.
    (["algo.games_per_update=4", "algo.rollouts=8"], "algo.games_per_update must be a multiple of "
     "algo.rollouts (8): an update plays 8 equal batches, so 4 would play 8 games per update; use e.g. 8"),
    (["algo.games_per_update=100", "algo.rollouts=8"], "algo.games_per_update must be a multiple of "
     "algo.rollouts (8): an update plays 8 equal batches, so 100 would play 104 games per update; use e.g. "
     "96 or 104"),
    # Until when turned positions are learned, in a run that learns none.
    (["algo.symmetries_until=0.5"], "algo.symmetries_until is set but algo.symmetries is false: it says "
     "until when the turned positions are learned; add algo.symmetries=true, or drop it"),
])
def test_a_value_the_code_cannot_hold_is_refused_in_one_line(overrides, message, monkeypatch):
    monkeypatch.setattr(config, "MEMBERS_MAX", 1000)  # the grid's count, without a huge grid
    with pytest.raises(ConfigError) as e:
        validate(make_cfg(*overrides))
    assert str(e.value) == message


@pytest.mark.parametrize("overrides", [
    ["seed=4294967295"], ["seed=4294967288", "population.size=8", "budget.games=1"],
    ["budget.games=10000000000000"], ["algo.lr=1e30", "reward.win=1e30", "reward.loss=-1e30"],
    ["algo.games_per_update=8"], [],  # debug=tiny: 512 games in 8 batches of 64
])
def test_values_at_the_limits_pass(overrides):
    validate(make_cfg(*overrides))


def test_the_limits_are_what_the_code_holds():
    import lightning as L
    import torch

    L.seed_everything(SEED_MAX, verbose=False)  # the largest seed the run seeds everything with
    with pytest.raises(ValueError):
        L.seed_everything(SEED_MAX + 1, verbose=False)
    # A run resumed with another number of processes seeds its streams from the games played
    # (train/module.py: seed * 1_000_003 ^ games << 20); at the limits that still fits 64 bits.
    torch.Generator().manual_seed((SEED_MAX * 1_000_003) ^ ((GAMES_MAX + 2**20) << 20))
    assert torch.tensor([GAMES_MAX * 9], dtype=torch.int64).item() == GAMES_MAX * 9  # moves fit int64
    assert float(GAMES_MAX) == GAMES_MAX  # and float64 (metrics.csv) holds the counts exactly
    # The largest learning rate and reward are held by float32 (what diverges from there is
    # the numerical guard's to stop: tests/train/test_population_train.py poisons a member with 1e30).
    held = torch.tensor([config.VALUE_MAX, -config.VALUE_MAX], dtype=torch.float32)
    assert torch.isfinite(held).all() and abs(float(held[0]) / config.VALUE_MAX - 1) < 1e-6


REFUSE = ("import sys\nfrom ttt_research.__main__ import main\n"
          "try:\n    main()\nexcept SystemExit as e:\n"
          "    print(e.code, sorted(m for m in ('torch', 'lightning') if m in sys.modules))\n")


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_population_the_machine_cannot_hold_is_refused_before_torch(tmp_path):
    est = runspec.memory_estimate(make_cfg("population.size=100000"))
    free = config.available_memory()
    if free is None or free >= est.total:
        pytest.skip("no /proc/meminfo, or more than 1,300 GB available")
    out = subprocess.run([sys.executable, "-c", REFUSE, "population.size=100000",
                          f"hydra.run.dir={tmp_path / 'job'}"], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "2 []", out.stderr  # exit 2, and neither torch nor Lightning loaded
    (line,) = out.stderr.splitlines()
    assert re.fullmatch(
        r"error: a population of 100,000 members needs about 1307\.4 GB of memory \(100,000 x 13\.4 MB \+ "
        r"480\.0 MB for Python and torch\), more than the [0-9.]+ [GM]B this machine has available "
        r"\(MemAvailable\): at most [0-9,]+ members fit here \(population\.size, or the grid of "
        r"population\.vary\); train the rest in another job \(-m seed=\.\.\.\)", line), line
    assert not (tmp_path / "job").exists()


def test_the_memory_check_reads_what_the_machine_has(monkeypatch):
    monkeypatch.setattr(config, "available_memory", lambda: 2 * 2**30)
    # antirez's net and the old default's update: 8 batches of 2,048 (debug=tiny plays 512).
    full = ["net=mlp100", "algo.games_per_update=16384", "algo.rollouts=8"]
    # As O with mlp100: per member 5,500,000 B + 2,048 games x 120 B + 2,097 x 13.5 x 100 B, and
    # 2,809 weights (18 x 100 + 100, 100 x 9 + 9) x 16 B.
    est = runspec.memory_estimate(make_cfg("population.size=200", *full))
    per_member = 5_500_000 + 2048 * 120 + 2097 * 1350 + 2809 * 16
    assert (est.members, est.per_member, est.base) == (200, per_member, 480 * 2**20)
    with pytest.raises(ConfigError) as e:
        validate(make_cfg("population.size=200", *full))
    assert str(e.value) == (
        "a population of 200 members needs about 2.1 GB of memory (200 x 8.2 MB + 480.0 MB for Python and "
        "torch), more than the 2.0 GB this machine has available (MemAvailable): at most 190 members fit "
        "here (population.size, or the grid of population.vary); train the rest in another job (-m seed=...)")
    validate(make_cfg("population.size=190", *full))
    # One agent whose batch is too big gets the advice that fits it.
    with pytest.raises(ConfigError, match=r"^this run needs about 2\.7 GB .* play fewer games per update"):
        validate(make_cfg("net=mlp100", "algo.games_per_update=160000000", "algo.rollouts=8"))
    # A GPU run's batches live on the GPU; a machine without /proc/meminfo is not checked.
    config.check_memory(make_cfg("population.size=200", *full, "trainer.accelerator=gpu"))
    monkeypatch.setattr(config, "available_memory", lambda: None)
    validate(make_cfg("population.size=200", *full))


@pytest.mark.parametrize("algo", ["dqn", "alphazero"])
def test_an_algorithm_declares_the_bytes_of_the_replay_it_builds(algo):
    """The spec's record size (what the memory check counts) is what the ring really holds."""
    from ttt_research.train.run import build

    cfg = make_cfg(f"algo={algo}", "algo.capacity=1000", "algo.batch_size=10", "population.size=3")
    ring = build(cfg).algo.replay
    (buffer,) = runspec.algo_spec(cfg).buffers
    assert sum(getattr(ring, name).nbytes for name in ring.fields) == 3 * 1000 * buffer.record
    assert runspec.algo_spec(cfg).buffer_bytes(runspec.settings(cfg)) == 1000 * buffer.record


def test_a_replay_the_machine_cannot_hold_is_refused_with_its_size(monkeypatch):
    """Before: algo.capacity was not counted; algo=dqn algo.capacity=2000000000 was OOM-killed
    41 s in, its folder left holding only .lock."""
    monkeypatch.setattr(config, "available_memory", lambda: 2 * 2**30)
    with pytest.raises(ConfigError) as e:  # 28 B a transition, held twice: 56 x 40M = 2.1 GB
        validate(make_cfg("algo=dqn", "algo.capacity=40000000"))
    assert str(e.value) == (
        "this run needs about 2.6 GB of memory (1 x 2.1 GB: algo.capacity=40,000,000 replay transitions "
        "x 28 B, held twice (the replay and its checkpoint) = 2.1 GB a member, + 480.0 MB for Python and "
        "torch), more than the 2.0 GB this machine has available (MemAvailable): lower algo.capacity (at "
        "most 29,055,302 fit here)")
    validate(make_cfg("algo=dqn", "algo.capacity=29055302"))  # the advice holds: that fits
    with pytest.raises(ConfigError, match="at most 29,055,302 fit here"):
        validate(make_cfg("algo=dqn", "algo.capacity=29055303"))
    validate(make_cfg("algo=dqn"))  # the default replay (50,000) is far from it
    # A population's members each hold their own; trainer=ddp's processes each hold one agent's.
    with pytest.raises(ConfigError, match=r"^a population of 4 members needs about 4\.9 GB .*\(4 x 1\.1 GB:"):
        validate(make_cfg("algo=alphazero", "algo.capacity=12000000", "population.size=4"))
    with pytest.raises(ConfigError, match=r"^this run needs .* \(2 x 1\.1 GB: algo\.capacity=20,000,000 "):
        validate(make_cfg("algo=dqn", "algo.capacity=20000000", "trainer=ddp", "trainer.devices=2"))
    # On a GPU the replay is made on the host, then moved; its checkpoint is written from there.
    with pytest.raises(ConfigError, match=r"^this run needs about 2\.6 GB"):
        config.check_memory(make_cfg("algo=dqn", "algo.capacity=40000000", "trainer.accelerator=gpu"))


@pytest.mark.slow  # a command in a subprocess (~3 s)
def test_a_huge_replay_is_refused_before_torch_and_leaves_no_folder(tmp_path):
    """Before: algo=alphazero algo.capacity=3000000000 ended in an allocation traceback."""
    out = subprocess.run([sys.executable, "-c", REFUSE, "algo=alphazero", "algo.capacity=10000000000000",
                          f"hydra.run.dir={tmp_path / 'job'}"], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "2 []", out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("error: this run needs about 912696.6 GB of memory (1 x 912696.1 GB: "
                           "algo.capacity=10,000,000,000,000 replay positions x 49 B"), line
    assert "this machine has available (MemAvailable): lower algo.capacity (at most " in line
    assert not (tmp_path / "job").exists()


# The child's own peak, VmHWM of its memory map: ru_maxrss of RUSAGE_SELF keeps the peak of the
# process it was forked from across exec, so under a pytest that has grown to 800 MB it read 800 MB.
MEASURE = """
import re, sys
from ttt_research.bench import fit
fit(sys.argv[1:], threads=1)
print(int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024)
"""


@pytest.mark.slow  # two populations train an update each (~30 s)
@pytest.mark.parametrize("overrides", [["population.size=24", "budget.games=16384"],
                                       ["algo=ppo", "population.size=24", "budget.games=2048"]])
def test_the_estimate_is_close_to_the_measured_peak(overrides):
    out = subprocess.run([sys.executable, "-c", MEASURE, *overrides, "progress=false"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    peak = int(out.stdout.strip().splitlines()[-1])
    gpu = "2048" if "algo=ppo" in overrides else "16384"  # the algorithm's own update, not debug=tiny's
    est = runspec.memory_estimate(make_cfg(*overrides, f"algo.games_per_update={gpu}"))
    assert 0.8 < est.total / peak < 1.25, (est.total / 2**20, peak / 2**20)


# A whole run in one process (training, the exact evaluation of every member, the outputs), then
# its own peak: on another board the evaluation, not the update, holds the most.
MEASURE_RUN = """
import re, sys
from ttt_research.__main__ import main
sys.argv = ["ttt_research", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print(int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024)
"""


@pytest.mark.slow  # a population of 16 on 3,4,3: one update, then 16 exact evaluations (~15 s)
def test_another_boards_estimate_is_close_to_a_whole_runs_peak(tmp_path, own_positions_cache):
    overrides = ["game=mnk343", "population.size=16", "budget.games=16384", "progress=false"]
    out = subprocess.run([sys.executable, "-c", MEASURE_RUN, *overrides, f"hydra.run.dir={tmp_path / 'run'}"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    peak = int(out.stdout.strip().splitlines()[-1])
    est = runspec.memory_estimate(make_cfg(*overrides, "algo.games_per_update=16384"))
    assert 0.8 < est.total / peak < 1.25, (est.total / 2**20, peak / 2**20)


def test_another_board_counts_its_tables_and_an_alphazero_member_its_position_tables(monkeypatch):
    # The 4,4,4 estimate was tic-tac-toe's (0.49 GB for one agent) where a run peaks at 3.5 GB,
    # and AlphaZero's 30 members 0.96 GB where one member's whole-tree search holds ~7 GB.
    from ttt_research.population import spec as pop

    board = ["game=mnk", "game.m=4", "game.n=4", "game.k=4"]
    placements = 10_165_779  # 4x4 boards with as many X as O, or one more
    ttt, mnk = runspec.memory_estimate(make_cfg()), runspec.memory_estimate(make_cfg(*board))
    assert ttt.base == pop.BASE_BYTES and ttt.base_holds == "Python and torch"
    assert mnk.base == pop.BASE_BYTES + pop.BOARD_BYTES * placements
    assert 3 * 2**30 < mnk.total < 4 * 2**30
    assert mnk.per_member >= pop.BOARD_MEMBER_BYTES * placements
    zero = runspec.memory_estimate(make_cfg("algo=alphazero", *board))
    assert zero.per_member >= placements * 16 * 40  # its net's tables, its search's subtrees and policies
    table = runspec.memory_estimate(make_cfg("algo=qlearning", *board))
    assert table.per_member >= placements * 16 * 8  # a float32 value and count a (position, cell)
    monkeypatch.setattr(config, "available_memory", lambda: 24 * 2**30)
    with pytest.raises(ConfigError) as e:
        validate(make_cfg("algo=alphazero", *board, "population.size=30"))
    said = str(e.value)
    # one member measured: 10.26 GB at its peak (debug=tiny, 2026-12-06), the estimate 10.1 GB
    assert re.fullmatch(r"a population of 30 members needs about 20\d\.\d GB of memory \(30 x 6\.8 GB \+ "
                        r"3\.3 GB for Python, torch and the board's tables\), more than the 24\.0 GB this "
                        r"machine has available \(MemAvailable\): algo.test_simulations=0 \(no whole-tree "
                        r"search, most of each member's memory here\), or at most 3 members fit here .*", said), said
    validate(make_cfg("algo=alphazero", *board, "population.size=3"))
