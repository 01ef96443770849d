"""Exact accuracy of learned action values: ``eval.json``'s ``value_accuracy`` block.

A value-learning algorithm (tabular Q, DQN) says through ``Algorithm.action_values`` what
it expects each move to be worth, in the reward table's units. The solver knows what each
move is worth under perfect play from then on, so the learned values can be checked
exactly, at every position, with no sampling:

* **decision positions**: every unfinished position reachable from the empty board with a
  trained seat to move (2,097 with O to move, 2,423 with X, 4,520 for both seats);
* **game-theoretic value** of move ``a`` at position ``p``: the minimax result of the
  position after ``a`` from the mover's side (+1 win, 0 draw, -1 loss, ``solver.solve``),
  mapped through the run's reward table (a win is worth ``reward.win``, a draw
  ``reward.tie``, a loss ``reward.loss``);
* ``sign_agreement``: the share of the decision positions where the learned value of the
  greedy move (the argmax of the policy's logits, ties to the lowest cell: the move the
  agent plays) points at that move's minimax result. "Points at": the learned value is read
  as the nearest of the table's three values (the thresholds lie halfway between win and
  tie and between tie and loss; a value exactly halfway reads as the tie), and that result
  must be the move's minimax result. For a table symmetric around its tie (``zero_sum``:
  +1 / 0 / -1) this is the sign of the value, with a dead band of +-0.5 around 0 for a draw;
  the nearest rule carries the same idea to asymmetric tables (``antirez``: 1 / 0.3 / -2).
* ``mae``: the mean, over every legal move of every decision position, of
  ``|learned - game-theoretic|``, in reward units;
* ``decision_points``: how many positions were checked.

Why values and not only the policy: an agent can play every move right while its values
are far off (the greedy move only needs the right order), and a Q-learner whose values
are right everywhere has learned the game, not just a line through it. Against a fixed
opponent the "right" value of a move is the expectation under that opponent, not the
minimax value; the block measures the distance to perfect play, the values a learner
converges to in self-play or against a perfect opponent.

A population's values are (N, P, 9) and its reward fields may be (N, 1) tensors (a member's
own table): then every figure is per member, a list of N blocks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ttt_research.contract import SEAT_PIECE, VALUE_KEY
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.reward import Reward
from ttt_research.env.solver import solve

ValuesFn = Callable[[torch.Tensor], torch.Tensor | None]  # (P, 9) views -> (P, 9) / (N, P, 9)


def decision_positions(seats, game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(P,) the reachable unfinished rows of ``game``'s tables (tic-tac-toe: codes) with one of
    ``seats`` (``"x"``, ``"o"``) to move, in row order (the order of ``RLModule.positions`` for
    a fixed seat)."""
    t = game.tables()
    pieces = torch.tensor([SEAT_PIECE[s] for s in seats], dtype=t.mover.dtype)
    return (t.reachable & ~t.done & torch.isin(t.mover, pieces)).nonzero().squeeze(-1)


