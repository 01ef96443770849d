"""``python -m ttt_research.tournament PATH_OR_NAME ... [--out DIR] [--as-trained] [--json]``.

Every participant plays every other from both seats, and itself, exactly: the probabilities of
each outcome of each ordered pair are a sum over the whole game tree (``evaluation/crossplay.py``),
not a sample of games. Then ratings: Davidson's Bradley-Terry model with ties and a first-move
advantage (Davidson 1970; Davidson & Beaver 1977), fitted to those exact results
(``evaluation/ratings.py``), on the Elo scale with ``random`` (or the first participant) at 0.
Participants: ``evaluation/participants.py``; ``best-response`` among them meets each policy
with that policy's own exact best response (``exploit.best_response_outcomes``), from both
seats. docs/tournament.md explains the numbers.

Stdout, first who can be beaten: each policy against its exact best response from each seat
(what the best response gets: 0 unbeatable), whether or not ``best-response`` plays. Ratings
put a player that beats weak ones above one that cannot be beaten, so this, not the ratings,
leads. Then the ratings, highest first, with the model's fit and a warning when it is poor
(``ratings.fit_warning``); the matrix of expected results (row plays X, column plays O) when
there are at most ``SHOW_MATRIX`` participants; the seconds. With ``--out DIR``:
``crossplay.csv``, ``crossplay.md``, ``crossplay.png``, ``ratings.csv``, ``worst_case.csv``.
Torch and the evaluation modules are imported once the arguments passed: ``--help`` and a
participant that names nothing answer before torch loads.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ttt_research.contract import EVAL_SEATS, REPORT_KEY, SEAT_PIECE
from ttt_research.env.mnk import game_option
from ttt_research.errors import command
from ttt_research.evaluation.options import BUILTINS, FILLS, ILLEGAL, require_participant
from ttt_research.files.atomic import atomic_path, write_atomic

if TYPE_CHECKING:  # torch and the evaluation modules load once the arguments passed (main)
    import torch

    from ttt_research.evaluation.participants import Participant
    from ttt_research.evaluation.ratings import Ratings

SHOW_MATRIX = 12  # participants up to which stdout shows the matrix
# A best response's expected result up to which a policy counts as unbeatable from that seat:
# the sums are exact rationals, float64 noise stays far below (exploit._wlt_row rounds at 1e-12).
UNBEATABLE = 1e-9
WORST_CASE_HEAD = ("who can be beaten: each player against its own exact best response, from each "
                   "seat; the best response's expected result (0: unbeatable, 1: always beaten)")
NUMBERS_IN_CELLS = 20  # participants up to which the heatmap writes each cell's number


def matrix_text(names: list[str], score: torch.Tensor) -> str:
    """(n, n) expected results (row as X vs column as O) as text; columns by number."""
    corner = "X (row) vs O (column)"
    width = max(len(corner) - 4, *(len(s) for s in names))  # the name column, after "NN  "
    head = f"{corner:<{width + 4}}" + "".join(f"{k + 1:>7}" for k in range(len(names)))
    rows = [head] + [f"{k + 1:>2}  {name:<{width}}" + "".join(f"{v:>+7.3f}" for v in score[k].tolist())
                     for k, name in enumerate(names)]
    return "\n".join(rows)


def worst_cases(names: list[str], against: torch.Tensor) -> dict[str, dict]:
    """Each policy's games against its own best response (``against`` (n, 2, 3), from
    ``exploit.best_response_outcomes``), by name: per seat (``as_x``, ``as_o``) the best
    response's expected result (``best_response``, as ``evaluate`` reports it) and the policy's
    ``win``, ``loss``, ``tie``; ``nashconv``, the two seats' sum; ``unbeatable`` when both are 0."""
    out = {}
    for name, games in zip(names, against.tolist(), strict=True):
        block: dict = {}
        for side, (x, o, tie) in zip(EVAL_SEATS, games, strict=True):
            win, loss = (x, o) if SEAT_PIECE[side] > 0 else (o, x)
            block[REPORT_KEY[side]] = {"best_response": loss - win + 0.0, "win": win, "loss": loss,
                                       "tie": tie}
        block["nashconv"] = sum(block[REPORT_KEY[s]]["best_response"] for s in EVAL_SEATS)
        block["unbeatable"] = all(block[REPORT_KEY[s]]["best_response"] <= UNBEATABLE for s in EVAL_SEATS)
        out[name] = block
    return out


