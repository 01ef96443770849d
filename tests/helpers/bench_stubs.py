"""Every speed figure of ``bench`` stubbed, for tests of the bench's own bookkeeping (warnings,
the table, the compare wiring): each returns fixed figures at once."""

from __future__ import annotations

import copy


def stub_figures(monkeypatch, bench, antirez: bool = True, said: list | None = None) -> None:
    """Replace ``bench``'s figure functions; ``antirez``: REINFORCE's comes with a same-run C
    block (as ``--compare antirez`` gives it); ``said``: the engine appends "engine" to it when run."""
    def env(*a):
        if said is not None:
            said.append("engine")
        return {"env_games_per_s": 1e7, "env_best_batch": 65536}

    reinforce = {"reinforce_games_per_s": 2e5, "reinforce_threads": 1, "reinforce_games_per_s_per_run": [2e5]}
    if antirez:
        reinforce["antirez"] = {"games": 300_000, "runs": 1, "seconds": 4.0, "games_per_s": 75_000.0,
                                "games_per_s_per_run": [75_000.0], "ratio_reinforce": 2.67, "threads": 1,
                                "timed": "t"}
    monkeypatch.setattr(bench, "bench_env", env)
    monkeypatch.setattr(bench, "bench_reinforce", lambda *a: copy.deepcopy(reinforce))  # a run adds to it
    monkeypatch.setattr(bench, "bench_ppo", lambda *a: {
        "ppo_steps_per_s": 1e5, "time_to_unbeatable_s": None, "details_ppo_unbeatable_s": [None],
        "ppo_threads": 1})
    monkeypatch.setattr(bench, "bench_eval", lambda *a: {"eval_s": 0.01})
    monkeypatch.setattr(bench, "bench_search", lambda *a, **k: {
        "search_us_per_game": 20.0, "search_phases_ms": {"tables": 7.0, "subtrees": 10.0},
        "search_setting": {"batch": 4096, "simulations": 16, "threads": 1}})
    monkeypatch.setattr(bench, "bench_nashconv", lambda *a, **k: {
        "nashconv_ms": 5.0, "nashconv_report_ms": 20.0, "nashconv_reports_100_ms": 300.0})
    monkeypatch.setattr(bench, "bench_tournament", lambda *a, **k: {
        "tournament_100_s": 1.5, "tournament_phases_s": {"cross_play": 1.2, "ratings": 0.3},
        "tournament_setting": {"agents": 100, "threads": 1}})
    monkeypatch.setattr(bench, "bench_latency",
                        lambda *a: {"move_latency_ms": {"torch": 0.02, "onnxruntime": 0.01}})
    monkeypatch.setattr(bench.floor, "bench_floor", lambda *a, **k: {
        "command_floor_s": 1.2, "command_1game_s": 6.0, "import_lightning_s": 4.8, "help_s": 0.9,
        "refusal_s": 0.5, "command_floor_frozen_s": 2.2, "import_lightning_frozen_s": 3.8})
    monkeypatch.setattr(bench, "bench_boards", lambda *a, **k: {"3,4,3": {
        "build_s": 0.3, "build_positions_s": 0.2, "load_s": 0.03, "tables_s": 0.1, "load_peak_gb": 0.27,
        "prepare_s": 0.13, "eval_s": 0.57, "eval_peak_gb": 0.35, "per_run": {}}})
    monkeypatch.setattr(bench, "bench_board_training", lambda *a, **k: {"3,4,3": {
        "reinforce": {"games_per_s": 6e4, "train_s": 2.0, "eval_s": 0.2, "peak_gb": 0.5, "games": 131_072},
        "ppo": {"games_per_s": 1e4, "steps_per_s": 4e4, "train_s": 3.0, "eval_s": 0.15, "peak_gb": 0.5,
                "games": 32_768}}})
    pair = {"games_per_agent": 131_072, "ratio": 0.5,
            "population": {"done": 2_097_152, "train_s": 2.0, "wall_s": 2.1, "rate": 998_643.8},
            "singles": {"done": 2_097_152, "wall_s": 1.05, "rate": 1_997_287.6, "workers": 2}}
    monkeypatch.setattr(bench.parallel, "bench_parallel", lambda *a, **k: {
        "reinforce": {"16": copy.deepcopy(pair)}, "ppo": {"16": copy.deepcopy(pair)}})