def move_outcomes(codes: torch.Tensor, game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(P, cells) int8 minimax result of each move at ``codes`` from the mover's side: +1 the
    move wins under perfect play, 0 it draws, -1 it loses (occupied cells: 0, never read)."""
    t = game.tables()
    after = solve(g=game).value[t.next2d[codes]]  # (P, cells) from X's side
    return torch.where(t.legal[codes], after * t.mover[codes, None], 0).to(torch.int8)


def _field(value, dims: int) -> torch.Tensor:
    """A reward field as a float64 tensor: a number's 0-d, a population's (N, 1) values
    shaped to broadcast against (N, ...) with ``dims`` dimensions after the member axis."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).reshape(-1, *([1] * dims))
    return torch.tensor(float(value), dtype=torch.float64)


def game_values(outcomes: torch.Tensor, reward: Reward) -> torch.Tensor:
    """(P, 9) results (+1 / 0 / -1) -> their worth in ``reward``'s units: (P, 9) float64,
    or (N, P, 9) when the table's fields are a population's (N, 1) tensors."""
    win, tie, loss = (_field(v, outcomes.dim()) for v in (reward.win, reward.tie, reward.loss))
    out = outcomes.to(torch.float64)
    return torch.where(out > 0, win, torch.where(out < 0, loss, tie)) + torch.zeros_like(out)


def read_outcome(value: torch.Tensor, reward: Reward) -> torch.Tensor:
    """(..., P) learned values -> (..., P) int8 the result (+1 / 0 / -1) whose table value is
    nearest: a win above the halfway point between tie and win, a loss below the halfway
    point between loss and tie, a tie in between (a value exactly halfway reads as the tie).
    A population's (N, P) values read with each member's own (N, 1) table."""
    dims = value.dim() - 1
    win, tie, loss = (_field(v, dims) for v in (reward.win, reward.tie, reward.loss))
    out = torch.where(value > (tie + win) / 2, 1, torch.where(value < (tie + loss) / 2, -1, 0))
    return out.to(torch.int8)


def value_accuracy(values: ValuesFn | torch.Tensor, reward: Reward, seats,
                   logits: ValuesFn | torch.Tensor | None = None,
                   game: Game = TIC_TAC_TOE, members: int = 1) -> dict | list[dict] | None:
    """The ``value_accuracy`` block of the learned ``values`` (module docstring).

    Args:
        values: ``Algorithm.action_values`` (called once on the (P, 9) float32 views of
            ``decision_positions(seats)``), or its result: (P, 9), a population's (N, P, 9);
            None from the function: the algorithm has no values, and neither has the block.
        reward: the run's table; its fields numbers or a population's (N, 1) tensors.
        seats: the evaluated seats the run is judged on (``contract.JUDGED_SEATS[seat]``).
        logits: the policy's logits at the same positions (a function or a tensor, shaped as
            ``values``), whose argmax is the greedy move; None: the argmax of the values.
        members: how many members' values a call returns (a population's N): the positions
            are read ``ROWS // members`` at a time, so a part's tables stay the same size.

    Returns:
        ``{"sign_agreement", "mae", "decision_points"}``, a list of one per member for
        (N, P, 9) values, or None when there are no values.
    """
    codes = decision_positions(seats, game)
    agreed, errors, moves, dims = None, None, 0, 2
    # ``ROWS`` positions a member at a time (tic-tac-toe's 4,520 in one): sums of 0/1 agreements
    # and of errors, so the figures are the whole's means.
    rows = max(ROWS // max(members, 1), MIN_ROWS)
    for start in range(0, codes.numel(), rows):
        part = _part(codes[start:start + rows], values, logits, reward, game, start)
        if part is None:
            return None
        agree, error, legal, dims = part
        agreed = agree if agreed is None else agreed + agree
        errors = error if errors is None else errors + error
        moves += int(legal)
    if agreed is None:  # no decision position (a board with none reachable)
        return None
    sign, mae = agreed / codes.numel(), errors / moves
    if dims == 2:
        return _block(sign, mae, codes.numel())
    return [_block(s, m, codes.numel()) for s, m in zip(sign, mae, strict=True)]


# Decision positions ``value_accuracy`` reads at a time, per member: 4,4,4's 9M at once would
# hold (P, cells) float64 tables and a network's (P, hidden) activations together (13.6 GB at the
# peak), and 30 members' parts of 2^18 positions 10 GB more than a member's (a DQN row's final
# evaluation at 17.6 GB and rising). Never fewer than MIN_ROWS: tic-tac-toe's positions stay one part.
ROWS = 1 << 18
MIN_ROWS = 1 << 13


def _part(codes: torch.Tensor, values, logits, reward: Reward, game: Game, start: int):
    """``value_accuracy``'s sums over the positions ``codes`` (rows ``start``.. of the whole):
    (..,) agreements, (..,) summed |error|, the legal moves, and the values' dims; None when
    the algorithm has no values."""
    rows = slice(start, start + codes.numel())
    views = game.tables().view[codes].float()  # (P, cells)
    values = values(views) if callable(values) else values[..., rows, :]
    if values is None:
        return None
    values = values.detach().to("cpu", torch.float64)
    legal = game.tables().legal[codes]  # (P, cells)
    logits = logits(views) if callable(logits) else None if logits is None else logits[..., rows, :]
    scores = values if logits is None else logits.detach().to("cpu", torch.float64)
    greedy = torch.where(legal, scores, -torch.inf).argmax(-1, keepdim=True)  # (..., P, 1): first max
    outcomes = move_outcomes(codes, game)  # (P, cells)
    target = game_values(outcomes, reward)  # (P, cells) or (N, P, cells)
    agree = read_outcome(values.gather(-1, greedy).squeeze(-1), reward) == outcomes.expand(
        *values.shape[:-2], -1, -1).gather(-1, greedy).squeeze(-1)  # (..., P)
    error = torch.where(legal, (values - target).abs(), 0.0)  # (..., P, cells)
    return agree.double().sum(-1), error.sum((-2, -1)), legal.sum(), values.dim()


def _block(sign: torch.Tensor, mae: torch.Tensor, points: int) -> dict:
    # Rounded to 12 places, as the rest of eval.json: the float noise below that says nothing.
    return {"sign_agreement": round(float(sign), 12) + 0.0, "mae": round(float(mae), 12) + 0.0,
            "decision_points": int(points)}


def value_lines(report: dict) -> list[str]:
    """A report's ``value_accuracy`` as the console's evaluation table shows it: one line,
    or none without the block."""
    block = report.get(VALUE_KEY)
    if not block:
        return []
    return [f"learned values: sign agrees with minimax at {block['sign_agreement']:.4f} of "
            f"{block['decision_points']} decision points, mean |error| {block['mae']:.4f} "
            "(reward units, against the minimax value of every legal move)"]