def beaten(block: dict) -> str:
    """A ``worst_cases`` entry in words: ``unbeatable``, or the seats it can be beaten from
    and how often it loses there to its best response."""
    seats = [f"loses {b['loss']:.1%} as {k[-1].upper()}" for k, b in block.items()
             if isinstance(b, dict) and b["best_response"] > UNBEATABLE]
    return f"can be beaten ({', '.join(seats)})" if seats else "unbeatable"


def worst_case_order(cases: dict[str, dict]) -> list[str]:
    """The names from the least beatable (NashConv) up; ties keep the participants' order."""
    return sorted(cases, key=lambda name: cases[name]["nashconv"] if not cases[name]["unbeatable"] else 0.0)


def seats_of(case: dict) -> tuple[dict, dict]:
    """A player's games against its best response as X, then as O (the report's keys)."""
    return tuple(case[REPORT_KEY[s]] for s in EVAL_SEATS)


def worst_case_text(cases: dict[str, dict]) -> str:
    width = max(len("player"), *(len(s) for s in cases))
    rows = [WORST_CASE_HEAD + ":", f"{'player':<{width}}  {'as X':>7}  {'as O':>7}"]
    for name in worst_case_order(cases):
        b = cases[name]
        x, o = seats_of(b)
        rows.append(f"{name:<{width}}  {x['best_response']:>7.4f}  {o['best_response']:>7.4f}  {beaten(b)}")
    return "\n".join(rows)


