"""Reports as text: the small table ``evaluate`` prints without ``--json`` and every run prints
at its end, the unbeatable line, and the exploitability lines (``evaluation/exploit.py``'s
blocks). Apart from ``exact.py`` so that the evaluator stays the DPs and nothing else.
"""

from __future__ import annotations

from ttt_research.contract import (
    EVAL_SEATS,
    GAME_VALUE,
    JUDGED_SEATS,
    NASHCONV,
    OPTIMAL_ALL,
    REPORT_KEY,
    TRAINED_KEY,
    unbeatable,
)
from ttt_research.evaluation.values import value_lines


def drawn(report: dict) -> bool:
    """The report's game is a draw with perfect play (tic-tac-toe, 4,4,4), or the report
    predates ``game_value`` (a 3x3 one)."""
    return report[REPORT_KEY["x"]].get(GAME_VALUE, "draw") == "draw"


# What holding the game's value means for a seat, by that seat's value (contract.HOLDS_VALUE),
# and what it means not to.
HOLDING = {"win": ("forces the win", "some opponent draws or beats it"),
           "loss": ("loses only to a perfect {other}", "an imperfect {other} can still beat it")}


def unbeatable_line(report: dict, seat: str = "both") -> str:
    """Whether the agent holds the game's value (``contract.unbeatable``) from each seat the
    training seat ``seat`` is judged on, in words. On a drawn game: ``unbeatable as X: yes;
    as O: no (some opponent beats it)``; on a won one, what that means per seat:
    ``X wins this game: as X forces the win: yes; as O loses only to a perfect X: no (...)``."""
    if drawn(report):
        said = {True: "yes", False: "no (some opponent beats it)"}
        return "unbeatable " + "; ".join(f"as {side.upper()}: {said[unbeatable(report, side)]}"
                                         for side in JUDGED_SEATS[seat])
    winner = "X" if report[REPORT_KEY["x"]][GAME_VALUE] == "win" else "O"
    parts = []
    for side in JUDGED_SEATS[seat]:
        other = "O" if side == "x" else "X"
        holds, fails = (w.format(other=other) for w in HOLDING[report[REPORT_KEY[side]][GAME_VALUE]])
        said = "yes" if unbeatable(report, side) else f"no ({fails})"
        parts.append(f"as {side.upper()} {holds}: {said}")
    return f"{winner} wins this game: " + "; ".join(parts)


def small(v: float) -> str:
    """A value in [0, 2] that may be tiny but not zero (a softmax's leftover mistakes): four
    decimals, or three significant digits below 0.001, so 3.4e-05 is not shown as 0.0000."""
    return f"{v:.4f}" if v == 0 or abs(v) >= 1e-3 else f"{v:.2e}"


def trained_lines(report: dict, seat: str = "both") -> list[str]:
    """The exploitability lines of a report (``evaluation/exploit.py``): the greedy policy's
    NashConv, and the policy as trained's (``as_trained``, ``search_as_trained``): what a best
    response gets against it per seat (+1 it always wins, 0 it can only draw) and its
    results vs random. None for a report without them."""
    rows = []
    if NASHCONV in report:
        rows.append(f"NashConv of the greedy policy: {report[NASHCONV]:.4f} "
                    + ("(0: nobody beats it from either seat)" if drawn(report) else
                       "(0: no opponent gets more than the game's value against it from either seat)"))
    for key in (TRAINED_KEY, f"search_{TRAINED_KEY}"):
        block = report.get(key)
        if not block:
            continue
        per_seat = "; ".join(
            f"as {s.upper()}: a best response gets {small(block[REPORT_KEY[s]]['best_response'])}, "
            f"vs random win {block[REPORT_KEY[s]]['vs_random']['win']:.4f} "
            f"loss {block[REPORT_KEY[s]]['vs_random']['loss']:.4f}" for s in JUDGED_SEATS[seat])
        rows.append(f"as trained ({block['policy']}): NashConv {small(block['nashconv'])}; {per_seat}")
    return rows


def eval_table(report: dict, seat: str = "both") -> str:
    """An ``eval.json`` report as a small text table (what ``evaluate`` prints without
    ``--json``), ending with whether it is unbeatable from the seats ``seat`` is judged on."""
    rows = ["seat  opponent   win      loss     tie      worst case"]
    for side in EVAL_SEATS:
        block = report[REPORT_KEY[side]]
        for opp in ("vs_random", "vs_perfect"):
            r = block[opp]
            worst = block["worst_case"] if opp == "vs_random" else ""
            rows.append(f"{side.upper():<5} {opp[3:]:<10} {r['win']:<8.4f} {r['loss']:<8.4f} "
                        f"{r['tie']:<8.4f} {worst}")
    rows.append(f"optimal moves: {report['optimal_move_rate']:.4f} of "
                f"{report['decision_points']} decision points")
    if not drawn(report):  # a won game: each seat's share (the winner's and the loser's differ)
        rows.append("  " + "; ".join(
            f"as {side.upper()} {report[REPORT_KEY[side]]['optimal_move_rate']:.4f} of "
            f"{report[REPORT_KEY[side]]['decision_points']}" for side in EVAL_SEATS)
            + (f"; over every decision point of the game {report[OPTIMAL_ALL]:.4f}"
               if OPTIMAL_ALL in report else ""))
    rows += value_lines(report)  # an algorithm with action values: its value_accuracy
    rows += trained_lines(report, seat)  # the greedy NashConv, the policy as trained
    rows.append(unbeatable_line(report, seat))
    rows += [f"{name} (the test-time search, {part['simulations']} simulations: algo.test_simulations): "
             f"optimal moves {part['optimal_move_rate']:.4f}; "
             f"{unbeatable_line(part, seat)}" for name, part in report.items()  # alphazero's search
             if isinstance(part, dict) and "worst_case" in part.get(REPORT_KEY["x"], {})]  # policy_parts
    return "\n".join(rows)

