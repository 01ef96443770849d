"""The benchmark harness runs end to end and reports every figure of the contract.

Speed is never asserted here (the machine is shared): only that each figure is produced,
is a number of the right kind, that a same-run ratio is computed from the two numbers measured
in the run, and that bad arguments are refused in one line. antirez's C ttt-rl is stood in for
by a small script that speaks its command line and stdin dialogue at a known, slow speed."""

import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from ttt_research.baselines import antirez as bench_antirez
from ttt_research.bench import main

KEYS = {"env_games_per_s", "reinforce_games_per_s", "ppo_steps_per_s", "time_to_unbeatable_s",
        "eval_s", "move_latency_ms", "device", "threads", "versions", "host"}
FAKE_SLEEP_S = 0.4

# Speaks ttt-rl's interface: N training games with a progress line every 10,000, then one game
# read from stdin (a square per line) and "Play again?". Unlike the real program it exits 3 at
# the end of input instead of looping forever, so a bench that feeds no answers fails fast.
FAKE_TTT = f"""#!{sys.executable}
import sys, time
games = int(sys.argv[1])
print(f"Training neural network against {{games}} random games...")
time.sleep({FAKE_SLEEP_S})
for k in range(10000, games + 1, 10000):
    print(f"Games: {{k}}, Wins: {{k // 2}} (50.0%), Losses: 0 (0.0%), Ties: {{k // 2}} (50.0%)")
print("\\nTraining complete!")
board = set()
for line in sys.stdin:
    if len(board) == 5:  # the game is over: this line answers "Play again? (y/n)"
        sys.exit(0 if line.strip() != "y" else 4)
    board.add(line.strip())
sys.exit(3)
"""


