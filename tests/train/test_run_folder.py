"""One run per folder, and a resume checked before anything in the folder is touched
(runfolder.py): a locked folder, a folder that holds a run, a resume whose settings or
checkpoint do not match are refused in one line, exit 2, with every file byte for byte as
before; a dead run's lock is taken; default folders never collide; a refused multirun leaves
no sweep folder; DDP's other processes take no lock and write nothing.

The command runs in this process (``cli``: Hydra's app, as ``python -m ttt_research``), which
saves the ~10 s a subprocess spends importing torch and Lightning."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers.command import checksums, cli, copy_of, one_error_line
from tests.helpers.configs import make_cfg
from ttt_research.errors import ConfigError
from ttt_research.train import runfolder
from ttt_research.train.confdir import compose
from ttt_research.train.run import train

TINY = ["debug=tiny", "progress=false", "threads=1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two finished runs made by the command: REINFORCE mlp100 seed 0, and a population of 2."""
    base = tmp_path_factory.mktemp("runs")
    for name, extra in (("single", []), ("population", ["population.size=2"])):
        code, _, err = cli(*TINY, *extra, f"hydra.run.dir={base / name}")
        assert code == 0, err
    return base


# ----------------------------------------------------------------------- resume checks


@pytest.mark.parametrize("name, overrides, needles", [
    ("single", ["net=mlp25"], ["net.hidden=[25] (the run: [128, 128])"]),
    ("single", ["seed=5"], ["seed=5 (the run: 0)"]),
    ("single", ["algo=reinforce_faithful"],
     ["algo._target_=ttt_research.algos.reinforce_faithful.ReinforceFaithful (the run: "
      "ttt_research.algos.reinforce.Reinforce)"]),
    ("population", ["population.size=2", "seed=100"], ["seed=100 (the run: 0)"]),
    ("single", ["truncate"], ["last.ckpt does not load (", "truncated or not a checkpoint"]),
])
def test_a_refused_resume_leaves_every_file_as_it_was(runs, tmp_path, name, overrides, needles):
    """Before: a traceback (size mismatch), or exit 0 with seed 0's results labelled seed 5,
    and in both cases .hydra replaced, metrics.csv renamed, run.json appended."""
    folder = copy_of(runs, name, tmp_path)
    if overrides == ["truncate"]:
        ckpt = folder / "checkpoints" / "last.ckpt"
        ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
        overrides = []
    before = checksums(folder)
    code, _, err = cli(*TINY, *overrides, "resume=true", f"hydra.run.dir={folder}")
    assert code == 2
    line = one_error_line(err)
    for needle in needles:
        assert needle in line
    assert checksums(folder) == before


def test_a_resume_names_each_differing_key_with_both_values(runs, tmp_path):
    folder = copy_of(runs, "single", tmp_path)
    code, _, err = cli(*TINY, "seed=5", "reward.tie=0.5", "resume=true", f"hydra.run.dir={folder}")
    line = one_error_line(err)
    assert code == 2 and "seed=5 (the run: 0); reward.tie=0.5 (the run: 0.3)" in line
    assert "another hydra.run.dir" in line


def test_a_new_option_at_its_default_is_what_an_older_run_trained_with():
    # A DQN run started before algo.symmetries existed has no such key in its saved config or
    # its checkpoint: resumed today (the option at its default, off) it is the same run.
    now = runfolder.defining(OmegaConf.to_container(compose(["algo=dqn"]), resolve=False))
    older = {k: v for k, v in now.items() if k != "algo.symmetries"}
    assert now["algo.symmetries"] is False and runfolder.differences(now, older) == []
    assert runfolder.differences({**now, "algo.symmetries": True}, older) == [
        "algo.symmetries=true (the run: absent)"]
    # Only an algorithm's own key, at its default: any other key the run lacks still differs.
    assert runfolder.differences(now, {k: v for k, v in now.items() if k != "seat.side"}) == [
        "seat.side=both (the run: absent)"]


def test_a_larger_budget_for_a_finished_run_is_refused(runs, tmp_path):
    """Before: exit 0, nothing trained (Lightning's only epoch was over), and .hydra saying
    3,072 games over the results of 2,048. A stopped run is extended (test_signals.py)."""
    folder = copy_of(runs, "single", tmp_path)
    before = checksums(folder)
    code, _, err = cli(*TINY, "budget.games=3072", "resume=true", f"hydra.run.dir={folder}")
    assert code == 2 and "is the end of a finished run (2,048 games)" in one_error_line(err)
    assert checksums(folder) == before


