"""A training run killed on purpose after its first checkpoint (``Crash`` stands for the process
dying), and the metrics.csv / population_evals.csv rows that a resumed run must share with the
uninterrupted one (all but the wall-clock columns)."""

import csv

import pytest

from ttt_research.train.callbacks import PeriodicCheckpoint
from ttt_research.train.module import RLModule
from ttt_research.train.run import train

# Wall-clock columns: the only values a resumed (or DDP) run may write differently.
TIMING = ("perf/", "train/elapsed_s", "elapsed_s")


def timeless_rows(path):
    """A CSV file's rows without its timing columns (``TIMING``)."""
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if not k.startswith(TIMING)} for row in csv.DictReader(f)]


def metric_rows(run_dir):
    """metrics.csv without its timing columns (the only values allowed to differ)."""
    return timeless_rows(run_dir / "metrics.csv")


def evals_rows(run_dir):
    """population_evals.csv without its ``elapsed_s`` column (the only one allowed to differ)."""
    return timeless_rows(run_dir / "population_evals.csv")


class Crash(Exception):
    """Stands for the process dying: raised as the update after a checkpoint begins."""


def crash_after_first_checkpoint(monkeypatch, later: int = 0):
    """Die as update ``later`` + 1 after the first checkpoint begins (0: right after it)."""
    saved = []
    save, start = PeriodicCheckpoint.save, RLModule.on_train_batch_start

    def saving(self, trainer, update=None):
        save(self, trainer, update)
        saved.append(update)

    def starting(self, batch, batch_idx):
        if saved and batch_idx >= saved[0] + later:
            raise Crash(f"killed {later} updates after the checkpoint of update {saved[0]}")
        start(self, batch, batch_idx)

    monkeypatch.setattr(PeriodicCheckpoint, "save", saving)
    monkeypatch.setattr(RLModule, "on_train_batch_start", starting)


def train_killed(cfg, run_dir, monkeypatch, later: int = 0) -> None:
    """Train ``cfg`` into ``run_dir`` until it dies ``later`` updates after its first checkpoint,
    then lift the patch: the folder is what a kill at that moment leaves."""
    crash_after_first_checkpoint(monkeypatch, later)
    with pytest.raises(Crash):
        train(cfg, run_dir)
    monkeypatch.undo()
