"""``python -m ttt_research.report DIR``: statistics across seeds for a sweep, a population, or both.

Every folder under DIR that holds an ``eval.json`` is a run; a population's folder
(``population.json``) counts as one run per member, with the member's seed and its varied
hyperparameters as overrides. Runs are grouped into *configurations* by their Hydra
overrides (``.hydra/overrides.yaml``) and member hyperparameters, minus ``seed`` and the
``population.*`` keys; only the keys that differ between runs become columns.

Per configuration and per exact metric M (default: win and loss vs random for each trained
seat, and the optimal-move rate; ``--metrics`` picks others from the metric contract, e.g.
``o_perfect_loss``): the interquartile mean with its 95% stratified bootstrap interval, the
median and the mean; and the share of seeds that cannot be beaten with its Wilson interval
(``stats.py`` says why these). Also the training games after which a seed first was, and
then stayed, unbeatable (from the exact evaluations during training) and the sweep objective.

Writes, into DIR (or ``--out``): ``report.md`` (also printed), ``report.csv`` (one row per
configuration: ``M_iqm``, ``M_iqm_ci_low``, ``M_iqm_ci_high``, ``M_median``, ``M_mean``, ...,
``seeds``, ``unbeatable``, ``unbeatable_fraction``, ``unbeatable_ci_low``,
``unbeatable_ci_high``), ``runs.csv`` (one row per seed), ``report.png`` (IQM learning curves
with their 95% bands) and ``report_profiles.png`` (performance profiles: the share of seeds
above each score; for a loss, at or below). ``--json`` prints report.csv's rows as JSON
instead of the table. ``--compare A B`` prints the probability that configuration A improves
on B (a seed of A beats a seed of B), with its 95% interval, for each metric, and warns when
a side has fewer than ``FEW_SEEDS`` seeds.

DIR may come from anywhere: its files are read as data (``untrusted.py``: no interpolation is
resolved, so no environment value reaches a report), a folder without ``eval.json`` (the last
file a run writes: still running, or killed) and a folder whose files are malformed are
skipped, each with a warning on stderr naming the file and the field, and counted in report.md.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import stats, untrusted
from .atomic import atomic_path, describe_os_error, write_atomic
from .cli import UserError, command
from .contract import (
    EVAL_NAMES,
    EVAL_SEATS,
    JUDGED_SEATS,
    OUTCOMES,
    REPORT_KEY,
    TRAINING_SEATS,
    eval_metrics,
    eval_name,
    unbeatable,
)
from .objectives import NAMES as OBJECTIVES
from .objectives import direction, member_name, objective
from .plots import read_metrics, wrap_phrases
from .untrusted import Malformed

NOISE = ("seed", "progress", "hydra.run.dir", "hydra.sweep.dir", "resume")  # never a config axis
# Below this many seeds a side, P(A improves on B) takes few values (2 x 2 seeds: 0, 1/4, ... 1)
# and its bootstrap interval can collapse to a point ("0.000 [0.000, 0.000]" from 2 seeds):
# compare says so rather than look certain.
FEW_SEEDS = 5
METRICS = tuple(n.removeprefix("eval/") for n in EVAL_NAMES)  # what --metrics can name


def default_metrics(seats) -> list[str]:
    """Win and loss vs random for each trained seat, then the optimal-move rate."""
    per_seat = [f"{s}_random_{o}" for s in EVAL_SEATS if s in seats for o in ("win", "loss")]
    return [*per_seat, "optimal_move_rate"]


@dataclass
class Run:
    path: Path
    overrides: dict[str, str]
    seed: int | None
    seat: str                       # the trained seat(s): x, o or both
    metric: str                     # optimized_metric
    report: dict
    series: dict = field(default_factory=dict)  # metrics.csv: {name: [(games, value), ...]}
    config: Any = None                          # .hydra/config.yaml as plain data (nothing resolved)
    choices: dict = field(default_factory=dict)  # Hydra's group choices: {"net": "mlp100", ...}
    member: int | None = None                    # a population member's index (None: a run)

    def value(self, key: str) -> str:
        """The run's value of an override key; a key it did not override is read from what
        it ran with (its group choice or config value), so ``net.encoding`` shows
        ``planes18`` rather than a blank when only other runs set it."""
        if key in self.overrides:
            return self.overrides[key]
        if key in self.choices:
            return str(self.choices[key])
        v = untrusted.select(self.config, key)
        if v is not None and not isinstance(v, (dict, list)):
            return str(v)  # an interpolation shows as its own text: nothing is resolved
        return ""

    @property
    def trained(self) -> tuple[str, ...]:
        """The evaluated seats the run is judged on: ``x``, ``o`` or both."""
        return JUDGED_SEATS[self.seat]

    @property
    def objective(self) -> float | None:
        """The seed's own value of the objective (the per-member name under a population
        aggregate: ``score`` under ``population_median_score``)."""
        return None if self.report is None else objective(self.report, self.seat, member_name(self.metric))

    @property
    def unbeatable(self) -> bool:
        return self.report is not None and unbeatable(self.report, self.seat)

    def metric_value(self, name: str) -> float | None:
        """An exact metric of the final evaluation (``o_random_win``; None: no report)."""
        return None if self.report is None else eval_metrics(self.report)[f"eval/{name}"]

    @property
    def games(self) -> float | None:
        pts = self.series.get("eval/optimal_move_rate") or []
        return pts[-1][0] if pts else None

    @property
    def seconds(self) -> float | None:
        """The job's wall time: from Hydra's record of its config to its last output file."""
        start = self.path / ".hydra" / "config.yaml"
        ends = [p.stat().st_mtime for p in (self.path / n for n in ("eval.json", "policy.onnx", "curves.png"))
                if p.is_file()]
        return max(ends) - start.stat().st_mtime if start.is_file() and ends else None

    def _safe_at(self) -> list[tuple[float, bool]]:
        """(games, unbeatable from every trained seat) at each exact evaluation."""
        worst = [dict(self.series.get(eval_name(s, "worst_case"), [])) for s in self.trained]
        points = sorted(set.intersection(*(set(w) for w in worst))) if worst else []
        return [(g, all(w[g] >= 0 for w in worst)) for g in points]

    @property
    def first_unbeatable(self) -> float | None:
        """Games at the first exact evaluation that finds the agent unbeatable."""
        return next((g for g, safe in self._safe_at() if safe), None)

    @property
    def unbeatable_since(self) -> float | None:
        """Games at the first exact evaluation after which every evaluation is unbeatable."""
        since = None
        for g, safe in self._safe_at():
            since = (since if since is not None else g) if safe else None
        return since


class ReportError(UserError):
    """DIR holds nothing to report on; the message is the one line the user sees."""


# ---------------------------------------------------------------------- reading
# Every file is read through ``untrusted``: plain YAML (an interpolation is its own text,
# never resolved) and checked JSON. A run whose files cannot be what training writes is
# skipped with a warning that names the file and the field; one bad folder never stops
# the report of the others.


@dataclass
class Skipped:
    """A run folder left out of the report, and why (``incomplete``: no eval.json yet)."""
    path: Path
    why: str
    incomplete: bool = False


def _parse_override(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key.lstrip("+~"), value


def _overrides(hydra: Path) -> dict[str, str]:
    """``.hydra/overrides.yaml``: the command line's ``key=value`` strings, as text."""
    found = untrusted.load_yaml(hydra / "overrides.yaml", ".hydra/overrides.yaml")
    if found is None:
        return {}
    if not isinstance(found, list) or not all(isinstance(o, str) for o in found):
        raise Malformed(f".hydra/overrides.yaml is {untrusted.kind(found)}, not a list of key=value strings")
    return dict(_parse_override(o) for o in found)