def worst_case_csv(cases: dict[str, dict]) -> str:
    """One policy a line, in the participants' order; floats written with repr."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["player", "x_best_response", "o_best_response", "nashconv", "unbeatable",
                "x_win", "x_loss", "x_tie", "o_win", "o_loss", "o_tie"])
    for name, b in cases.items():
        x, o = seats_of(b)
        w.writerow([name, repr(x["best_response"]), repr(o["best_response"]), repr(b["nashconv"]),
                    str(b["unbeatable"]).lower(),
                    *(repr(side[k]) for side in (x, o) for k in ("win", "loss", "tie"))])
    return out.getvalue()


def worst_case_md(cases: dict[str, dict]) -> list[str]:
    lines = ["## Who can be beaten", "",
             "Each player against its own exact best response (an opponent that knows its policy "
             "and maximises its expected result), from each seat: the best response's expected "
             "result, P(it wins) - P(it loses), 0 for a player no one beats from that seat; the "
             "player's loss rate in that game. Before the ratings, which can put a player that beats "
             "weak ones above one that no one beats.", "",
             "| player | best response vs it as X | as O | NashConv | verdict |", "|---|---:|---:|---:|---|"]
    for name in worst_case_order(cases):
        b = cases[name]
        x, o = seats_of(b)
        lines.append(f"| {name.replace('|', chr(92) + '|')} | {x['best_response']:.4f} | "
                     f"{o['best_response']:.4f} | {b['nashconv']:.4f} | {beaten(b)} |")
    return lines + [""]


def crossplay_csv(names: list[str], results: torch.Tensor) -> str:
    """Long form, one ordered pair a line; floats written with repr: they read back equal."""
    from ttt_research.evaluation.crossplay import expected_result

    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["x", "o", "p_x_win", "p_o_win", "p_tie", "score"])
    score = expected_result(results)
    for i, x in enumerate(names):
        for j, o in enumerate(names):
            w.writerow([x, o, *(repr(float(v)) for v in results[i, j]), repr(float(score[i, j]))])
    return out.getvalue()


def ratings_csv(r: Ratings) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["rank", "player", "elo", "bounded_only_by_prior"])
    for rank, k in enumerate(r.order(), 1):
        w.writerow([rank, r.names[k], repr(r.elo[k]), str(r.names[k] in r.separated).lower()])
    return out.getvalue()


def crossplay_md(players: list[Participant], results: torch.Tensor, r: Ratings,
                 cases: dict[str, dict]) -> str:
    from ttt_research.evaluation.crossplay import expected_result, standings
    from ttt_research.evaluation.ratings import FIT_WARN, fit_warning

    names = [p.name for p in players]
    score = expected_result(results)
    cell = "\\|"  # a name with | would break the table
    corner = "X (row) \\ O (column)"
    lines = ["# Cross-play (exact)", "", *worst_case_md(cases), "## Expected results", "",
             "Expected result of the row player, who plays X, against the column player as O: "
             "P(X wins) - P(O wins), from +1 (X always wins) to -1 (O always wins). Exact sums "
             "over the game tree, not sampled games.", "",
             f"| {corner} | " + " | ".join(n.replace("|", cell) for n in names) + " |",
             "|---|" + "---:|" * len(names)]
    for k, name in enumerate(names):
        lines.append(f"| {name.replace('|', cell)} | " + " | ".join(f"{v:+.4f}" for v in score[k].tolist())
                     + " |")
    lines += ["", "## Ratings", "",
              "Davidson's Bradley-Terry model with ties and a first-move advantage (Davidson 1970; "
              "Davidson & Beaver 1977), fitted to the exact results; Elo scale (400 log10), "
              f"{r.anchor} = 0. No confidence intervals: the results have no sampling error; the "
              "model's misfit is the uncertainty, reported below.", "",
              "| rank | player | Elo | plays |", "|---:|---|---:|---|"]
    for rank, k in enumerate(r.order(), 1):
        flag = " (won or lost every game: bounded only by the prior)" if r.names[k] in r.separated else ""
        name = names[k].replace("|", cell)
        lines.append(f"| {rank} | {name} | {r.elo[k]:.1f}{flag} | {players[k].plays} |")
    lines += ["", f"First move (X) worth {r.x_advantage:+.1f} Elo; tie parameter nu = {r.tie:.4g}. "
              f"Fit (model vs exact expected points per ordered pair): max |diff| {r.fit_max:.4f}, "
              f"RMS {r.fit_rms:.4f}.", ""]
    warning = fit_warning(r)
    if warning:
        lines += [f"**{warning}** (poor: a pair missed by more than {FIT_WARN} expected points, or "
                  "ratings in an order that a pair's own games contradict)", ""]
    return "\n".join(lines + standings_md(names, standings(results)))


def standings_md(names: list[str], table: torch.Tensor) -> list[str]:
    """The standings: expected wins, ties, losses and points over each player's games against the
    others, one from each seat; by points, no model involved."""
    games = 2 * (len(names) - 1)
    lines = ["## Standings", "", f"Each player's {games} games against the others, one as X and one as O "
             "against each; expected numbers (exact), 1 point a win, 1/2 a tie.", "",
             "| rank | player | won | tied | lost | points |", "|---:|---|---:|---:|---:|---:|"]
    order = sorted(range(len(names)), key=lambda k: -float(table[k, 3]))
    for rank, k in enumerate(order, 1):
        won, tied, lost, points = table[k].tolist()
        name = names[k].replace("|", "\\|")
        lines.append(f"| {rank} | {name} | {won:.4f} | {tied:.4f} | {lost:.4f} | {points:.4f} |")
    return lines + [""]


def heatmap(path: Path, names: list[str], score: torch.Tensor) -> None:
    """The matrix of expected results as a picture: diverging colours centred on 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(names)
    # Up to 16 inches a side, names shrinking past 36 players: a 100-member population's
    # picture at 30 inches took 5 s of the command's 12 to draw, for no more to see.
    side = min(4 + 0.45 * n, 16)
    font = 8 if n <= 36 else max(3.0, 8 * 36 / n)
    fig, ax = plt.subplots(figsize=(side + 1.5, side), layout="constrained")
    image = ax.imshow(score.numpy(), cmap="RdBu_r", vmin=-1, vmax=1,  # red: X wins; blue: O wins
                      interpolation="nearest")
    ax.set_xticks(range(n), names, rotation=90, fontsize=font)
    ax.set_yticks(range(n), names, fontsize=font)
    ax.set_xlabel("O (column)")
    ax.set_ylabel("X (row)")
    ax.set_title("Exact expected result for X: P(X wins) - P(O wins)")
    if n <= NUMBERS_IN_CELLS:
        for i in range(n):
            for j in range(n):
                v = float(score[i, j])
                ax.text(j, i, f"{v:+.2f}", ha="center", va="center", fontsize=7,
                        color="white" if abs(v) > 0.6 else "black")
    fig.colorbar(image, ax=ax, label="expected result for the row player (X)")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def write_outputs(out: Path, players: list[Participant], results: torch.Tensor, r: Ratings,
                  cases: dict[str, dict]) -> None:
    from ttt_research.evaluation.crossplay import expected_result

    names = [p.name for p in players]
    write_atomic(out / "crossplay.csv", crossplay_csv(names, results))
    write_atomic(out / "crossplay.md", crossplay_md(players, results, r, cases))
    write_atomic(out / "ratings.csv", ratings_csv(r))
    write_atomic(out / "worst_case.csv", worst_case_csv(cases))
    heatmap(out / "crossplay.png", names, expected_result(results))


