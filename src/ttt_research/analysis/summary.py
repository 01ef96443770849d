"""The report's numbers: per configuration and per exact metric M, the interquartile mean with
its 95% stratified bootstrap interval, the median and the mean, and the share of seeds that
cannot be beaten with its Wilson interval (``evaluation/stats.py`` says why these); the games
after which a seed first was, and then stayed, unbeatable; the sweep objective. ``records``
gives report.csv's rows, ``markdown`` report.md, ``compare`` the probability that one
configuration improves on another (a seed of A beats a seed of B), with its interval.
"""
from __future__ import annotations

import csv
import io
import itertools
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from ttt_research.analysis import safety
from ttt_research.analysis.runs import (
    VALUE_KEYS,
    ReportError,
    RunRecord,
    group_runs,
    parse_override,
    seeds_text,
    varying_keys,
)
from ttt_research.contract import (
    EVAL_NAMES,
    EVAL_SEATS,
    EXPLOIT_NAMES,
    OUTCOMES,
    REPORT_KEY,
    TRAINED_KEY,
    better,
    eval_metrics,
    eval_name,
)
from ttt_research.evaluation import stats
from ttt_research.evaluation.objectives import direction, meaning
from ttt_research.files import untrusted
from ttt_research.files.atomic import write_atomic
from ttt_research.files.untrusted import Malformed

# Below this many seeds a side, P(A improves on B) takes few values (2 x 2 seeds: 0, 1/4, ... 1)
# and its bootstrap interval can collapse to a point ("0.000 [0.000, 0.000]" from 2 seeds):
# compare says so rather than look certain.
FEW_SEEDS = 5


METRICS = tuple(n.removeprefix("eval/") for n in (*EVAL_NAMES, *EXPLOIT_NAMES))  # what --metrics can name
CONFIGURATION = "configuration"  # the one key of a report over several folders: each folder's name


def label_text(label: dict[str, str]) -> str:
    """A configuration's name: its folder's (several folders), else its ``key=value`` pairs."""
    if list(label) == [CONFIGURATION]:
        return str(label[CONFIGURATION])
    return ", ".join(f"{k}={fmt(v)}" for k, v in label.items()) or "all runs"


def default_metrics(seats, exploit: bool = False) -> list[str]:
    """Win and loss vs random for each trained seat, then the optimal-move rate; with
    ``exploit`` (the runs' reports score the policy as trained) what a best response gets
    against it: NashConv when both seats are trained (and the greedy policy's), else the
    trained seat's best-response value."""
    per_seat = [f"{s}_random_{o}" for s in EVAL_SEATS if s in seats for o in ("win", "loss")]
    more = []
    if exploit:
        both = all(s in seats for s in EVAL_SEATS)
        more = ["trained_nashconv", "nashconv"] if both else [f"trained_{s}_best_response" for s in seats]
    return [*per_seat, "optimal_move_rate", *more]


def fmt(v) -> str:
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


def summarise(runs: list[RunRecord], metrics: list[str] | None = None, reps: int = stats.REPS,
              seed: int = 0, keys: list[str] | None = None) -> tuple[list[str], list[dict], list[dict]]:
    """(varying keys, one row per configuration, one row per seed): numbers, formatted later.
    ``keys``: the keys that name configurations (default: the override keys that vary).

    A row holds, per metric M, ``values[M]`` (per seed with a report) and ``summary[M]``."""
    keys = varying_keys(runs) if keys is None else keys
    seats = [s for s in EVAL_SEATS if any(s in r.trained for r in runs)]
    exploit = any(r.report is not None and TRAINED_KEY in r.report for r in runs)
    metrics = list(metrics or default_metrics(seats, exploit))
    rows, per_run = [], []
    for label, rs in group_runs(runs, keys):
        row: dict = {"label": label, "runs": rs, "seeds": [r.seed for r in rs], "metrics": metrics,
                     "values": {}, "summary": {}}
        mine = [s for s in seats if any(s in r.trained for r in rs)]  # the seats this configuration trains
        for m in metrics:
            judged = m.split("_")[0] not in EVAL_SEATS or any(m.startswith(f"{s}_") for s in mine)
            vals = [v for r in rs if (v := r.metric_value(m)) is not None] if judged else []
            row["values"][m] = vals
            row["summary"][m] = Summary.of(vals, reps, seed) if vals else None
        k, n = sum(r.unbeatable for r in rs), len(rs)
        row["unbeatable"], row["unbeatable_ci"] = k, stats.wilson(k, n)
        row["first"] = [r.first_unbeatable for r in rs]
        row["value"] = {}  # value accuracy (eval.json's value_accuracy) over the seeds that have one
        for v in VALUE_KEYS:
            found = [float(a[v]) for r in rs if (a := r.value_accuracy) is not None]
            row["value"][v] = Summary.of(found, reps, seed) if found else None
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
        rec.update(safety.records(row["runs"]))
        for v, s in row["value"].items():
            if s is not None:
                rec.update({f"value_{v}_iqm": s.iqm, f"value_{v}_iqm_ci_low": s.ci_low,
                            f"value_{v}_iqm_ci_high": s.ci_high, f"value_{v}_median": s.median,
                            f"value_{v}_mean": s.mean})
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