@pytest.fixture
def fake_ttt(tmp_path: Path) -> Path:
    path = tmp_path / "ttt"
    path.write_text(FAKE_TTT)
    path.chmod(0o755)
    return path


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ttt_research.bench", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_quick_bench_reports_every_key_and_the_same_run_ratio(fake_ttt):
    r = bench("--quick", "--json", "--reinforce-games", "4096", "--ppo-games", "4096", "--repeats", "2",
              "--compare", "antirez", "--antirez-bin", str(fake_ttt), "--antirez-games", "20000",
              "--population-sizes", "3", "--population-games", "1024", "--parallel-sizes", "2")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)  # stdout is pure JSON: progress goes to stderr
    assert KEYS <= set(res)
    for key in ("env_games_per_s", "reinforce_games_per_s", "ppo_steps_per_s", "eval_s"):
        assert isinstance(res[key], float) and math.isfinite(res[key]) and res[key] > 0, key
    # 4,096 PPO games are far too few to become unbeatable: the figure is null, not a guess.
    ttu = res["time_to_unbeatable_s"]
    assert ttu is None or ttu > 0
    assert set(res["move_latency_ms"]) == {"torch", "onnxruntime"}
    assert all(v > 0 for v in res["move_latency_ms"].values())
    assert res["device"] == "cpu" and res["versions"]["torch"]
    assert "bench: training: flagship PPO" in r.stderr
    # alphazero's self-play search: microseconds a game, one thread, the batch's split.
    assert res["search_us_per_game"] > 0 and res["search_setting"] == {"batch": 4096, "simulations": 16,
                                                                        "threads": 1}
    assert 0 < res["search_phases_ms"]["subtrees"] < res["search_us_per_game"] * 4096 / 1e3
    # The exact NashConv of one policy, its whole report, 100 reports: figures, not targets.
    assert all(res[k] > 0 for k in ("nashconv_ms", "nashconv_report_ms", "nashconv_reports_100_ms"))
    # The whole command's floor: whole processes, the 1-game run beside Lightning's import.
    assert res["command_floor_s"] == pytest.approx(res["command_1game_s"] - res["import_lightning_s"])
    assert 0 < res["refusal_s"] < res["command_1game_s"] and 0 < res["help_s"] < res["command_1game_s"]
    # The host and the torch threads each figure ran with (the configs say 1 per run).
    assert res["host"]["cpu"] and res["host"]["logical_cpus"] == os.cpu_count()
    assert res["threads"]["reinforce"] == 1 and res["threads"]["ppo"] == 1

    # The C side: its own measured time, and the ratio of the two medians of this run.
    c = res["compare"]["antirez"]
    ours = res["details"]["reinforce_games_per_s_per_run"]
    assert c["games"] == 20000 and c["runs"] == 2 and len(ours) == 2 and c["threads"] == 1
    assert len(c["games_per_s_per_run"]) == 2
    assert FAKE_SLEEP_S <= c["seconds"] < FAKE_SLEEP_S + 30
    assert c["games_per_s"] == pytest.approx(20000 / c["seconds"], rel=1e-12)
    assert c["seconds"] == pytest.approx(statistics.median(20000 / g for g in c["games_per_s_per_run"]))
    assert res["reinforce_games_per_s"] == statistics.median(ours)
    assert c["ratio_reinforce"] == pytest.approx(statistics.median(ours) / c["games_per_s"], rel=1e-12)
    # Populations: all members' games (steps) per second, and ratios measured in this run.
    pop_rf, pop_ppo = res["population_reinforce_games_per_s"], res["population_ppo_steps_per_s"]
    assert set(pop_rf) == set(pop_ppo) == {"3"} and pop_rf["3"] > 0 and pop_ppo["3"] > 0
    ratios = res["population_ratios"]
    assert ratios["reinforce_3_vs_single"] == pytest.approx(pop_rf["3"] / res["reinforce_games_per_s"])
    assert ratios["reinforce_3_vs_antirez"] == pytest.approx(pop_rf["3"] / c["games_per_s"])
    assert ratios["ppo_3_vs_single"] == pytest.approx(pop_ppo["3"] / res["ppo_steps_per_s"])
    assert "bench: population of 3 reinforce, run 2/2" in r.stderr
    # A population of 2 against the same 2 agents as single runs side by side: the same work.
    for algo in ("reinforce", "ppo"):
        p = res["population_vs_parallel_singles"][algo]["2"]
        assert p["games_per_agent"] == 1024 and p["singles"]["workers"] == 2
        assert p["population"]["done"] == p["singles"]["done"] > 0, algo
        assert p["ratio"] == pytest.approx(p["population"]["rate"] / p["singles"]["rate"]), algo
        assert p["singles"]["rate"] == pytest.approx(p["singles"]["done"] / p["singles"]["wall_s"]), algo
    # Interleaved, first in turn: ours then C in round 1, C then ours in round 2.
    order = re.findall(r"^bench: ((?:reinforce|antirez) run \d/2):", r.stderr, re.MULTILINE)
    assert order == ["reinforce run 1/2", "antirez run 1/2", "antirez run 2/2", "reinforce run 2/2"]