def test_a_finished_run_resumed_with_a_new_cadence_writes_its_outputs_again(runs, tmp_path):
    folder = copy_of(runs, "single", tmp_path)
    eval_json = (folder / "eval.json").read_text()
    code, out, err = cli(*TINY, "eval_every=1", "checkpoint_every=1", "progress=lines",
                         "resume=true", f"hydra.run.dir={folder}")
    assert code == 0, err
    assert "resumed after 2,048 games" in out and "Exact evaluation after 2,048 games" in out
    assert (folder / "eval.json").read_text() == eval_json
    assert OmegaConf.load(folder / ".hydra" / "config.yaml").eval_every == 1
    assert list(OmegaConf.load(folder / ".hydra" / "overrides.yaml"))[-1] == "resume=true"


def test_a_foreign_checkpoint_is_refused(runs, tmp_path):
    """The saved config matches, the checkpoint does not: it is another run's."""
    folder = copy_of(runs, "single", tmp_path)
    ckpt = folder / "checkpoints" / "last.ckpt"
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    state["run_identity"]["keys"]["seed"] = 3  # as a seed-3 run's checkpoint says
    torch.save(state, ckpt)
    before = checksums(folder)
    with pytest.raises(ConfigError, match=r"last.ckpt is another run's checkpoint: seed=0 \(the run: 3\)"):
        train(make_cfg("threads=1", "resume=true"), folder)
    assert checksums(folder) == before


def test_a_checkpoint_that_does_not_fit_the_network_is_refused(runs, tmp_path):
    """A checkpoint without a run record (as older ones) and no saved config: its tensors
    are checked against the module built from the config, before Lightning sees it."""
    folder = copy_of(runs, "single", tmp_path)
    shutil.rmtree(folder / ".hydra")
    ckpt = folder / "checkpoints" / "last.ckpt"
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    del state["run_identity"]
    torch.save(state, ckpt)
    before = checksums(folder)
    with pytest.raises(ConfigError, match=r"does not fit the network of this config: net\.body\.0\.weight "
                                          r"is \[128, 9\] in the checkpoint, \[128, 18\] here$"):
        train(make_cfg("threads=1", "net.encoding=planes18", "resume=true"), folder)
    assert checksums(folder) == before


@pytest.mark.parametrize("content, needle", [
    (b"garbage, not a checkpoint", "does not load ("),
    (None, "is not a Lightning checkpoint of this project (no state_dict, optimizer_states, loops"),
])
def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path, content, needle):
    ckpt = tmp_path / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir()
    if content is None:
        torch.save({"weights": torch.zeros(3)}, ckpt)
    else:
        ckpt.write_bytes(content)
    before = checksums(tmp_path)
    with pytest.raises(ConfigError) as error:
        train(make_cfg("threads=1", "resume=true"), tmp_path)
    assert needle in str(error.value) and "\n" not in str(error.value)
    assert checksums(tmp_path) == before


# ----------------------------------------------------------------------- one run per folder


def test_a_fresh_run_into_a_folder_that_holds_a_run_is_refused(runs, tmp_path):
    """Before: exit 0, and eval.json, last.ckpt, metrics.csv replaced."""
    folder = copy_of(runs, "single", tmp_path)
    before = checksums(folder)
    code, _, err = cli(*TINY, "seed=1", f"hydra.run.dir={folder}")
    line = one_error_line(err)
    assert code == 2 and "already holds a run (checkpoints/last.ckpt, eval.json" in line
    assert "resume=true continues it; choose another hydra.run.dir for a new run" in line
    assert checksums(folder) == before


