"""The league view: the policy at the end of a run against itself at each earlier evaluation.

With ``league=true`` a single run keeps the policy as trained (``exploit``'s move
probabilities at the board's decision positions, 4,520 on tic-tac-toe) at every exact
evaluation; at the end the final policy plays each of them exactly, from both seats
(``crossplay.cross_play``: the expectation over the whole tree, no sampled games), and
``league.csv`` in the run folder says how the run improved on its own past: a row per earlier
evaluation with the final policy's win and loss probabilities as X and as O and its expected
score (+1 win, 0 draw, -1 loss) from the seat it trains (the two seats averaged for
``seat=both``). A run that only gets better scores >= 0
against every earlier self; a row below 0 is a regression (an earlier self that beats the end
of the run).

The snapshots ride in the checkpoint (float32, 163 kB each on tic-tac-toe, 3.8 MB on 3,4,3),
so a resumed run keeps its past. Any board whose cross-play fits (``crossplay.MAX_BYTES``:
3,4,3's does; 4,4,4's 9M positions do not: ``league_problem`` refuses it before the run).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import torch

from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.evaluation.crossplay import MAX_BYTES, cost, cross_play
from ttt_research.files.atomic import write_atomic

COLUMNS = ("games", "final_as_x_win", "final_as_x_loss", "final_as_o_win", "final_as_o_loss", "final_score")


def league_rows(snapshots: list[tuple[int, torch.Tensor]], final: torch.Tensor,
                seat: str = "both", on_board: dict | None = None) -> list[dict]:
    """One row per earlier policy ``(games, (M, cells) probabilities)``: the final (M, cells)
    policy against it from both seats, exactly (``COLUMNS``); ``final_score`` is its expected
    result from the seat(s) the run trains (``seat``: x, o, or both averaged): a learner of O
    is not judged by an X it never trained. ``on_board``: ``{"game": g}`` on another board
    (the module's ``on_board``; its M decision positions are ``exact.decision_codes(g)``)."""
    if not snapshots:
        return []
    probs = torch.stack([final.double(), *(p.double() for _, p in snapshots)])  # (1 + k, M, cells)
    # (1 + k, 1 + k, 3): [i, j] = i as X vs j as O: P(X wins), P(O wins), P(tie)
    r = cross_play(probs, **(on_board or {}))
    rows = []
    for j, (games, _) in enumerate(snapshots, start=1):
        as_x, as_o = r[0, j], r[j, 0]
        x_score, o_score = float(as_x[0] - as_x[1]), float(as_o[1] - as_o[0])
        score = {"x": x_score, "o": o_score}.get(seat, (x_score + o_score) / 2)
        rows.append({"games": int(games), "final_as_x_win": float(as_x[0]), "final_as_x_loss": float(as_x[1]),
                     "final_as_o_win": float(as_o[1]), "final_as_o_loss": float(as_o[0]),
                     "final_score": score})
    return rows


def league_problem(g: Game, updates: int, eval_every: int) -> str | None:
    """Why ``league=true`` cannot play on ``g`` (one line), or None: its cross-play of one policy
    per evaluation (every ``eval_every`` of ``updates`` and the last) would hold more than
    ``crossplay.MAX_BYTES``. Asked before the run, so that no training ends in a league that
    cannot be played (tic-tac-toe's always fits)."""
    if g == TIC_TAC_TOE:
        return None
    n = math.ceil(updates / eval_every)  # the evaluations: the policies the league keeps
    facts = g.positions().facts
    need = cost(int(facts["reachable"]), int(facts["to_move"]), g.cells, n)
    if need <= MAX_BYTES:
        return None
    return (f"league=true on the {g.name} board: cross-play of its {n} evaluations' policies would hold "
            f"about {need / 1e9:.1f} GB, over {MAX_BYTES / 1e9:g} GB; train without league, or with "
            "fewer evaluations (eval_every)")


def write_league(path: Path, rows: list[dict]) -> None:
    """``league.csv``, whole or not at all."""
    f = io.StringIO(newline="")
    out = csv.DictWriter(f, COLUMNS)
    out.writeheader()
    out.writerows(rows)
    write_atomic(path, f.getvalue())


def league_text(rows: list[dict]) -> str:
    """A few lines for the console: the final policy against its earliest, middle and last
    earlier selves, and the worst row."""
    if not rows:
        return "league: no earlier evaluation to play against"
    picks = {0, len(rows) // 2, len(rows) - 1, min(range(len(rows)), key=lambda i: rows[i]["final_score"])}
    lines = ["league (the final policy as trained against itself at earlier evaluations, exact; "
             "score: +1 win, -1 loss, from the seat(s) it trains):"]
    for i in sorted(picks):
        r = rows[i]
        lines.append(f"  vs itself at {r['games']:>11,} games: score {r['final_score']:+.4f}  "
                     f"(as X win {r['final_as_x_win']:.4f} loss {r['final_as_x_loss']:.4f}; "
                     f"as O win {r['final_as_o_win']:.4f} loss {r['final_as_o_loss']:.4f})")
    return "\n".join(lines)