def _config(hydra: Path) -> tuple[dict, str, str, int | None]:
    """(config, seat, optimized metric, seed) of ``.hydra/config.yaml``, each checked: the
    report computes with these, so a text where a name or a number belongs skips the run."""
    cfg = untrusted.load_yaml(hydra / "config.yaml", ".hydra/config.yaml")
    cfg = {} if cfg is None else untrusted.mapping(cfg, ".hydra/config.yaml")
    seat = untrusted.select(cfg, "seat.side", "both")
    if seat not in TRAINING_SEATS:
        raise Malformed(f".hydra/config.yaml: seat.side is {untrusted.kind(seat)}, not one of "
                        f"{', '.join(TRAINING_SEATS)}")
    metric = untrusted.select(cfg, "optimized_metric", "score")
    if metric not in OBJECTIVES:
        raise Malformed(f".hydra/config.yaml: optimized_metric is {untrusted.kind(metric)}, not an "
                        "objective of the project (docs/tracking-and-sweeps.md)")
    seed = untrusted.select(cfg, "seed")
    if seed is not None:
        untrusted.integer(seed, ".hydra/config.yaml: seed")
    return cfg, seat, metric, seed


def _choices(hydra: Path) -> dict[str, str]:
    """Hydra's group choices (``net: mlp100``) from ``.hydra/hydra.yaml``; only strings."""
    found = untrusted.select(untrusted.load_yaml(hydra / "hydra.yaml", ".hydra/hydra.yaml"),
                             "hydra.runtime.choices", {})
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(found, dict) else {}


def _series(path: Path) -> dict:
    """metrics.csv's series, the exact evaluations checked (rates in [0, 1], worst cases
    within [-1, 1]: a population's median of two members can be -0.5): they draw the curves
    and say when a seed became unbeatable. Columns the report does not read are not checked."""
    untrusted.read_text(path, "metrics.csv")  # a regular file of a sane size, UTF-8
    try:
        series = read_metrics(path)
    except (ValueError, csv.Error) as e:
        raise Malformed(f"metrics.csv: {e}") from e
    for name, points in series.items():
        if name in CHECKED_SERIES:
            _check_points(points, name, "metrics.csv", exact_worst=False)
    return series


# The eval/* series report reads, and a population's band of each (its members' min and max).
CHECKED_SERIES = {*EVAL_NAMES, *(f"{n}{end}" for n in EVAL_NAMES for end in ("_min", "_max"))}


def _check_points(points: list[tuple[float, float]], name: str, file: str, exact_worst: bool = True) -> None:
    worst = "_worst_case" in name
    for games, v in points:
        if not math.isfinite(games) or games < 0:
            raise Malformed(f"{file}: the games are {games}, not a count of games")
        if worst:
            bad = v not in (-1.0, 0.0, 1.0) if exact_worst else not -1.0 <= v <= 1.0  # NaN fails both
        else:
            bad = not 0.0 <= v <= 1.0
        if bad:
            want = ("-1, 0 or 1" if exact_worst else "within [-1, 1]") if worst else "a rate in [0, 1]"
            raise Malformed(f"{file}: {name} is {v} at {games:.0f} games, not {want}")


def load_run(path: Path) -> Run:
    """The run in ``path`` (complete: it has an eval.json), or ``Malformed``."""
    report = untrusted.check_report(untrusted.load_json(path / "eval.json"))
    hydra = path / ".hydra"
    overrides: dict[str, str] = {}
    cfg, seat, metric, seed, choices = None, "both", "score", None, {}
    if (hydra / "overrides.yaml").exists():
        overrides = _overrides(hydra)
    if (hydra / "config.yaml").exists():
        cfg, seat, metric, seed = _config(hydra)
    if (hydra / "hydra.yaml").exists():
        choices = _choices(hydra)
    if not hydra.is_dir():  # a run folder without Hydra's record: its name is its identity
        overrides = {"run": path.name}
    series = _series(path / "metrics.csv") if (path / "metrics.csv").exists() else {}
    run = Run(path, overrides, seed, seat, metric, report, series, cfg, choices)
    _check_objective(run, "eval.json")
    return run