def test_bench_table_prints_only_ratios_measured_in_the_run():
    res = {"device": "cpu", "host": {"cpu": "Test CPU 9000", "logical_cpus": 2},
           "threads": {"engine": 2, "reinforce": 2, "ppo": 2}, "versions": {"torch": "2.x"},
           "env_games_per_s": 1e7, "details": {"env_best_batch": 65536,
                                                "reinforce_games_per_s_per_run": [200_000.0]},
           "reinforce_games_per_s": 200_000.0, "ppo_steps_per_s": 100_000.0, "time_to_unbeatable_s": 2.0,
           "eval_s": 0.01, "move_latency_ms": {"torch": 0.02, "onnxruntime": 0.007}}
    from ttt_research.bench import format_table

    text = format_table(res)
    assert "Test CPU 9000, 2 logical CPU(s)" in text and "REINFORCE 2" in text
    # No run of the C program: its constant is shown, labelled with its host, never divided by.
    assert "~89,000 (measured on the project's 2-core development host, 2026-11-30)" in text
    row = next(line for line in text.splitlines() if line.startswith("reinforce_games_per_s"))
    assert not re.search(r"\d(\.\d+)?x", row), row
    res["compare"] = {"antirez": {"games": 300_000, "runs": 1, "seconds": 4.0, "games_per_s": 75_000.0,
                                  "games_per_s_per_run": [75_000.0], "ratio_reinforce": 200_000 / 75_000,
                                  "threads": 1, "timed": "the process"}}
    text = format_table(res)
    assert "antirez's C ttt-rl in this run (1 thread): 75,000; ours 2.67x" in text
    assert "89,000" not in text
    # A population against the same agents as single runs side by side, both measured in this run.
    res["population_vs_parallel_singles"] = {"ppo": {"16": {
        "games_per_agent": 20_480, "ratio": 0.75,
        "population": {"done": 1_500_000, "wall_s": 20.0, "rate": 75_000.0},
        "singles": {"done": 1_500_000, "wall_s": 15.0, "rate": 100_000.0, "workers": 2}}}}
    assert ("  ppo       N=16         75,000 vs      100,000 steps/s: 0.75x (20.0 s vs 15.0 s, 20,480 games "
            "an agent)") in format_table(res).splitlines()


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_bench_refuses_bad_arguments_in_one_line():
    r = bench("--reinforce-games", "0")
    assert r.returncode == 2
    assert r.stderr.strip() == "error: --reinforce-games must be a positive integer, got 0"


def run_main(capsys, *args: str) -> tuple[int, str]:
    rc = main(list(args))
    return rc, capsys.readouterr().err.strip()


def test_bench_refuses_a_missing_or_broken_antirez_binary_in_one_line(capsys, tmp_path, fake_ttt):
    missing = tmp_path / "nowhere" / "ttt"
    assert run_main(capsys, "--compare", "antirez", "--antirez-bin", str(missing)) == (
        2, f"error: --antirez-bin {missing}: no such file")
    plain = tmp_path / "plain"
    plain.write_text("not a program")
    assert run_main(capsys, "--compare", "antirez", "--antirez-bin", str(plain)) == (
        2, f"error: --antirez-bin {plain} is not an executable file")
    # Runs, but is not ttt-rl: exits at once with no training output.
    true = shutil.which("true")
    assert run_main(capsys, "--compare", "antirez", "--antirez-bin", true) == (
        2, f"error: --antirez-bin {true} did not print ttt-rl's training progress for 10,000 games "
           "(is it antirez's ttt-rl?)")
    assert run_main(capsys, "--compare", "antirez") == (
        2, "error: --compare antirez needs one of --antirez-bin PATH or --antirez-src ttt.c")
    assert run_main(capsys, "--antirez-bin", str(fake_ttt)) == (
        2, "error: --antirez-bin and --antirez-src are used only with --compare antirez")
    assert run_main(capsys, "--compare", "antirez", "--antirez-src", str(tmp_path / "ttt.c")) == (
        2, f"error: --antirez-src {tmp_path / 'ttt.c'}: no such file")


def test_antirez_run_feeds_the_game_and_times_the_process(fake_ttt, monkeypatch):
    seconds = bench_antirez.run_once(fake_ttt, 30_000)
    assert FAKE_SLEEP_S <= seconds < FAKE_SLEEP_S + 30
    monkeypatch.setattr(bench_antirez, "ANSWERS", "0\n")  # input ends mid-game: the stand-in exits 3
    with pytest.raises(bench_antirez.AntirezError, match="exited with status 3"):
        bench_antirez.run_once(fake_ttt, 10_000)


def test_antirez_src_without_a_compiler_is_one_line(tmp_path, monkeypatch):
    src = tmp_path / "ttt.c"
    src.write_text("int main(void) { return 0; }\n")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(bench_antirez.AntirezError, match=r"^--antirez-src needs a C compiler"):
        bench_antirez.build(src, tmp_path)


