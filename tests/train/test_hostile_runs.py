"""The training command against a hostile environment and damaged run folders (issue 42's
attacks on training): each is refused in one line, exit 2, with the folder byte for byte as
it was, or with no folder left behind for a run that never started.

A rank left in the environment by a shell or a SLURM allocation, a finished run resumed with
another budget, a damaged ``metrics.csv`` or ``run.json``, a lock file that is a folder or a
link or cannot be taken, a run folder Hydra cannot make, an optimiser that does not build, and
Trainer keys that the project sets itself."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest

from tests.helpers.command import checksums, cli, one_error_line
from tests.helpers.configs import make_cfg
from ttt_research.train import runfolder

TINY = ["debug=tiny", "progress=false", "threads=1"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished tiny run (REINFORCE, seed 0, the budget of debug=tiny: 2,048 games)."""
    run = tmp_path_factory.mktemp("hostile") / "run"
    code, _, err = cli(*TINY, f"hydra.run.dir={run}")
    assert code == 0, err
    return run


@pytest.fixture
def run(finished, tmp_path) -> Path:
    """A copy of the finished run, to damage."""
    folder = tmp_path / "run"
    shutil.copytree(finished, folder)
    return folder


def refused(folder: Path, *args: str) -> str:
    """Run the command on ``folder``; assert a one-line refusal (exit 2) that left every file
    as it was; return the line."""
    before = checksums(folder)
    code, _, err = cli(*TINY, *args, f"hydra.run.dir={folder}")
    assert code == 2, err
    assert checksums(folder) == before
    return one_error_line(err)


@pytest.mark.parametrize("variable", ["RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK"])
def test_a_rank_in_the_environment_does_not_unlock_a_finished_run(run, monkeypatch, variable):
    """Before: RANK=1 (or SLURM_PROCID=1, as inside a SLURM allocation) made a one-process run
    a DDP follower that skipped the lock and the check of the folder, and a new seed-9 run
    overwrote the finished seed-0 run's checkpoint, eval.json, policy.onnx and run.json."""
    monkeypatch.setenv(variable, "1")
    line = refused(run, "seed=9")
    # LOCAL_RANK and RANK are refused as no launch's before the folder is read (train/launch.py).
    assert "already holds a run" in line or f"{variable}=1 is set in the environment" in line


def test_only_a_trainer_of_several_processes_has_followers(monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "1")
    assert not runfolder.secondary(make_cfg())  # trainer=cpu: one process, its own first
    assert runfolder.secondary(make_cfg("trainer=ddp"))
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert not runfolder.secondary(make_cfg("trainer=ddp"))


@pytest.mark.parametrize("budget", [1024, 2000, 4096])
def test_a_finished_run_is_resumed_only_with_its_own_budget(run, budget):
    """Before: budget.games=1024 on a finished 2,048-game run exited 0 and rewrote
    .hydra/config.yaml to 1024. A larger budget was already refused."""
    line = refused(run, f"budget.games={budget}", "resume=true")
    said = "a larger budget.games" if budget > 2048 else f"budget.games={budget}"
    assert "finished run" in line and said in line


def test_a_finished_run_resumed_with_its_own_budget_still_ends(run):
    code, out, err = cli(*TINY, f"hydra.run.dir={run}", "resume=true")
    assert code == 0, err
    assert "Exact evaluation after 2,048 games" in out


