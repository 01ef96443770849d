"""Exact evaluation of a greedy policy: the numbers in ``eval.json``, never sampled.

The evaluated agent is the greedy policy: argmax of the masked logits, ties to the
lowest cell. One batched forward pass over the 4,520 reachable positions where somebody
is to move gives the agent's move everywhere (an ``(N,)`` action table over all codes);
then each figure is a dynamic programme over plies, from full boards back to the empty
one, in float64:

* ``vs_random`` / ``vs_perfect``: outcome probabilities when the opponent draws uniformly
  from its legal / minimax-optimal moves (``outcome_probs``: a sum over the game tree).
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
from .solver import solve

WORST = {1: "win", 0: "draw", -1: "loss"}
PolicyFn = Callable[[torch.Tensor], torch.Tensor]  # (M, 9) float32 mover's view -> (M, 9) logits


# --------------------------------------------------------------------------- move tables


def uniform_over(mask: torch.Tensor) -> torch.Tensor:
    """(N, 9) bool -> (N, 9) float64 probabilities, uniform over the True cells (rows with
    none stay all zero)."""
    m = mask.double()
    return m / m.sum(-1, keepdim=True).clamp_min(1.0)


def random_probs() -> torch.Tensor:
    """(N, 9) float64: a uniformly random legal move at every code."""
    return uniform_over(game.tables().legal)


def perfect_probs() -> torch.Tensor:
    """(N, 9) float64: a uniformly random minimax-optimal move at every code."""
    return uniform_over(solve().optimal)


def one_hot(actions: torch.Tensor) -> torch.Tensor:
    """(N,) action table -> (N, 9) float64 deterministic move probabilities (legal rows only)."""
    t = game.tables()
    probs = torch.nn.functional.one_hot(actions, game.CELLS).double()
    return probs * t.legal.any(-1, keepdim=True)


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


def _plies_backwards():
    t = game.tables()
    for ply in range(game.CELLS - 1, -1, -1):
        yield ((t.ply == ply) & ~t.done).nonzero().squeeze(-1)


def outcome_probs(pi_x: torch.Tensor, pi_o: torch.Tensor) -> torch.Tensor:
    """Exact outcome probabilities when X plays ``pi_x`` and O plays ``pi_o``.

    Args:
        pi_x, pi_o: (N, 9) float64 move probabilities at every code.

    Returns:
        (N, 3) float64: P(X wins), P(O wins), P(tie) from every code.
    """
    t = game.tables()
    pi = torch.where((t.mover == game.X)[:, None], pi_x, pi_o)
    result = torch.stack([t.winner == game.X, t.winner == game.O, t.done & (t.winner == 0)],
                         -1).double()  # terminal rows are one-hot; the rest is filled in
    nxt = t.next2d
    for rows in _plies_backwards():
        result[rows] = torch.einsum("rc,rck->rk", pi[rows], result[nxt[rows]])
    return result


def worst_case(actions: torch.Tensor, seat: int) -> int:
    """The agent's result (+1 win, 0 draw, -1 loss) from the empty board when it plays
    ``actions`` as ``seat`` against an opponent that knows the policy and plays its best."""
    t = game.tables()
    value = (t.winner * seat).long()  # from the agent's side
    nxt = t.next2d
    for rows in _plies_backwards():
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
    for name, seat in (("as_x", game.X), ("as_o", game.O)):
        px, po = (agent, rnd) if seat == game.X else (rnd, agent)
        qx, qo = (agent, perfect) if seat == game.X else (perfect, agent)
        report[name] = {
            "vs_random": _wlt(outcome_probs(px, po), seat),
            "vs_perfect": _wlt(outcome_probs(qx, qo), seat),
            "worst_case": WORST[worst_case(actions, seat)],
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


# --------------------------------------------------------------------------- command line


def format_table(report: dict) -> str:
    """The report as a small text table (what ``evaluate`` prints without ``--json``)."""
    rows = ["seat  opponent   win      loss     tie      worst case"]
    for key, seat in (("as_x", "X"), ("as_o", "O")):
        for opp in ("vs_random", "vs_perfect"):
            r = report[key][opp]
            worst = report[key]["worst_case"] if opp == "vs_random" else ""
            rows.append(f"{seat:<5} {opp[3:]:<10} {r['win']:<8.4f} {r['loss']:<8.4f} "
                        f"{r['tie']:<8.4f} {worst}")
    rows.append(f"optimal moves: {report['optimal_move_rate']:.4f} of "
                f"{report['decision_points']} decision points")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    from .policy_file import PolicyFileError, load_policy

    parser = argparse.ArgumentParser(
        prog="python -m ttt_research.evaluate",
        description="Exact evaluation of a greedy policy over the whole game tree.")
    parser.add_argument("path", help="policy file: .onnx (following the contract) or .ckpt")
    parser.add_argument("--json", action="store_true", help="print the eval.json report")
    args = parser.parse_args(argv)
    try:
        policy, _ = load_policy(args.path)
        report = evaluate_policy(policy)
    except PolicyFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
