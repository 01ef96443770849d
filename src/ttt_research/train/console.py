"""What a training run tells the person watching it.

* ``opening_line``: the run's first line: what is trained, and the budget *as played*
  (whole updates, so a budget that is not a multiple of an update's games is rounded up,
  and the line says so).
* ``ProgressLines``: off a terminal (piped, CI, a log file) there is no progress bar, so
  one short line per exact evaluation says how far the run is, how fast it goes, where
  the exact evaluation stands and how long is left. Flushed at once: a reader of the log
  sees the run move. Printed once the update's row is in ``metrics.csv`` and its checkpoint
  in place, so a reader that stops reading (``| head -n 4``) ends the run with every row
  it saw kept.

What ``run.json`` records of the host is ``host.py``'s.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass

import lightning as L

from ttt_research.contract import JUDGED_SEATS, REPORT_KEY, trained_exploit
from ttt_research.evaluation.text import small


def opening_line(what: str, budget: int, updates: int, per_update: int, members: int = 1) -> str:
    """``what``, then the budget as played: ``updates`` updates of ``per_update`` games (each,
    for a population of ``members``)."""
    played = updates * per_update
    each = f" each ({played * members:,} in all)" if members > 1 else ""
    line = f"training {what}: {played:,} games{each} in {updates:,} updates of {per_update:,}"
    if played != budget:
        line += f" (budget.games={budget:,} rounded up to whole updates)"
    return line


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


class OpeningLine(L.Callback):
    """Print ``opening_line`` once the Trainer is known (DDP: the updates of all processes),
    and ``after`` it when there is one (why the run's pair has no tuned cell: ``cells.Note``)."""

    def __init__(self, what: str, budget: int, after: str = ""):
        self.what, self.budget, self.after = what, int(budget), after

    def on_fit_start(self, trainer, module) -> None:
        if trainer.is_global_zero:
            line = opening_line(self.what, self.budget, module.total_updates,
                                module.games_per_update * module.budget_processes,
                                module.population_size)
            if module.games_played:  # restored from checkpoints/last.ckpt (resume=true)
                line += f"; resumed after {module.games_played:,} games"
            print(line + (f"\n{self.after}" if self.after else ""), flush=True)


def trained_text(reports: list, seat: str) -> str:
    """The progress line's part for the policy as trained: what a best response gains against
    it from the training seat (NashConv for ``both``; a population's median), or nothing."""
    found = [v for r in reports if r is not None and (v := trained_exploit(r, seat)) is not None]
    if not found:
        return ""
    what = "NashConv" if seat == "both" else f"best response vs {seat.upper()}"
    return f"  as trained: {what} {small(statistics.median(found))}"


class ProgressLines(L.Callback):
    """One line per exact evaluation, read from ``evaluation.history`` (so it prints exactly
    what the ``eval/*`` metrics hold), e.g.::

        [ 50/367]  819,200 games  14%  41.2k games/s  exact vs random: O win 0.8812 loss 0.0213  ETA 2m02s
    """

    def __init__(self, evaluation, seat: str, stream=None):
        self.evaluation = evaluation
        self.seats = JUDGED_SEATS[seat]
        self.seat = seat
        self.stream = stream
        self._seen = 0
        self._start: tuple[float, int] | None = None  # (time, games) when this fit began
        self._first: tuple[float, int] | None = None  # ... and at the end of its first update
        self._line: str | None = None  # made at the update's end, printed after its row

    # Lightning logs an update's row after every callback's on_train_batch_end, and the
    # checkpoint goes into place at the next hook (callbacks.PeriodicCheckpoint, which comes
    # first in the callback list): the line waits for the same hooks.
    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._print()

    def on_train_epoch_end(self, trainer, module) -> None:
        self._print()

    def on_train_end(self, trainer, module) -> None:
        self._print()

    def _print(self) -> None:
        line, self._line = self._line, None
        if line is not None:
            print(line, file=self.stream or sys.stdout, flush=True)

    def on_train_start(self, trainer, module) -> None:
        self._start = (time.perf_counter(), module.games_played)
        self._seen = len(self.evaluation.history)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self._first = self._first or (time.perf_counter(), module.games_played)
        history = self.evaluation.history
        if len(history) == self._seen or not trainer.is_global_zero:
            return
        self._seen = len(history)
        st = status(self, trainer, module, games=history[-1][0])
        width = len(str(st.updates))
        self._line = (f"[{batch_idx + 1:>{width}}/{st.updates}] {st.games:>11,} games "
                      f"{100 * st.games / st.budget:3.0f}%  {st.rate / 1000:,.1f}k games/s  "
                      f"exact vs random: {st.exact}  ETA {st.eta}")


@dataclass
class Status:
    """Where a run stands after an update: games played (per member) of the budget, the
    whole population's speed, the last exact evaluation in words, the time left."""

    games: int
    budget: int
    updates: int
    rate: float  # games per second, all members
    exact: str
    eta: str


def status(watcher, trainer, module, games: int | None = None) -> Status:
    """``watcher``: a callback with ``evaluation``, ``seat``, ``seats``, ``_start`` and
    ``_first``; ``games``: played so far (default: the module's count).

    The speed is the updates': from the end of this session's first update (where a run, new or
    resumed, loads its board's tables: 10-20 s on 4,4,4) when games were played since, and
    without the exact evaluations' seconds; the time left adds the evaluations still due at the
    last one's pace. (Counting both in the speed, a resumed 4,4,4 run said 0.5k games/s and
    1h50m left at its first line, where it played 8k games/s and had 8 min to go.)"""
    evaluation = watcher.evaluation
    history = evaluation.history
    games = module.games_played if games is None else games
    t0, g0 = watcher._first if watcher._first is not None and games > watcher._first[1] else watcher._start
    elapsed = time.perf_counter() - t0 - evaluation.spent_since(t0)
    rate = (games - g0) / elapsed if elapsed > 0 else 0.0  # games per member and second
    updates = trainer.num_training_batches
    budget = module.games_per_update * module.budget_processes * updates
    exact = "no exact evaluation yet"
    if history:
        report = history[-1][1]
        if hasattr(watcher.evaluation, "summary"):  # a population's: medians over its members
            exact = watcher.evaluation.summary()
        else:
            exact = "  ".join(
                f"{s.upper()} win {report[REPORT_KEY[s]]['vs_random']['win']:.4f} "
                f"loss {report[REPORT_KEY[s]]['vs_random']['loss']:.4f}" for s in watcher.seats)
        exact += trained_text(report if isinstance(report, list) else [report], watcher.seat)
    done = module.update_index + 1  # updates played, this one included
    due = updates // evaluation.every - done // evaluation.every + (updates % evaluation.every > 0)
    last = evaluation.took[-1][1] if evaluation.took else 0.0
    eta = _duration((budget - games) / rate + max(due, 0) * last) if rate > 0 and games < budget else "0s"
    return Status(games, budget, updates, rate * int(module.active_all.sum()), exact, eta)


def bar_columns() -> list:
    """The progress bar's columns: the bar, games played of the budget with thousands
    separators as the progress lines write them (Rich's own count has none: "98304/4014080"),
    the share, the speed and the time left. Rich is imported here, not at the module's import:
    a command that never draws a bar does not pay for it."""
    from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    class Games(ProgressColumn):
        def render(self, task) -> Text:
            total = f"{int(task.total):,}" if task.total is not None else "?"
            return Text(f"{int(task.completed):,}/{total}", style="progress.download")

    return [BarColumn(bar_width=20), Games(), TextColumn("games {task.percentage:>3.0f}%"),
            TextColumn("{task.fields[rate]}"), TextColumn("ETA"), TimeRemainingColumn()]


class GamesProgress(L.Callback):
    """On a terminal: a Rich display counted in games, not Lightning's "Epoch 0/0" and
    iterations, with the speed, the time left and the last exact evaluation under it::

        ━━━━━━╸━━━━━━━━━━━━━ 1,376,256/4,014,080 games  34% 71.2k games/s ETA 0:00:37
        exact vs random: O win 0.9031 loss 0.0012  as trained: best response vs O 2.42e-05
    """

    def __init__(self, evaluation, seat: str, console=None):
        self.evaluation, self.seat, self.seats = evaluation, seat, JUDGED_SEATS[seat]
        self.console = console
        self._start: tuple[float, int] | None = None
        self._first: tuple[float, int] | None = None  # (``ProgressLines``)
        self._progress = None
        self._task = None

    def on_train_start(self, trainer, module) -> None:
        if not trainer.is_global_zero:
            return
        from rich.progress import Progress

        self._start = (time.perf_counter(), module.games_played)
        class WithExact(Progress):  # the bar's row, then the exact figures on a line of their own
            def get_renderables(self):
                yield self.make_tasks_table(self.tasks)
                for task in self.tasks:
                    yield task.fields["exact"]

        self._progress = WithExact(*bar_columns(), console=self.console, transient=False)
        budget = module.games_per_update * module.budget_processes * trainer.num_training_batches
        self._task = self._progress.add_task("training", total=budget, completed=module.games_played,
                                             rate="", exact="exact vs random: no evaluation yet")
        self._progress.start()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self._first = self._first or (time.perf_counter(), module.games_played)
        if self._progress is None:
            return
        st = status(self, trainer, module)
        self._progress.update(self._task, completed=st.games, rate=f"{st.rate / 1000:,.1f}k games/s",
                              exact=f"exact vs random: {st.exact}")

    def on_train_end(self, trainer, module) -> None:
        self.close()

    def on_exception(self, trainer, module, exception) -> None:
        self.close()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
