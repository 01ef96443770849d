"""Lightning callbacks: exact evaluation during training, and crash-safe checkpoints.

``ExactEvaluation`` runs the exact evaluator (``evaluation/exact.py``: the whole game tree, no
sampling) every ``every`` updates and after the last one, logs the ``eval/*`` metrics of
the contract, and keeps the history that ``analysis/curves.py`` draws. It costs ~15 ms, so an
evaluation every few dozen updates is nearly free. An algorithm with action values gets its
``value_accuracy`` block too (``evaluation/values.py``), and every evaluation scores the policy
as trained (``evaluation/exploit.py``: its NashConv, ``eval/trained_*``) beside the greedy one.
Each evaluation also records the training wall seconds since the fit began (``train/elapsed_s``);
the clock is saved in the checkpoint, so a resumed run continues it (the seconds up to the
checkpoint count, those of the updates after it that the kill lost do not: the resumed run
plays them again). With ``league`` it keeps the policy as trained of each evaluation
(``train/league.py``).

``PeriodicCheckpoint`` writes ``checkpoints/last.ckpt`` so that no kill can tear it, renames
it into place only once the ``metrics.csv`` rows it covers are on disk, and never replaces a
good checkpoint with a non-finite one.
"""

from __future__ import annotations

import copy
import os
import time

import lightning as L
import torch

from ttt_research.contract import (
    ELAPSED,
    JUDGED_SEATS,
    NASHCONV,
    TRAINED_KEY,
    VALUE_KEY,
    eval_metrics,
    exploit_metrics,
    greedy_nashconv,
    learner_loss,
    value_metrics,
)
from ttt_research.errors import NonFiniteError
from ttt_research.evaluation.exact import decision_logits, evaluate_stack
from ttt_research.evaluation.exploit import evaluate_agent, trained_blocks
from ttt_research.evaluation.values import value_accuracy
from ttt_research.files.atomic import removed_on_error, sync_and_replace, temporary


def learned_values(module) -> dict | list[dict] | None:
    """The ``value_accuracy`` of the module's algorithm (``values.value_accuracy``: a block,
    a population's list of one per member), or None when it learns no action values."""
    def views(view):  # (P, 9) -> on the module's device; a stack's (N, P, 9), one block per member
        view = view.to(module.device)
        return view.expand(module.n, -1, -1) if module.stacked else view

    with module.algo.values_held():  # its calls, part after part, see the same weights
        return value_accuracy(lambda view: module.algo.action_values(views(view)), module.reward,
                              JUDGED_SEATS[module.seat], logits=lambda view: module.policy_logits(views(view)),
                              members=module.n if module.stacked else 1, **module.on_board)


def exact_reports(module) -> list[dict]:
    """Every member's exact report (a single run is a population of one: a list of one): the
    greedy policy's, its ``nashconv`` and the ``as_trained`` block of the policy the algorithm
    plays, from one pass over the decision positions (a single run's through
    ``exploit.evaluate_agent``, the same evaluation of one member, whose refusal of a policy
    names no member); then the learned values' accuracy where the algorithm learns values,
    and a population's figures of the algorithm's own (``Algorithm.member_reports``; a single
    run adds its own once, to eval.json)."""
    acting = module.algo.acting(module)
    if module.stacked:
        trained: dict[int, dict] = {}

        def each(first, logits):  # the policy as trained, from the same forward pass
            trained.update(enumerate(trained_blocks(logits, acting, first, **module.on_board), first))

        reports = evaluate_stack(module.net, each=each, **module.on_board)
        for k, r in enumerate(reports):
            r[NASHCONV] = greedy_nashconv(r)
            r[TRAINED_KEY] = trained[k]
    else:
        reports = [evaluate_agent(module.policy_logits, acting, **module.on_board)]
    blocks = learned_values(module)  # each member's value_accuracy (a single run's: one), None without
    if blocks is not None:
        for r, block in zip(reports, blocks if module.stacked else [blocks], strict=True):
            r[VALUE_KEY] = block
    extra = module.algo.member_reports() if module.stacked else None
    if extra is not None:
        for r, more in zip(reports, extra, strict=True):
            r.update(more)
    return reports


