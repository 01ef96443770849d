"""train.log, Hydra's job log in the run folder, holds what the run printed (the opening line,
the progress lines, the final table) instead of nothing (``joblog.py``); the docs' ``runs/``
folders are ignored by git."""

import io
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ttt_research.train.joblog import RunLog

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_train_log_holds_the_lines_the_run_printed(tmp_path):
    job = tmp_path / "job"
    out = subprocess.run([sys.executable, "-m", "ttt_research", "debug=tiny", "progress=lines",
                          "threads=1", f"hydra.run.dir={job}"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    log = (job / "train.log").read_text()
    assert log == out.stdout  # line for line what the console showed, in its order
    lines = log.splitlines()
    assert lines[0] == ("training reinforce [128, 128] signed9, seat o vs random, seed 0: 2,048 games in "
                        "4 updates of 512")
    assert [ln.split()[0] for ln in lines[1:3]] == ["[2/4]", "[4/4]"]
    assert "Exact evaluation after 2,048 games (reinforce [128, 128] signed9, seat o, seed 0):" in lines
    assert lines[-1].startswith(f"run folder: {job}  (policy.onnx parity")


def test_the_tee_keeps_plain_lines_and_gives_stdout_back(tmp_path, monkeypatch):
    console = io.StringIO()
    monkeypatch.setattr(sys, "stdout", console)
    path = tmp_path / "train.log"
    handler = RunLog(str(path))
    assert sys.stdout is handler.tee and not path.exists()  # no line yet, no file
    print("opening line")
    print("\x1b[2K a progress bar's redraw")
    sys.stdout.write("a line in ")
    sys.stdout.write("two writes\n 50%\r100%\n")  # a line rewritten: as the terminal leaves it
    handler.handle(logging.makeLogRecord({"msg": "a record", "levelno": logging.INFO}))
    assert path.read_text() == "opening line\na line in two writes\n100%\na record\n"
    assert console.getvalue().startswith("opening line\n\x1b[2K a progress bar's redraw\n")
    assert sys.stdout.isatty() is False  # the console's own answers
    handler.close()
    assert sys.stdout is console
    print("after the job")
    assert path.read_text().endswith("a record\n")


def test_a_tee_whose_folder_went_leaves_the_console_alone(tmp_path, monkeypatch):
    console = io.StringIO()
    monkeypatch.setattr(sys, "stdout", console)
    handler = RunLog(str(tmp_path / "gone" / "train.log"))  # a refused job's folder, removed
    print("error line")
    handler.close()
    assert console.getvalue() == "error line\n" and not (tmp_path / "gone").exists()


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                    reason="needs a git checkout")
def test_the_docs_runs_folders_are_ignored_by_git():
    out = subprocess.run(["git", "check-ignore", "runs/a/eval.json"], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "runs/a/eval.json"
