"""The runs under a folder, for the report: every folder under DIR that holds an ``eval.json``
is a run (``runs.load_run``; a population's folder: one run per member). A folder without
``eval.json`` (the last file a run writes: still running, or killed), a folder whose files are
malformed, a run whose figures its ``policy.onnx`` contradicts (``recheck.py``) and a copy
of a run already found (``copies.py``: the same seed and config, counted once) are left out
(``Skipped``), each said on stderr (one line per run with copies, however many) and in report.md.
"""
from __future__ import annotations

import os
from pathlib import Path

from ttt_research.analysis.copies import count_once
from ttt_research.analysis.recheck import recheck
from ttt_research.analysis.runs import ReportError, RunRecord, load_population, load_run
from ttt_research.analysis.skipped import Skipped, counts, warn_skipped
from ttt_research.files.untrusted import Malformed


def _natural(path: Path) -> list:
    """Job folders in number order (2 before 10); a name and a number at the same depth
    (``sweep/0`` beside ``sweep/b/0``) compare as numbers first, never int against str."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.parts]


def run_folders(root: Path) -> list[Path]:
    """Every folder under ``root`` that holds a run, finished or not: an ``eval.json``, Hydra's
    record (``.hydra/config.yaml``) or a ``checkpoints`` folder. Links to folders are not
    followed (a link to a parent would never end)."""
    found = []
    for here, dirs, files in os.walk(root):
        if "eval.json" in files or "checkpoints" in dirs or (
                ".hydra" in dirs and os.path.exists(os.path.join(here, ".hydra", "config.yaml"))):
            found.append(Path(here))
        dirs[:] = [d for d in dirs if d not in (".hydra", "checkpoints", "wandb", ".submitit")]
    return sorted(found, key=_natural)


def scan_runs(root: Path, empty: bool = False) -> tuple[list[RunRecord], list[Skipped]]:
    """The complete, well-formed runs under ``root`` (a population's folder: one RunRecord per
    member), each counted once, and the runs skipped: incomplete (no ``eval.json``: still
    running, or killed before its end), malformed, contradicted by its policy, or a copy.
    ``empty``: none complete is no error (the report of several folders says which it left
    out, and why)."""
    if not root.is_dir():
        raise ReportError(f"no such directory: {root}")
    paths = run_folders(root)
    if not paths:
        raise ReportError(f"no runs under {root} (no eval.json found)")
    runs, skipped = [], []
    for p in paths:
        if not (p / "eval.json").exists():  # eval.json is the last file a run writes
            skipped.append(Skipped(p, "incomplete: no eval.json (still running, or stopped before its end)",
                                   "incomplete"))
            continue
        try:
            run = load_run(p)
            runs += load_population(run) if (p / "population.json").exists() else [run]
        except Malformed as e:
            skipped.append(Skipped(p, str(e)))
    runs, contradicted = recheck(runs, root)
    runs, copies = count_once(runs, root)
    skipped += contradicted + copies
    if not runs and not empty:
        said = next((f" ({s.name}: {s.why})" for s in skipped if s.kind == "contradicted"), "")
        raise ReportError(f"no complete run under {root}: {counts(skipped)}{said}")
    return runs, skipped


def find_runs(root: Path) -> list[RunRecord]:
    """``scan_runs``' runs, the folders it skipped said on stderr (``warn_skipped``)."""
    runs, skipped = scan_runs(root)
    warn_skipped(skipped, root)
    return runs
