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
