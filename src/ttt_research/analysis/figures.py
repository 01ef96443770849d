"""The report's two figures: ``report.png`` (IQM learning curves of each configuration, with
their 95% bootstrap bands, from the exact evaluations during training) and
``report_profiles.png`` (performance profiles: the share of seeds above each score; for a
loss, at or below).
"""
from __future__ import annotations

from pathlib import Path

from ttt_research.analysis.curves import wrap_phrases
from ttt_research.analysis.safety import share_curve, wilson_band
from ttt_research.analysis.summary import label_text, metric_title
from ttt_research.contract import EVAL_SEATS, better
from ttt_research.evaluation import stats
from ttt_research.files.atomic import atomic_path


def _labels(rows: list[dict]) -> list[str]:
    return [wrap_phrases(label_text(row["label"]), 36) for row in rows]


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
    return _save(fig, path, ncols)


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
        lower = better(m) == "lower"
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
    return _save(fig, path, ncols)


def plot_safe(path: Path, rows: list[dict]) -> Path:
    """The share of each configuration's seeds unbeatable from every seat it trains, at each
    exact evaluation during training, in its Wilson 95% band: against training games, and
    (where the runs record ``elapsed_s``) against training wall seconds per agent. A seed
    counts at its latest evaluation so far; the line ends where the shortest seed's does."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = _labels(rows)
    curves = [[share_curve(row["runs"], seconds) for row in rows] for seconds in (False, True)]
    panels = [c for c in curves if any(x is not None for x in c)] or [curves[0]]
    width = 6.0 * len(panels)
    ncols, lines = _legend_layout(labels, width)
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 4.2 + 0.4 + 0.16 * lines), squeeze=False,
                             layout="constrained")
    colours = plt.get_cmap("tab10" if len(rows) <= 10 else "tab20")
    for j, (ax, panel) in enumerate(zip(axes[0], panels, strict=True)):
        for i, found in enumerate(panel):
            if found is None:
                continue
            x, count, seeds = found
            low, high = wilson_band(count, seeds)
            colour = colours(i % colours.N)
            label = f"{labels[i]} ({seeds})" if j == 0 else None
            if len(x) == 1:  # one evaluation: a point and its interval
                share = count / seeds
                ax.errorbar(x, share, yerr=[share - low, high - share], fmt="o", color=colour, capsize=4,
                            label=label)
                continue
            ax.step(x, count / seeds, where="post", color=colour, lw=1.8, label=label,
                    marker="o" if len(x) < 12 else None, ms=4)  # few evaluations: each one shown
            ax.fill_between(x, low, high, step="post", color=colour, alpha=0.15)
        seconds = panel is curves[1]
        xs = [v for found in panel if found is not None for v in found[0]]
        if xs and min(xs) > 0 and max(xs) / min(xs) >= 30:  # rows that differ tenfold in speed
            ax.set_xscale("log")
        ax.set_xlabel("training wall seconds per agent (elapsed_s / agents trained together)"
                      if seconds else "training games")
        ax.set_ylabel("share of seeds unbeatable")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.set_title("against wall seconds" if seconds else "against games played", fontsize=9)
    fig.suptitle("seeds unbeatable from every seat they train, at each exact evaluation; band: Wilson 95%",
                 fontsize=9)
    return _save(fig, path, ncols)


def _save(fig, path: Path, ncols: int) -> Path:
    """The configurations' legend below the plots, then the PNG written whole."""
    import matplotlib.pyplot as plt  # as in the plots: matplotlib loads only when one is drawn

    if any(ax.get_legend_handles_labels()[0] for ax in fig.axes):  # report_safe.png may have no line
        fig.legend(fontsize=7, loc="outside lower center", ncols=ncols, title="configuration (seeds)",
                   title_fontsize=7)
    with atomic_path(path) as tmp:  # a kill mid-draw leaves the old figure, not half a PNG
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path
