"""atomic.py: outputs are renamed into place whole; a failed write leaves no temporary file."""

import os

import pytest

from ttt_research.files.atomic import OutputError, atomic_path, write_atomic


def test_write_replaces_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "eval.json"
    target.write_text("old")
    write_atomic(target, "new\n")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json"]


def test_an_error_inside_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    target = tmp_path / "policy.onnx"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.onnx"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_one_line(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="cannot write .*eval.json: permission denied"):
            write_atomic(folder / "eval.json", "x")
    finally:
        folder.chmod(0o755)


def test_full_disk_is_one_line_and_no_temporary(tmp_path, monkeypatch):
    import errno

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OutputError, match="no space left on the device"):
        write_atomic(tmp_path / "eval.json", "x")
    assert list(tmp_path.iterdir()) == []


def _dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    return int(child.stdout)


@pytest.mark.parametrize("name, pid", [
    (".eval.json.123.tmp", 123), (".last.ckpt.2147483647.tmp", 2**31 - 1),
    (".eval.json.99999999999999999999.tmp", None), (".eval.json.2147483648.tmp", None),
    (".eval.json.0.tmp", None), (".eval.json.007.tmp", None), (".eval.json.\u0661\u0662.tmp", None),
    ("eval.json.123.tmp", None), (".eval.json.-5.tmp", None), ("..5.tmp", None),
])
def test_a_temporary_names_its_writer_only_as_a_process_id_can_be_written(name, pid):
    """Before: any run of digits was read as the pid, and os.kill(99999999999999999999, 0)
    raised OverflowError in the middle of a resume."""
    from ttt_research.files.atomic import writer_of

    assert writer_of(name) == pid


def test_only_a_dead_processs_plain_temporary_is_left_by_a_dead_process(tmp_path):
    from ttt_research.files.atomic import left_by_a_dead_process, temporary

    dead = _dead_pid()
    (tmp_path / f".eval.json.{dead}.tmp").write_text("half")
    (tmp_path / ".eval.json.99999999999999999999.tmp").write_text("not ours")
    (tmp_path / f".curves.png.{dead}.tmp").mkdir()  # a folder: never one of ours
    (tmp_path / f".run.json.{dead}.tmp").symlink_to(tmp_path / f".eval.json.{dead}.tmp")
    temporary(tmp_path / "policy.onnx").write_text("this process's")
    (tmp_path / f".hparams.yaml.{os.getppid()}.tmp").write_text("a live process's")
    stale = [p.name for p in tmp_path.iterdir() if left_by_a_dead_process(p)]
    assert stale == [f".eval.json.{dead}.tmp"]
