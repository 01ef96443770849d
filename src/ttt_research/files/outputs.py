"""Where a command that reads a policy may write: never over what it reads, never into a run.

A run folder is its run's record: ``eval.json``, ``metrics.csv``, ``policy.onnx``, the
checkpoint, Hydra's config, and whatever its trackers added. ``report``, ``dashboard`` and a
resume read them back, so a file written there by another command (``export -o`` or
``export --table``) would replace or blur the record and go unnoticed. ``check_output``
refuses such an output before anything is loaded, in one line:

- the command's input itself (the same path, a link to it, a hard link);
- any file of a run folder (a folder that holds one of ``RUN_FILES``), at its top or in its
  subfolders; only beside the checkpoints (``checkpoints/``, where ``export`` puts its
  default ``checkpoints/last.onnx``) may a new file, never a checkpoint, be written.

Standard library only: every module may import it (``train.runfolder`` names its runs by
``RUN_FILES``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ttt_research.errors import UserError

# What a run leaves in its folder: any of them means the folder holds a run.
RUN_FILES = ("checkpoints/last.ckpt", "eval.json", "metrics.csv", "run.json", ".hydra/config.yaml",
             "population.json")
CHECKPOINTS = "checkpoints"  # the one subfolder where an export may add a file (not a .ckpt)
# How far above an output a run folder is looked for: its files (eval.json), its subfolders'
# (.hydra/config.yaml), a member's (members/NNN/policy.onnx). Not further: a stray eval.json in
# a home folder must not make every file below it a run's.
DEPTH = 3


def run_folder(path: Path) -> Path | None:
    """The folder among ``path``'s nearest ``DEPTH`` ancestors that holds a run, or None."""
    for folder in list(path.parents)[:DEPTH]:
        if any((folder / name).exists() for name in RUN_FILES):
            return folder
    return None


def check_output(out: str | Path, source: str | Path, option: str, what: str = "the input") -> None:
    """Refuse (``UserError``) an output ``out`` (given as ``option``) that is the command's
    input ``source`` (``what`` names it) or a file of a run folder; see the module's docstring."""
    out, source = Path(out), Path(source)
    real = out.resolve()  # a link to a run's file is that file
    if real == source.resolve() or (out.exists() and source.exists() and os.path.samefile(out, source)):
        raise UserError(f"{out}: that is {what} itself; choose another {option}")
    run = run_folder(real)
    if run is None:
        return
    inside = real.relative_to(run).parts
    if len(inside) == 2 and inside[0] == CHECKPOINTS and Path(inside[1]).suffix.lower() != ".ckpt":
        return  # a new file beside the checkpoints: export's own default (checkpoints/last.onnx)
    raise UserError(f"{out}: a file of the run folder {run}, whose files are its run's record; "
                    f"choose another {option} outside it")
