"""Atomic file outputs: a file is either its old self or its complete new self, never torn.

Every output of the project goes through here: it is written to a temporary file in the
same folder (same file system, so the rename cannot copy), flushed, and renamed over the
target with ``os.replace`` (atomic on POSIX and Windows). A kill at any moment leaves the
previous file or the new one; a failure (a full or read-only disk) removes the temporary
file and raises ``OutputError``, one line naming the file and the reason.

    from .atomic import atomic_path, write_atomic
    write_atomic(run_dir / "eval.json", text)
    with atomic_path(run_dir / "policy.onnx") as tmp:   # for writers that want a path
        onnx.save(model, tmp)

Standard library only: every module may import it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator
from pathlib import Path

from ttt_research.errors import UserError

TMP_SUFFIX = ".tmp"  # what a kill can leave beside an output; nothing reads it as a result
PID_MAX = 2**31 - 1  # the largest pid_t: a larger number in a name is no process's
_TEMPORARY = re.compile(r"\..+\.([1-9][0-9]{0,9})" + re.escape(TMP_SUFFIX))  # .NAME.PID.tmp

# errno values that are the disk's or the folder's state, not a bug: said in one line.
_DISK_ERRORS = {errno.ENOSPC: "no space left on the device", errno.EROFS: "read-only file system",
                errno.EACCES: "permission denied", errno.EPERM: "permission denied",
                errno.EDQUOT: "disk quota exceeded"}


class OutputError(UserError):
    """An output could not be written (full or read-only disk, no permission)."""


def describe_os_error(error: OSError) -> str:
    """The reason of an ``OSError`` in a few words (``no space left on the device``)."""
    return _DISK_ERRORS.get(error.errno, error.strerror or str(error))


def temporary(path: str | Path) -> Path:
    """The temporary name ``path`` is written under before its rename: hidden, same folder,
    unique to this process (two writers never share one)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")


def writer_of(path: str | Path) -> int | None:
    """The process id in a name ``temporary`` gives (``.NAME.PID.tmp``), or None when the name
    is not one it gives. A name found in a folder is untrusted text: the number is read only
    as a process id can be written (ASCII digits, no leading zero, within ``PID_MAX``), so
    ``.eval.json.99999999999999999999.tmp`` is nobody's, never handed to the OS."""
    match = _TEMPORARY.fullmatch(Path(path).name)
    pid = int(match.group(1)) if match else 0
    return pid if 0 < pid <= PID_MAX else None


def left_by_a_dead_process(path: str | Path) -> bool:
    """Whether ``path`` is a temporary file (a plain file, not a link or a folder, named as
    ``temporary`` names them) whose writer is another process, no longer alive: what a kill
    left, which nothing will rename. A file of a live process, or of a name not ours, is not."""
    path = Path(path)
    pid = writer_of(path)
    if pid is None or pid == os.getpid() or path.is_symlink() or not path.is_file():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process (EPERM): alive
        return False
    return False


@contextlib.contextmanager
def removed_on_error(tmp: str | Path, path: str | Path) -> Iterator[None]:
    """Any error in the block removes ``tmp`` (the temporary file of ``path``); an ``OSError``
    of the disk becomes ``OutputError``. For writers that rename later themselves (the
    checkpoint waits for its rows: ``callbacks.PeriodicCheckpoint``)."""
    try:
        yield
    except OSError as e:
        _remove(Path(tmp))
        raise OutputError(f"cannot write {path}: {describe_os_error(e)}") from e
    except BaseException:
        _remove(Path(tmp))
        raise


def sync_and_replace(tmp: str | Path, path: str | Path) -> None:
    """``tmp`` on disk, then renamed over ``path``: a crash cannot name a hollow file."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success rename it over ``path``. On any error the
    temporary file is removed; an ``OSError`` of the disk becomes ``OutputError``."""
    path = Path(path)
    tmp = temporary(path)
    with removed_on_error(tmp, path):
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        sync_and_replace(tmp, path)


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)


def _remove(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        tmp.unlink()
