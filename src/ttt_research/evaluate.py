"""Exact evaluation of a greedy policy: the numbers in ``eval.json``, never sampled.

The evaluated agent is the greedy policy: argmax of the masked logits, ties to the
lowest cell. One batched forward pass over the 4,520 reachable positions where somebody
is to move gives the agent's move everywhere (an ``(N,)`` action table over all codes);
then each figure is a dynamic programme over plies, from full boards back to the empty
one, in float64:

* ``vs_random`` / ``vs_perfect``: outcome probabilities when the opponent draws uniformly
  from its legal / minimax-optimal moves (``solver.outcome_probs``: a sum over the game tree).
* ``worst_case``: the result against a best-response opponent that knows the policy
  (``worst_case``: min over the opponent's moves, the agent's own move at its positions).
* ``optimal_move_rate``: over the agent's decision points reachable from either seat
  against any opponent, the share of moves that keep the minimax value.

Why exact: sampling 100 games against a rule-based player is how the PPO seed came to
claim it "never loses"; the tree says it loses 73% of games as O to a minimax player.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import game
from .contract import EVAL_SEATS, REPORT_KEY, SEAT_PIECE, WORST_NAME
from .solver import one_hot, outcome_probs, perfect_probs, plies_backwards, random_probs, solve

PolicyFn = Callable[[torch.Tensor], torch.Tensor]  # (M, 9) float32 mover's view -> (M, 9) logits


# --------------------------------------------------------------------------- positions


def decision_codes() -> torch.Tensor:
    """(M,) the reachable codes where somebody is to move (M = 4,520), in code order."""
    t = game.tables()
    return (t.reachable & ~t.done).nonzero().squeeze(-1)


def greedy_actions(policy: PolicyFn) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``policy`` once on every decision position and take its greedy moves.

    Returns ``(actions, raw_illegal)``: (N,) int64 masked-argmax moves over all codes (0
    where nobody moves), and (N,) bool marking where the unmasked argmax was an occupied
    cell (the raw policy's illegal choices).
    """
    t = game.tables()
    codes = decision_codes()
    with torch.no_grad():
        logits = policy(t.view[codes].float()).detach().to("cpu", torch.float32)
    legal = t.legal[codes]
    # torch.argmax returns the first maximal index: ties go to the lowest cell.
    masked = torch.where(legal, logits, -torch.inf)
    actions = torch.zeros(game.N_CODES, dtype=torch.long)
    actions[codes] = masked.argmax(-1)
    raw_illegal = torch.zeros(game.N_CODES, dtype=torch.bool)
    raw_illegal[codes] = ~legal.gather(1, logits.argmax(-1, keepdim=True)).squeeze(-1)
    return actions, raw_illegal


# --------------------------------------------------------------------------- the DPs


def worst_case(actions: torch.Tensor, seat: int) -> int:
    """The agent's result (+1 win, 0 draw, -1 loss) from the empty board when it plays
    ``actions`` as ``seat`` against an opponent that knows the policy and plays its best."""
    t = game.tables()
    value = (t.winner * seat).long()  # from the agent's side
    nxt = t.next2d
    for rows in plies_backwards():
        child = value[nxt[rows]]  # (R, 9)
        mine = child.gather(1, actions[rows, None]).squeeze(-1)
        theirs = torch.where(t.legal[rows], child, 2).amin(-1)
        value[rows] = torch.where(t.mover[rows] == seat, mine, theirs)
    return int(value[game.EMPTY_CODE])


def decision_points(actions: torch.Tensor, seat: int) -> torch.Tensor:
    """(N,) bool: positions where the agent (as ``seat``, playing ``actions``) is to move and
    that some opponent can lead it to. Forward over plies from the empty board."""
    t = game.tables()
    reach = torch.zeros(game.N_CODES, dtype=torch.bool)
    reach[game.EMPTY_CODE] = True
    nxt = t.next2d
    for ply in range(game.CELLS):
        rows = ((t.ply == ply) & reach & ~t.done).nonzero().squeeze(-1)
        mine = t.mover[rows] == seat
        # The agent follows its own move; the opponent may play any legal move.
        follow = torch.where(mine[:, None], torch.nn.functional.one_hot(actions[rows], game.CELLS)
                             .bool(), t.legal[rows])
        reach[nxt[rows][follow]] = True
    return reach & ~t.done & (t.mover == seat)


# --------------------------------------------------------------------------- the report


def _wlt(probs: torch.Tensor, seat: int) -> dict[str, float]:
    # Rounded to 12 places: the sums are exact rationals, float64 only adds noise below that.
    x, o, tie = (round(float(p), 12) + 0.0 for p in probs[game.EMPTY_CODE])
    win, loss = (x, o) if seat == game.X else (o, x)
    return {"win": win, "loss": loss, "tie": tie}


def evaluate_actions(actions: torch.Tensor) -> dict:
    """The ``eval.json`` report for a deterministic policy given as an (N,) action table."""
    sol = solve()
    agent, rnd, perfect = one_hot(actions), random_probs(), perfect_probs()
    report: dict = {}
    points = torch.zeros(game.N_CODES, dtype=torch.bool)
    for side in EVAL_SEATS:
        seat = SEAT_PIECE[side]
        px, po = (agent, rnd) if seat == game.X else (rnd, agent)
        qx, qo = (agent, perfect) if seat == game.X else (perfect, agent)
        report[REPORT_KEY[side]] = {
            "vs_random": _wlt(outcome_probs(px, po), seat),
            "vs_perfect": _wlt(outcome_probs(qx, qo), seat),
            "worst_case": WORST_NAME[worst_case(actions, seat)],
        }
        points |= decision_points(actions, seat)
    codes = points.nonzero().squeeze(-1)
    kept = sol.optimal[codes, actions[codes]]
    report["optimal_move_rate"] = float(kept.double().mean()) if codes.numel() else 1.0
    report["decision_points"] = int(codes.numel())
    return report


def evaluate_policy(policy: PolicyFn) -> dict:
    """The ``eval.json`` report for a policy given as a batched logits function."""
    actions, _ = greedy_actions(policy)
    return evaluate_actions(actions)


# --------------------------------------------------------------------------- as text


def eval_table(report: dict) -> str:
    """An ``eval.json`` report as a small text table (what ``evaluate`` prints without ``--json``)."""
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
    return "\n".join(rows)


if __name__ == "__main__":  # python -m ttt_research.evaluate: the command line lives apart
    from .evaluate_cli import main

    raise SystemExit(main())
