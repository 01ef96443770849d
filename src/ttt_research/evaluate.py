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
    return _wlt_row(probs[game.EMPTY_CODE], seat)


def _wlt_row(row: torch.Tensor | list[float], seat: int) -> dict[str, float]:
    # Rounded to 12 places: the sums are exact rationals, float64 only adds noise below that.
    x, o, tie = (round(float(p), 12) + 0.0 for p in row)
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


# --------------------------------------------------------------------------- populations
#
# The same report for N policies at once (a population of agents): one forward over the
# decision positions for all members, then every DP above with a leading member axis. The
# DPs keep only the 5,478 reachable codes (children of reachable positions are reachable,
# so nothing else is ever read), which keeps an (N, codes, 3) float64 table at 134 MB for
# N=1024, and members go through in chunks to bound the (N, rows, 9, 3) gathers. The
# figures are those of ``evaluate_actions`` on each member alone: the same operations
# per position, in the same order (tests/test_population_core.py checks equality).

StackPolicyFn = Callable[[torch.Tensor], torch.Tensor]  # (N, M, 9) views -> (N, M, 9) logits
CHUNK = 256  # members per DP pass: bounds the largest temporary (CHUNK, rows, 9, 3) float64


class _Compact:
    """The reachable codes as rows 0..R-1, with the tables the DPs need in that indexing."""

    def __init__(self) -> None:
        t = game.tables()
        self.codes = t.reachable.nonzero().squeeze(-1)  # (R,) codes, R = 5,478, code order
        index = torch.full((game.N_CODES,), -1, dtype=torch.long)
        index[self.codes] = torch.arange(self.codes.numel())
        # Occupied cells "lead" to the same board (game.tables), so every entry is reachable.
        self.next = index[t.next2d[self.codes]]  # (R, 9) rows after each move
        self.legal = t.legal[self.codes]  # (R, 9)
        self.mover = t.mover[self.codes]  # (R,)
        self.winner = t.winner[self.codes]  # (R,)
        self.done = t.done[self.codes]  # (R,)
        self.empty = int(index[game.EMPTY_CODE])
        # Unfinished rows per ply, from ply 8 down to 0 (as solver.plies_backwards).
        ply = t.ply[self.codes]
        self.plies = [((ply == p) & ~self.done).nonzero().squeeze(-1) for p in range(game.CELLS)]
        self.optimal = solve().optimal[self.codes]  # (R, 9)
        self.random = random_probs()[self.codes]  # (R, 9) float64
        self.perfect = perfect_probs()[self.codes]  # (R, 9) float64


_COMPACT: list[_Compact] = []


def _compact() -> _Compact:
    if not _COMPACT:
        _COMPACT.append(_Compact())
    return _COMPACT[0]