def as_json(players: list[Participant], results: torch.Tensor, r: Ratings, cases: dict[str, dict],
            seconds: dict) -> dict:
    from ttt_research.evaluation.crossplay import standings
    from ttt_research.evaluation.ratings import FIT_WARN, fit_warning

    return {"participants": [{"name": p.name, "plays": p.plays, **({"note": p.note} if p.note else {})}
                             for p in players],
            "results": results.tolist(),  # [i][j] = [P(X wins), P(O wins), P(tie)], i as X
            "ratings": {r.names[k]: r.elo[k] for k in r.order()}, "anchor": r.anchor,
            "standings": {p.name: dict(zip(("won", "tied", "lost", "points"), row, strict=True))
                       for p, row in zip(players, standings(results).tolist(), strict=True)},
            "model": {"name": "Davidson-Beaver (Bradley-Terry with ties and an order effect)",
                      "x_advantage_elo": r.x_advantage, "tie_nu": r.tie, "fit_max_abs": r.fit_max,
                      "fit_rms": r.fit_rms, "bounded_only_by_prior": r.separated,
                      "fit_warn_max_abs": FIT_WARN, "fit_warning": fit_warning(r),
                      "upsets": [{"higher": hi, "lower": lo, "lower_beats_higher_by": m}
                                 for hi, lo, m in r.upsets]},
            "worst_case": cases,  # every policy (not best-response) against its own best response
            "seconds": seconds}


