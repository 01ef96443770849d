"""Hydra's own errors on the command line (an unknown option, key or plugin; an override it
cannot parse) are one ``error:`` line and exit code 2, like every other mistake
(``hydra_errors.py``); HYDRA_FULL_ERROR=1 still gives Hydra's full report, and --help,
--cfg job and -m work as before. Each case runs the real command (no torch is loaded: a few
seconds each)."""

import os
import re
import signal
import subprocess
import sys

import pytest

from ttt_research.train import hydra_errors

# A stand-in for a machine without the sweep and SLURM plugins: Hydra's plugin scan skips a
# module whose sys.modules entry is None, as if the package were not installed.
WITHOUT_PLUGINS = """
import sys
for name in ("hydra_joblib_launcher", "hydra_optuna_sweeper", "hydra_submitit_launcher"):
    sys.modules["hydra_plugins." + name] = None
from ttt_research.__main__ import main
main()
"""


def train(*args: str, plugins: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    head = ["-m", "ttt_research"] if plugins else ["-c", WITHOUT_PLUGINS]
    full_env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, *head, *args], capture_output=True, text=True,
                          timeout=120, env=full_env)


@pytest.mark.parametrize("args,plugins,line", [
    (["net=mlp999"], True,
     "error: net=mlp999: net has no option mlp999; choose one of mlp100, mlp128, mlp25, qtable"),
    (["experiment=flagshp"], True,
     "error: experiment=flagshp: experiment has no option flagshp; choose one of antirez_repro, "
     "flagship, seed_ppo_repro, study_net_size, study_opponents, study_reward_tables, "
     "teacher443, teacher444"),
    (["no_such_key=1"], True,
     "error: no_such_key is not a key of the config (python -m ttt_research --cfg job prints every key)"),
    (["budget.game=5"], True, "error: budget.game is not a key of the config; did you mean budget.games=5?"),
    # The one case where "+key=" is what they meant: a key the built object takes.
    (["trainer.max_time=00:01:00:00"], True, "error: trainer.max_time is not in the config, but "
     "lightning.Trainer takes max_time: add it with +trainer.max_time=00:01:00:00"),
    (["+seed=3"], True, "error: seed is in the config already: set it without the + (seed=3)"),
    (["net=mlp25,mlp100"], True, "error: net=mlp25,mlp100 is a sweep: add -m to run one job per value "
     "(for a list write key=[a,b]; for a string with commas quote it: key='a,b')"),
    (["seed"], True, "error: seed: an override is key=value (or group=option)"),
    (["hydra.launcher.n_jobs=2"], True, "error: hydra.launcher.n_jobs: the launcher chosen (basic) has "
     "no setting n_jobs; choose the launcher that has it first, e.g. hydra/launcher=joblib"),
    (["-m", "hydra/launcher=joblib", "seed=0,1"], False, "error: hydra/launcher=joblib needs the Hydra "
     "plugin hydra-joblib-launcher, which is not installed: pip install 'ttt_research[sweeps]'"),
    (["-m", "hparams_search=ppo_optuna"], False, "error: hydra/sweeper=optuna (asked for by "
     "hparams_search=ppo_optuna) needs the Hydra plugin hydra-optuna-sweeper, which is not installed: "
     "pip install 'ttt_research[sweeps]'"),
    (["-m", "hydra/launcher=slurm", "seed=0,1"], False, "error: hydra/launcher=slurm needs the Hydra "
     "plugin hydra-submitit-launcher, which is not installed: pip install 'ttt_research[slurm]'"),
])
def test_hydras_own_error_is_one_line_and_exit_2(tmp_path, args, plugins, line):
    out = train(*args, "debug=tiny", f"hydra.run.dir={tmp_path / 'job'}",
                f"hydra.sweep.dir={tmp_path / 'sweep'}", plugins=plugins)
    assert (out.returncode, out.stderr.splitlines(), out.stdout) == (2, [line], "")
    assert list(tmp_path.iterdir()) == []  # refused before Hydra made any folder


@pytest.mark.slow  # two commands in subprocesses
def test_a_long_value_is_echoed_cut_in_hydras_errors_too(tmp_path):
    # Issue 58: an error that repeats the value typed (here a grid of 3,750 values under a
    # misspelt key, as a sweep without -m, and where a dict of keys is wanted, which Hydra
    # cannot merge) cut it at SHOWN characters.
    grid = ",".join(["0.5"] * 3750)
    for args, start in ((["population.vary.algo.lrr=[" + grid + "]"],
                         "error: population.vary.algo.lrr is not a key of the config; did you mean "
                         "population.vary.algo.lr=[0.5,0.5,"),
                        ([f"algo.lr={grid}"], "error: algo.lr=0.5,0.5,"),
                        ([f"population.vary=[{grid}]"],
                         "error: Error merging override population.vary=[0.5,")):
        out = train(*args, "debug=tiny", f"hydra.run.dir={tmp_path / 'job'}")
        [line] = out.stderr.splitlines()
        assert out.returncode == 2 and line.startswith(start), line[:300]
        assert re.search(r"\.\.\. \(1[45],\d{3} characters\)", line) and len(line) < 500, line[:300]
    assert list(tmp_path.iterdir()) == []