def final_report(module, evaluation) -> dict:
    """A single run's report at its end: the evaluation's after the last update (it ran then:
    ``ExactEvaluation.due``), or a new one if the history ends elsewhere (a resume with no
    update left to play). A deep copy: eval.json adds to it, the history stays as evaluated."""
    if evaluation.history and evaluation.history[-1][0] == module.games_played:
        return copy.deepcopy(evaluation.history[-1][1])
    (report,) = exact_reports(module)
    return report


class ExactEvaluation(L.Callback):
    """Evaluate the greedy policy exactly every ``every`` updates and at the end.

    ``history``: ``(games, report)`` per evaluation; ``elapsed``: the training wall seconds
    at each (``clock``; None for evaluations of a checkpoint written before they were kept)."""

    def __init__(self, every: int = 25, league: bool = False):
        self.every = int(every)
        self.league = league  # keep the policy as trained at each evaluation (train/league.py)
        self.snapshots: list[tuple[int, torch.Tensor]] = []  # (games, (M, 9) float32 probabilities)
        self.history: list[tuple[int, dict]] = []  # (games played, report)
        self.elapsed: list[float | None] = []  # train/elapsed_s of each history entry
        self._offset = 0.0  # seconds trained by the sessions before a resume (the checkpoint's)
        self._start: float | None = None  # perf_counter() when this session's fit began
        self.took: list[tuple[float, float]] = []  # this session's evaluations: (began, seconds)

    def on_fit_start(self, trainer, module) -> None:
        self._start = time.perf_counter()

    def clock(self) -> float:
        """Training wall seconds since the fit began, the sessions before a resume included."""
        return self._offset + (time.perf_counter() - self._start if self._start is not None else 0.0)

    def record(self, games: int, report, seconds: float | None = None) -> None:
        """Add an evaluation (a report, or a population's list) to the history, at
        ``seconds`` of training (default: now)."""
        self.history.append((games, report))
        self.elapsed.append(round(self.clock() if seconds is None else seconds, 3))

    def spent_since(self, t0: float) -> float:
        """Wall seconds this session's evaluations begun after ``t0`` (``perf_counter``) took:
        the progress's speed counts the updates alone (4,4,4: 10-20 s an evaluation)."""
        return sum(seconds for began, seconds in self.took if began >= t0)

    def evaluate(self, trainer: L.Trainer, module) -> dict:
        began = time.perf_counter()
        report = self._evaluate(trainer, module)
        self.took.append((began, time.perf_counter() - began))
        return report

    def _evaluate(self, trainer: L.Trainer, module) -> dict:
        was_training = module.training
        module.eval()
        seconds = self.clock()  # the time trained until this evaluation, not counting it
        (report,) = exact_reports(module)  # greedy, as trained, values
        if self.league:
            probs = module.algo.acting(module).probs(decision_logits(module.policy_logits, **module.on_board),
                                                     **module.on_board).float()
            self.snapshots.append((module.games_played, probs))
        module.train(was_training)
        self.record(module.games_played, report, seconds)
        return report

    def due(self, trainer, batch_idx: int) -> bool:
        """Whether update ``batch_idx`` (0-based) ends with an evaluation: every ``every``
        updates, and the last (the budget's, or the one its algorithm ended the run with:
        ``Algorithm.finished``; a stop signal's update is not one)."""
        return ((batch_idx + 1) % self.every == 0 or batch_idx + 1 >= trainer.num_training_batches
                or trainer.lightning_module.algo.finished)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if not self.due(trainer, batch_idx):
            return
        report = self.evaluate(trainer, module)
        # Straight to the loggers, in float64 and once: values logged with self.log from a
        # callback are rounded to float32 and repeated on later rows until logged again.
        metrics = {**eval_metrics(report), **exploit_metrics(report), **value_metrics(report),
                   ELAPSED: self.elapsed[-1],
                   "train/games": float(module.games_played)}
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=batch_idx)
        module.log("exact_loss", learner_loss(report, module.seat), prog_bar=True, logger=False,
                   on_step=True, on_epoch=False)

    def state_dict(self) -> dict:
        state = {"history": self.history, "elapsed": self.elapsed, "elapsed_s": self.clock()}
        if self.snapshots:
            state["league"] = self.snapshots
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self.history = list(state_dict.get("history", []))
        # A checkpoint written before the clock was kept has neither: its evaluations have no
        # time (None), and the clock starts again from 0 at the resume.
        elapsed = list(state_dict.get("elapsed", []))
        self.elapsed = (elapsed + [None] * len(self.history))[: len(self.history)]
        self._offset = float(state_dict.get("elapsed_s", 0.0))
        self.snapshots = list(state_dict.get("league", []))


