"""Finding and reading the runs under a folder, for the report: every folder under DIR that
holds an ``eval.json`` is a run; a population's folder (``population.json``) counts as one run
per member, with the member's seed and its varied hyperparameters as overrides. Runs are
grouped into *configurations* by their Hydra overrides (``.hydra/overrides.yaml``) and member
hyperparameters, minus ``seed`` and the ``population.*`` keys (``NOISE``); only the keys that
differ between runs become columns (``varying_keys``, ``group_runs``).

DIR may come from anywhere: its files are read as data (``files/untrusted.py``: no
interpolation is resolved, so no environment value reaches a report); a file that is not what
training writes is ``Malformed``, naming the file and the field (``scan.py`` finds the run
folders and skips such a run, with a warning).
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttt_research.analysis.curves import read_metrics
from ttt_research.contract import (
    EVAL_NAMES,
    GAME_VALUE,
    JUDGED_SEATS,
    REPORT_KEY,
    TRAINING_SEATS,
    WORST_VALUE,
    eval_metrics,
    eval_name,
    exploit_metrics,
    unbeatable,
)
from ttt_research.errors import UserError
from ttt_research.evaluation.objectives import NAMES as OBJECTIVES
from ttt_research.evaluation.objectives import member_name, objective
from ttt_research.files import untrusted
from ttt_research.files.untrusted import Malformed

NOISE = ("seed", "progress", "hydra.run.dir", "hydra.sweep.dir", "resume")  # never a config axis
# Training wall seconds since the fit started, at each exact evaluation (continued across a
# resume): metrics.csv's ``train/elapsed_s``, population_evals.csv's ``elapsed_s`` column.
ELAPSED = "train/elapsed_s"
VALUE_KEYS = ("sign_agreement", "mae")  # eval.json's value_accuracy block (where a run learns values)


@dataclass
class RunRecord:
    """A finished run (or one population member) as its folder records it, read for a report
    (``algos.base.Run`` is another thing: what the shell offers an algorithm while it trains)."""

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
    together: int = 1                            # agents trained in the one job (a population's members)
    checked: bool = False                        # its figures re-checked from its policy file (recheck.py)

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
        if self.report is None:
            return None
        return {**eval_metrics(self.report), **exploit_metrics(self.report)}.get(f"eval/{name}")

    @property
    def games(self) -> float | None:
        pts = self.series.get("eval/optimal_move_rate") or []
        return pts[-1][0] if pts else None

    @property
    def seconds(self) -> float | None:
        """The job's training wall seconds: ``elapsed_s`` at its last exact evaluation (continued
        across a resume); without it, from Hydra's record of its config to its last output file
        (which a resume, rewriting the record, would cut short)."""
        elapsed = self.series.get(ELAPSED)
        if elapsed:
            return max(elapsed)[1]  # at the most games
        start = self.path / ".hydra" / "config.yaml"
        ends = [p.stat().st_mtime for p in (self.path / n for n in ("eval.json", "policy.onnx", "curves.png"))
                if p.is_file()]
        return max(ends) - start.stat().st_mtime if start.is_file() and ends else None

    def safe_at(self, seats: tuple[str, ...] | None = None) -> list[tuple[float, bool]]:
        """(games, unbeatable from every seat of ``seats``: default, every trained seat) at each
        exact evaluation."""
        seats = seats or self.trained
        worst = [dict(self.series.get(eval_name(s, "worst_case"), [])) for s in seats]
        # The worst case that holds a seat's value (contract.HOLDS_VALUE): a draw on a drawn game,
        # the win where the seat wins; where it loses, holding means losing only to perfect play,
        # which the logged worst case cannot show (-1 either way): such a seat is judged at the
        # end, by eval.json, and never here.
        need = [max(WORST_VALUE[self.report[REPORT_KEY[s]].get(GAME_VALUE, "draw")], 0) if self.report
                else 0 for s in seats]
        points = sorted(set.intersection(*(set(w) for w in worst))) if worst else []
        return [(g, all(w[g] >= v for w, v in zip(worst, need, strict=True))) for g in points]

    @property
    def first_unbeatable(self) -> float | None:
        """Games at the first exact evaluation that finds the agent unbeatable."""
        return self.first_unbeatable_from(None)

    def first_unbeatable_from(self, seats: tuple[str, ...] | None) -> float | None:
        """Games at the first exact evaluation that finds the agent unbeatable from ``seats``."""
        return next((g for g, safe in self.safe_at(seats) if safe), None)

    def seconds_at(self, games: float | None) -> float | None:
        """Training wall seconds per agent at the exact evaluation after ``games`` games: the
        job's elapsed seconds there divided by the agents it trained together (a population of
        100 counts a hundredth of its time for each member); None without ``elapsed_s``."""
        at = dict(self.series.get(ELAPSED, []))
        return None if games is None or games not in at else at[games] / self.together

    @property
    def value_accuracy(self) -> dict | None:
        """eval.json's ``value_accuracy`` block (an algorithm that learns values: qlearning, dqn)."""
        found = None if self.report is None else self.report.get("value_accuracy")
        return found if isinstance(found, dict) else None

    @property
    def unbeatable_since(self) -> float | None:
        """Games at the first exact evaluation after which every evaluation is unbeatable."""
        since = None
        for g, safe in self.safe_at():
            since = (since if since is not None else g) if safe else None
        return since


