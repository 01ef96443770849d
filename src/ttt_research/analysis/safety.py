"""How soon a configuration's seeds become unbeatable, for the report: per configuration and
per trained seat (all of them together, and X and O apart), the share of seeds unbeatable at
the end (Wilson 95%), the training games until each seed's first unbeatable exact evaluation
(median and interquartile range over the seeds that got there, and how many never did), and
the training wall seconds per agent until then; and the curve of the share of seeds
unbeatable at each evaluation, against games and against wall seconds (``report_safe.png``).

Wall seconds come from the job's ``elapsed_s`` at each exact evaluation (metrics.csv's
``train/elapsed_s``, population_evals.csv's ``elapsed_s``): a population trains its members
together, so a member's cost is the job's seconds divided by its members (``RunRecord.seconds_at``).
A run written before ``elapsed_s`` existed has no seconds: its cells are blank.

Quantiles are NumPy's (linear interpolation between order statistics): the median of 1000,
2000, 4000 and 8000 games is 3000, its IQR [1750, 5000].
"""
from __future__ import annotations

from dataclasses import dataclass

from ttt_research.analysis.runs import ELAPSED, RunRecord
from ttt_research.contract import EVAL_SEATS, unbeatable
from ttt_research.evaluation import stats


def quartiles(values: list[float]) -> tuple[float, float, float] | None:
    """(median, 25th, 75th percentile) of ``values``; None for none."""
    import numpy as np

    if not values:
        return None
    q25, q50, q75 = np.percentile(np.asarray(values, dtype=float), [25, 50, 75])
    return float(q50), float(q25), float(q75)


@dataclass
class Safety:
    """One configuration's safety from ``seats`` (None: every seat each run trains)."""
    seats: tuple[str, ...] | None
    seeds: int
    unbeatable: int                  # at the end (the final report)
    ci: tuple[float, float]          # Wilson 95% of unbeatable / seeds
    first_games: list[float | None]  # per seed: games at its first unbeatable evaluation (None: never)
    first_seconds: list[float | None]  # per seed: wall seconds per agent then (None: never, or no elapsed_s)
    timed: bool                      # some run of it has elapsed_s
    name: str = ""                   # the seats, in words: "X and O", "O"

    @property
    def never(self) -> int:
        return sum(g is None for g in self.first_games)

    @property
    def games_quartiles(self):
        return quartiles([g for g in self.first_games if g is not None])

    @property
    def seconds_quartiles(self):
        return quartiles([t for t in self.first_seconds if t is not None])


def _timed(r: RunRecord) -> bool:
    return bool(r.series.get(ELAPSED))


def safety(runs: list[RunRecord], seats: tuple[str, ...] | None = None) -> Safety:
    """``Safety`` of ``runs`` from ``seats`` (None: each run's trained seats); only the runs
    that train every seat of ``seats`` count."""
    rs = runs if seats is None else [r for r in runs if all(s in r.trained for s in seats)]
    safe = [r.unbeatable if seats is None else
            r.report is not None and all(unbeatable(r.report, s) for s in seats) for r in rs]
    first = [r.first_unbeatable_from(seats) for r in rs]
    seconds = [r.seconds_at(g) for r, g in zip(rs, first, strict=True)]
    k, n = sum(safe), len(rs)
    name = " and ".join(s.upper() for s in (seats or trained_seats(rs)))
    return Safety(seats, n, k, stats.wilson(k, n) if n else (0.0, 1.0), first, seconds,
                  any(_timed(r) for r in rs), name)


def trained_seats(runs: list[RunRecord]) -> list[str]:
    return [s for s in EVAL_SEATS if any(s in r.trained for r in runs)]


def safety_rows(runs: list[RunRecord]) -> list[Safety]:
    """Every trained seat together, then (when more than one) each seat apart."""
    seats = trained_seats(runs)
    return [safety(runs)] + ([safety(runs, (s,)) for s in seats] if len(seats) > 1 else [])


def records(runs: list[RunRecord]) -> dict:
    """report.csv's columns on safety for one configuration: the first unbeatable evaluation's
    IQR and never-count, its wall seconds per agent, and per trained seat ``x_``/``o_`` the
    unbeatable share (Wilson) and the same times."""
    out: dict = {}
    both = safety(runs)
    out.update(_times("", both, median_games=False))
    for s in trained_seats(runs):
        one = safety(runs, (s,))
        lo, hi = one.ci
        out.update({f"{s}_unbeatable": one.unbeatable,
                    f"{s}_unbeatable_fraction": one.unbeatable / one.seeds if one.seeds else None,
                    f"{s}_unbeatable_ci_low": lo, f"{s}_unbeatable_ci_high": hi})
        out.update(_times(f"{s}_", one, median_games=True))
    return out


