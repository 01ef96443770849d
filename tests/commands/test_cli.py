"""Command lines: evaluate on ONNX files (good and bad), the main job, the benchmark."""

import json
import subprocess
import sys

import pytest
import yaml

from tests.helpers.onnx_models import preference_model
from tests.helpers.scripts import SCRIPTS
from ttt_research.evaluation import exact as ev


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_evaluate_json_on_a_contract_onnx_policy(tmp_path):
    pref = [3, 1, 3, 1, 5, 1, 3, 1, 3]
    path = preference_model(pref, tmp_path / "centre_first.onnx")
    out = run("ttt_research.evaluate", str(path), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"as_x", "as_o", "optimal_move_rate", "optimal_move_rate_all", "decision_points",
                           "nashconv", "policy"}
    assert report.pop("nashconv") == 2.0 and report.pop("policy")["nashconv"] == 2.0  # the greedy policy's
    # The same preferences as a torch function give the same exact report.
    import torch

    p = torch.tensor(pref, dtype=torch.float32)
    assert report == ev.evaluate_policy(lambda v: p.expand(v.shape[0], 9) - 1e9 * v.abs())
    # Centre-then-corners is beatable from both seats: a best response finds the fork.
    assert report["as_x"]["worst_case"] == "loss" or report["as_o"]["worst_case"] == "loss"
    # The table form prints the same figures.
    table = run("ttt_research.evaluate", str(path))
    assert table.returncode == 0
    assert f"{report['as_o']['vs_random']['win']:.4f}" in table.stdout


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_evaluate_in_process_matches_cli(tmp_path):
    path = preference_model([0, 1, 2, 3, 4, 5, 6, 7, 8], tmp_path / "high.onnx")
    from ttt_research.evaluation.policy_file import load_policy

    policy, _ = load_policy(path)
    out = run("ttt_research.evaluate", str(path), "--json")
    report = json.loads(out.stdout)
    del report["nashconv"], report["policy"]  # beside eval.json's greedy keys (see test_policy_table_cli)
    assert report == json.loads(json.dumps(ev.evaluate_policy(policy)))


@pytest.mark.parametrize("make,needle", [
    (lambda d: d / "missing.onnx", "no such file"),
    (lambda d: (d / "junk.onnx").write_bytes(b"\x00not a model at all") and d / "junk.onnx",
     "not a valid ONNX model"),
    (lambda d: preference_model([0] * 10, d / "wide.onnx", in_width=10), "float32 [N, 9]"),
])
def test_evaluate_bad_files_get_one_line_and_exit_2(tmp_path, make, needle):
    path = make(tmp_path)
    out = run("ttt_research.evaluate", str(path))
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in out.stderr


@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_main_job_trains_and_writes_the_run_folder(tmp_path):
    out = run("ttt_research", "budget.games=4096", "algo.games_per_update=1024", "progress=false",
              f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    assert "Exact evaluation after 4,096 games" in out.stdout
    report = json.loads((tmp_path / "eval.json").read_text())
    assert f"{report['as_o']['vs_random']['win']:.4f}" in out.stdout
    assert "budget" in (tmp_path / ".hydra" / "config.yaml").read_text()
    assert "Traceback" not in out.stderr


@pytest.mark.slow  # a whole command in a subprocess, or several runs: python -m pytest -m 'not slow' skips it
def test_readme_python_example_runs_and_random_x_never_beats_minimax():
    import re
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "docs" / "design.md").read_text()  # the engine example
    code = re.findall(r"```python\n(.*?)```", readme, re.S)[0].replace("print(", "result = (")
    scope: dict = {}
    exec(code, scope)
    assert scope["result"][0] == 0 and scope["result"][1] > 0.5


@pytest.mark.parametrize("content,needle", [
    (b"PK\x03\x04 truncated zip", "not a readable checkpoint"),
    (None, "not a ttt_research checkpoint"),
])
def test_evaluate_bad_checkpoints_get_one_line_and_exit_2(tmp_path, content, needle):
    import torch

    path = tmp_path / "model.ckpt"
    if content is None:
        torch.save({"state_dict": {}, "something": 1}, path)  # a torch file, but not ours
    else:
        path.write_bytes(content)
    out = run("ttt_research.evaluate", str(path))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr


# ---------------------------------------------------------------------- the main job's config

from pathlib import Path  # noqa: E402

from hydra import compose, initialize_config_dir  # noqa: E402

import ttt_research.__main__  # noqa: E402,F401  (what `python -m ttt_research` imports first)
from ttt_research.train.confdir import config_dir  # noqa: E402


def composed(*overrides, hydra=False):
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra)


EXPERIMENTS = sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes_with_and_without_plus(name):
    from ttt_research.train.confdir import compose as project_compose

    plain = composed(f"experiment={name}")  # Hydra's own compose: the null default is there
    assert plain != composed()  # the preset changed something
    assert "experiment" not in composed()  # `experiment: null` adds no key of its own
    # The project's compose (what bench uses) and the command line also take +experiment=.
    assert project_compose([f"experiment={name}"]) == project_compose([f"+experiment={name}"]) == plain


@pytest.mark.parametrize("group,name", [("experiment", "flagship"), ("hparams_search", "ppo_optuna")])
def test_command_line_takes_both_spellings_of_a_preset(group, name):
    plain, plus = (run("ttt_research", f"{spelling}={name}", "--cfg", "job")
                   for spelling in (group, f"+{group}"))
    assert plain.returncode == 0 and plus.returncode == 0, plus.stderr
    assert plain.stdout == plus.stdout and "hidden:\n  - 128\n  - 128" in plain.stdout


# What each Optuna preset promises in its header: the setup every trial trains.
PRESETS = {
    "ppo_optuna": dict(algo="ttt_research.algos.ppo.PPO", hidden=[128, 128], encoding="signed9",
                       seat="both", opponent="ttt_research.env.opponents.RandomOpponent",
                       reward=(1.0, 0.3, -5.0), games=300000),
    "reinforce_optuna": dict(algo="ttt_research.algos.reinforce.Reinforce", hidden=[100],
                             encoding="planes18", seat="o",
                             opponent="ttt_research.env.opponents.RandomOpponent",
                             reward=(1.0, 0.3, -2.0), games=1500000),
}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_optuna_preset_trains_the_setup_it_promises(preset):
    want = PRESETS[preset]
    cfg = composed(f"hparams_search={preset}", hydra=True)
    assert cfg.algo._target_ == want["algo"]
    assert list(cfg.net.hidden) == want["hidden"] and cfg.net.encoding == want["encoding"]
    assert cfg.seat.side == want["seat"] and cfg.opponent._target_ == want["opponent"]
    assert (cfg.reward.win, cfg.reward.tie, cfg.reward.loss) == want["reward"]
    assert cfg.budget.games == want["games"] and cfg.optimized_metric == "score"
    assert cfg.hydra.mode.name == "MULTIRUN" and cfg.hydra.sweeper.study_name == preset
    # The command line still picks another setup.
    assert list(composed(f"hparams_search={preset}", "net=mlp25").net.hidden) == [25]


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("metric,direction", [
    ("score", "maximize"), ("win", "maximize"), ("loss", "minimize"),
    ("eval/o_random_win", "maximize"), ("eval/x_perfect_loss", "minimize"),
])
def test_optuna_direction_follows_the_optimized_metric(preset, metric, direction):
    cfg = composed(f"hparams_search={preset}", f"optimized_metric={metric}", hydra=True)
    assert cfg.hydra.sweeper.direction == direction


# ---------------------------------------------------------------------- refusals and help


