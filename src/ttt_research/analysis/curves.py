"""``curves.png``: the story of a run at a glance, drawn from ``metrics.csv``.

Top: win / loss / tie against random over training games, sampled from the training games
(thin, noisy) and exact (bold, from the evaluator) for the seat(s) the learner trains.
Bottom: what sampling cannot show: the exact loss rate against random on a log scale
(it has to reach zero), the loss rate against a perfect player, the worst case, and what a
best response gets against the policy as trained (its sampled mistakes, ``eval/trained_*``).

A population's ``curves.png`` (``plot_population``) is drawn from ``population_evals.csv``
instead (a row per member per exact evaluation): per judged seat, every member's win rate
as a faint line under the median and the interquartile band, on an axis that spans the
members' range (on 0..1 they were flat), and below, the loss rate's
median and band with the share of members that cannot be beaten.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ttt_research.contract import JUDGED_SEATS, eval_name
from ttt_research.files.atomic import write_atomic

COLOURS = {"win": "tab:green", "loss": "tab:red", "tie": "tab:blue"}


def read_metrics(path: str | Path) -> dict[str, list[tuple[float, float]]]:
    """metrics.csv -> {metric: [(games, value), ...]} using ``train/games`` as the x axis.
    A cell that is not a number is a ``ValueError`` naming its line and column (not its text:
    the file may not be ours, see ``untrusted.py``)."""
    series: dict[str, list[tuple[float, float]]] = {}
    games = 0.0
    with open(path, newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            if row.get("train/games"):
                games = _number(row["train/games"], line, "train/games")
            for key, value in row.items():
                if value not in ("", None) and key not in ("step", "train/games"):
                    series.setdefault(key, []).append((games, _number(value, line, key)))
    return series


def _number(cell, line: int, column) -> float:
    try:
        return float(cell)
    except (TypeError, ValueError):
        what = "a cell beyond the header's columns" if column is None else f"{column}"
        raise ValueError(f"line {line}: {what} is not a number") from None


PHRASE_ENDS = (": ", "; ", ", ")  # where a title may break, the strongest first


def wrap_phrases(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters, broken only where a phrase ends: at
    ``: `` first, then ``; ``, then ``, ``, so a title never splits "its 95% CI" from its noun
    (``textwrap`` broke it at any space). A phrase longer than a line is broken at its
    spaces, and a word is never cut. Existing line breaks stay."""
    return "\n".join(line for paragraph in text.split("\n") for line in _phrases(paragraph, width, 0))


def _phrases(text: str, width: int, level: int) -> list[str]:
    import textwrap

    if len(text) <= width:
        return [text]
    if level == len(PHRASE_ENDS):
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
    end = PHRASE_ENDS[level]
    parts = text.split(end)
    parts = [p + end.rstrip() for p in parts[:-1]] + parts[-1:]  # each keeps its ":" or ","
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 1 + len(part) <= width:
            lines[-1] += " " + part
        else:
            lines += _phrases(part, width, level + 1)
    return lines