def _times(prefix: str, s: Safety, median_games: bool) -> dict:
    g, t = s.games_quartiles, s.seconds_quartiles
    out: dict = {}
    if median_games:  # the configuration's own median is summary.py's existing column
        out[f"{prefix}first_unbeatable_games_median"] = g[0] if g else None
    out.update({f"{prefix}first_unbeatable_games_q25": g[1] if g else None,
                f"{prefix}first_unbeatable_games_q75": g[2] if g else None,
                f"{prefix}first_unbeatable_never": s.never,
                f"{prefix}first_unbeatable_seconds_median": t[0] if t else None,
                f"{prefix}first_unbeatable_seconds_q25": t[1] if t else None,
                f"{prefix}first_unbeatable_seconds_q75": t[2] if t else None})
    return out


def _games(g: float) -> str:
    return f"{g / 1000:,.0f}k" if g >= 10_000 else f"{g / 1000:.1f}k" if g >= 1000 else f"{g:,.0f}"


def _seconds(t: float) -> str:
    return f"{t:.3g}" if t < 100 else f"{t:,.0f}"


def _spread(q, show) -> str:
    if q is None:
        return "never"
    return f"{show(q[0])} [{show(q[1])}, {show(q[2])}]"


def _timed_spread(s: Safety) -> str:
    """The wall seconds' spread, saying so where the seeds got there before the run kept
    ``elapsed_s`` (a run started before the clock existed, then resumed)."""
    reached = sum(g is not None for g in s.first_games)
    timed = sum(t is not None for t in s.first_seconds)
    if reached and not timed:
        return "not measured (no elapsed_s at those evaluations)"
    spread = _spread(s.seconds_quartiles, _seconds)
    return spread if timed == reached else f"{spread} ({timed} of {reached} timed)"


def markdown(labels: list[str], groups: list[list[RunRecord]]) -> str:
    """report.md's second table: per configuration and trained seat(s), the share unbeatable at
    the end and the time to the first unbeatable evaluation, in games and in wall seconds."""
    head = ["configuration", "seats", "seeds", "unbeatable at the end (Wilson 95%)",
            "games to first unbeatable: median [IQR]", "never", "wall s per agent to first unbeatable: "
            "median [IQR]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, runs in zip(labels, groups, strict=True):
        for s in safety_rows(runs):
            lo, hi = s.ci
            secs = "" if not s.timed else _timed_spread(s)
            lines.append("| " + " | ".join([
                label, s.name, str(s.seeds),
                f"{s.unbeatable}/{s.seeds} = {s.unbeatable / max(s.seeds, 1):.2f} [{lo:.2f}, {hi:.2f}]",
                _spread(s.games_quartiles, _games), f"{s.never} of {s.seeds}", secs]) + " |")
    intro = ("\nTime to safety: the first exact evaluation that finds a seed unbeatable from every seat "
             "named; median and interquartile range over the seeds that got there, `never` counts the "
             "others. Wall seconds per agent: the job's training seconds at that evaluation (`elapsed_s`) "
             "divided by the agents it trained together (a population's members); blank where the run "
             "has no `elapsed_s`.\n\n")
    return intro + "\n".join(lines) + "\n"


def share_curve(runs: list[RunRecord], seconds: bool = False):
    """(x, unbeatable, seeds): at each exact evaluation x (training games, or wall seconds per
    agent), how many of the ``seeds`` seeds were unbeatable from every trained seat, each seed
    at its latest evaluation at or before x (none yet: not unbeatable); x spans the range
    every evaluated seed covers. None when no seed has a point (no evaluations, or no
    ``elapsed_s`` for ``seconds``)."""
    import numpy as np

    paths = []
    for r in runs:
        pts = [(r.seconds_at(g) if seconds else g, safe) for g, safe in r.safe_at()]
        paths.append([(x, safe) for x, safe in pts if x is not None])
    covered = [p for p in paths if p]
    if not covered:
        return None
    end = min(p[-1][0] for p in covered)
    grid = np.unique([x for p in covered for x, _ in p if x <= end])
    count = np.zeros(len(grid), dtype=int)
    for p in covered:
        xs = np.array([x for x, _ in p])
        safe = np.array([s for _, s in p], dtype=bool)
        at = np.searchsorted(xs, grid, side="right") - 1  # the latest evaluation at or before x
        count += np.where(at >= 0, safe[np.maximum(at, 0)], False)
    return grid, count, len(runs)


def wilson_band(count, seeds: int):
    """(low, high) arrays of the Wilson 95% interval of ``count`` / ``seeds`` at each point."""
    import numpy as np

    cache: dict[int, tuple[float, float]] = {}
    for k in {int(k) for k in count}:
        cache[k] = stats.wilson(k, seeds)
    pairs = [cache[int(k)] for k in count]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