def _check_objective(run: Run, where: str) -> None:
    """The seed's objective is a finite number (a population's block in eval.json may hold one)."""
    try:
        value = run.objective
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise Malformed(f"{where}: the objective {run.metric} cannot be computed ({type(e).__name__})") from e
    if value is not None and not (untrusted.is_number(value) and math.isfinite(value)):
        raise Malformed(f"{where}: the objective {run.metric} is {untrusted.kind(value)}")


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


def scan_runs(root: Path) -> tuple[list[Run], list[Skipped]]:
    """The complete, well-formed runs under ``root`` (a population's folder: one Run per
    member), and the folders skipped: incomplete (no ``eval.json``: still running, or
    killed before its end) or malformed."""
    if not root.is_dir():
        raise ReportError(f"no such directory: {root}")
    paths = run_folders(root)
    if not paths:
        raise ReportError(f"no runs under {root} (no eval.json found)")
    runs, skipped = [], []
    for p in paths:
        if not (p / "eval.json").exists():  # eval.json is the last file a run writes
            skipped.append(Skipped(p, "incomplete: no eval.json (still running, or stopped before its end)",
                                   incomplete=True))
            continue
        try:
            run = load_run(p)
            runs += load_population(run) if (p / "population.json").exists() else [run]
        except Malformed as e:
            skipped.append(Skipped(p, str(e)))
    if not runs:
        raise ReportError(f"no complete run under {root}: {_skipped_counts(skipped)}")
    return runs, skipped


def find_runs(root: Path) -> list[Run]:
    """``scan_runs``' runs, the folders it skipped said on stderr (``warn_skipped``)."""
    runs, skipped = scan_runs(root)
    warn_skipped(skipped, root)
    return runs


def _skipped_counts(skipped: list[Skipped]) -> str:
    """``2 incomplete (no eval.json), 1 malformed``."""
    n_inc = sum(s.incomplete for s in skipped)
    parts = [f"{n_inc} incomplete (no eval.json)" if n_inc else "",
             f"{len(skipped) - n_inc} malformed" if len(skipped) > n_inc else ""]
    return ", ".join(p for p in parts if p)


def warn_skipped(skipped: list[Skipped], root: Path) -> None:
    """One line per malformed run (the file and the field), one for the incomplete ones, and
    the count, on stderr."""
    if not skipped:
        return
    for s in skipped:
        if not s.incomplete:
            print(f"warning: skipped {s.path}: {s.why}", file=sys.stderr)
    waiting = [s.path for s in skipped if s.incomplete]
    if waiting:
        shown = ", ".join(str(p.relative_to(root)) if p != root else "." for p in waiting[:5])
        print(f"warning: skipped {len(waiting)} incomplete run folder(s) (no eval.json: still running, "
              f"or stopped before the end; resume=true finishes one): {shown}"
              + (", ..." if len(waiting) > 5 else ""), file=sys.stderr)
    print(f"warning: report skipped {len(skipped)} run folder(s): {_skipped_counts(skipped)}",
          file=sys.stderr)


def skipped_markdown(skipped: list[Skipped], root: Path) -> str:
    """report.md's line on the folders left out (and, for up to 20, which and why)."""
    if not skipped:
        return ""
    lines = [f"\nSkipped {len(skipped)} run folder(s): {_skipped_counts(skipped)}. A run counts once its "
             "eval.json (the last file it writes) is there and every file reads as training writes it.\n"]
    for s in skipped[:20]:
        lines.append(f"- `{s.path.relative_to(root) if s.path != root else '.'}`: {s.why}")
    if len(skipped) > 20:
        lines.append(f"- ... and {len(skipped) - 20} more (all on stderr)")
    return "\n".join(lines) + "\n"


def load_population(job: Run) -> list[Run]:
    """One Run per member of the population whose folder ``job`` is: the member's seed, its
    varied hyperparameters as overrides, its exact evaluations (``population_evals.csv``).
    Every member's row is checked; one bad row skips the whole population (its members
    are one job's results)."""
    pop = untrusted.mapping(untrusted.load_json(job.path / "population.json"), "population.json")
    members = pop.get("members")
    if not isinstance(members, list) or not members:
        raise Malformed(f"population.json: members is {untrusted.kind(members)}, not a list of members")
    seen: set[int] = set()
    for i, m in enumerate(members):
        where = f"population.json: members[{i}]"
        untrusted.mapping(m, where)
        index = untrusted.integer(m.get("index"), f"{where}.index")
        if index in seen:
            raise Malformed(f"{where}.index {index} appears twice")
        seen.add(index)
        untrusted.integer(m.get("seed"), f"{where}.seed")
        hparams = untrusted.mapping(m.get("hparams", {}), f"{where}.hparams")
        for k, v in hparams.items():
            if not (untrusted.is_number(v) and math.isfinite(v)) and not isinstance(v, str):
                raise Malformed(f"{where}.hparams.{k} is {untrusted.kind(v)}, not a value")
        if m.get("eval") is not None:
            untrusted.check_report(m["eval"], f"{where}.eval")
    series = _population_series(job.path / "population_evals.csv") \
        if (job.path / "population_evals.csv").exists() else {}
    overrides = {k: v for k, v in job.overrides.items() if not k.startswith("population.")}
    runs = [Run(job.path, {**overrides, **{k: str(v) for k, v in m.get("hparams", {}).items()}}, m["seed"],
                job.seat, job.metric, m.get("eval"), series.get(m["index"], {}), job.config, job.choices,
                member=m["index"])
            for m in members]
    for i, r in enumerate(runs):
        _check_objective(r, f"population.json: members[{i}].eval")
    return runs