def _smooth(values: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def figure(**kwargs):
    """A matplotlib ``Figure`` on the Agg canvas, without ``pyplot``'s global state (nothing
    here shows a window, and a figure not registered there needs no ``close``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes, at the resolution of every curves.png."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    return buf.getvalue()


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def plain_log_ticks(axis) -> None:
    """Powers of ten as ``10⁻⁵`` in plain text, and no minor ticks: matplotlib's default writes
    each label in mathtext and makes ~70 minor ticks (with their grid lines) on a log axis,
    together ~0.3 s of a 1-game run, for lines between the decades that nobody reads."""
    import math

    from matplotlib.ticker import FuncFormatter, NullLocator

    def label(value, _pos) -> str:
        exponent = round(math.log10(value)) if value > 0 else 0
        return "1" if exponent == 0 else "10" + str(exponent).translate(SUPERSCRIPT)

    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_locator(NullLocator())


def plot_curves(metrics_csv: str | Path, out_png: str | Path, seat: str = "o", title: str = "") -> Path:
    """Write ``curves.png`` of a run, whole or not at all (``curves_png``, then one rename)."""
    out_png = Path(out_png)
    write_atomic(out_png, curves_png(metrics_csv, seat, title))
    return out_png


def curves_png(metrics_csv: str | Path, seat: str = "o", title: str = "") -> bytes:
    """A run's curves (the module's docstring) from ``metrics.csv``, as PNG bytes."""
    return png_bytes(curves_figure(metrics_csv, seat, title))


LEGEND_ROW = 0.2  # inches per row of the lower panel's legend (font size 8)


def curves_figure(metrics_csv: str | Path, seat: str = "o", title: str = ""):
    """The figure of ``curves_png``. The lower panel's legend sits under it, outside the axes:
    inside, at any corner, it hid a curve (the best response's value starts at the top right,
    the loss rates end at the bottom) in most runs."""
    s = read_metrics(metrics_csv)
    seats = {"x": ["x"], "o": ["o"], "both": ["x", "o"]}[seat]
    # Lower legend: up to 3 curves and the unbeatable ticks per seat, in two columns.
    rows = -(-4 * len(seats) // 2)
    below = 0.65 + rows * LEGEND_ROW  # inches under the axes: tick labels, x label, legend, margin
    height = 7.1 + rows * LEGEND_ROW
    fig = figure(figsize=(9, height))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for outcome, colour in COLOURS.items():
        pts = s.get(f"rollout/{outcome}_rate", [])
        if pts:
            xs, ys = zip(*pts, strict=True)
            top.plot(xs, _smooth(list(ys), 10), color=colour, alpha=0.35, lw=1,
                     label=f"{outcome} (sampled, training games)")
        for i, st in enumerate(seats):
            pts = s.get(f"eval/{st}_random_{outcome}", [])
            if pts:
                xs, ys = zip(*pts, strict=True)
                top.plot(xs, ys, color=colour, lw=2.2, ls="-" if i == 0 else "--",
                         label=f"{outcome} as {st.upper()} vs random (exact)")
    top.set_ylabel("rate")
    top.set_ylim(-0.02, 1.02)
    top.grid(alpha=0.3)
    top.legend(fontsize=8, loc="center right")
    top.set_title(title or "training curves")

    floor = 1e-5  # zero cannot sit on a log axis: losses of exactly 0 are drawn here
    for i, st in enumerate(seats):
        ls = "-" if i == 0 else "--"
        for key, colour, label in ((f"eval/{st}_random_loss", "tab:red", "loss vs random"),
                                   (f"eval/{st}_perfect_loss", "tab:purple", "loss vs perfect"),
                                   (f"eval/trained_{st}_best_response", "tab:orange",
                                    "best response's value vs the policy as trained")):
            pts = s.get(key, [])
            if pts:
                xs, ys = zip(*pts, strict=True)
                bottom.plot(xs, [max(y, floor) for y in ys], color=colour, ls=ls, lw=2,
                            label=f"{label} as {st.upper()} (exact)")
        pts = s.get(f"eval/{st}_worst_case", [])
        beaten = [x for x, y in pts if y < 0]
        if pts and len(beaten) < len(pts):  # tick marks where the agent cannot be beaten
            safe = [x for x, y in pts if y >= 0]
            bottom.scatter(safe, [floor * (1 + i)] * len(safe), marker="|", s=120,
                           color="black" if i == 0 else "grey", label=f"unbeatable as {st.upper()}")
    bottom.set_yscale("log")
    plain_log_ticks(bottom.yaxis)
    bottom.set_ylim(floor / 2, 1.5)
    bottom.set_xlabel("training games")
    bottom.set_ylabel("exact loss rate / value (0 drawn at 1e-5)")
    bottom.grid(alpha=0.3, which="both")
    # Fixed margins that fit the labels of a 9-inch-wide figure (tight_layout measured every
    # text for the same result: ~0.35 s of a 1-game run); the legend's top 0.55 inch under the
    # lower axes, past its tick labels and x label (the panels share 1.03 plot heights: hspace).
    fig.subplots_adjust(left=0.085, right=0.98, top=1 - 0.35 / height, bottom=below / height, hspace=0.06)
    lower_axes = (height - 0.35 - below) * 2 / 5 / 1.03
    bottom.legend(fontsize=8, loc="upper center", ncols=2, frameon=False,
                  bbox_to_anchor=(0.5, -0.55 / lower_axes))
    return fig


# --------------------------------------------------------------------------- populations

QUARTILES = (25, 50, 75)  # the band's lower edge, the bold line, the band's upper edge
MAX_LINES = 200  # member lines drawn at most: beyond that they are one grey smear anyway
KEY_COLUMNS = ("games", "member", "seed")  # population_evals.csv's integer columns


def read_population_evals(path: str | Path) -> dict:
    """population_evals.csv -> its columns as arrays of R rows: ``games``, ``member`` and
    ``seed`` int64 (R,), each ``eval/*`` metric float64 (R,) (an empty cell reads as NaN)."""
    import numpy as np

    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        names = list(reader.fieldnames or ())
    cols = {}
    for name in names:
        cells = [row[name] for row in rows]
        if name in KEY_COLUMNS:
            cols[name] = np.array([int(float(c)) for c in cells], dtype=np.int64)
        else:
            cols[name] = np.array([float(c) if c not in ("", None) else np.nan for c in cells],
                                  dtype=np.float64)
    return cols


def population_series(evals_csv: str | Path, seat: str = "o") -> dict:
    """The numbers a population's curves.png draws, for learners trained as ``seat``.

    ``{"games": (G,) the distinct evaluation points, ascending; "present": (G,) members
    evaluated at each; "members": N, the members in the file; "ended_early": members whose
    last evaluation comes before the last point (stopped); "unbeatable": (G,) the share of
    all N members that no opponent beats at each point (worst case >= 0 from every judged
    seat); "seats": {judged seat: {"win": (3, G), "loss": (3, G)}}}``, rows of the (3, G)
    arrays: 25th percentile, median, 75th percentile over the members present at that point
    (numpy's default, linear interpolation between members)."""
    return _series(read_population_evals(evals_csv), seat)


def _series(cols: dict, seat: str) -> dict:
    import numpy as np

    seats = JUDGED_SEATS[seat]
    games = np.unique(cols["games"])  # (G,) members evaluate in lockstep: one point per value
    at = [cols["games"] == g for g in games]  # G masks over the R rows
    members = np.unique(cols["member"])
    last = {m: cols["games"][cols["member"] == m].max() for m in members}
    # (R,) True where the member is safe from every seat it is judged on
    safe = np.all([cols[eval_name(s, "worst_case")] >= 0 for s in seats], axis=0)
    n = len(members)

    def quartiles(metric: str):  # -> (3, G)
        if not len(games):
            return np.zeros((len(QUARTILES), 0))
        return np.stack([np.percentile(cols[metric][m], QUARTILES) for m in at], axis=1)

    return {
        "games": games,
        "present": np.array([int(m.sum()) for m in at], dtype=np.int64),
        "members": n,
        "ended_early": sum(int(last[m] < games[-1]) for m in members),
        # Over all N, not the members present: one that stopped does not make the rest safer,
        # and at the last point this is population.json's unbeatable_fraction.
        "unbeatable": np.array([safe[m].sum() / n for m in at], dtype=np.float64),
        "seats": {s: {o: quartiles(eval_name(s, f"random_{o}")) for o in ("win", "loss")}
                  for s in seats},
        # What a best response gets against the policy as trained (files written since issue 32).
        "trained": {s: quartiles(f"eval/trained_{s}_best_response") for s in seats
                    if f"eval/trained_{s}_best_response" in cols},
    }


MIN_SPAN = 0.02  # the narrowest win-rate axis: members within 0.1% of each other stay a line


def rate_limits(values) -> tuple[float, float]:
    """A rate axis around ``values`` (NaN ignored), padded by 8% and at least ``MIN_SPAN``
    wide, within [0, 1]. A population's win rates move over a few hundredths (0.80 to 0.92):
    on a 0..1 axis they were a flat line; the loss rate below keeps its log scale."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if not values.size:
        return -0.02, 1.02
    lo, hi = float(values.min()), float(values.max())
    pad = max(0.08 * (hi - lo), (MIN_SPAN - (hi - lo)) / 2, 0.0)
    lo, hi = max(0.0, lo - pad), min(1.0, hi + pad)
    if hi - lo < MIN_SPAN:  # pressed against 0 or 1: widen away from the edge
        lo, hi = (0.0, MIN_SPAN) if lo == 0.0 else (1.0 - MIN_SPAN, 1.0)
    return lo, hi


def drawn_members(members, limit: int = MAX_LINES):
    """The members to draw a line for: all of them, or ``limit`` spread evenly over them."""
    import numpy as np

    members = np.unique(members)
    if len(members) <= limit:
        return members
    return members[np.linspace(0, len(members) - 1, limit).round().astype(int)]


def plot_population(evals_csv: str | Path, out_png: str | Path, seat: str = "o",
                    title: str = "") -> Path:
    """Write a population's ``curves.png``, whole or not at all (``population_png``)."""
    out_png = Path(out_png)
    write_atomic(out_png, population_png(evals_csv, seat, title))
    return out_png


def population_png(evals_csv: str | Path, seat: str = "o", title: str = "") -> bytes:
    """A population's ``curves.png`` from ``population_evals.csv``: one column per seat the
    training seat is judged on. Top: exact win rate vs random, each member a faint line (at
    most ``MAX_LINES``, evenly chosen), the median bold, the 25th-75th percentile band shaded,
    on an axis that spans the members' range (``rate_limits``), not 0..1.
    Bottom: exact loss rate vs random on a log scale (0 drawn at 1e-5), median and band, the
    median of what a best response gets against the policy as trained (files that have it),
    and on the right axis the share of members unbeatable. The legend sits below the plots, so
    it covers no curve."""
    cols = read_population_evals(evals_csv)
    st = _series(cols, seat)
    games = st["games"]
    seats = JUDGED_SEATS[seat]
    drawn = drawn_members(cols["member"])
    few = len(games) < 12  # few points: markers, and a lone point is still seen
    marker = "o" if few else None
    floor = 1e-5  # zero cannot sit on a log axis: losses of exactly 0 are drawn here
    fig = figure(figsize=(9 if len(seats) == 1 else 14, 7.8), layout="constrained")
    axes = fig.subplots(2, len(seats), sharex=True, squeeze=False, gridspec_kw={"height_ratios": [3, 2]})
    single = len(games) == 1  # one evaluation (the last): a point per member, no line to draw
    each = "one point per member" if single else "one line per member"
    lines_label = (f"win vs random, {each} (all {len(drawn)})" if len(drawn) == st["members"] else
                   f"win vs random, {each} ({len(drawn)} of {st['members']}, evenly chosen)")
    alpha = 0.35 if len(drawn) <= 20 else 0.12
    for j, s in enumerate(seats):
        top, bottom = axes[0][j], axes[1][j]
        win = eval_name(s, "random_win")
        for k, m in enumerate(drawn):
            rows = cols["member"] == m
            top.plot(cols["games"][rows], cols[win][rows], color=COLOURS["win"], lw=0.6,
                     marker="." if single else None, alpha=alpha, label=lines_label if k == 0 else None)
        q = st["seats"][s]["win"]  # (3, G)
        top.fill_between(games, q[0], q[2], color=COLOURS["win"], alpha=0.25,
                         label="win: 25th-75th percentile of members")
        top.plot(games, q[1], color=COLOURS["win"], lw=2.4, marker=marker, label="win: median")
        top.set_title(f"as {s.upper()} vs random (exact)")
        top.set_ylabel("win rate (axis: the members' range)")
        top.set_ylim(*rate_limits(cols[win]))  # every member's values: the band lies within them
        top.grid(alpha=0.3)
        if not len(games):
            top.text(0.5, 0.5, "no exact evaluation yet", transform=top.transAxes, ha="center")

        q = st["seats"][s]["loss"].clip(min=floor)  # (3, G)
        bottom.fill_between(games, q[0], q[2], color=COLOURS["loss"], alpha=0.2,
                            label="loss: 25th-75th percentile of members")
        bottom.plot(games, q[1], color=COLOURS["loss"], lw=2.2, marker=marker,
                    label="loss vs random: median (0 drawn at 1e-5)")
        if s in st["trained"]:
            q = st["trained"][s].clip(min=floor)  # (3, G)
            bottom.plot(games, q[1], color="tab:orange", lw=1.8, marker=marker,
                        label="best response's value vs the policy as trained: median")
        bottom.set_yscale("log")
        plain_log_ticks(bottom.yaxis)
        bottom.set_ylim(floor / 2, 1.5)
        bottom.set_xlabel("training games")
        bottom.set_ylabel("exact loss rate / value (0 drawn at 1e-5)")
        bottom.grid(alpha=0.3, which="both")
        share = bottom.twinx()  # the same curve under every seat: it judges all of them
        share.plot(games, st["unbeatable"], color="black", lw=1.6, marker=marker, ms=4,
                   label="share of members unbeatable" + (" (from X and O)" if len(seats) > 1 else "")
                   + " (right axis)")
        share.set_ylim(-0.02, 1.02)
        share.set_ylabel("share unbeatable")
    # One entry per label: the columns repeat the same styles.
    handles: dict = {}
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), fontsize=8, loc="outside lower center",
                   ncols=2 if len(seats) == 1 else 3)
    who = f"population of {st['members']} members"
    if st["ended_early"]:
        who += f", {st['ended_early']} stopped early"
    if single:  # as the sweep report says it (figures.py)
        who += "\none exact evaluation (the last), so no curves: lower eval_every for them"
    fig.suptitle(f"{title}: {who}" if title else who, fontsize=10)
    return png_bytes(fig)
