"""``python -m ttt_research.evaluate PATH [--json]``: the exact evaluation of a policy.

PATH is a policy file (``.onnx`` following the contract, or a ``.ckpt``), a run folder (its
``policy.onnx``) or a policy table (``.csv`` / ``.json``: any player's answers at every
position, ``evaluation/policy_table.py``). Every policy gets the exact figures of the
stochastic policy it is (``exploit.policy_report``: NashConv, what a best-responding opponent
gets from each seat, the records against the random and the perfect player) and the lines
a best response exploits; a deterministic one also gets the greedy table of ``eval.json``
(``exact.evaluate_actions``). A file's logits are scored greedy by default, or as
``--temperature`` / ``--epsilon`` / ``--as-trained`` say (``policy_file.acting_for``).

Apart from ``evaluation/exact.py`` so that the evaluator itself needs only torch: loading a policy
file brings in ``policy_file`` and, for an ONNX model, onnxruntime. The module itself imports
only the standard library's and ``evaluation/options.py``'s: torch comes with the first policy
read, so ``--help`` and a refused option answer at once.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING

from ttt_research.contract import EVAL_SEATS, NASHCONV, REPORT_KEY, greedy_nashconv
from ttt_research.errors import UserError, command
from ttt_research.evaluation.options import FILLS, ILLEGAL, add_acting_args, is_table, require_path

if TYPE_CHECKING:
    import torch

    from ttt_research.env.board import Game


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ttt_research.evaluate",
        description="Exact evaluation of a policy over the whole game tree.")
    p.add_argument("path", help="a policy: .onnx (following the contract), .ckpt, a run folder "
                                "(its policy.onnx) or a policy table (.csv or .json, docs/policy-tables.md)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON object: eval.json's keys for a deterministic policy, and 'policy'")
    add_acting_args(p)
    p.add_argument("--fill", choices=FILLS, default=None,
                   help="a table's positions without a row: refused (default), or filled uniform "
                        "over the empty cells, or with the first empty cell")
    p.add_argument("--illegal", choices=ILLEGAL, default=None,
                   help="a table's moves on an occupied cell: refused (default) or filled as --fill says")
    p.add_argument("--lines", type=int, default=3, metavar="K",
                   help="show the K positions a best response exploits most, per seat (default 3; 0: none)")
    return p


def check_options(args: argparse.Namespace) -> None:
    """Options that do not go together, refused before anything is loaded."""
    if args.lines < 0:
        raise UserError(f"--lines must be 0 or more, got {args.lines}")
    if is_table(args.path):
        if args.temperature is not None or args.epsilon is not None or args.as_trained:
            raise UserError("--temperature, --epsilon and --as-trained transform a model's logits; "
                            "a policy table gives its moves itself")
    elif args.fill or args.illegal:
        raise UserError("--fill and --illegal apply to policy tables (.csv, .json)")
    require_path(args.path)


def scored_policy(args: argparse.Namespace) -> tuple[torch.Tensor, dict, Game | None]:
    """(probs (M, cells) float64, about, game): the policy the options name, what it is (a
    table's ``read_table`` info under ``table``, a file's ``acting``: temperature, epsilon) and
    its board (a file's ``game`` metadata, ``policy_file.game_of``; None: tic-tac-toe)."""
    if is_table(args.path):  # the options were checked (check_options)
        from ttt_research.evaluation.policy_table import read_table

        probs, info = read_table(args.path, args.fill or "refuse", args.illegal or "refuse")
        return probs, {"table": info}, None
    from ttt_research.evaluation.policy_file import game_of, load_probs, run_policy

    probs, meta, acting = load_probs(args.path, args.temperature, args.epsilon, args.as_trained)
    board = game_of(run_policy(args.path), meta) if "game" in meta else None  # None: tic-tac-toe
    return probs, {"acting": {"temperature": acting.temperature, "epsilon": acting.epsilon,
                              "describe": acting.describe()}}, board


def full_report(probs: torch.Tensor, about: dict, k: int, game: Game | None = None) -> dict:
    """eval.json's greedy keys (and ``nashconv``) when the policy is deterministic, and
    ``policy``: ``about``, the exact figures of ``exploit.policy_report`` and (k > 0) the
    ``worst_lines`` per seat, on ``game``'s board (None: tic-tac-toe)."""
    from ttt_research.evaluation.exact import evaluate_actions
    from ttt_research.evaluation.exploit import policy_report, worst_lines
    from ttt_research.evaluation.policy_table import deterministic_actions

    board = {} if game is None else {"game": game}  # no game: each function's own default, tic-tac-toe
    actions = deterministic_actions(probs, **{"board": game} if game else {})
    report = evaluate_actions(actions, **board) if actions is not None else {}
    if report:
        report[NASHCONV] = greedy_nashconv(report)  # as in a run's eval.json
    policy = {**about, **policy_report(probs, **board)}
    if k > 0:
        policy["worst_lines"] = {side: worst_lines(probs, side, k, **board) for side in EVAL_SEATS}
    return {**report, "policy": policy}


def nonfinite(value, where: str = "") -> tuple[str, float] | None:
    """(key path, value) of the first NaN or infinite number in a report, or None. The
    policy's probabilities are checked before scoring; this is the last guard, so that no
    NaN figure is ever printed with exit code 0."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, v in items:
        found = nonfinite(v, f"{where}.{key}" if where else str(key))
        if found:
            return found
    return None


def policy_text(policy: dict) -> str:
    """The ``policy`` block as a small table: NashConv, then per seat what a best-responding
    opponent gets and the records against the random and the perfect player."""
    rows = [f"NashConv {policy['nashconv']:.6f} (exploitability {policy['exploitability']:.6f}; "
            "0: no opponent beats it from either seat)",
            f"{'seat':<5} {'opponent best':>13} {'vs random: win':>15} {'loss':>7} {'tie':>7} "
            f"{'vs perfect: win':>16} {'loss':>7} {'tie':>7}"]
    for side in EVAL_SEATS:
        b = policy[REPORT_KEY[side]]
        r, q = b["vs_random"], b["vs_perfect"]
        rows.append(f"{side.upper():<5} {b['best_response']:>13.6f} {r['win']:>15.4f} {r['loss']:>7.4f} "
                    f"{r['tie']:>7.4f} {q['win']:>16.4f} {q['loss']:>7.4f} {q['tie']:>7.4f}")
    return "\n".join(rows)


def info_text(info: dict) -> str:
    """``policy_table.read_table``'s info in a few lines: what the table held and filled."""
    n = info["positions"]
    out = [f"table: {info['rows']:,} rows for {n:,} positions ({info['moves']:,} moves, "
           f"{info['distributions']:,} distributions)"]
    if info["moves"]:
        rate, legal = info["optimal_move_rate"], info["legal_answers"]
        kept = f"{rate:.4f} of the {legal:,} legal answers" if rate is not None else "n/a (no legal answers)"
        out.append(f"answers: {legal:,} legal ({legal / n:.2%} of positions), {info['illegal']:,} illegal "
                   f"({info['illegal'] / n:.2%}), {info['missing']:,} missing ({info['missing'] / n:.2%}); "
                   f"optimal moves {kept}")
    if info["filled"]:
        out.append(f"filled: {info['filled']:,} positions ({info['missing']:,} missing, {info['illegal']:,} "
                   f"illegal) by the rule '{info['fill']}'; the figures below score the filled policy")
    return "\n".join(out)


def report_text(report: dict, game: Game | None = None) -> str:
    """``full_report`` as text: what was scored, the lines a best response finds, then the
    figures: a stochastic policy's (``exploit.policy_report``), or for a deterministic one the
    greedy table (which says the same and more), ending with whether it can be beaten."""
    from ttt_research.evaluation.exploit import lines_text
    from ttt_research.evaluation.text import eval_table

    policy = report["policy"]
    out = [info_text(policy["table"]) if "table" in policy else f"policy: {policy['acting']['describe']}"]
    for side, lines in policy.get("worst_lines", {}).items():
        out += ["", lines_text(lines, side, **{} if game is None else {"game": game})]
    if REPORT_KEY["x"] in report:  # deterministic: a best response's value is the negated worst case
        out += ["", "the deterministic policy (eval.json):", eval_table(report)]
    else:
        out += ["", "the policy's exact figures (exploit.policy_report):", policy_text(policy)]
    return "\n".join(out)


@command()
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    check_options(args)
    probs, about, game = scored_policy(args)
    report = full_report(probs, about, args.lines, game)
    bad = nonfinite(report)
    if bad:
        raise UserError(f"{args.path}: the figure {bad[0]} is {bad[1]}, not a number; nothing is printed")
    print(json.dumps(report, indent=2) if args.json else report_text(report, game))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
