"""The benchmark harness runs end to end and reports every figure of the contract.

Speed is never asserted here (the machine is shared): only that each figure is produced,
is a number of the right kind, and that bad arguments are refused in one line."""

import json
import math
import subprocess
import sys

KEYS = {"env_games_per_s", "reinforce_games_per_s", "ppo_steps_per_s", "time_to_unbeatable_s",
        "eval_s", "move_latency_ms", "device", "threads", "versions"}


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ttt_research.bench", *args],
                          capture_output=True, text=True, timeout=600)


def test_quick_bench_reports_every_key():
    r = bench("--quick", "--json", "--reinforce-games", "4096", "--ppo-games", "4096")
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


def test_bench_refuses_bad_arguments_in_one_line():
    r = bench("--reinforce-games", "0")
    assert r.returncode == 2
    assert r.stderr.strip() == "error: --reinforce-games must be a positive integer, got 0"