def test_bad_value_is_refused_in_one_line_without_a_run_folder_or_torch(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    out = run("ttt_research", "budget.games=-1", f"hydra.run.dir={runs / 'job'}")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == ["error: budget.games must be a positive integer, got -1"]
    assert list(runs.iterdir()) == []
    # The refusal comes before torch and Lightning are imported (that is what made it slow).
    script = ("import sys\nfrom ttt_research.__main__ import main\n"
              "try:\n    main()\nexcept SystemExit as e:\n"
              "    print(e.code, sorted(m for m in ('torch', 'lightning') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", script, "seed=-3", f"hydra.run.dir={runs / 'job'}"],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "2 []", out.stderr
    assert out.stderr.strip() == "error: seed must be a non-negative integer, got -3"
    # The default run folder, outputs/DATE/TIME/, goes with its parents when they are left empty.
    out = run("ttt_research", "threads=0", cwd=tmp_path)
    assert out.returncode == 2 and "threads must be" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    # An interpolation that cannot be resolved is a bad value too: one line naming it, no folder.
    out = run("ttt_research", "algo.lr=${nope}", f"hydra.run.dir={runs / 'job'}")
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: algo.lr cannot be resolved: Interpolation key 'nope' not found"]
    assert list(runs.iterdir()) == []
    # A board that is no game here, or an opponent that cannot play it: one line each.
    for args, says in ((["game=mnk", "game.m=5", "game.n=4"],
                        "error: game.m=5 game.n=4: a board of 20 cells"),
                       (["game=mnk343", "algo=ppo",
                         "opponent._target_=ttt_research.env.opponents.TableOpponent"],
                        "error: opponent TableOpponent plays tic-tac-toe only (game=ttt), "
                        "not the 3,4,3 board")):
        out = run("ttt_research", *args, f"hydra.run.dir={runs / 'job'}")
        assert out.returncode == 2 and out.stdout == "", out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith(says), out.stderr
    assert list(runs.iterdir()) == []


def test_refused_job_keeps_a_run_folder_that_holds_anything_else(tmp_path):
    job = tmp_path / "job"
    (job / "checkpoints").mkdir(parents=True)
    (job / "checkpoints" / "last.ckpt").write_bytes(b"not really")
    out = run("ttt_research", "resume=true", "eval_every=0", f"hydra.run.dir={job}")
    assert out.returncode == 2 and "eval_every must be a positive integer" in out.stderr
    assert (job / "checkpoints" / "last.ckpt").read_bytes() == b"not really"
    assert sorted(p.name for p in job.rglob("*")) == ["checkpoints", "last.ckpt"]  # nothing added (.hydra)
    # A folder that already held a log (an earlier run's) is not Hydra's fresh folder either.
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.log").write_text("an earlier run\n")
    out = run("ttt_research", "eval_every=0", f"hydra.run.dir={other}")
    assert out.returncode == 2 and (other / "train.log").read_text() == "an earlier run\n"


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_trainer_keys_are_still_checked(tmp_path):
    out = run("ttt_research", "+trainer.no_such_key=1", f"hydra.run.dir={tmp_path / 'job'}")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: trainer.no_such_key must be an argument of lightning.Trainer (this key is not one), got 1"]
    assert not (tmp_path / "job").exists()


def test_trainer_keys_and_strategies_accepted_without_lightning_are_lightnings():
    import inspect

    import lightning as L
    from lightning.pytorch.strategies import StrategyRegistry

    from ttt_research.train.validate import STRATEGIES, TRAINER_KEYS

    assert TRAINER_KEYS <= set(inspect.signature(L.Trainer.__init__).parameters)
    assert STRATEGIES - {"auto"} <= set(StrategyRegistry.available_strategies())
    for name in ("cpu", "gpu", "ddp"):  # the shipped trainer configs need no look-up (base included)
        with initialize_config_dir(str(config_dir()), version_base="1.3"):
            trainer = compose("config", overrides=[f"trainer={name}"]).trainer
        assert set(trainer) - {"_target_"} <= TRAINER_KEYS


COMMANDS = ["python -m ttt_research", "ttt-train", "ttt_research.evaluate", "ttt-evaluate",
            "ttt_research.play", "ttt-play", "--web", "ttt_research.export", "ttt-export",
            "ttt_research.report", "ttt-report", "ttt_research.bench", "ttt-bench",
            "ttt_research.dashboard", "ttt-dashboard", "ttt_research.tournament", "ttt-tournament",
            "ttt_research.solve", "ttt-solve", "ttt_research.baselines.sb3"]


def test_help_lists_every_command_and_config_group():
    out = run("ttt_research", "--help")
    assert out.returncode == 0, out.stderr
    for command in COMMANDS:
        assert command in out.stdout, command
    # Hydra's own list of the config groups and their options.
    for group in ("algo", "net", "opponent", "reward", "seat", "trainer", "logger",
                  "experiment", "hparams_search"):
        options = sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))
        assert f"{group}: {', '.join(options)}" in out.stdout, group


