"""Tracking and sweeps: offline W&B and TensorBoard runs hold the exact evaluation; a Hydra
multirun gives one run folder (and one W&B run) per job; an Optuna sweep returns the best
trial's objective; ``report`` tabulates and plots a sweep; the objective ranks agents as
documented; the SLURM launcher and the W&B sweep compose into valid configs."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.configs import TINY, make_cfg
from tests.helpers.wandb_files import (
    history,
    key,
    no_wandb_account,
    of_kind,
    run_config,
    step_metrics,
    wandb_records,
)
from ttt_research import report
from ttt_research.env import game
from ttt_research.env.solver import best_response, random_probs, solve
from ttt_research.errors import ConfigError
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.objectives import NAMES, direction, objective
from ttt_research.train.run import train
from ttt_research.train.validate import validate

ROOT = Path(__file__).parents[2]






def last_summary(records) -> dict:
    summary: dict = {}
    for r in of_kind(records, "summary"):
        summary.update({key(i): json.loads(i.value_json) for i in r.summary.update})
    return summary


# ---------------------------------------------------------------------- W&B, TensorBoard


def test_offline_wandb_run_holds_config_exact_metrics_and_artifacts(tmp_path, monkeypatch):
    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc: no key
    from ttt_research.train import tracking

    assert tracking.wandb_mode("auto") == "offline"
    run_dir = tmp_path / "run"
    rep = train(make_cfg("logger=wandb", "logger.wandb.tags=[tiny]"), run_dir)
    import wandb

    assert wandb.run is None  # finished: the next job gets a run of its own
    records = wandb_records(run_dir)
    (run,) = of_kind(records, "run")
    assert run.run.project == "ttt_research" and list(run.run.tags) == ["tiny"]
    config = run_config(records)
    assert config["budget"] == {"games": 2048} and config["net"]["hidden"] == [128, 128]  # the whole config
    summary = last_summary(records)
    evals = [h for h in history(records) if "eval/o_random_loss" in h]
    assert len(evals) == 2  # after updates 2 and 4: the curve, not only the end
    # The exact evaluation, as in eval.json (written there with 12 decimals): a win rate's
    # summary is its best and its last, a loss rate's its lowest and its last.
    wins = [h["eval/o_random_win"] for h in evals]
    losses = [h["eval/x_random_loss"] for h in evals]
    assert summary["eval/o_random_win"]["last"] == pytest.approx(rep["as_o"]["vs_random"]["win"], abs=1e-11)
    assert summary["eval/o_random_win"]["max"] == max(wins)
    assert summary["eval/x_random_loss"]["last"] == pytest.approx(rep["as_x"]["vs_random"]["loss"], abs=1e-11)
    assert summary["eval/x_random_loss"]["min"] == min(losses)
    assert summary["eval/optimal_move_rate"] == rep["optimal_move_rate"]  # the rest: the last
    assert summary["eval"]["as_o"] == rep["as_o"]  # the final report, whole
    assert summary["objective"] == pytest.approx(objective(rep, "o", "score"), abs=1e-11)
    # The policy as trained: logged at each evaluation, its lowest and last value kept.
    trained = [h["eval/trained_o_best_response"] for h in evals]
    assert summary["eval/trained_o_best_response"]["last"] == rep["as_trained"]["as_o"]["best_response"]
    assert summary["eval/trained_o_best_response"]["min"] == min(trained)
    assert summary["eval/trained_nashconv"]["last"] == rep["as_trained"]["nashconv"]
    # Every chart's x axis is games played, not Lightning's step.
    steps = step_metrics(records)
    assert all(steps[f"{p}/*"] == "train/games" for p in ("rollout", "train", "eval", "perf", "population"))
    assert steps["eval/o_random_win"] == "train/games"
    assert [h["train/games"] for h in evals] == [1024, 2048]
    (art,) = of_kind(records, "artifact")
    assert art.artifact.type == "model"
    assert sorted(m.path for m in art.artifact.manifest.contents) == ["eval.json", "last.ckpt", "policy.onnx"]
    assert list(run_dir.glob("wandb/offline-run-*/files/media/images/curves_*.png"))
    assert of_kind(records, "exit")


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_two_runs_with_different_games_per_update_line_up_on_games(tmp_path, monkeypatch):
    """512 and 1,024 games per update: Lightning's steps differ, the charts' x axis does not."""
    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    rows = {}
    for per_update, every in ((512, 2), (1024, 1)):
        run_dir = tmp_path / str(per_update)
        train(make_cfg("logger=wandb", f"algo.games_per_update={per_update}", f"eval_every={every}"), run_dir)
        records = wandb_records(run_dir)
        steps = step_metrics(records)
        assert steps["eval/*"] == steps["rollout/*"] == "train/games"
        rows[per_update] = [(h["trainer/global_step"], h["train/games"])
                            for h in history(records) if "eval/o_random_win" in h]
    assert [g for _, g in rows[512]] == [g for _, g in rows[1024]] == [1024, 2048]
    assert [s for s, _ in rows[512]] != [s for s, _ in rows[1024]]  # the steps W&B would have used


def test_wandb_mode_is_offline_without_key_or_server(monkeypatch, tmp_path):
    from ttt_research.train import tracking

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # a key, but nobody answers
    assert tracking.wandb_mode("auto") == "offline"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert tracking.wandb_mode("auto") == "disabled"
    assert tracking.wandb_mode("offline") == "offline"


@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_an_empty_wandb_mode_counts_as_unset(tmp_path):
    """`WANDB_MODE=` (set, empty) is "unset" to a user; wandb itself would stop with a
    pydantic traceback on it. The run goes offline (no key here) and finishes."""
    env = {**no_wandb_account(tmp_path), "WANDB_MODE": "", "WANDB_PROJECT": " "}
    out = subprocess.run([sys.executable, "-m", "ttt_research", *TINY, "logger=wandb",
                          f"hydra.run.dir={tmp_path / 'run'}"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "literal_error" not in out.stderr
    assert list((tmp_path / "run").glob("wandb/offline-run-*/run-*.wandb"))
    # A plain line like the run's others (it was in the log's "[time][module][INFO]" format).
    assert f"W&B offline (no API key or no server): {tmp_path / 'run'}/wandb/; upload later" in out.stdout
    assert not [line for line in (out.stdout + out.stderr).splitlines() if "W&B" in line and "[INFO]" in line]


@pytest.mark.slow  # a tiny run with W&B offline
def test_offline_asked_for_says_so_not_that_no_key_was_found(tmp_path, monkeypatch, capsys):
    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    train(make_cfg("logger=wandb", "logger.wandb.mode=offline"), tmp_path / "run")
    out = capsys.readouterr().out
    assert f"W&B offline (logger.wandb.mode=offline): {tmp_path / 'run'}/wandb/" in out
    assert "no API key" not in out


def test_tensorboard_run_holds_exact_metrics_hparams_and_curves(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rep = train(make_cfg("logger=tensorboard", "seat=x"), tmp_path)
    acc = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"images": 0, "scalars": 0})
    acc.Reload()
    win = acc.Scalars("eval/x_random_win")
    assert len(win) == 2 and win[-1].value == pytest.approx(rep["as_x"]["vs_random"]["win"], abs=1e-6)
    assert [w.step for w in win] == [1024, 2048]  # the step is games played, not the update
    assert [s.step for s in acc.Scalars("rollout/win_rate")] == [512, 1024, 1536, 2048]
    assert acc.Scalars("final/objective")[0].value == pytest.approx(objective(rep, "x"), abs=1e-6)
    assert acc.Images("curves")[0].width > 500
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["seat/side"].string_value == "x" and hparams["budget/games"].number_value == 2048


def test_missing_or_bad_logger_settings_are_one_line_config_errors(tmp_path):
    from ttt_research.train.tracking import make_loggers

    with pytest.raises(ConfigError, match="logger.wandb.mode must be one of auto, online, offline"):
        make_loggers(make_cfg("logger=wandb", "logger.wandb.mode=maybe"), tmp_path)
    with pytest.raises(ConfigError, match="optimized_metric must be one of score"):
        validate(make_cfg("optimized_metric=wins"))


# ---------------------------------------------------------------------- the objective


SOL = solve()
T = game.tables()


def agent(reward_as_o):
    """X: the best unbeatable player; O: reward-optimal vs random under ``reward_as_o``."""
    acts = SOL.optimal.to(torch.int8).argmax(-1)
    a, _ = best_response(random_probs(), game.X, (1.0, 0.0, -1.0), allowed=SOL.optimal)
    acts[T.mover == game.X] = a[T.mover == game.X]
    safe = reward_as_o == (1.0, 0.3, -2.0)  # antirez: the optimum is unbeatable anyway
    b, _ = best_response(random_probs(), game.O, reward_as_o, allowed=SOL.optimal if safe else None)
    acts[T.mover == game.O] = b[T.mover == game.O]
    return ev.evaluate_actions(acts)


def test_score_ranks_every_unbeatable_agent_above_a_riskier_one_that_wins_more():
    ceiling = agent((1.0, 0.3, -2.0))  # docs/facts.md: X 0.9948 / 0, O 0.9164 / 0, unbeatable
    risky = agent((1.0, 0.0, -1.0))  # docs/facts.md (zero_sum): O 0.9323 / 0.0074, beatable
    assert objective(ceiling, "x") == pytest.approx(0.9948, abs=5e-5)
    assert objective(ceiling, "both") == pytest.approx(0.9164, abs=5e-5)  # the worse seat
    assert objective(risky, "o", "win") == pytest.approx(0.9323, abs=5e-5)  # more wins...
    assert objective(risky, "o") == pytest.approx(0.9323 - 0.0074 - 1, abs=1e-4)  # ...but beatable
    assert objective(risky, "o") < 0 < objective(ceiling, "o")
    assert objective(risky, "both", "loss") == pytest.approx(0.0074, abs=5e-5)
    assert objective(risky, "o", "eval/o_worst_case") == -1.0
    assert direction("loss") == "minimize" and direction("score") == "maximize"
    assert len(NAMES) == 4 + 11 + 8  # and the population aggregates (test_population_train.py)
    assert direction("population_median_loss") == "minimize"
    assert direction("population_iqm_loss") == "minimize" and direction("population_iqm_win") == "maximize"
    # A single run is a population of one for the aggregate names.
    assert objective(risky, "o", "population_unbeatable_fraction") == 0.0
    assert objective(ceiling, "both", "population_unbeatable_fraction") == 1.0
    assert objective(risky, "o", "population_median_score") == objective(risky, "o")
    assert objective(risky, "o", "population_iqm_win") == objective(risky, "o", "win")
    # Wilson's lower end for 1 of 1: 1 / (1 + z^2) = 1 / 4.8415
    assert objective(ceiling, "both", "population_unbeatable_ci_low") == pytest.approx(0.2065, abs=1e-4)


# ---------------------------------------------------------------------- multirun and report


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A two-job multirun in parallel (joblib), each job logging to W&B with no account."""
    out = tmp_path_factory.mktemp("sweep")
    cmd = [sys.executable, "-m", "ttt_research", "-m", "net=mlp25,mlp100", "seed=1", *TINY,
           "logger=wandb", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={out}"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                         env=no_wandb_account(out / "home"), cwd=out)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_two_job_multirun_gives_two_run_folders_and_two_wandb_runs(sweep):
    evals = sorted(sweep.glob("*/eval.json"))
    assert [p.parent.name for p in evals] == ["0", "1"]
    ids, nets = set(), []
    for job in ("0", "1"):
        rep = json.loads((sweep / job / "eval.json").read_text())
        assert set(rep) >= {"as_x", "as_o", "optimal_move_rate"}
        overrides = yaml.safe_load((sweep / job / ".hydra" / "overrides.yaml").read_text())
        nets.append(next(o for o in overrides if o.startswith("net=")))
        records = wandb_records(sweep / job)
        (run,) = of_kind(records, "run")
        assert nets[-1] in run.run.display_name  # named after the job's overrides
        assert run_config(records)["choices"]["net"] == nets[-1].removeprefix("net=")  # the option's name
        assert run.run.run_group == str(sweep)  # one group per sweep
        assert last_summary(wandb_records(sweep / job))["eval/o_random_win"]["last"] == pytest.approx(
            rep["as_o"]["vs_random"]["win"], abs=1e-11)
        ids.add(run.run.run_id)
    assert sorted(nets) == ["net=mlp100", "net=mlp25"] and len(ids) == 2


@pytest.mark.slow
def test_dashboard_of_a_sweep_filters_its_group_and_plots_its_varied_group(sweep):
    from ttt_research import dashboard

    pytest.importorskip("wandb_workspaces")
    assert dashboard.swept_params(sweep) == ["choices.net"]  # net=mlp25,mlp100; seed=1 is no axis
    res = subprocess.run([sys.executable, "-m", "ttt_research.dashboard", "--entity", "me", "--sweep",
                          str(sweep), "--print"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    (section,) = [s for s in json.loads(res.stdout)["sections"] if s["name"] == "Sweep"]
    assert section["panels"][0]["metrics"] == ["choices.net", "objective"]
    ws = dashboard.build("me", "ttt_research", str(sweep), ["choices.net"])
    assert str(ws.runset_settings.filters) == f"Metric(\"Group\") == '{sweep}'"  # its jobs only


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_report_tabulates_and_plots_a_sweep(sweep):
    res = subprocess.run([sys.executable, "-m", "ttt_research.report", str(sweep)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    md = (sweep / "report.md").read_text()
    assert "| net | seeds | O win vs random |" in md  # only the override that differs
    with open(sweep / "report.csv", newline="") as f:
        rows = {r["net"]: r for r in csv.DictReader(f)}
    for job in ("0", "1"):
        rep = json.loads((sweep / job / "eval.json").read_text())
        overrides = yaml.safe_load((sweep / job / ".hydra" / "overrides.yaml").read_text())
        net = next(o for o in overrides if o.startswith("net=")).split("=")[1]
        row = rows[net]
        assert float(row["o_random_win_iqm"]) == pytest.approx(rep["as_o"]["vs_random"]["win"], abs=1e-12)
        assert float(row["objective_mean"]) == pytest.approx(objective(rep, "o"), abs=1e-12)
        assert row["seeds"] == "1" and row["unbeatable"] == str(int(objective(rep, "o") >= 0))
        seed = yaml.safe_load((sweep / job / ".hydra" / "config.yaml").read_text())["seed"]
        assert f"| {net} | {seed} | {rep['as_o']['vs_random']['win']:.4f} |" in md
    import matplotlib.image as mpimg

    png = mpimg.imread(str(sweep / "report.png"))
    assert png.shape[0] > 400 and png.shape[1] > 400 and png.std() > 0.01  # a drawn plot


def fake_run(path: Path, seed: int, lr: str, o_loss: float, worst: list[float], *extra: str):
    """A run folder as training leaves it: eval.json, Hydra's record, metrics.csv."""
    (path / ".hydra").mkdir(parents=True)
    side = {"vs_random": {"win": 0.9 - o_loss, "loss": o_loss, "tie": 0.1},
            "vs_perfect": {"win": 0.0, "loss": 0.0, "tie": 1.0}, "worst_case": "loss" if o_loss else "draw"}
    rep = {"as_x": side, "as_o": side, "optimal_move_rate": 0.9, "decision_points": 500}
    (path / "eval.json").write_text(json.dumps(rep))
    overrides = [f"seed={seed}", f"algo.lr={lr}", "net=mlp25", *extra]
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"seed": seed, "seat": {"side": "o"}, "optimized_metric": "score", "reward": {"tie": 0.3}}))
    with open(path / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "train/games", "eval/o_worst_case", "eval/o_random_win", "eval/o_random_loss"])
        for i, v in enumerate(worst):
            w.writerow([i, 1000 * (i + 1), v, 0.5 + 0.1 * i, 0.1 / (i + 1)])


def test_report_statistics_across_seeds_and_games_to_unbeatable_for_good(tmp_path):
    fake_run(tmp_path / "0", 0, "0.1", 0.0, [-1, 0, -1, 0, 0])  # safe for good from 4,000 games
    fake_run(tmp_path / "1", 1, "0.1", 0.0, [0, 0, 0, 0, 0])  # from the first evaluation
    fake_run(tmp_path / "2", 0, "0.3", 0.02, [0, 0, -1, -1, -1])  # lost it again: never
    fake_run(tmp_path / "3", 0, "0.3", 0.02, [0, 0, 0, 0, -1], "reward.tie=0.5")
    files = report.report(tmp_path)
    with open(files["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    # reward.tie: overridden in one run only; the others show the value they ran with.
    assert [(r["algo.lr"], r["reward.tie"], r["seeds"]) for r in rows] == [
        ("0.1", "0.3", "2"), ("0.3", "0.3", "1"), ("0.3", "0.5", "1")]
    assert float(rows[0]["o_random_win_iqm"]) == pytest.approx(0.9) and rows[0]["unbeatable"] == "2"
    assert float(rows[1]["o_random_loss_max"]) == pytest.approx(0.02) and rows[1]["unbeatable"] == "0"
    assert float(rows[0]["unbeatable_fraction"]) == 1.0 and float(rows[1]["unbeatable_ci_high"]) < 0.8
    assert float(rows[0]["unbeatable_since_games_median"]) == 2500.0  # median of 4,000 and 1,000
    assert float(rows[0]["first_unbeatable_games_median"]) == 1500.0  # of 2,000 and 1,000
    assert float(rows[1]["first_unbeatable_games_median"]) == 1000.0  # safe at first, then lost
    md = files["md"].read_text()
    assert ("| 0.1 | 0.3 | 0, 1 | 0.9000 | 0.0000 | 0.9000 | 2 of 2: 1.00 [0.34, 1.00] | 1.5k (2 of 2) "
            "| 2.5k (2 of 2) |") in md
    assert "| 0.3 | 0.3 | 0 | 0.8800 | 0.0200 | 0.9000 | 0 of 1: 0.00 [0.00, 0.79] | 1.0k | never |" in md
    assert "net" not in md.splitlines()[2]  # the same in every run: not a column
    with open(files["runs"], newline="") as f:
        assert len(list(csv.DictReader(f))) == 4


@pytest.mark.parametrize("make,needle", [
    (lambda d: d / "missing", "no such directory"),
    (lambda d: d, "no runs under"),
])
def test_report_on_a_bad_dir_is_one_line_and_exit_2(tmp_path, make, needle):
    res = subprocess.run([sys.executable, "-m", "ttt_research.report", str(make(tmp_path))],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


# ---------------------------------------------------------------------- Optuna


@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_two_trial_optuna_sweep_finishes_and_reports_the_best_trial(tmp_path):
    cmd = [sys.executable, "-m", "ttt_research", "-m", "hparams_search=reinforce_optuna",
           "hydra.sweeper.n_trials=2", *TINY, "algo.games_per_update=512", "algo.rollouts=4",
           f"hydra.sweep.dir={tmp_path}"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                         env=no_wandb_account(tmp_path / "home"))
    assert res.returncode == 0, res.stderr[-3000:]
    best = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    # The searched keys, less those fixed on the command line (games_per_update, rollouts).
    assert set(best["best_params"]) == {"algo.lr", "algo.momentum", "algo.temperature",
                                        "algo.temperature_final", "reward.tie", "reward.loss"}
    scores = {}
    for job in ("0", "1"):
        rep = json.loads((tmp_path / job / "eval.json").read_text())
        overrides = yaml.safe_load((tmp_path / job / ".hydra" / "overrides.yaml").read_text())
        scores[job] = (objective(rep, "o", "score"), overrides)
    top, overrides = max(scores.values(), key=lambda s: s[0])
    assert best["best_value"] == pytest.approx(top, abs=1e-9)  # each trial returned its exact score
    assert f"algo.lr={best['best_params']['algo.lr']}" in overrides
    assert 0.3 <= best["best_params"]["algo.lr"] <= 6.0
    assert 0.0 <= best["best_params"]["algo.momentum"] <= 0.95


@pytest.mark.slow  # a whole command in a subprocess: python -m pytest -m 'not slow' skips it
def test_optuna_ranks_population_trials_on_their_unbeatable_share_wilson_low_end(tmp_path):
    cmd = [sys.executable, "-m", "ttt_research", "-m", "hparams_search=reinforce_population",
           "hydra.sweeper.n_trials=2", *TINY, "population.size=3", "optimized_metric=population_iqm_win",
           f"hydra.sweep.dir={tmp_path}"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                         env=no_wandb_account(tmp_path / "home"))
    assert res.returncode == 0, res.stderr[-3000:]
    best = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert set(best["best_params"]) == {"algo.lr", "algo.lr_final", "algo.temperature_final"}
    values = []
    for job in ("0", "1"):  # each trial's value: the IQM of its 3 members' O wins (3: their mean)
        members = json.loads((tmp_path / job / "population.json").read_text())["members"]
        assert [m["seed"] for m in members] == [0, 1, 2]
        values.append(sum(m["eval"]["as_o"]["vs_random"]["win"] for m in members) / 3)
    assert best["best_value"] == pytest.approx(max(values), abs=1e-12)


def test_ppo_optuna_preset_searches_ppo_with_a_seeded_tpe():
    cfg = make_cfg("hparams_search=ppo_optuna", hydra=True)
    sweeper = cfg.hydra.sweeper
    assert cfg.algo._target_.endswith("PPO") and cfg.seat.side == "both"
    assert sweeper._target_.endswith("OptunaSweeper") and sweeper.direction == "maximize"
    assert sweeper.sampler._target_ == "optuna.samplers.TPESampler" and sweeper.sampler.seed == 0
    searched = {"algo.lr", "algo.ent_coef", "algo.clip", "algo.games_per_update", "reward.loss"}
    assert searched <= set(sweeper.params)
    validate(cfg)


# ---------------------------------------------------------------------- beyond one machine


def test_slurm_launcher_example_composes_on_submitit():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    cfg = make_cfg("hydra/launcher=slurm", hydra=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("submitit_launcher.SlurmLauncher")
    assert launcher.cpus_per_task == 1 and launcher.timeout_min == 30  # one torch thread a run


def test_wandb_sweep_drives_the_hydra_entry_point_with_valid_overrides():
    spec = yaml.safe_load((ROOT / "experiments" / "wandb_sweep.yaml").read_text())
    assert spec["command"][:4] == ["${env}", "${interpreter}", "-m", "ttt_research"]
    assert "${args_no_hyphens}" in spec["command"] and "logger=wandb" in spec["command"]
    assert spec["metric"] == {"name": "objective", "goal": "maximize"}  # what publish() logs
    fixed = [a for a in spec["command"] if "=" in a and not a.startswith(("$", "hydra."))]
    for extreme in (0, -1):  # every parameter, at both ends of its range, is a valid override
        overrides = []
        for name, p in spec["parameters"].items():
            values = p.get("values") or [p["min"], p["max"]]
            overrides.append(f"{name}={values[extreme]}")
        validate(make_cfg(*fixed, *overrides))
