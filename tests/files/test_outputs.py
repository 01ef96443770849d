"""``files/outputs.check_output``: an output is never the input (nor a link to it) nor a file of
a run folder; beside the checkpoints a new file (export's default) is fine, a checkpoint never."""

import os

import pytest

from ttt_research.errors import UserError
from ttt_research.files.outputs import RUN_FILES, check_output, run_folder


@pytest.fixture
def run(tmp_path):
    """A folder that holds a run (as far as the guard looks: its files' names)."""
    folder = tmp_path / "run"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / ".hydra").mkdir()
    for name in ("eval.json", "metrics.csv", "policy.onnx", "checkpoints/last.ckpt", ".hydra/config.yaml"):
        (folder / name).write_text(name)
    return folder


def refused(out, source, option="--table") -> str:
    with pytest.raises(UserError) as e:
        check_output(out, source, option)
    return str(e.value)


@pytest.mark.parametrize("name", ["eval.json", "metrics.csv", "policy.onnx", "new.csv", "hparams.yaml",
                                  "checkpoints/last.ckpt", "checkpoints/epoch=3.CKPT", ".hydra/config.yaml",
                                  "members/003/policy.onnx", "lightning_logs/version_0/x.json"])
def test_every_file_of_a_run_folder_is_refused(run, tmp_path, name):
    message = refused(run / name, tmp_path / "agent.onnx")
    assert message == (f"{run / name}: a file of the run folder {run}, whose files are its run's record; "
                       "choose another --table outside it")


def test_beside_the_checkpoints_a_new_file_is_fine_and_outside_the_run_anything(run, tmp_path):
    check_output(run / "checkpoints" / "last.onnx", run / "checkpoints" / "last.ckpt", "-o")  # the default
    check_output(run / "checkpoints" / "greedy.csv", run, "--table")
    check_output(tmp_path / "agent.csv", run, "--table")
    check_output(tmp_path / "elsewhere" / "eval.json", run, "--table")  # a folder without a run


def test_the_input_is_refused_by_its_path_a_link_or_a_hard_link(tmp_path):
    source = tmp_path / "agent.ckpt"
    source.write_text("weights")
    (tmp_path / "soft.ckpt").symlink_to(source)
    os.link(source, tmp_path / "hard.ckpt")
    dotted = tmp_path / "sub" / ".." / "agent.ckpt"
    for out in (source, tmp_path / "soft.ckpt", tmp_path / "hard.ckpt", dotted):
        with pytest.raises(UserError, match="that is the checkpoint itself; choose another -o$"):
            check_output(out, source, "-o", "the checkpoint")


def test_a_link_to_a_runs_file_is_that_file(run, tmp_path):
    (tmp_path / "link.json").symlink_to(run / "eval.json")
    assert "a file of the run folder" in refused(tmp_path / "link.json", tmp_path / "agent.onnx")


def test_a_run_is_looked_for_three_folders_up_no_further(tmp_path):
    (tmp_path / "eval.json").write_text("{}")  # a stray eval.json high up
    assert run_folder(tmp_path / "a" / "b" / "out.csv") == tmp_path
    assert run_folder(tmp_path / "a" / "b" / "c" / "out.csv") is None
    assert "checkpoints/last.ckpt" in RUN_FILES and "eval.json" in RUN_FILES