def test_the_quick_help_is_hydras_help_to_the_byte(tmp_path, monkeypatch):
    """A bare --help is written without Hydra (confdir.app_help: ~0.4 s, not ~1 s); with an
    override Hydra writes it: the two are the same text."""
    quick, hydras = run("ttt_research", "--help"), run("ttt_research", "--help", "seed=0")
    assert quick.returncode == hydras.returncode == 0
    assert quick.stdout == hydras.stdout and "experiment/leaderboard: " in quick.stdout
    # A template that asks for more than the groups is left to Hydra.
    from ttt_research.train import confdir

    (tmp_path / "algo").mkdir()
    (tmp_path / "algo" / "a.yaml").write_text("{}\n")
    for template, expect in (("groups:\n$APP_CONFIG_GROUPS $$5", "groups:\nalgo: a\n $5"),
                             ("$APP_CONFIG_GROUPS\n$CONFIG", None)):
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({"hydra": {"help": {"template": template}}}))
        monkeypatch.setattr(confdir, "config_dir", lambda: tmp_path)
        assert confdir.app_help() == expect


def test_console_scripts_name_an_int_returning_main_of_each_command():
    import importlib

    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    for name, target in SCRIPTS.items():
        assert f'{name} = "{target}"' in pyproject
        module, func = target.split(":")
        main = getattr(importlib.import_module(module), func)
        assert callable(main)
        if name != "ttt-train":  # the script runs sys.exit(main()): an int, 0 after --help
            with pytest.raises(SystemExit) as e:
                main(["--help"])
            assert e.value.code == 0


def test_help_into_a_closed_pipe_ends_quietly():
    """`python -m ttt_research --help | head -1`: the reader leaves before the help is written."""
    p = subprocess.Popen([sys.executable, "-m", "ttt_research", "--help"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()  # long before the interpreter has started
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_key_added_with_plus_is_checked_like_any_other(tmp_path):
    """``+foo=1`` trained and wrote ``foo: 1`` into the run's config; ``+algo.lrr=0.5`` ended in
    a 52-line traceback; both left an empty run folder (issue 35)."""
    for added, line in (("+foo=1", "error: +foo: no such key in this config (a '+' adds a key, and "
                                    "nothing reads foo)"),
                        ("+algo.lrr=0.5", "error: +algo.lrr: no such key in this config (a '+' adds a "
                                          "key, and nothing reads algo.lrr); did you mean algo.lr?")):
        out = run("ttt_research", added, "budget.games=2000", cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.strip().splitlines() == [line], out.stderr
        assert list(tmp_path.iterdir()) == []  # no outputs/DATE/TIME/ left


def test_keys_a_plus_may_add_still_pass_the_check():
    from ttt_research.errors import ConfigError
    from ttt_research.train.refusal import validate_added

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=["+foo=1"])
    groups = {"algo": "reinforce", "net": "mlp100", "experiment": None}
    for ok in (["+experiment=flagship"], ["+trainer.max_time=1"], ["+population.vary.algo.lr=[1,2]"],
               ["+algo.optimizer={_target_:torch.optim.Adam,_partial_:true}"], ["++algo.lr=2"],
               ["+logger.wandb.tags=[a]"], ["algo.lr=2"]):
        validate_added(cfg, ok, groups)
    with pytest.raises(ConfigError, match=r"\+foo: no such key"):
        validate_added(cfg, ["+foo=1"], groups)
    with pytest.raises(ConfigError, match="did you mean algo.lr"):
        validate_added(cfg, ["+algo.lrr=1"], groups)
    cfg.algo._target_ = "my_lab.algos.Mine"  # a user's algorithm takes keys of its own
    validate_added(cfg, ["+algo.shift=0.25"], groups)
    with pytest.raises(ConfigError, match="did you mean seed"):
        validate_added(cfg, ["+sed=3"], groups)


def test_a_net_the_algorithm_cannot_take_is_named_as_typed(tmp_path):
    out = run("ttt_research", "algo=qlearning", "net=mlp128", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "error: algo=qlearning learns a table of action values: use net=qtable (got net=mlp128)"]
    assert list(tmp_path.iterdir()) == []