@command()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ttt_research.tournament",
        description="Exact round robin: every participant against every other from both seats, "
                    "then Davidson-Beaver ratings on the Elo scale (docs/tournament.md).")
    parser.add_argument("players", nargs="+", metavar="PATH_OR_NAME",
                        help=f"a run folder, a population folder (every member), .onnx, .ckpt, "
                             f".csv/.json policy table, or a built-in: {', '.join(BUILTINS)}")
    parser.add_argument("--out", type=Path, default=None,
                        help="write crossplay.csv, crossplay.md, crossplay.png, ratings.csv, "
                             "worst_case.csv here")
    parser.add_argument("--as-trained", action="store_true",
                        help="networks play as they did while training (the file's 'acting' "
                             "metadata: softmax temperature, epsilon), not greedy")
    parser.add_argument("--fill", choices=FILLS, default="refuse",
                        help="policy tables: positions without a row are refused (default) or "
                             "filled, uniform over the empty cells or the first empty cell")
    parser.add_argument("--illegal", choices=ILLEGAL, default="refuse",
                        help="policy tables: a move on an occupied cell is refused (default) or "
                             "filled by the --fill rule")
    parser.add_argument("--game", default=None, metavar="M,N,K",
                        help="the board (default: the participants' files', tic-tac-toe for built-ins "
                             "alone); a file of another board is refused")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    sizes = game_option(args.game)  # before torch, as a typo below
    for arg in args.players:  # a typo is refused before torch loads (about 1.5 s)
        require_participant(arg)
    import torch

    from ttt_research.evaluation.crossplay import (
        check_size,
        cross_play,
        expected_result,
        one_thread,
        with_responder,
    )
    from ttt_research.evaluation.exploit import best_response_outcomes
    from ttt_research.evaluation.participants import TIC_TAC_TOE, board_of, gather
    from ttt_research.evaluation.ratings import fit_ratings, ratings_table

    # One torch thread for the whole command, as every run here (conf: threads=1): its tensors
    # are small (4,520 x 9 a player), and on a busy 2-core host two threads spin against each
    # other: loading 100 members' policy.onnx took 13.3 s on two threads, 2.8 s on one.
    torch.set_num_threads(1)
    game, said = board_of(args.players, sizes)  # files of another board: refused
    on_board = {} if game == TIC_TAC_TOE else {"game": game}  # tic-tac-toe: every call as it was
    check_size(game, len(args.players))  # a 4x4 board: refused before any policy loads
    players = gather(args.players, args.as_trained, args.fill, args.illegal, game)
    names = [p.name for p in players]
    policies = [p for p in players if p.probs is not None]  # all but best-response
    check_size(game, len(policies))  # a population's members counted
    probs = torch.stack([p.probs for p in policies])
    start = time.perf_counter()
    results = cross_play(probs, **on_board)  # (n, n, 3)
    played = time.perf_counter()
    with one_thread():  # small operations, as cross_play's
        against = best_response_outcomes(probs, **on_board)  # (n, 2, 3)
    responded = time.perf_counter()
    if len(policies) < len(players):
        results = with_responder(results, against, [p.probs for p in players].index(None), **on_board)
    r = fit_ratings(results, names)
    seconds = {"cross_play": played - start, "best_response": responded - played,
               "ratings": time.perf_counter() - responded}
    cases = worst_cases([p.name for p in policies], against)
    if args.out is not None:
        write_outputs(args.out, players, results, r, cases)
    if args.json:
        print(json.dumps({**as_json(players, results, r, cases, seconds),
                          **({"game": game.name} if on_board else {})}, indent=2))
        return 0
    if on_board:  # tic-tac-toe's output as it always was
        print(f"board: {game.name} ({said or 'built-in players alone'})")
    for p in players:
        if p.note:
            print(f"note: {p.note}")
    print(worst_case_text(cases) + "\n")
    print(ratings_table(r))
    if len(players) <= SHOW_MATRIX:  # in the ratings' order: row k is rank k above
        order = r.order()
        print("\nexpected result of the row player as X against the column player as O (+1 X wins, "
              "-1 O wins), by rank:")
        print(matrix_text([names[k] for k in order], expected_result(results)[order][:, order]))
    n = len(players)
    print(f"\n{n} participants, {n * n} ordered pairs: exact cross-play {seconds['cross_play']:.2f} s, "
          f"best responses {seconds['best_response']:.2f} s, ratings {seconds['ratings']:.2f} s"
          + (f"; files in {args.out}" if args.out else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