# antirez's ttt.c, never in the repo: $TTT_ANTIREZ_SRC, or the copy beside the checkout in the project's CI.
ANTIREZ_SRC = Path(os.environ.get("TTT_ANTIREZ_SRC") or
                   Path(__file__).resolve().parents[2].parent / "shared/reference/antirez-ttt-rl/ttt.c")


@pytest.mark.slow
@pytest.mark.skipif(not ANTIREZ_SRC.is_file(), reason="antirez's ttt.c is not beside the checkout")
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_real_antirez_program_builds_and_is_timed(tmp_path):
    binary = bench_antirez.build(ANTIREZ_SRC, tmp_path)
    bench_antirez.check_binary(binary)  # its output and stdin dialogue are as this module expects
    seconds = bench_antirez.run_once(binary, 50_000)
    assert 0 < seconds < 120


def test_the_floor_is_the_difference_of_the_medians_of_alternating_whole_processes(monkeypatch):
    from ttt_research.bench import floor

    order = []
    times = {"run": iter([7.0, 6.0, 9.0]), "lightning": iter([9.9, 5.0, 4.0, 4.5]),
             "frozen": iter([3.0, 4.0, 3.5])}

    def seconds(args, cwd):
        kind = {tuple(floor.LIGHTNING): "lightning", tuple(floor.FROZEN): "frozen"}.get(tuple(args))
        if kind is None:
            kind = "run" if "seed=1" in args else args[-1]
        order.append(kind)
        if kind == "run":
            assert any(a.startswith("hydra.run.dir=") for a in args)  # each run in its own folder
        if args[:2] != ["-m", "ttt_research"] and kind not in times:  # another command's start
            return 0.7 if args[1:] == ["ttt_research.evaluate", "--help"] else 0.2
        return next(times[kind]) if kind in times else {"--help": 0.9, "seed=-1": 0.5}[kind]

    monkeypatch.setattr(floor, "_seconds", seconds)
    res = floor.bench_floor(3, log=lambda m: None)
    # a warm-up import first (not counted), then the three kinds in turn, each going first in turn
    assert order[:10] == ["lightning", "run", "lightning", "frozen", "lightning", "frozen", "run",
                          "frozen", "run", "lightning"]
    assert res["command_1game_s"] == 7.0 and res["import_lightning_s"] == 4.5
    assert res["command_floor_s"] == pytest.approx(2.5)
    assert res["import_lightning_frozen_s"] == 3.5 and res["command_floor_frozen_s"] == pytest.approx(3.5)
    assert (res["help_s"], res["refusal_s"]) == (0.9, 0.5)
    assert "command_floor_s" in floor.format_line(res) and "--help 0.90 s" in floor.format_line(res)
    # Every command's --help and refusal (issue 43): those at 0.5 s or over are named.
    assert set(res["start_s"]) == set(floor.COMMANDS)
    assert res["start_s"]["ttt_research"] == {"help": 0.9, "refusal": 0.5}
    assert res["start_s"]["ttt_research.report"] == {"help": 0.2, "refusal": 0.2}
    slow = ["train --help 0.90 s", "train refusal 0.50 s", "evaluate --help 0.70 s"]
    assert floor.slow_starts(res["start_s"]) == slow
    assert floor.format_line(res).endswith("every command's --help and refusal within 0.90 s, over 0.5 s: "
                                           + ", ".join(slow))


def test_a_bench_child_reports_its_own_peak_not_its_parents():
    """``bench/peak.py``: a child started from a parent holding 400 MB more than it needs
    reports its own peak (ru_maxrss would say the parent's; the per-board figures did)."""
    held = bytearray(400_000_000)  # noqa: F841 (held while the child runs)
    code = "from ttt_research.bench.peak import peak_gb; print(peak_gb())"
    child = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout)
    from ttt_research.bench.peak import peak_gb
    assert 0 < child < 0.3 < peak_gb()