@pytest.mark.slow  # a refused resume, then a resume: over 3 s on the 2-core host
def test_a_temporary_file_whose_name_is_no_process_id_is_left_alone(run):
    """Before: a stale ``.eval.json.99999999999999999999.tmp`` in a stopped run made its resume
    end in an OverflowError traceback after .hydra/ and run.json were rewritten, and every
    later resume the same way. Now the resume ends; only a dead process's temporary goes."""
    import subprocess
    import sys

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)
    (run / "eval.json").unlink()  # stopped after its last checkpoint, before eval.json
    foreign = [run / ".eval.json.99999999999999999999.tmp", run / "checkpoints" / ".last.ckpt.0.tmp"]
    for path in foreign:
        path.write_text("not a temporary of this project")
    (run / f".eval.json.{dead}.tmp").write_text("{half")
    (run / "checkpoints" / f".last.ckpt.{dead}.tmp").write_bytes(b"PK")
    line = refused(run, "seed=5", "resume=true")  # a refused resume removes nothing either
    assert "seed=5 (the run: 0)" in line
    code, _, err = cli(*TINY, f"hydra.run.dir={run}", "resume=true")
    assert code == 0, err
    assert (run / "eval.json").is_file() and all(path.is_file() for path in foreign)
    assert sorted(p.name for p in run.rglob(".*.tmp")) == sorted(p.name for p in foreign)


DAMAGE = {
    "a text row": ("metrics.csv", b"garbage,row,here\r\n", "'epoch' is not a number"),
    "bytes that are not UTF-8": ("metrics.csv", b"\xff\xfe,1,2\r\n", "is not UTF-8 text"),
    "a 200,000-character cell": ("metrics.csv", b"1," + b"9" * 200_000 + b"\r\n", "field limit"),
    "more cells than the header": ("metrics.csv", b"1" + b",1" * 40 + b"\r\n", "more cells than the header"),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_metrics_log_is_refused_before_anything_is_written(run, damage):
    """Before: a text row made a resume train to the end, replace last.ckpt and policy.onnx,
    then fail drawing curves.png with no eval.json, at every later resume too; bytes that are
    not UTF-8 and an over-long cell failed with a traceback after .hydra/ and run.json were
    rewritten."""
    name, tail, reason = DAMAGE[damage]
    with open(run / name, "ab") as f:
        f.write(tail)
    last = (run / name).read_bytes().count(b"\n")  # the damaged row: the file's last line
    line = refused(run, "resume=true")
    assert str(run / name) in line and reason in line and "nothing was changed" in line
    if damage == "a text row":
        assert f"line {last}:" in line


@pytest.mark.parametrize("text", ['{"seed": 0, "sessions": 5}', "[1, 2]", "{not json"])
def test_a_run_record_that_is_not_one_is_refused_before_anything_is_written(run, text):
    """Before: ``"sessions": 5`` failed with an AttributeError after .hydra/ was rewritten."""
    (run / "run.json").write_text(text)
    line = refused(run, "resume=true")
    assert str(run / "run.json") in line and "nothing was changed" in line


@pytest.mark.parametrize("kind", ["folder", "link"])
def test_a_lock_that_is_no_lock_file_is_refused(run, kind):
    """Before: IsADirectoryError, or "Too many levels of symbolic links", as a traceback."""
    lock = run / runfolder.LOCK_NAME
    lock.unlink()
    if kind == "folder":
        lock.mkdir()
    else:
        lock.symlink_to(lock.name)
    line = refused(run, "resume=true")
    assert str(lock) in line and ("a folder" if kind == "folder" else "a symbolic link") in line


def test_a_lock_that_cannot_be_taken_is_refused(run, monkeypatch):
    """A read-only folder (the lock cannot be created): before, OSError's traceback. Root
    writes anywhere, so the read-only file system is stood for by the error it raises."""
    import filelock

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(run / runfolder.LOCK_NAME))

    monkeypatch.setattr(filelock.FileLock, "acquire", read_only)
    line = refused(run, "resume=true")
    assert line == f"error: cannot take the lock {run / runfolder.LOCK_NAME}: read-only file system; " \
                   "nothing was changed"