class ReportError(UserError):
    """DIR holds nothing to report on; the message is the one line the user sees."""


def parse_override(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key.lstrip("+~"), value


def _overrides(hydra: Path) -> dict[str, str]:
    """``.hydra/overrides.yaml``: the command line's ``key=value`` strings, as text."""
    found = untrusted.load_yaml(hydra / "overrides.yaml", ".hydra/overrides.yaml")
    if found is None:
        return {}
    if not isinstance(found, list) or not all(isinstance(o, str) for o in found):
        raise Malformed(f".hydra/overrides.yaml is {untrusted.kind(found)}, not a list of key=value strings")
    return dict(parse_override(o) for o in found)


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
    _check_elapsed(series.get(ELAPSED, []), "metrics.csv")
    return series


def _check_elapsed(points: list[tuple[float, float]], file: str) -> None:
    for games, v in points:
        if not (math.isfinite(v) and v >= 0):
            raise Malformed(f"{file}: {ELAPSED} is {v} at {games:.0f} games, not a number of seconds")


def _check_values(report: dict | None, where: str) -> None:
    """A report's ``value_accuracy`` block, when it has one: a rate and an error the report
    can average."""
    if report is None or "value_accuracy" not in report:
        return
    block = untrusted.mapping(report["value_accuracy"], f"{where}: value_accuracy")
    untrusted.rate(block.get("sign_agreement"), f"{where}: value_accuracy.sign_agreement")
    mae = block.get("mae")
    if not (untrusted.is_number(mae) and math.isfinite(mae) and mae >= 0):
        raise Malformed(f"{where}: value_accuracy.mae is {untrusted.kind(mae)}, not a mean absolute error")


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


def load_run(path: Path) -> RunRecord:
    """The run in ``path`` (complete: it has an eval.json), or ``Malformed``."""
    report = untrusted.check_report(untrusted.load_json(path / "eval.json"))
    _check_values(report, "eval.json")
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
    run = RunRecord(path, overrides, seed, seat, metric, report, series, cfg, choices)
    _check_objective(run, "eval.json")
    return run


def _check_objective(run: RunRecord, where: str) -> None:
    """The seed's objective is a finite number (a population's block in eval.json may hold one)."""
    try:
        value = run.objective
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise Malformed(f"{where}: the objective {run.metric} cannot be computed ({type(e).__name__})") from e
    if value is not None and not (untrusted.is_number(value) and math.isfinite(value)):
        raise Malformed(f"{where}: the objective {run.metric} is {untrusted.kind(value)}")


def load_population(job: RunRecord) -> list[RunRecord]:
    """One RunRecord per member of the population whose folder ``job`` is: the member's seed, its
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
            _check_values(m["eval"], f"{where}.eval")
    series = _population_series(job.path / "population_evals.csv") \
        if (job.path / "population_evals.csv").exists() else {}
    overrides = {k: v for k, v in job.overrides.items() if not k.startswith("population.")}
    runs = [RunRecord(job.path, {**overrides, **{k: str(v) for k, v in m.get("hparams", {}).items()}},
                      m["seed"], job.seat, job.metric, m.get("eval"), series.get(m["index"], {}), job.config,
                      job.choices, member=m["index"], together=len(members))
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
            if row.get("elapsed_s") not in ("", None):  # the job's seconds at this evaluation
                try:
                    elapsed = float(row["elapsed_s"])
                except (TypeError, ValueError) as e:
                    raise Malformed(f"population_evals.csv: line {n}: elapsed_s is not a number") from e
                _check_elapsed([(games, elapsed)], f"population_evals.csv: line {n}")
                mine.setdefault(ELAPSED, []).append((games, elapsed))
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


def varying_keys(runs: list[RunRecord]) -> list[str]:
    """Override keys whose value is not the same in every run (``seed`` aside)."""
    keys = list(dict.fromkeys(k for r in runs for k in r.overrides
                              if k not in NOISE and not k.startswith("population.")))
    return [k for k in keys if len({r.value(k) for r in runs}) > 1]


def group_runs(runs: list[RunRecord], keys: list[str]) -> list[tuple[dict[str, str], list[RunRecord]]]:
    groups: dict[tuple, list[RunRecord]] = {}
    for r in runs:
        groups.setdefault(tuple(r.value(k) for k in keys), []).append(r)
    return [(dict(zip(keys, label, strict=True)), rs) for label, rs in groups.items()]


def seeds_text(seeds: list) -> str:
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