def test_a_locked_folder_is_refused_and_a_killed_holders_lock_is_taken(tmp_path):
    """A live run's lock refuses a second run; the same lock of a SIGKILLed process is gone
    with it (flock), and the next run takes the folder."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "train.log").touch()  # what Hydra makes for a running run before it takes the lock
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, filelock\n"
         "lock = filelock.FileLock(sys.argv[1]); lock.acquire(timeout=0)\n"
         "print('held', flush=True); time.sleep(120)", str(folder / runfolder.LOCK_NAME)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = checksums(folder)
        code, _, err = cli(*TINY, f"hydra.run.dir={folder}")
        assert code == 2 and f"{folder} is in use by another run" in one_error_line(err)
        assert checksums(folder) == before and folder.is_dir()
    finally:
        holder.kill()  # SIGKILL: no chance to release anything
        holder.wait()
    assert holder.returncode == -9
    report = train(make_cfg("threads=1"), folder)
    assert report["decision_points"] > 0 and (folder / "eval.json").is_file()


def test_a_run_holds_its_folder_lock_for_its_life(tmp_path):
    from filelock import FileLock, Timeout

    with runfolder.claim(tmp_path, make_cfg()) as claim:
        assert claim.resume_from is None
        with pytest.raises(Timeout):
            FileLock(str(tmp_path / runfolder.LOCK_NAME)).acquire(timeout=0)
    FileLock(str(tmp_path / runfolder.LOCK_NAME)).acquire(timeout=0).lock.release()


def test_default_folders_never_collide(tmp_path, monkeypatch):
    """Two processes asking for the same default folder at once get two folders; one
    process asks Hydra's resolver as often as it likes and gets one."""
    script = ("import sys; from ttt_research.train.confdir import fresh_folder; "
              "print(fresh_folder(sys.argv[1]))")
    path = str(tmp_path / "elsewhere" / "2026-01-01" / "12-00-00")
    procs = [subprocess.Popen([sys.executable, "-c", script, path], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    made = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert made == [path, path + "-2"]
    monkeypatch.chdir(tmp_path)
    cfg = compose(hydra=True)
    first = cfg.hydra.run.dir
    assert cfg.hydra.run.dir == first and first.startswith("outputs/") and Path(first).is_dir()
    assert len(list((tmp_path / "outputs").glob("*/*"))) == 1


def test_a_refused_multirun_leaves_no_sweep_folder(tmp_path, monkeypatch):
    """Before: multirun/DATE/TIME/multirun.yaml was left behind."""
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("-m", "seed=0,1", "budget.games=-1")
    assert code == 2 and "budget.games must be a positive integer, got -1" in err
    assert list(tmp_path.iterdir()) == []


def test_ddp_processes_after_the_first_take_no_lock_and_write_nothing(runs, tmp_path, monkeypatch):
    """Lightning reruns the command for rank 1 with the same hydra.run.dir (LOCAL_RANK=1)
    while rank 0 holds the folder: rank 1 neither waits for the lock, nor refuses the
    folder that rank 0 has just written into, nor writes .hydra."""
    from filelock import FileLock

    folder = copy_of(runs, "single", tmp_path)
    held = FileLock(str(folder / runfolder.LOCK_NAME))
    held.acquire(timeout=0)
    before = checksums(folder)
    monkeypatch.setenv("LOCAL_RANK", "1")
    cfg = make_cfg("threads=1", "trainer=ddp")
    assert runfolder.secondary(cfg)
    with runfolder.claim(folder, cfg) as claim:
        assert claim.resume_from is None and not claim.primary
        claim.commit(cfg, hydra_files=True)
    assert checksums(folder) == before
    held.release()


def test_the_hydra_files_are_written_as_hydra_writes_them(runs):
    folder = runs / "single"
    overrides = OmegaConf.load(folder / ".hydra" / "overrides.yaml")
    assert list(overrides) == TINY  # the task's overrides; hydra.run.dir is Hydra's (hydra.yaml)
    saved = OmegaConf.to_container(OmegaConf.load(folder / ".hydra" / "config.yaml"))
    assert saved == OmegaConf.to_container(compose(list(TINY)))
    hydra = OmegaConf.load(folder / ".hydra" / "hydra.yaml").hydra
    assert hydra.runtime.output_dir == str(folder) and hydra.job.name == "train"
    assert list(hydra.overrides.task) == TINY and f"hydra.run.dir={folder}" in hydra.overrides.hydra


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_run_stopped_before_its_first_checkpoint_starts_again_with_resume(tmp_path):
    """Killed before its first checkpoint, a run has nothing to continue: a fresh run into its
    folder is refused (it holds a run), and resume=true starts it again from the beginning,
    ending as an uninterrupted run does; with other settings it is refused like any resume."""
    import json
    import subprocess
    import sys

    run = tmp_path / "run"
    base = [sys.executable, "-m", "ttt_research", "debug=tiny", "threads=1", "progress=false",
            f"hydra.run.dir={run}"]
    reference = tmp_path / "reference"
    subprocess.run([*base[:-1], f"hydra.run.dir={reference}"], check=True, capture_output=True, timeout=300)
    subprocess.run(base, check=True, capture_output=True, timeout=300)
    # what a kill before the first checkpoint leaves: the config, run.json, some rows
    (run / "eval.json").unlink()
    for path in (run / "checkpoints").iterdir():
        path.unlink()
    other = subprocess.run([*base, "resume=true", "seed=3"], capture_output=True, text=True, timeout=300)
    assert other.returncode == 2 and "seed=3 (the run: 0)" in other.stderr, other.stderr
    again = subprocess.run([*base, "resume=true"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"no checkpoint in {run} yet: the run starts again from its beginning" in again.stdout
    assert json.loads((run / "eval.json").read_text()) == json.loads((reference / "eval.json").read_text())