def metric_title(m: str) -> str:
    """``o_random_win`` -> ``O win vs random``; ``optimal_move_rate`` -> ``optimal moves``."""
    if m == "optimal_move_rate":
        return "optimal moves"
    if m == "nashconv":
        return "greedy NashConv"
    if m == "trained_nashconv":
        return "NashConv as trained"
    if m.startswith("trained_"):  # trained_o_best_response, trained_x_random_win
        seat, *rest = m.removeprefix("trained_").split("_")
        if rest == ["best", "response"]:
            return f"best response vs {seat.upper()} as trained"
        return f"{seat.upper()} {rest[-1]} vs {rest[0]} as trained"
    seat, *rest = m.split("_")
    if rest[-1] == "case":
        return f"{seat.upper()} worst case"
    return f"{seat.upper()} {rest[-1]} vs {rest[0]}"


def ci_text(lo: float, hi: float, digits: int = 4) -> str:
    return f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def _reached(gs: list) -> str:
    reached = [g for g in gs if g is not None]
    if not reached:
        return "never"
    if len(gs) == 1:
        return _games(reached[0])
    return f"{_games(statistics.median(reached))} ({len(reached)} of {len(gs)})"


def objective_title(metric: str) -> str:
    """The objective's column: its name and, where it has one, what it measures (IQM over seeds)."""
    what = meaning(metric)
    return f"objective: {metric}{f' ({what})' if what else ''}, IQM"


def markdown(keys: list[str], rows: list[dict]) -> str:
    metrics = [m for m in rows[0]["metrics"] if any(r["summary"][m] for r in rows)]
    head = [*(keys or ["runs"]), "seeds", *(metric_title(m) for m in metrics)]
    head += ["unbeatable (Wilson 95%)", "first unbeatable (median games)", "unbeatable for good from",
             objective_title(rows[0]["metric"]), "training seconds per job (jobs x mean)"]
    values = [v for v in VALUE_KEYS if any(r["value"][v] for r in rows)]
    head += [VALUE_TITLES[v] for v in values]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        n = len(row["runs"])
        cells = [fmt(row["label"][k]) or "(default)" for k in keys] or [str(n)]
        cells.append(seeds_text(row["seeds"]))
        for m in metrics:
            s = row["summary"][m]
            cells.append("" if s is None else f"{s.iqm:.4f}" if n == 1 or s.min == s.max
                         else f"{s.iqm:.4f} {ci_text(s.ci_low, s.ci_high)}")
        k, (lo, hi) = row["unbeatable"], row["unbeatable_ci"]
        cells.append(f"{k} of {n}: {k / n:.2f} {ci_text(lo, hi, 2)}")  # 0 of 2 is still "up to 0.66"
        cells.append(_reached(row["first"]))
        cells.append(_reached(row["since"]))
        o = row["objective"]
        cells.append("" if o is None else f"{o.iqm:.4f}")
        secs = row["seconds"]
        cells.append("" if not secs else f"{statistics.fmean(secs):.0f} s" if len(secs) == 1
                     else f"{len(secs)} x {statistics.fmean(secs):.0f} s")
        for v in values:
            s = row["value"][v]
            cells.append("" if s is None else f"{s.iqm:.4f}" if s.min == s.max
                         else f"{s.iqm:.4f} {ci_text(s.ci_low, s.ci_high)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


VALUE_TITLES = {"sign_agreement": "value sign agreement (IQM)", "mae": "value MAE (IQM)"}


def write_rows(path: Path, rows: list[dict]) -> None:
    header = list(dict.fromkeys(k for r in rows for k in r))
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=header)
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    write_atomic(path, text.getvalue())