def _population_series(path: Path) -> dict[int, dict]:
    """population_evals.csv: {member: {eval/* name: [(games, value), ...]}}, checked."""
    series: dict[int, dict] = {}
    text = untrusted.read_text(path, "population_evals.csv")
    try:
        for n, row in enumerate(csv.DictReader(io.StringIO(text, newline="")), start=2):
            try:
                member, games = int(row["member"]), float(row["games"])
            except (KeyError, TypeError, ValueError) as e:
                raise Malformed(f"population_evals.csv: line {n}: member and games must be numbers") from e
            mine = series.setdefault(member, {})
            for name, value in row.items():
                if name in CHECKED_SERIES and value not in ("", None):
                    try:
                        v = float(value)
                    except (TypeError, ValueError) as e:
                        raise Malformed(f"population_evals.csv: line {n}: {name} is not a number") from e
                    _check_points([(games, v)], name, f"population_evals.csv: line {n}")
                    mine.setdefault(name, []).append((games, v))
    except csv.Error as e:
        raise Malformed(f"population_evals.csv: not CSV ({e})") from e
    return series


# ---------------------------------------------------------------------- grouping


def varying_keys(runs: list[Run]) -> list[str]:
    """Override keys whose value is not the same in every run (``seed`` aside)."""
    keys = list(dict.fromkeys(k for r in runs for k in r.overrides
                              if k not in NOISE and not k.startswith("population.")))
    return [k for k in keys if len({r.value(k) for r in runs}) > 1]


def group_runs(runs: list[Run], keys: list[str]) -> list[tuple[dict[str, str], list[Run]]]:
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault(tuple(r.value(k) for k in keys), []).append(r)
    return [(dict(zip(keys, label, strict=True)), rs) for label, rs in groups.items()]


def _fmt(v) -> str:
    if isinstance(v, str):
        try:
            v = float(v) if "." in v or "e" in v.lower() else v
        except ValueError:
            return v
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _games(g: float | None) -> str:
    if g is None:
        return "never"
    return f"{g / 1000:,.0f}k" if g >= 10_000 else f"{g / 1000:.1f}k" if g >= 1000 else f"{g:,.0f}"


def _seed_list(seeds: list) -> str:
    """``0, 1, 2`` for a few seeds; ``100: 1000–1099`` (count, then runs of consecutive
    seeds) for many."""
    known = sorted({s for s in seeds if s is not None})
    if len(seeds) <= 6:
        return ", ".join("-" if s is None else str(s) for s in seeds)
    spans, start = [], None
    for i, s in enumerate(known):
        start = s if start is None else start
        if i + 1 == len(known) or known[i + 1] != s + 1:
            spans.append(str(start) if start == s else f"{start}–{s}")
            start = None
    return f"{len(seeds)}: " + ", ".join(spans)


@dataclass
class Summary:
    """The statistics of one configuration's values of one metric over its seeds."""
    iqm: float
    ci_low: float
    ci_high: float
    median: float
    mean: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float], reps: int, seed: int) -> Summary:
        mid, low, high = stats.iqm_ci(values, reps=reps, seed=seed)
        return cls(mid, low, high, statistics.median(values), statistics.fmean(values),
                   min(values), max(values))


def summarise(runs: list[Run], metrics: list[str] | None = None, reps: int = stats.REPS,
              seed: int = 0) -> tuple[list[str], list[dict], list[dict]]:
    """(varying keys, one row per configuration, one row per seed): numbers, formatted later.

    A row holds, per metric M, ``values[M]`` (per seed with a report) and ``summary[M]``."""
    keys = varying_keys(runs)
    seats = [s for s in EVAL_SEATS if any(s in r.trained for r in runs)]
    metrics = list(metrics or default_metrics(seats))
    rows, per_run = [], []
    for label, rs in group_runs(runs, keys):
        row: dict = {"label": label, "runs": rs, "seeds": [r.seed for r in rs], "metrics": metrics,
                     "values": {}, "summary": {}}
        for m in metrics:
            judged = m.split("_")[0] not in EVAL_SEATS or any(m.startswith(f"{s}_") for s in seats)
            vals = [v for r in rs if (v := r.metric_value(m)) is not None] if judged else []
            row["values"][m] = vals
            row["summary"][m] = Summary.of(vals, reps, seed) if vals else None
        k, n = sum(r.unbeatable for r in rs), len(rs)
        row["unbeatable"], row["unbeatable_ci"] = k, stats.wilson(k, n)
        row["first"] = [r.first_unbeatable for r in rs]
        row["since"] = [r.unbeatable_since for r in rs]
        objectives = [o for r in rs if (o := r.objective) is not None]
        row["objective"] = Summary.of(objectives, reps, seed) if objectives else None
        jobs = {r.path: r.seconds for r in rs}  # a population's members share one job
        row["jobs"], row["seconds"] = len(jobs), [t for t in jobs.values() if t is not None]
        row["metric"] = rs[0].metric
        rows.append(row)
        for r in rs:
            rep = eval_metrics(r.report) if r.report is not None else {}
            per_run.append({"run": str(r.path), "member": "" if r.member is None else r.member,
                            **{k: r.value(k) for k in keys}, "seed": r.seed,
                            **{f"{s}_{o}": rep.get(eval_name(s, f"random_{o}"), "")
                               for s in seats for o in OUTCOMES},
                            **{f"{s}_worst_case": r.report[REPORT_KEY[s]]["worst_case"] if r.report else ""
                               for s in seats},
                            "unbeatable": r.unbeatable, "first_unbeatable_games": r.first_unbeatable,
                            "unbeatable_since_games": r.unbeatable_since,
                            "games": r.games, "optimal_move_rate": rep.get("eval/optimal_move_rate", ""),
                            "objective": r.objective, "optimized_metric": r.metric, "seconds": r.seconds})
    return keys, rows, per_run


