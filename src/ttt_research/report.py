"""``python -m ttt_research.report DIR``: one table and one plot for a sweep or a set of runs.

Every folder under DIR that holds an ``eval.json`` is a run. Runs are grouped by their
Hydra overrides (``.hydra/overrides.yaml``) minus ``seed``; only the overrides that differ
between runs become columns. Each group gets the exact metrics of its seeds (mean, and
min–max when there is more than one): win and loss rates vs random for the seats trained,
how many seeds are unbeatable, the training games after which a seed stayed unbeatable
(from the exact evaluations in ``metrics.csv``), and the sweep objective.

Writes, into DIR (or ``--out``): ``report.md`` (also printed), ``report.csv`` (one row per
group: ``_mean``, ``_min``, ``_max`` columns), ``runs.csv`` (one row per run) and
``report.png`` (exact learning curves, the mean of each group's seeds with a min–max band).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cli import UserError, command
from .contract import EVAL_SEATS, JUDGED_SEATS, OUTCOMES, REPORT_KEY, eval_name, unbeatable
from .objectives import direction, objective
from .plots import read_metrics

NOISE = ("seed", "progress", "hydra.run.dir", "hydra.sweep.dir", "resume")  # never a config axis


@dataclass
class Run:
    path: Path
    overrides: dict[str, str]
    seed: int | None
    seat: str                       # the trained seat(s): x, o or both
    metric: str                     # optimized_metric
    report: dict
    series: dict = field(default_factory=dict)  # metrics.csv: {name: [(games, value), ...]}
    config: Any = None                          # .hydra/config.yaml (resolved), if any
    choices: dict = field(default_factory=dict)  # Hydra's group choices: {"net": "mlp100", ...}

    def value(self, key: str) -> str:
        """The run's value of an override key; a key it did not override is read from what
        it ran with (its group choice or config value), so ``net.encoding`` shows
        ``planes18`` rather than a blank when only other runs set it."""
        if key in self.overrides:
            return self.overrides[key]
        if key in self.choices:
            return str(self.choices[key])
        if self.config is not None:
            from omegaconf import OmegaConf

            v = OmegaConf.select(self.config, key, default=None)
            if v is not None and not OmegaConf.is_config(v):
                return str(v)
        return ""

    @property
    def trained(self) -> tuple[str, ...]:
        """The evaluated seats the run is judged on: ``x``, ``o`` or both."""
        return JUDGED_SEATS[self.seat]

    @property
    def objective(self) -> float:
        return objective(self.report, self.seat, self.metric)

    @property
    def unbeatable(self) -> bool:
        return unbeatable(self.report, self.seat)

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


def _parse_override(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key.lstrip("+~"), value


def load_run(path: Path) -> Run:
    from omegaconf import OmegaConf

    report = json.loads((path / "eval.json").read_text())
    hydra = path / ".hydra"
    overrides: dict[str, str] = {}
    seat, metric, seed = "both", "score", None
    if (hydra / "overrides.yaml").is_file():
        overrides = dict(_parse_override(o) for o in OmegaConf.load(hydra / "overrides.yaml"))
    if (hydra / "config.yaml").is_file():
        cfg = OmegaConf.load(hydra / "config.yaml")
        seat = OmegaConf.select(cfg, "seat.side", default=seat)
        metric = OmegaConf.select(cfg, "optimized_metric", default=metric)
        seed = OmegaConf.select(cfg, "seed", default=None)
    if not hydra.is_dir():  # a run folder without Hydra's record: its name is its identity
        overrides = {"run": path.name}
    series = read_metrics(path / "metrics.csv") if (path / "metrics.csv").is_file() else {}
    cfg = OmegaConf.load(hydra / "config.yaml") if (hydra / "config.yaml").is_file() else None
    choices = {}
    if (hydra / "hydra.yaml").is_file():
        found = OmegaConf.select(OmegaConf.load(hydra / "hydra.yaml"), "hydra.runtime.choices", default=None)
        found = OmegaConf.to_container(found) if found is not None else {}
        choices = {k: v for k, v in found.items() if isinstance(v, str)}
    return Run(path, overrides, seed, seat, metric, report, series, cfg, choices)


def _natural(path: Path) -> list:
    return [int(p) if p.isdigit() else p for p in path.parts]


def find_runs(root: Path) -> list[Run]:
    if not root.is_dir():
        raise ReportError(f"no such directory: {root}")
    paths = sorted((p.parent for p in root.rglob("eval.json")), key=_natural)
    if not paths:
        raise ReportError(f"no runs under {root} (no eval.json found)")
    runs = []
    for p in paths:
        try:
            runs.append(load_run(p))
        except (OSError, ValueError, KeyError) as e:
            raise ReportError(f"cannot read the run in {p}: {e}") from e
    return runs


# ---------------------------------------------------------------------- grouping


def varying_keys(runs: list[Run]) -> list[str]:
    """Override keys whose value is not the same in every run (``seed`` aside)."""
    keys = list(dict.fromkeys(k for r in runs for k in r.overrides if k not in NOISE))
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


def _stats(values: list[float]) -> tuple[float, float, float]:
    return statistics.fmean(values), min(values), max(values)


def _cell(values: list[float], digits: int = 4) -> str:
    mean, lo, hi = _stats(values)
    if len(values) == 1 or lo == hi:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def _games(g: float | None) -> str:
    return "never" if g is None else f"{g / 1000:,.0f}k" if g >= 1000 else f"{g:,.0f}"


def summarise(runs: list[Run]) -> tuple[list[str], list[dict], list[dict]]:
    """(varying keys, group rows, per-run rows): the rows hold numbers, formatting comes later."""
    keys = varying_keys(runs)
    seats = [s for s in EVAL_SEATS if any(s in r.trained for r in runs)]
    rows, per_run = [], []
    for label, rs in group_runs(runs, keys):
        row: dict = {"label": label, "runs": rs, "seeds": [r.seed for r in rs]}
        for s in seats:
            mine = [r for r in rs if s in r.trained]
            for outcome in ("win", "loss"):
                row[f"{s}_{outcome}"] = [r.report[REPORT_KEY[s]]["vs_random"][outcome] for r in mine]
        row["unbeatable"] = sum(r.unbeatable for r in rs)
        row["first"] = [r.first_unbeatable for r in rs]
        row["since"] = [r.unbeatable_since for r in rs]
        row["objective"] = [r.objective for r in rs]
        row["optimal_move_rate"] = [r.report["optimal_move_rate"] for r in rs]
        row["seconds"] = [r.seconds for r in rs if r.seconds is not None]
        row["metric"] = rs[0].metric
        rows.append(row)
        for r in rs:
            per_run.append({"run": str(r.path), **{k: r.value(k) for k in keys}, "seed": r.seed,
                            **{f"{s}_{o}": r.report[REPORT_KEY[s]]["vs_random"][o]
                               for s in seats for o in OUTCOMES},
                            **{f"{s}_worst_case": r.report[REPORT_KEY[s]]["worst_case"] for s in seats},
                            "unbeatable": r.unbeatable, "first_unbeatable_games": r.first_unbeatable,
                            "unbeatable_since_games": r.unbeatable_since,
                            "games": r.games, "optimal_move_rate": r.report["optimal_move_rate"],
                            "objective": r.objective, "optimized_metric": r.metric, "seconds": r.seconds})
    return keys, rows, per_run


# ---------------------------------------------------------------------- writing


def markdown(keys: list[str], rows: list[dict]) -> str:
    seats = [s for s in EVAL_SEATS if f"{s}_win" in rows[0]]
    head = [*(keys or ["runs"]), "seeds"]
    head += [f"{s.upper()} {o} vs random" for s in seats for o in ("win", "loss")]
    head += ["unbeatable", "first unbeatable (games)", "unbeatable for good from (games)", "optimal moves",
             f"objective ({rows[0]['metric']})", "job s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [_fmt(row["label"][k]) or "(default)" for k in keys] or [str(len(row["runs"]))]
        cells.append(", ".join("-" if s is None else str(s) for s in row["seeds"]))
        for s in seats:
            for o in ("win", "loss"):
                cells.append(_cell(row[f"{s}_{o}"]) if row[f"{s}_{o}"] else "")
        cells.append(f"{row['unbeatable']} of {len(row['runs'])}")
        cells.append(", ".join(_games(g) for g in row["first"]))
        cells.append(", ".join(_games(g) for g in row["since"]))
        cells.append(_cell(row["optimal_move_rate"]))
        cells.append(_cell(row["objective"]))
        cells.append(_cell(row["seconds"], 0) if row["seconds"] else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_csv(path: Path, keys: list[str], rows: list[dict]) -> None:
    out = []
    for row in rows:
        rec: dict = {k: row["label"][k] for k in keys}
        rec["runs"], rec["seeds"] = len(row["runs"]), " ".join(str(s) for s in row["seeds"])
        for name in [k for k in row if k[:2] in ("x_", "o_")] + ["optimal_move_rate", "objective", "seconds"]:
            if row[name]:
                rec[f"{name}_mean"], rec[f"{name}_min"], rec[f"{name}_max"] = _stats(row[name])
        rec["unbeatable"] = row["unbeatable"]
        for name, key in (("first", "first_unbeatable_games_median"),
                          ("since", "unbeatable_since_games_median")):
            reached = [g for g in row[name] if g is not None]
            rec[key] = statistics.median(reached) if reached else ""
        rec["optimized_metric"] = row["metric"]
        out.append(rec)
    _write_rows(path, out)


def _write_rows(path: Path, rows: list[dict]) -> None:
    header = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)


def plot(path: Path, keys: list[str], rows: list[dict]) -> Path:
    """Exact win and loss vs random over training games, per trained seat, one line per group.

    The legend goes below the plots, in as many columns as the width holds, and the figure
    grows to make room for it: beside the plots it ran into the title on a one-seat figure.
    Few evaluations get markers; a sweep with one evaluation per run (a budget shorter than
    ``eval_every`` updates) gets each group's mean as a marker with a min-max bar and its value
    written beside it, on axes that start at 0 games and span win rates 0..1, so the lone point
    is read against something."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    seats = [s for s in EVAL_SEATS
             if rows[0].get(f"{s}_win") is not None and any(r[f"{s}_win"] for r in rows)]
    labels = [textwrap.fill(", ".join(f"{k}={_fmt(v)}" for k, v in row["label"].items()), 36) or "all runs"
              for row in rows]
    width = 6.5 * len(seats)
    ncols = max(1, min(len(rows), int(width // 3.2)))  # a 36-character label at 7 pt: ~3 inches
    lines = sum(max(labels[k].count("\n") + 1 for k in range(i, min(i + ncols, len(rows))))
                for i in range(0, len(rows), ncols))
    fig, axes = plt.subplots(2, len(seats), figsize=(width, 7 + 0.4 + 0.16 * lines), sharex=True,
                             squeeze=False, layout="constrained")
    floor = 1e-5  # a loss of exactly 0 cannot sit on a log axis: drawn here
    colours = plt.get_cmap("tab10" if len(rows) <= 10 else "tab20")
    points = [len(r.series.get(f"eval/{s}_random_win") or ())
              for row in rows for r in row["runs"] for s in seats]
    single = max(points, default=0) == 1  # one exact evaluation per run: no curve to draw
    last = 0.0
    for i, row in enumerate(rows):
        colour = colours(i % colours.N)
        for j, s in enumerate(seats):
            for top, outcome in ((True, "win"), (False, "loss")):
                curves = [r.series.get(f"eval/{s}_random_{outcome}") for r in row["runs"]]
                curves = [c for c in curves if c]
                if not curves:
                    continue
                end = min(c[-1][0] for c in curves)  # the range every seed covers
                grid = np.unique(np.concatenate([[g for g, _ in c if g <= end] for c in curves]))
                ys = np.stack([np.interp(grid, *zip(*c, strict=True)) for c in curves])
                if not top:
                    ys = np.maximum(ys, floor)
                last = max(last, float(grid[-1]))
                ax = axes[0 if top else 1][j]
                label = f"{labels[i]} ({len(curves)})" if j == 0 and top else None
                mean = ys.mean(0)
                if len(grid) == 1:  # a band needs two points: a bar from min to max instead
                    ax.errorbar(grid, mean, yerr=[mean - ys.min(0), ys.max(0) - mean], color=colour,
                                fmt="o", ms=7, capsize=4, label=label)
                    if top and len(rows) <= 6:
                        ax.annotate(f"{mean[0]:.4f}", (grid[0], mean[0]), xytext=(8, 0),
                                    textcoords="offset points", va="center", fontsize=7, color=colour)
                    continue
                ax.plot(grid, mean, color=colour, lw=2, ms=6, marker="o" if len(grid) < 12 else None,
                        label=label)
                if len(curves) > 1:
                    ax.fill_between(grid, ys.min(0), ys.max(0), color=colour, alpha=0.15)
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
    title = "exact evaluations during training: the mean of each group's seeds, band min–max"
    if single:
        title += "\none exact evaluation per run (its last), so no curves: lower eval_every for them"
    fig.suptitle("\n".join(textwrap.fill(t, math.floor(width * 13)) for t in title.split("\n")), fontsize=9)
    # Below the plots, not on them nor beside the title: a sweep can have dozens of groups.
    fig.legend(fontsize=7, loc="outside lower center", ncols=ncols, title="group (seeds)", title_fontsize=7)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def best_trial(root: Path) -> str:
    """Optuna's verdict, when DIR is an Optuna sweep (``optimization_results.yaml``)."""
    path = root / "optimization_results.yaml"
    if not path.is_file():
        return ""
    from omegaconf import OmegaConf

    res = OmegaConf.to_container(OmegaConf.load(path))
    params = ", ".join(f"{k}={_fmt(v)}" for k, v in (res.get("best_params") or {}).items())
    return f"\nOptuna best: {res.get('best_value')} with {params}\n"


def report(root: str | Path, out: str | Path | None = None, sort: str = "none") -> dict[str, Path]:
    """Write report.md, report.csv, runs.csv and report.png for the runs under ``root``."""
    root = Path(root)
    runs = find_runs(root)
    out = Path(out) if out else root
    out.mkdir(parents=True, exist_ok=True)
    keys, rows, per_run = summarise(runs)
    if sort == "objective":  # best first (the objectives that are minimised: smallest first)
        sign = -1 if direction(rows[0]["metric"]) == "maximize" else 1
        rows.sort(key=lambda r: sign * statistics.fmean(r["objective"]))
    files = {"md": out / "report.md", "csv": out / "report.csv", "runs": out / "runs.csv",
             "png": out / "report.png"}
    files["md"].write_text(f"{len(runs)} runs under {root}\n\n" + markdown(keys, rows) + best_trial(root))
    write_csv(files["csv"], keys, rows)
    _write_rows(files["runs"], per_run)
    plot(files["png"], keys, rows)
    return files


@command()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ttt_research.report", description=__doc__.split("\n")[0])
    parser.add_argument("dir", help="a sweep folder (multirun/DATE/TIME) or any folder of run folders")
    parser.add_argument("--out", help="where to write the report files (default: DIR)")
    parser.add_argument("--sort", choices=("none", "objective"), default="none",
                        help="order of the groups: as found (job order), or best objective first")
    args = parser.parse_args(argv)
    files = report(args.dir, args.out, args.sort)
    print(files["md"].read_text(), end="")
    print("\nwrote " + ", ".join(str(p) for p in files.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
