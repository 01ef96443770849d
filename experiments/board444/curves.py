"""The curves of issue 62 as a PNG (``curves.png`` beside this file), from ``rows/*.json``: the
share of optimal moves over every decision point, and the seats whose value the agent holds,
against the run's own clock (minutes), one line per (setting, seed), a colour per setting; the
4,4,3 rows (``teacher443``) in the lower panels, where the seat that matters is X's forced win."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a file, no display
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
ON_443 = ("teacher443",)  # settings that play 4,4,3 (X wins); the others 4,4,4 (a draw)


def load() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(HERE.glob("rows/*.json"))]


def main() -> None:
    rows = [r for r in load() if r.get("curve")]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), squeeze=False)
    colours = {}
    for i, row in enumerate(rows):
        lower = row["setting"] in ON_443
        share_ax, held_ax = axes[1 if lower else 0]
        colour = colours.setdefault(row["setting"], f"C{len(colours) % 10}")
        minutes = [0.0] + [p["train_s"] / 60 for p in row["curve"]]
        share = [None] + [p["optimal_move_rate_all"] for p in row["curve"]]
        held = [0] + [p["holds_x"] if lower else int(p["holds_x"]) + int(p["holds_o"]) for p in row["curve"]]
        label = row["setting"] if not any(l.get_label() == row["setting"] for l in share_ax.lines) else None
        share_ax.plot(minutes[1:], share[1:], "o-", color=colour, label=label, alpha=0.8)
        lift = 0.02 * (i % 10)  # apart, so that lines on the same level stay visible
        held_ax.step(minutes, [h + lift for h in held], where="post", color=colour, alpha=0.6)
    for (share_ax, held_ax), game in zip(axes, ("4,4,4 (a draw)", "4,4,3 (X wins)"), strict=True):
        share_ax.axhline(0.995, color="k", lw=0.8, ls="--")
        share_ax.axhline(0.992, color="grey", lw=0.8, ls=":")
        share_ax.set(title=f"{game}: optimal moves over every decision point", xlabel="minutes (run clock)",
                     ylabel="optimal_move_rate_all")
        if any(not line.get_label().startswith("_") for line in share_ax.lines):
            share_ax.legend(fontsize=8)
        held_ax.set(title=f"{game}: worst case", xlabel="minutes (run clock)")
    axes[0][0].text(0.01, 0.02, "dashed: the target 99.5%; dotted: lean4-mlir's 99.20%",
                    transform=axes[0][0].transAxes, fontsize=8)
    axes[0][1].set(yticks=[0, 1, 2], yticklabels=["loses from both seats", "draws from one seat",
                                                   "draws from both seats"])
    axes[1][1].set(yticks=[0, 1], yticklabels=["X can be stopped", "X forces the win"])
    fig.tight_layout()
    fig.savefig(HERE / "curves.png", dpi=90)


if __name__ == "__main__":
    main()