def records(keys: list[str], rows: list[dict]) -> list[dict]:
    """report.csv's rows (and ``--json``'s): the columns docs/contracts.md lists."""
    out = []
    for row in rows:
        rec: dict = {k: row["label"][k] for k in keys}
        for m in row["metrics"]:
            s = row["summary"][m]
            if s is None:
                continue
            rec.update({f"{m}_iqm": s.iqm, f"{m}_iqm_ci_low": s.ci_low, f"{m}_iqm_ci_high": s.ci_high,
                        f"{m}_median": s.median, f"{m}_mean": s.mean, f"{m}_min": s.min, f"{m}_max": s.max})
        n = len(row["runs"])
        rec["seeds"], rec["unbeatable"] = n, row["unbeatable"]
        rec["unbeatable_fraction"] = row["unbeatable"] / n
        rec["unbeatable_ci_low"], rec["unbeatable_ci_high"] = row["unbeatable_ci"]
        for name, key in (("first", "first_unbeatable_games_median"),
                          ("since", "unbeatable_since_games_median")):
            reached = [g for g in row[name] if g is not None]
            rec[key] = statistics.median(reached) if reached else None
        if row["objective"] is not None:
            o = row["objective"]
            rec.update({"objective_iqm": o.iqm, "objective_iqm_ci_low": o.ci_low,
                        "objective_iqm_ci_high": o.ci_high, "objective_median": o.median,
                        "objective_mean": o.mean})
        rec["optimized_metric"] = row["metric"]
        rec["jobs"] = row["jobs"]
        rec["job_seconds_mean"] = statistics.fmean(row["seconds"]) if row["seconds"] else None
        out.append(rec)
    return out


# ---------------------------------------------------------------------- writing


def metric_title(m: str) -> str:
    """``o_random_win`` -> ``O win vs random``; ``optimal_move_rate`` -> ``optimal moves``."""
    if m == "optimal_move_rate":
        return "optimal moves"
    seat, *rest = m.split("_")
    if rest[-1] == "case":
        return f"{seat.upper()} worst case"
    return f"{seat.upper()} {rest[-1]} vs {rest[0]}"


def _ci(lo: float, hi: float, digits: int = 4) -> str:
    return f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def _reached(gs: list) -> str:
    reached = [g for g in gs if g is not None]
    if not reached:
        return "never"
    if len(gs) == 1:
        return _games(reached[0])
    return f"{_games(statistics.median(reached))} ({len(reached)} of {len(gs)})"


