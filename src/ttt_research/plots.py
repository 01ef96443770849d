"""``curves.png``: the story of a run at a glance, drawn from ``metrics.csv``.

Top: win / loss / tie against random over training games, sampled from the training games
(thin, noisy) and exact (bold, from the evaluator) for the seat(s) the learner trains.
Bottom: what sampling cannot show: the exact loss rate against random on a log scale
(it has to reach zero), the loss rate against a perfect player, and the worst case.
"""

from __future__ import annotations

import csv
from pathlib import Path

COLOURS = {"win": "tab:green", "loss": "tab:red", "tie": "tab:blue"}


def read_metrics(path: str | Path) -> dict[str, list[tuple[float, float]]]:
    """metrics.csv -> {metric: [(games, value), ...]} using ``train/games`` as the x axis."""
    series: dict[str, list[tuple[float, float]]] = {}
    games = 0.0
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("train/games"):
                games = float(row["train/games"])
            for key, value in row.items():
                if value not in ("", None) and key not in ("step", "train/games"):
                    series.setdefault(key, []).append((games, float(value)))
    return series


def _smooth(values: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def plot_curves(metrics_csv: str | Path, out_png: str | Path, seat: str = "o",
                title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = read_metrics(metrics_csv)
    seats = {"x": ["x"], "o": ["o"], "both": ["x", "o"]}[seat]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
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
                                   (f"eval/{st}_perfect_loss", "tab:purple", "loss vs perfect")):
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
    bottom.set_ylim(floor / 2, 1.5)
    bottom.set_xlabel("training games")
    bottom.set_ylabel("exact loss rate (0 drawn at 1e-5)")
    bottom.grid(alpha=0.3, which="both")
    bottom.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    out_png = Path(out_png)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png
