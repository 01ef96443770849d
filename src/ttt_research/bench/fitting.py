"""Training a config for a speed figure: ``fit`` trains without a run folder, timed by
``Clock`` (the training loop's wall time; optionally the time to a first unbeatable agent).
Shared by the bench's figures (``suite.py``, ``parallel.py``) and experiments that time runs.
"""

from __future__ import annotations

import time

import lightning as L
import torch
from hydra.utils import instantiate

from ttt_research.contract import unbeatable
from ttt_research.evaluation.exact import evaluate_policy
from ttt_research.train import allocator, cores
from ttt_research.train.confdir import compose
from ttt_research.train.run import build_process, quiet_lightning


class Clock(L.Callback):
    """The training loop's wall time; with ``watch``, also the time at which the exact
    evaluation, run after every update (and not counted), first shows 0 losses vs random
    from both seats, where it stops the run."""

    def __init__(self, watch: bool = False):
        self.watch = watch
        self.unbeatable_s: float | None = None
        self.train_s = 0.0
        self._start = self._excluded = 0.0

    def on_train_start(self, trainer, module):
        self._start, self._excluded = time.perf_counter(), 0.0

    def _elapsed(self) -> float:
        return time.perf_counter() - self._start - self._excluded

    def on_train_batch_end(self, trainer, module, *args):
        if not self.watch or self.unbeatable_s is not None:
            return
        at = self._elapsed()
        t0 = time.perf_counter()
        report = evaluate_policy(module.policy_logits)
        self._excluded += time.perf_counter() - t0
        if unbeatable(report, "both"):
            self.unbeatable_s = at
            trainer.should_stop = True

    def on_train_end(self, trainer, module):
        self.train_s = self._elapsed()


def fit(overrides: list[str], watch: bool = False, threads: int | None = None):
    """Train the config of ``overrides`` without a run folder; returns (module, clock).
    ``threads``: torch's threads (None: the config's; ``auto``: a population takes the cores
    nothing else uses, as ``python -m ttt_research`` does: ``train/cores.py``). With
    ``trainer=ddp`` a population's members are shared out as the command shares them; Lightning
    starts the other processes by running the calling script again, so call it from a script
    that does the same in every process (the module returned holds this process's share)."""
    cfg = compose(overrides)  # confdir.compose: python -m ttt_research OVERRIDES
    quiet_lightning()
    setting = threads or cfg.threads
    torch.set_num_threads(cores.starting_threads(setting) or 1)
    L.seed_everything(cfg.seed, verbose=False)
    module, extra = build_process(cfg)  # trainer=ddp: this process's share of a population
    clock = Clock(watch)
    callbacks = [clock, *cores.callbacks(setting, module.stacked)]
    trainer = instantiate(cfg.trainer, logger=False, callbacks=callbacks, enable_checkpointing=False,
                          enable_progress_bar=False, limit_train_batches=module.total_updates, **extra)
    with allocator.kept_freed_memory(population=module.stacked):  # as python -m ttt_research does
        trainer.fit(module)
    return module, clock


def trainer_for(device: str) -> str:
    return "gpu" if device == "cuda" else "cpu"