def greedy_actions_stack(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``greedy_actions`` for N policies given their logits on the decision positions.

    Args:
        logits: (N, M, 9) logits at ``decision_codes()`` (M = 4,520), masked or not.

    Returns:
        ``(actions, raw_illegal)``: (N, 19683) int64 masked-argmax moves (0 where nobody
        moves, ties to the lowest cell) and (N, 19683) bool unmasked argmax on an occupied cell.
    """
    t = game.tables()
    codes = decision_codes()
    logits = logits.detach().to("cpu", torch.float32)
    n = logits.shape[0]
    legal = t.legal[codes]  # (M, 9)
    masked = torch.where(legal, logits, -torch.inf)  # (N, M, 9)
    actions = torch.zeros(n, game.N_CODES, dtype=torch.long)
    actions[:, codes] = masked.argmax(-1)
    raw_illegal = torch.zeros(n, game.N_CODES, dtype=torch.bool)
    raw_illegal[:, codes] = ~legal.expand(n, -1, -1).gather(2, logits.argmax(-1, keepdim=True)).squeeze(-1)
    return actions, raw_illegal


def _outcomes(c: _Compact, act: torch.Tensor, opponent: torch.Tensor, seat: int) -> torch.Tensor:
    """(n, 3) P(X wins), P(O wins), P(tie) from the empty board: n agents (act: (n, R)
    deterministic moves) as ``seat`` against ``opponent`` ((R, 9) float64 move probabilities).

    ``outcome_probs`` with a leading member axis. At the agent's rows its one-hot sum is
    exactly the chosen child's row (x * 1 + 0 * y + ... is x), so we gather it; at the
    opponent's rows we flatten (n, rows) into one row axis and use the very einsum of
    ``outcome_probs``, so each member gets the same sums in the same order."""
    n = act.shape[0]
    result = torch.stack([c.winner == game.X, c.winner == game.O, c.done & (c.winner == 0)],
                         -1).double().expand(n, -1, -1).clone()  # (n, R, 3)
    for rows in reversed(c.plies):
        nxt = c.next[rows]  # (r, 9)
        if int(c.mover[rows[0]]) == seat:  # one mover per ply: X at even plies, O at odd ones
            child = nxt.gather(1, act[:, rows].T).T  # (n, r) the agent's chosen children
            result[:, rows] = result.gather(1, child[..., None].expand(-1, -1, 3))
        else:
            kids = result[:, nxt]  # (n, r, 9, 3)
            pi = opponent[rows].expand(n, -1, -1)  # (n, r, 9)
            result[:, rows] = torch.einsum("rc,rck->rk", pi.reshape(-1, game.CELLS),
                                           kids.reshape(-1, game.CELLS, 3)).view(n, -1, 3)
    return result[:, c.empty]


def _worst_case(c: _Compact, act: torch.Tensor, seat: int) -> torch.Tensor:
    """(n,) ``worst_case`` of n agents (act: (n, R)) as ``seat``: +1 win, 0 draw, -1 loss."""
    n = act.shape[0]
    value = (c.winner * seat).long().expand(n, -1).clone()  # (n, R) from the agent's side
    for rows in reversed(c.plies):
        child = value[:, c.next[rows]]  # (n, r, 9)
        if int(c.mover[rows[0]]) == seat:
            value[:, rows] = child.gather(2, act[:, rows, None]).squeeze(-1)
        else:
            value[:, rows] = torch.where(c.legal[rows], child, 2).amin(-1)
    return value[:, c.empty]


def _decision_points(c: _Compact, act: torch.Tensor, seat: int) -> torch.Tensor:
    """(n, R) bool ``decision_points`` of n agents (act: (n, R)) as ``seat``."""
    n, r_all = act.shape
    reach = torch.zeros(n, r_all, dtype=torch.bool)
    reach[:, c.empty] = True
    for rows in c.plies:
        # The agent follows its own move; the opponent may play any legal move.
        if int(c.mover[rows[0]]) == seat:
            follow = torch.nn.functional.one_hot(act[:, rows], game.CELLS).bool()  # (n, r, 9)
        else:
            follow = c.legal[rows].expand(n, -1, -1)
        follow = follow & reach[:, rows, None]
        member = torch.arange(n)[:, None, None].expand_as(follow)
        reach[member[follow], c.next[rows].expand(n, -1, -1)[follow]] = True
    return reach & ~c.done & (c.mover == seat)


def evaluate_actions_stack(actions: torch.Tensor, chunk: int = CHUNK) -> list[dict]:
    """``evaluate_actions`` for N deterministic policies: (N, 19683) action tables -> N reports."""
    c = _compact()
    reports: list[dict] = []
    for start in range(0, actions.shape[0], chunk):
        act = actions[start:start + chunk, c.codes]  # (n, R)
        n = act.shape[0]
        blocks: list[dict] = [{} for _ in range(n)]
        points = torch.zeros(n, c.codes.numel(), dtype=torch.bool)
        for side in EVAL_SEATS:
            seat = SEAT_PIECE[side]
            vs_random = _outcomes(c, act, c.random, seat).tolist()
            vs_perfect = _outcomes(c, act, c.perfect, seat).tolist()
            worst = _worst_case(c, act, seat).tolist()
            for k in range(n):  # building the dicts, not the hot path
                blocks[k][REPORT_KEY[side]] = {
                    "vs_random": _wlt_row(vs_random[k], seat),
                    "vs_perfect": _wlt_row(vs_perfect[k], seat),
                    "worst_case": WORST_NAME[worst[k]],
                }
            points |= _decision_points(c, act, seat)
        kept = c.optimal.gather(1, act.T).T & points  # (n, R)
        count = points.sum(-1)
        # An integer count over an integer count: the same float as the single version's mean.
        rate = (kept.sum(-1).double() / count.clamp_min(1).double()).tolist()
        for k in range(n):
            blocks[k]["optimal_move_rate"] = rate[k] if int(count[k]) else 1.0
            blocks[k]["decision_points"] = int(count[k])
        reports += blocks
    return reports


def evaluate_stack(policy: StackPolicyFn | torch.Tensor, n: int | None = None) -> list[dict]:
    """The ``eval.json`` report of each of N policies, as a list of N dicts.

    ``policy`` is either a function from (N, M, 9) float32 views to (N, M, 9) logits (e.g.
    an ``nets.MLPStack``), called once on the 4,520 decision positions repeated for each of
    the ``n`` members, or the (N, M, 9) logits at ``decision_codes()`` themselves.
    """
    if callable(policy):
        if n is None:
            raise ValueError("evaluate_stack needs n, the number of members, with a policy function")
        views = game.tables().view[decision_codes()].float()  # (M, 9)
        with torch.no_grad():
            logits = policy(views.expand(n, -1, -1))
    else:
        logits = policy
    actions, _ = greedy_actions_stack(logits)
    return evaluate_actions_stack(actions)


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