@pytest.mark.parametrize("below", [False, True])
def test_a_run_folder_that_cannot_be_made_is_refused(tmp_path, below):
    """hydra.run.dir naming a file, or a folder under a file: before, FileExistsError or
    NotADirectoryError from Hydra's mkdir, as a traceback."""
    file = tmp_path / "a_file"
    file.write_text("mine\n")
    folder = file / "run" if below else file
    code, _, err = cli(*TINY, f"hydra.run.dir={folder}")
    assert code == 2
    line = one_error_line(err)
    assert line.startswith(f"error: cannot make the run folder {folder if below else file}: ")
    assert ("a part of the path is a file" if below else "a file is there") in line
    assert file.read_text() == "mine\n" and list(tmp_path.iterdir()) == [file]


OPTIMIZERS = {
    "{_target_:torch.optim.Adam,_partial_:true,betas:[2,2]}": "Invalid beta parameter at index 0: 2",
    "{_target_:torch.optim.Nope,_partial_:true}": "cannot be found",
    "{_target_:os.getcwd,_partial_:true}": "is not a torch optimiser",
    "{_target_:torch.optim.Adam}": "missing 1 required positional argument: 'params'",
}


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_an_optimizer_that_does_not_build_is_refused_before_the_folder_is_written(tmp_path, optimizer):
    """Before: tracebacks, after .hydra/, .lock and run.json were written (bad arguments) or
    with an empty folder left (an unknown target)."""
    folder = tmp_path / "run"
    code, _, err = cli(*TINY, f"algo.optimizer={optimizer}", f"hydra.run.dir={folder}")
    assert code == 2
    line = one_error_line(err)
    assert line.startswith("error: algo.optimizer") and OPTIMIZERS[optimizer] in line
    assert not folder.exists()


@pytest.mark.parametrize("override", ["trainer.max_epochs=3", "+trainer.accumulate_grad_batches=0",
                                      "+trainer.max_steps=5", "+trainer.gradient_clip_val=1.0",
                                      "+trainer.enable_checkpointing=true"])
def test_trainer_keys_the_project_sets_are_refused(tmp_path, override):
    """Before: trainer.max_epochs=3 said 2,048 games and trained three times as many;
    accumulate_grad_batches=0 failed in Lightning after the folder was written."""
    folder = tmp_path / "run"
    code, _, err = cli(*TINY, override, f"hydra.run.dir={folder}")
    assert code == 2
    key = override.lstrip("+").split("=")[0]
    assert one_error_line(err).startswith(f"error: {key} is not a setting of this project")
    assert not folder.exists()


def test_a_refusal_removes_only_the_folders_the_run_made(tmp_path, monkeypatch):
    """Before: a refused run removed its folder's empty parents up to the working folder,
    the user's own included: a runs/exp1/ made by hand, the working folder itself with
    hydra.run.dir=. (found by the fresh-clone rerun of issue 42's attacks)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine" / "run").mkdir(parents=True)
    (tmp_path / "cwd").mkdir()
    (tmp_path / "sweep").mkdir()
    refusals = [["hydra.run.dir=mine/new/deep"], ["hydra.run.dir=mine/run"],
                ["-m", "seed=0,1", "hydra.sweep.dir=sweep"], ["-m", "seed=0,1"], []]
    for args in refusals:
        code, _, err = cli(*args, "trainer.max_epochs=3")
        assert code == 2 and "trainer.max_epochs" in one_error_line(err)
    monkeypatch.chdir(tmp_path / "cwd")
    code, _, _ = cli("hydra.run.dir=.", "trainer.max_epochs=3")
    assert code == 2
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == ["cwd", "mine", "mine/run", "sweep"]  # the user's, empty as they were


@pytest.mark.parametrize("folder", ["", "."])
def test_the_current_folder_as_the_run_folder_is_refused(tmp_path, monkeypatch, folder):
    """``hydra.run.dir=`` (empty) made Hydra's run folder the working folder: a run spread
    eval.json, checkpoints/, .hydra/ ... among the user's files (a checkout's root)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.txt").write_text("the user's")
    code, _, err = cli(f"hydra.run.dir={folder}")
    assert code == 2 and one_error_line(err).startswith("error: hydra.run.dir names the current folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
