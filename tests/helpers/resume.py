"""A training run killed on purpose after its first checkpoint (``Crash`` stands for the process
dying), and the metrics.csv rows that a resumed run must share with the uninterrupted one."""

import csv

from ttt_research.train.callbacks import PeriodicCheckpoint
from ttt_research.train.module import RLModule


def metric_rows(run_dir):
    """metrics.csv without its timing columns (the only values allowed to differ)."""
    with open(run_dir / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if not k.startswith("perf/")}
                for row in csv.DictReader(f)]


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