class PeriodicCheckpoint(L.Callback):
    """``checkpoints/last.ckpt`` every ``every`` updates and after the last one.

    Counted in updates (training steps), not optimiser steps: an algorithm may take many
    optimiser steps per update. Written to a temporary file and renamed over the old one,
    so a kill at any moment leaves either the previous checkpoint or the new one, never a
    torn file (``os.replace`` is atomic on POSIX and Windows). A full or read-only disk is
    one line (``OutputError``) and leaves no temporary file.

    The state is taken at the end of the update (``on_train_batch_end``, where Lightning's
    loop resumes from), but the rename waits for the next hook after Lightning has logged
    that update's row (``on_train_batch_start`` of the next update, or the end of the
    epoch): a checkpoint is in place only when every row it covers is in ``metrics.csv``
    (flushed and synced), so a kill at any moment loses no row and a resume repeats none.

    A module whose parameters are not all finite is never saved (the module's own guard
    normally stops the run first, at the update that went wrong); when a run stops on
    ``NonFiniteError``, the error is told which checkpoint is the last good one.
    """

    def __init__(self, dirpath: str, every: int = 100, filename: str = "last.ckpt"):
        self.dirpath = dirpath
        self.every = int(every)
        self.filename = filename
        self.saved_update: int | None = None  # 1-based update of the checkpoint on disk
        self._pending: tuple[str, int | None, object] | None = None  # (temporary, update, trainer)
        self._deferred = False

    @property
    def path(self) -> str:
        return os.path.join(self.dirpath, self.filename)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        last = batch_idx + 1 >= trainer.num_training_batches or module.algo.finished
        if (batch_idx + 1) % self.every and not last:
            return
        self.take(trainer, batch_idx + 1)

    def take(self, trainer, update: int) -> None:
        """The checkpoint of ``update``, taken at its end and renamed once its row is logged
        (``commit``, below); nothing if it is taken already (a stop signal asks again)."""
        if update in (self.saved_update, self._pending and self._pending[1]):
            return
        self._deferred = True
        try:
            self.save(trainer, update)
        finally:
            self._deferred = False

    # The first hooks after Lightning logged the update's row: the rename happens here.
    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self.commit()

    def on_train_epoch_end(self, trainer, module) -> None:
        self.commit()

    def on_train_end(self, trainer, module) -> None:
        self.commit()

    def save(self, trainer, update: int | None = None) -> None:
        """Write the checkpoint of the module as it is now and rename it into place; called
        from ``on_train_batch_end``, the rename waits for ``commit()``, after the row."""
        module = trainer.lightning_module
        if not all(bool(torch.isfinite(p).all()) for p in module.parameters()):
            raise NonFiniteError(f"non-finite parameters at update {update}: checkpoint not written")
        self.discard()
        tmp = str(temporary(self.path))
        with removed_on_error(tmp, self.path):
            os.makedirs(self.dirpath, exist_ok=True)
            trainer.save_checkpoint(tmp)
        self._pending = (tmp, update, trainer)
        if not self._deferred:
            self.commit()

    def commit(self) -> None:
        """Rename the pending checkpoint into place, after making it and the loggers' rows
        durable (``fsync``: a crash of the host cannot leave a checkpoint ahead of its rows)."""
        if self._pending is None:
            return
        tmp, update, trainer = self._pending
        self._pending = None
        if not trainer.is_global_zero:  # Lightning wrote the file from rank 0 only
            self.saved_update = update
            return
        with removed_on_error(tmp, self.path):
            for logger in getattr(trainer, "loggers", []):
                if hasattr(logger, "sync"):
                    logger.sync()
            sync_and_replace(tmp, self.path)
        self.saved_update = update

    def discard(self) -> None:
        """Drop a checkpoint written but not renamed (the run stopped before its row)."""
        if self._pending is not None:
            self._remove(self._pending[0])
            self._pending = None

    @staticmethod
    def _remove(tmp: str) -> None:
        try:
            os.remove(tmp)
        except OSError:
            pass

    def on_exception(self, trainer, module, exception: BaseException) -> None:
        self.discard()
        if isinstance(exception, NonFiniteError) and os.path.isfile(self.path):
            where = f" (update {self.saved_update})" if self.saved_update else ""
            exception.checkpoint = f"{self.path}{where}"
