"""One run counted once, for the report: folders that hold the same run (a copied folder, a
sweep's folder copied beside itself) would count as that many seeds and shrink every interval
(one run copied 1,500 times is not 1,500 seeds). A run is identified by its seed and its
config: ``.hydra/config.yaml`` (the job's seed in it: a population's members are told apart
by their own seed and hyperparameters) and the overrides, but what only changes how the run
was watched or started (``progress``, ``resume``, the run folder). The first one found
counts; the others are left out as ``Skipped`` of kind ``copy``, one warning per run naming
a few copies and their count (``skipped.copies_line``). A run that records no seed (no
Hydra record) is its folder, never another's copy.

The same seed and config trained twice (a rerun) is also one seed: training is seeded, so it is
the same sample again, not a new one.
"""
from __future__ import annotations

import json
from pathlib import Path

from ttt_research.analysis.recheck import run_name
from ttt_research.analysis.runs import NOISE, RunRecord
from ttt_research.analysis.skipped import Skipped

WATCHING = ("progress", "resume")  # config keys that change how a run is watched or started, not the run


def identity(run: RunRecord) -> str | None:
    """The run's seed and config as one string (None: no seed recorded)."""
    if run.seed is None:
        return None
    config = {k: v for k, v in (run.config or {}).items() if k not in WATCHING}
    overrides = sorted((k, v) for k, v in run.overrides.items() if k not in NOISE)
    return json.dumps([run.seed, config, overrides], sort_keys=True, default=str)


def count_once(runs: list[RunRecord], root: Path) -> tuple[list[RunRecord], list[Skipped]]:
    """(each run once, the first found; the others, each naming the run it repeats)."""
    first: dict[str, RunRecord] = {}
    kept, copies = [], []
    for run in runs:
        key = identity(run)
        if key is None or key not in first:
            if key is not None:
                first[key] = run
            kept.append(run)
            continue
        original = run_name(first[key], root)
        copies.append(Skipped(run.path, f"the same seed ({run.seed}) and config as {original}: counted once",
                              "copy", run_name(run, root), original))
    return kept, copies