def markdown(keys: list[str], rows: list[dict]) -> str:
    metrics = [m for m in rows[0]["metrics"] if any(r["summary"][m] for r in rows)]
    head = [*(keys or ["runs"]), "seeds", *(metric_title(m) for m in metrics)]
    head += ["unbeatable (Wilson 95%)", "first unbeatable (median games)", "unbeatable for good from",
             f"objective ({rows[0]['metric']})", "job s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        n = len(row["runs"])
        cells = [_fmt(row["label"][k]) or "(default)" for k in keys] or [str(n)]
        cells.append(_seed_list(row["seeds"]))
        for m in metrics:
            s = row["summary"][m]
            cells.append("" if s is None else f"{s.iqm:.4f}" if n == 1 or s.min == s.max
                         else f"{s.iqm:.4f} {_ci(s.ci_low, s.ci_high)}")
        k, (lo, hi) = row["unbeatable"], row["unbeatable_ci"]
        cells.append(f"{k} of {n}: {k / n:.2f} {_ci(lo, hi, 2)}")  # 0 of 2 is still "up to 0.66"
        cells.append(_reached(row["first"]))
        cells.append(_reached(row["since"]))
        o = row["objective"]
        cells.append("" if o is None else f"{o.iqm:.4f}")
        secs = row["seconds"]
        cells.append("" if not secs else f"{statistics.fmean(secs):.0f}" if len(secs) == 1
                     else f"{len(secs)} x {statistics.fmean(secs):.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _write_rows(path: Path, rows: list[dict]) -> None:
    header = list(dict.fromkeys(k for r in rows for k in r))
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=header)
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    write_atomic(path, text.getvalue())


def _labels(rows: list[dict]) -> list[str]:
    return [wrap_phrases(", ".join(f"{k}={_fmt(v)}" for k, v in row["label"].items()), 36) or "all runs"
            for row in rows]


def _legend_layout(labels: list[str], width: float) -> tuple[int, int]:
    """(columns, text lines) of a legend below the plots: as many columns as the width holds
    (a 36-character label at 7 pt: ~3 inches)."""
    ncols = max(1, min(len(labels), int(width // 3.2)))
    lines = sum(max(labels[k].count("\n") + 1 for k in range(i, min(i + ncols, len(labels))))
                for i in range(0, len(labels), ncols))
    return ncols, lines


CURVE_POINTS = 40   # bootstrapped points per learning curve (more add time, not information)


def plot(path: Path, keys: list[str], rows: list[dict], reps: int = stats.REPS, seed: int = 0) -> Path:
    """Exact win and loss vs random over training games, per trained seat, one line per
    configuration: the IQM over its seeds, in a band of the 95% bootstrap interval.

    The legend goes below the plots, in as many columns as the width holds, and the figure
    grows to make room for it: beside the plots it ran into the title on a one-seat figure.
    Few evaluations get markers; a sweep with one evaluation per run (a budget shorter than
    ``eval_every`` updates) gets each configuration's IQM as a marker with its interval as a
    bar and its value written beside it, on axes that start at 0 games and span win rates
    0..1, so the lone point is read against something."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    seats = [s for s in EVAL_SEATS if any(s in r.trained for row in rows for r in row["runs"])]
    labels = _labels(rows)
    width = 6.5 * len(seats)
    ncols, lines = _legend_layout(labels, width)
    fig, axes = plt.subplots(2, len(seats), figsize=(width, 7 + 0.4 + 0.16 * lines), sharex=True,
                             squeeze=False, layout="constrained")
    floor = 1e-5  # a loss of exactly 0 cannot sit on a log axis: drawn here
    colours = plt.get_cmap("tab10" if len(rows) <= 10 else "tab20")
    points = [len(r.series.get(f"eval/{s}_random_win") or ())
              for row in rows for r in row["runs"] for s in seats]
    single = max(points, default=0) == 1  # one exact evaluation per run: no curve to draw
    curve_reps = min(reps, 500)  # per point of a curve: the band's edge settles well before
    last = 0.0
    for i, row in enumerate(rows):
        colour = colours(i % colours.N)
        for j, s in enumerate(seats):
            for top, outcome in ((True, "win"), (False, "loss")):
                curves = [r.series.get(f"eval/{s}_random_{outcome}") for r in row["runs"] if s in r.trained]
                curves = [c for c in curves if c]
                if not curves:
                    continue
                end = min(c[-1][0] for c in curves)  # the range every seed covers
                grid = np.unique(np.concatenate([[g for g, _ in c if g <= end] for c in curves]))
                if len(grid) > CURVE_POINTS:
                    grid = grid[np.unique(np.linspace(0, len(grid) - 1, CURVE_POINTS).round().astype(int))]
                ys = np.stack([np.interp(grid, *zip(*c, strict=True)) for c in curves])  # (seeds, G)
                mid = stats.iqm(ys, axis=0)
                band = np.array([stats.bootstrap_ci(ys[:, g], stats.iqm, curve_reps, seed=seed)
                                 for g in range(len(grid))]) if len(curves) > 1 else np.stack([mid, mid], 1)
                if not top:
                    mid, band = np.maximum(mid, floor), np.maximum(band, floor)
                last = max(last, float(grid[-1]))
                ax = axes[0 if top else 1][j]
                label = f"{labels[i]} ({len(curves)})" if j == 0 and top else None
                if len(grid) == 1:  # a band needs two points: a bar over the interval instead
                    ax.errorbar(grid, mid, yerr=[mid - band[:, 0], band[:, 1] - mid], color=colour,
                                fmt="o", ms=7, capsize=4, label=label)
                    if top and len(rows) <= 6:
                        ax.annotate(f"{mid[0]:.4f}", (grid[0], mid[0]), xytext=(8, 0),
                                    textcoords="offset points", va="center", fontsize=7, color=colour)
                    continue
                ax.plot(grid, mid, color=colour, lw=2, ms=6, marker="o" if len(grid) < 12 else None,
                        label=label)
                if len(curves) > 1:
                    ax.fill_between(grid, band[:, 0], band[:, 1], color=colour, alpha=0.15)
    for j, s in enumerate(seats):
        axes[0][j].set_title(f"as {s.upper()} vs random (exact)")
        axes[0][j].set_ylabel("win rate")
        axes[1][j].set_ylabel("loss rate (0 drawn at 1e-5)")
        axes[1][j].set_yscale("log")
        axes[1][j].set_ylim(floor / 2, 1.5)
        axes[1][j].set_xlabel("training games")
        for ax in (axes[0][j], axes[1][j]):
            ax.grid(alpha=0.3, which="both")
        if single:
            axes[0][j].set_ylim(0, 1.02)
            axes[1][j].set_xlim(0, 1.15 * last)  # shared with the win axis above
    title = "exact evaluations during training: the IQM of each configuration's seeds, band its 95% CI"
    if single:
        title += "\none exact evaluation per run (its last), so no curves: lower eval_every for them"
    fig.suptitle(wrap_phrases(title, math.floor(width * 13)), fontsize=9)
    # Below the plots, not on them nor beside the title: a sweep can have dozens of configurations.
    fig.legend(fontsize=7, loc="outside lower center", ncols=ncols, title="configuration (seeds)",
               title_fontsize=7)
    with atomic_path(path) as tmp:  # a kill mid-draw leaves the old figure, not half a PNG
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


def plot_profiles(path: Path, rows: list[dict], reps: int = stats.REPS, seed: int = 0) -> Path:
    """Performance profiles: per metric, the share of each configuration's seeds scoring above
    each threshold (for a metric to minimise, a loss rate: at or below it), with a 95%
    bootstrap band (rliable's score distributions). So in every panel a curve that lies above
    another everywhere is better at every level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    metrics = [m for m in rows[0]["metrics"] if any(r["values"][m] for r in rows)]
    labels = _labels(rows)
    cols = min(3, len(metrics))
    grid_rows = -(-len(metrics) // cols)
    width = 4.6 * cols
    ncols, lines = _legend_layout(labels, width)
    fig, axes = plt.subplots(grid_rows, cols, figsize=(width, 3.6 * grid_rows + 0.6 + 0.16 * lines),
                             squeeze=False, layout="constrained")
    colours = plt.get_cmap("tab10" if len(rows) <= 10 else "tab20")
    for ax, m in zip(axes.flat, metrics, strict=False):
        lower = direction(m) == "minimize" or m.endswith("_loss")
        every = np.concatenate([r["values"][m] for r in rows if r["values"][m]])
        lo, hi = float(every.min()), float(every.max())
        pad = max(1e-4, 0.05 * (hi - lo))
        tau = np.linspace(lo - pad, hi + pad, 101)
        for i, row in enumerate(rows):
            if not row["values"][m]:
                continue
            share, low, high = stats.performance_profile(row["values"][m], tau, min(reps, 1000), seed=seed)
            if lower:  # the share at or below t is 1 - the share above; the band flips with it
                share, low, high = 1 - share, 1 - high, 1 - low
            colour = colours(i % colours.N)
            ax.plot(tau, share, color=colour, lw=1.8, label=f"{labels[i]} ({len(row['values'][m])})"
                    if ax is axes.flat[0] else None)
            ax.fill_between(tau, low, high, color=colour, alpha=0.15)
        ax.set_title(f"{metric_title(m)} ({'lower' if lower else 'higher'} is better)", fontsize=9)
        ax.set_xlabel(f"threshold t on {m}")
        ax.locator_params(axis="x", nbins=4)  # seeds that agree to 4 digits: long tick labels
        ax.set_ylabel(f"share of seeds with {m} {'≤' if lower else '>'} t")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    fig.suptitle("performance profiles: each configuration's seeds, band 95% bootstrap CI", fontsize=9)
    fig.legend(fontsize=7, loc="outside lower center", ncols=ncols, title="configuration (seeds)",
               title_fontsize=7)
    with atomic_path(path) as tmp:  # a kill mid-draw leaves the old figure, not half a PNG
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- comparing


def find_group(keys: list[str], rows: list[dict], spec: str) -> dict:
    """The configuration ``spec`` names: ``key=value[,key=value]`` (its values of the varying
    keys; unnamed keys may take any value, but exactly one configuration must match) or its
    1-based row number in the table."""
    names = ["; ".join(f"{k}={_fmt(v)}" for k, v in row["label"].items()) or "all runs" for row in rows]
    if spec.isdigit() and 1 <= int(spec) <= len(rows):
        return rows[int(spec) - 1]
    pairs = [_parse_override(p.strip()) for p in spec.replace(";", ",").split(",") if p.strip()]
    unknown = [k for k, _ in pairs if k not in keys]
    if not pairs or unknown:
        raise ReportError(f"--compare: {spec!r} names no configuration (use key=value with the keys "
                          f"that vary: {', '.join(keys) or 'none'}; or a row number 1..{len(rows)})")
    found = [row for row in rows if all(_same(row["label"][k], v) for k, v in pairs)]
    if len(found) != 1:
        raise ReportError(f"--compare: {spec!r} matches {len(found)} configurations, not one "
                          f"(the configurations: {' | '.join(names)})")
    return found[0]


def _same(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def compare(a: dict, b: dict, metrics: list[str], reps: int = stats.REPS, seed: int = 0) -> list[dict]:
    """P(A improves on B) per metric with its 95% interval (the seeds of A and of B resampled
    separately). Improving on a loss rate is being lower; on the objective, what its sweep
    direction says."""
    out = []
    for m in [*metrics, "objective"]:
        if m == "objective":
            xa = [o for r in a["runs"] if (o := r.objective) is not None]
            xb = [o for r in b["runs"] if (o := r.objective) is not None]
            lower = direction(a["metric"]) == "minimize"
            name = f"objective ({a['metric']})"
        else:
            xa, xb = a["values"][m], b["values"][m]
            lower, name = m.endswith("_loss"), m
        if not xa or not xb:
            continue
        sign = -1.0 if lower else 1.0
        p, lo, hi = stats.probability_of_improvement_ci([sign * x for x in xa], [sign * x for x in xb],
                                                        reps=reps, seed=seed)
        out.append({"metric": name, "better": "lower" if lower else "higher", "p_improvement": p,
                    "ci_low": lo, "ci_high": hi, "seeds_a": len(xa), "seeds_b": len(xb),
                    "few_seeds": min(len(xa), len(xb)) < FEW_SEEDS})
    return out


def best_trial(root: Path) -> str:
    """Optuna's verdict, when DIR is an Optuna sweep (``optimization_results.yaml``)."""
    path = root / "optimization_results.yaml"
    if not path.exists():
        return ""
    try:
        res = untrusted.mapping(untrusted.load_yaml(path), path.name)
        best, params = res.get("best_value"), untrusted.mapping(res.get("best_params") or {},
                                                                f"{path.name}: best_params")
        if not (untrusted.is_number(best) and math.isfinite(best)):
            raise Malformed(f"{path.name}: best_value is {untrusted.kind(best)}, not a number")
    except Malformed as e:
        print(f"warning: Optuna's verdict left out: {e}", file=sys.stderr)
        return ""
    shown = ", ".join(f"{k}={_fmt(v)}" for k, v in params.items() if not isinstance(v, (dict, list)))
    return f"\nOptuna best: {best} with {shown}\n"


def report(root: str | Path, out: str | Path | None = None, sort: str = "none",
           metrics: list[str] | None = None, reps: int = stats.REPS, seed: int = 0) -> dict[str, Path]:
    """Write report.md, report.csv, runs.csv, report.png and report_profiles.png for the runs
    under ``root``."""
    return _report(root, out, sort, metrics, reps, seed)[0]


def _report(root, out, sort, metrics, reps, seed) -> tuple[dict[str, Path], list[dict]]:
    """``report``, also returning report.csv's rows (for ``--json``, so nothing is computed twice)."""
    root = Path(root)
    runs, skipped = scan_runs(root)
    warn_skipped(skipped, root)
    out = Path(out) if out else root
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ReportError(f"cannot write the report into {out}: {describe_os_error(e)}") from e
    keys, rows, per_run = summarise(runs, metrics, reps, seed)
    if sort == "objective":  # best first (the objectives that are minimised: smallest first)
        sign = -1 if direction(rows[0]["metric"]) == "maximize" else 1
        rows.sort(key=lambda r: sign * (r["objective"].iqm if r["objective"] else float("-inf")))
    files = {"md": out / "report.md", "csv": out / "report.csv", "runs": out / "runs.csv",
             "png": out / "report.png", "profiles": out / "report_profiles.png"}
    intro = (f"{len(runs)} seeds under {root}, {len(rows)} configuration(s). Metrics: the interquartile "
             f"mean over the seeds [its 95% stratified bootstrap CI, {reps} resamples]; unbeatable: "
             f"seeds that cannot be beaten from any trained seat [Wilson 95% CI].\n\n")
    write_atomic(files["md"], intro + markdown(keys, rows) + skipped_markdown(skipped, root)
                 + best_trial(root))
    table = records(keys, rows)
    _write_rows(files["csv"], table)
    _write_rows(files["runs"], per_run)
    plot(files["png"], keys, rows, reps, seed)
    plot_profiles(files["profiles"], rows, reps, seed)
    return files, table


def _metric_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [m.strip().removeprefix("eval/") for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in METRICS]
    if bad or not names:
        raise ReportError(f"--metrics: unknown metric {', '.join(bad) or repr(text)} "
                          f"(one or more of: {', '.join(METRICS)})")
    return names


@command()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ttt_research.report", description=__doc__.split("\n")[0])
    parser.add_argument("dir", nargs="?", help="a sweep folder (multirun/DATE/TIME), a population's run "
                        "folder, or any folder of them")
    parser.add_argument("--out", help="where to write the report files (default: DIR)")
    parser.add_argument("--sort", choices=("none", "objective"), default="none",
                        help="order of the configurations: as found (job order), or best objective first")
    parser.add_argument("--metrics", help="comma-separated exact metrics, e.g. o_random_win,o_perfect_loss "
                        "(default: win and loss vs random per trained seat, optimal_move_rate)")
    parser.add_argument("--json", action="store_true", help="print report.csv's rows as JSON, not the table")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"),
                        help="the probability that configuration A improves on B: each a key=value "
                        "(a varying key), a row number, or (without DIR) a folder of runs")
    parser.add_argument("--reps", type=int, default=stats.REPS,
                        help="bootstrap resamples (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default %(default)s)")
    args = parser.parse_args(argv)
    metrics = _metric_list(args.metrics)
    if args.reps < 100:
        raise ReportError(f"--reps must be at least 100, got {args.reps}")
    if args.compare:
        return _compare_main(args, metrics)
    if args.dir is None:
        raise ReportError("give a folder of runs (DIR), or --compare A B with two folders")
    files, rows = _report(args.dir, args.out, args.sort, metrics, args.reps, args.seed)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(files["md"].read_text(), end="")
    print("\nwrote " + ", ".join(str(p) for p in files.values()))
    return 0


def _compare_main(args, metrics: list[str] | None) -> int:
    a_spec, b_spec = args.compare
    if args.dir is None:  # two folders: each is one configuration, whatever its runs vary
        for d in (a_spec, b_spec):
            if not Path(d).is_dir():
                raise ReportError(f"--compare without DIR takes two folders of runs; no such directory: {d}")
        runs = {d: find_runs(Path(d)) for d in (a_spec, b_spec)}
        seats = [s for s in EVAL_SEATS if any(s in r.trained for rs in runs.values() for r in rs)]
        metrics = metrics or default_metrics(seats)
        a, b = (summarise_one(runs[d], metrics, d) for d in (a_spec, b_spec))
    else:
        keys, rows, _ = summarise(find_runs(Path(args.dir)), metrics, args.reps, args.seed)
        metrics = rows[0]["metrics"]
        a, b = find_group(keys, rows, a_spec), find_group(keys, rows, b_spec)
    if a is b:
        raise ReportError(f"--compare: {a_spec!r} and {b_spec!r} are the same configuration")
    result = compare(a, b, metrics, args.reps, args.seed)
    few = [c for c in result if c["few_seeds"]]
    if few:
        print(f"warning: --compare: A has {few[0]['seeds_a']} seeds and B {few[0]['seeds_b']}; with fewer "
              f"than {FEW_SEEDS} a side the probability of improvement takes few values and its interval "
              "can shrink to a point: run more seeds before reading it", file=sys.stderr)
    if args.json:
        print(json.dumps({"a": a_spec, "b": b_spec, "comparisons": result}, indent=1))
        return 0
    print(f"A: {a_spec} ({len(a['runs'])} seeds)   B: {b_spec} ({len(b['runs'])} seeds)")
    print(f"P(A improves on B): a seed of A beats a seed of B (0.5: neither better), "
          f"[95% CI, {args.reps} bootstrap resamples]")
    for c in result:
        note = f"  (few seeds: {c['seeds_a']} vs {c['seeds_b']}, read with care)" if c["few_seeds"] else ""
        print(f"  {c['metric']:<32} ({c['better']} is better): {c['p_improvement']:.3f} "
              f"{_ci(c['ci_low'], c['ci_high'], 3)}{note}")
    return 0


def summarise_one(runs: list[Run], metrics: list[str], name: str) -> dict:
    """Every run of a folder as one configuration (for ``--compare`` of two folders)."""
    for r in runs:
        r.overrides = {}
    _, (row, *more), _ = summarise(runs, metrics, reps=100)
    assert not more
    row["label"] = {"folder": name}
    return row


if __name__ == "__main__":
    sys.exit(main())