def test_hydra_full_error_set_by_the_user_keeps_hydras_full_report(tmp_path):
    out = train("net=mlp999", f"hydra.run.dir={tmp_path / 'job'}", env={"HYDRA_FULL_ERROR": "1"})
    assert out.returncode == 1
    assert "Traceback" in out.stderr and "MissingConfigException" in out.stderr
    assert "Available options in 'net'" in out.stderr


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_help_cfg_and_multirun_still_work(tmp_path):
    out = train("--help")
    assert out.returncode == 0 and "== Config groups" in out.stdout, out.stderr
    out = train("--cfg", "job", "net=mlp25", "seed=7")
    assert out.returncode == 0, out.stderr
    assert "seed: 7" in out.stdout and "- 25" in out.stdout
    # -m reaches the job (whose own refusal is one line too), and a missing option is one line.
    out = train("-m", "seed=-1,-2", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == "error: seed must be a non-negative integer, got -1"
    out = train("-m", "net=mlp999,mlp25", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == ("error: net=mlp999: net has no option mlp999; "
                                           "choose one of mlp100, mlp128, mlp25, qtable")
    out = train("-m", "--cfg", "job")  # two commands at once: Hydra's bare ValueError
    assert (out.returncode, out.stderr.splitlines()) == (2, [
        "error: Only one of --run, --multirun, --cfg, --info and --shell_completion can be specified"])


def test_a_bug_in_the_job_keeps_its_traceback(monkeypatch):
    from ttt_research.train import hydra_errors

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    seen = {}

    def app():  # Hydra raises (rather than prints) while the app runs; a bug stays a bug
        seen["full"] = os.environ.get("HYDRA_FULL_ERROR")
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        hydra_errors.run(app, argv=[])
    assert seen["full"] == "1"
    assert "HYDRA_FULL_ERROR" not in os.environ and hydra_errors.OURS not in os.environ


def test_a_stop_that_a_librarys_cleanup_turned_into_its_own_error_is_still_the_stop(monkeypatch):
    """CI's failure of the tenth sitting: a SIGTERM while the sweeper composed raised
    ``StoppedEarly`` inside Hydra's config reader before its ``f`` was set, and the reader's
    ``finally: f.close()`` raised UnboundLocalError with the stop as its context: a traceback and
    exit 1 instead of the stop's one line and 143."""
    from ttt_research.train import early_stop, hydra_errors

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)

    def read_config():  # the shape of hydra's importlib_resources_config_source._read_config
        try:
            raise early_stop.StoppedEarly(signal.SIGTERM)  # the handler, before `f = ...` ran
            f = open(os.devnull)
        finally:
            f.close()  # noqa: F821 (unbound: the library's own error)

    with pytest.raises(early_stop.StoppedEarly) as stopped:
        hydra_errors.run(read_config, argv=[])
    assert stopped.value.code == 143
    with pytest.raises(KeyError):  # a bug raised while handling another bug stays a bug
        hydra_errors.run(lambda: {}["a"], argv=[])


def test_a_bare_flag_after_the_overrides_is_read_as_hydra_reads_it_before_them():
    """``debug=tiny -m seed=0,1``: Hydra's parser stopped at ``-m`` and refused the rest in its
    usage text; the flag now goes first, so the command sweeps as it says."""
    assert hydra_errors.flags_first(["debug=tiny", "-m", "seed=0,1", "--resolve"]) == [
        "-m", "--resolve", "debug=tiny", "seed=0,1"]
    assert hydra_errors.flags_first(["--cfg", "job", "seed=1"]) == ["--cfg", "job", "seed=1"]


@pytest.mark.parametrize("argv, says", [
    (["--bogus", "seed=1"], "unrecognized arguments: --bogus"),
    (["--cfg"], "argument --cfg/-c: expected one argument"),
    ([f"--x{i}" for i in range(3000)], "unrecognized arguments: --x0 --x1"),
])
def test_hydras_own_flag_errors_are_one_short_line(capsys, argv, says):
    """Before: argparse's usage text (7 lines) and the arguments echoed whole (3,000 of them: a
    line of 23 KB), exit 2."""
    with pytest.raises(SystemExit) as e:
        hydra_errors.check_flags(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith(f"error: {says}")
    assert len(err) < 400 and "usage:" not in err