def find_group(keys: list[str], rows: list[dict], spec: str) -> dict:
    """The configuration ``spec`` names: ``key=value[,key=value]`` (its values of the varying
    keys; unnamed keys may take any value, but exactly one configuration must match) or its
    1-based row number in the table."""
    names = ["; ".join(f"{k}={fmt(v)}" for k, v in row["label"].items()) or "all runs" for row in rows]
    if spec.isdigit() and 1 <= int(spec) <= len(rows):
        return rows[int(spec) - 1]
    pairs = [parse_override(p.strip()) for p in spec.replace(";", ",").split(",") if p.strip()]
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
    separately). Which way a metric improves is ``contract.better``'s (lower for a loss rate,
    NashConv and a best response's value); the objective's, its sweep direction."""
    out = []
    for m in [*metrics, "objective"]:
        if m == "objective":
            xa = [o for r in a["runs"] if (o := r.objective) is not None]
            xb = [o for r in b["runs"] if (o := r.objective) is not None]
            lower = direction(a["metric"]) == "minimize"
            name = f"objective ({a['metric']})"
        else:
            xa, xb = a["values"][m], b["values"][m]
            lower, name = better(m) == "lower", m
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
    shown = ", ".join(f"{k}={fmt(v)}" for k, v in params.items() if not isinstance(v, (dict, list)))
    return f"\nOptuna best: {best} with {shown}\n"


SWEEP_MAX = 100_000  # jobs a sweep record may name for missing_jobs to count them


def missing_jobs(root: Path, runs: list[RunRecord], also: tuple[Path, ...] = ()) -> str:
    """A line for a sweep folder whose ``multirun.yaml`` names more jobs than ``runs`` (and the
    folders ``also``: finished jobs the report leaves out, a copy or a contradicted run) finished
    (a stopped sweep: the jobs after the stopped one never ran), else ''. The jobs are counted as
    Hydra's basic sweeper makes them (the product of the swept values of the command's overrides
    and of its ``params``, the command's winning) or Optuna's ``n_trials``; another sweeper, or a
    record that does not read, says nothing."""
    path = root / "multirun.yaml"
    if not path.is_file():
        return ""
    try:
        record = untrusted.mapping(untrusted.load_yaml(path), path.name)
        sweeper = untrusted.select(record, "hydra.sweeper") or {}
        target = str(sweeper.get("_target_", ""))
        if "optuna" in target.lower():
            expected = untrusted.integer(sweeper.get("n_trials"), "n_trials")
        elif target.endswith("BasicSweeper"):
            from hydra.core.override_parser.overrides_parser import OverridesParser

            # the command's overrides, and the sweeper's params (a preset's sweep) under them
            params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
            task = [*params, *(str(t) for t in untrusted.select(record, "hydra.overrides.task") or [])]
            expected = 1
            for o in {o.key_or_group: o for o in OverridesParser.create().parse_overrides(task)}.values():
                if o.is_sweep_override():  # counted up to a bound: a foreign range(0, 10**12) is no list
                    expected *= sum(1 for _ in itertools.islice(o.sweep_string_iterator(), SWEEP_MAX + 1))
            if expected > SWEEP_MAX:
                return ""
        else:  # another sweeper (nevergrad, Ax): its own count, not a grid
            return ""
    except Exception:  # a hand-made or foreign record: no count, no claim
        return ""
    finished = len({r.path for r in runs} | set(also))  # a population's members are one job
    if finished >= expected:
        return ""
    return (f"{path} names {expected} jobs and {finished} finished: the sweep was stopped or is still "
            f"running (the sweep's command with hydra.sweep.dir={root} resume=true continues it: the "
            "stopped job resumes, the jobs after it start, the finished ones stay as they are)")


def summarise_one(runs: list[RunRecord], metrics: list[str], name: str) -> dict:
    """Every run of a folder as one configuration (for ``--compare`` of two folders)."""
    for r in runs:
        r.overrides = {}
    _, (row, *more), _ = summarise(runs, metrics, reps=100)
    assert not more
    row["label"] = {"folder": name}
    return row


def label_folders(folders: list[tuple[str, list[RunRecord]]]) -> list[RunRecord]:
    """The runs of several folders, each folder one configuration named ``name`` (whatever
    its runs' overrides say: a preset and the plain overrides it stands for compare as two
    rows, and one folder's seeds stay together)."""
    runs = []
    for name, rs in folders:
        for r in rs:
            r.overrides = {CONFIGURATION: name}
        runs += rs
    return runs
