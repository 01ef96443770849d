"""The training command run in the test's own process, and what the refusal tests compare:
``cli`` (Hydra's app, as ``python -m ttt_research``: it saves the ~10 s a subprocess spends
importing torch and Lightning), a test's copy of a folder made once, a folder's checksums, and
the one line of a refusal."""

from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
import sys
from pathlib import Path


def cli(*args: str) -> tuple[int, str, str]:
    """``python -m ttt_research ARGS`` in this process: (exit code, stdout, stderr)."""
    from ttt_research.__main__ import main

    out, err, argv = io.StringIO(), io.StringIO(), sys.argv
    sys.argv = ["ttt_research", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


def copy_of(made: Path, name: str, tmp_path: Path) -> Path:
    """A test's own copy of the folder ``name`` that a module's fixture made once under ``made``."""
    folder = tmp_path / name
    shutil.copytree(made / name, folder)
    return folder


def checksums(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) -> its SHA-256."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def one_error_line(err: str) -> str:
    """The refusal's one line (``error: ...``), asserting there is nothing else."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]
