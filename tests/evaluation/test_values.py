"""The exact accuracy of learned action values (``evaluation/values.py``): the decision
positions, the game-theoretic value of each move (against the plain recursive minimax of
tests/helpers/reference.py), the nearest-value reading of a learned value, and the block
of values exact, shifted, read with another table, or scored at another greedy move."""

import pytest
import torch

from tests.helpers import reference as ref
from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE
from ttt_research.env.reward import Reward
from ttt_research.evaluation.values import (
    decision_positions,
    game_values,
    move_outcomes,
    read_outcome,
    value_accuracy,
    value_lines,
)

ANTIREZ = Reward(1.0, 0.3, -2.0)
ZERO_SUM = Reward(1.0, 0.0, -1.0)
BOTH, O, X = ("x", "o"), ("o",), ("x",)


def reachable_decision_boards() -> set:
    """Every unfinished board reachable from the empty one, by the plain reference."""
    seen, stack = set(), [ref.EMPTY_BOARD]
    while stack:
        b = stack.pop()
        if b in seen or ref.done(b):
            continue
        seen.add(b)
        stack += [ref.play(b, c) for c in ref.legal(b)]
    return seen


REFERENCE = reachable_decision_boards()


def reference_outcomes(codes: torch.Tensor) -> torch.Tensor:
    """(P, 9) each legal move's minimax result for the mover, by the plain recursion."""
    rows = []
    for b in map(tuple, game.tables().board[codes].tolist()):
        row = [0] * 9
        for cell in ref.legal(b):
            row[cell] = ref.minimax(ref.play(b, cell)) * ref.mover(b)
        rows.append(row)
    return torch.tensor(rows, dtype=torch.int8)


def test_decision_positions_are_the_reachable_unfinished_boards_of_the_seats():
    # docs/facts.md: 4,520 positions with somebody to move, 2,423 with X, 2,097 with O
    assert [decision_positions(s).numel() for s in (X, O, BOTH)] == [2423, 2097, 4520]
    assert set(map(tuple, game.tables().board[decision_positions(BOTH)].tolist())) == REFERENCE
    assert all(ref.mover(b) == -1 for b in map(tuple, game.tables().board[decision_positions(O)].tolist()))


def test_every_move_value_is_the_plain_minimax_of_the_position_after_it():
    codes = decision_positions(BOTH)
    legal = game.tables().legal[codes]
    outcomes = move_outcomes(codes)
    assert torch.equal(outcomes, reference_outcomes(codes))
    # legal moves at O's positions: 1,368 win, 1,216 draw, 4,952 lose under perfect play
    o = decision_positions(O)
    counts = [int(((move_outcomes(o) == v) & game.tables().legal[o]).sum()) for v in (1, 0, -1)]
    assert counts == [1368, 1216, 4952] and int(legal.sum()) == 16167


def test_a_hand_checked_position():
    #  X | X | .      X to move: 2 wins at once; 5 blocks O's row and draws (O must block 2,
    # ---+---+---     then X must block 6, and the board fills); 6, 7 or 8 let O play 5 and win.
    #  O | O | .
    # ---+---+---
    #  . | . | .
    board = torch.tensor([[1, 1, 0, -1, -1, 0, 0, 0, 0]])
    code = game.encode(board)
    assert move_outcomes(code).tolist() == [[0, 0, 1, 0, 0, 0, -1, -1, -1]]
    values = game_values(move_outcomes(code), ANTIREZ)
    assert values[0, [2, 5, 6]].tolist() == [1.0, 0.3, -2.0]


def test_a_learned_value_reads_as_the_nearest_table_value_halfway_to_the_tie():
    # antirez 1 / 0.3 / -2: thresholds 0.65 and -0.85
    v = torch.tensor([0.66, 0.65, 0.64, 0.0, -0.85, -0.86, 5.0, -5.0], dtype=torch.float64)
    assert read_outcome(v, ANTIREZ).tolist() == [1, 0, 0, 0, 0, -1, 1, -1]
    # zero_sum: the sign of the value, with a draw's band of +-0.5 around 0
    v = torch.tensor([0.51, 0.5, 0.0, -0.5, -0.51], dtype=torch.float64)
    assert read_outcome(v, ZERO_SUM).tolist() == [1, 0, 0, 0, -1]


def test_exact_values_agree_everywhere_and_a_shift_is_their_error():
    exact = game_values(move_outcomes(decision_positions(BOTH)), ANTIREZ)
    assert value_accuracy(exact, ANTIREZ, BOTH) == {"sign_agreement": 1.0, "mae": 0.0,
                                                    "decision_points": 4520}
    # +0.25 keeps every reading (a tie 0.55 < 0.65, a loss -1.75 < -0.85): only the error moves
    assert value_accuracy(exact + 0.25, ANTIREZ, BOTH) == {"sign_agreement": 1.0, "mae": 0.25,
                                                          "decision_points": 4520}
    # +0.4 reads a draw (0.7) as a win: wrong exactly where the best move draws, i.e. where
    # the mover's minimax result is a draw
    draws = sum(ref.minimax(b) == 0 for b in REFERENCE)
    block = value_accuracy(exact + 0.4, ANTIREZ, BOTH)
    assert block["sign_agreement"] == pytest.approx(1 - draws / 4520, abs=1e-12)
    assert block["mae"] == pytest.approx(0.4, abs=1e-12)


def test_the_greedy_move_is_the_policys():
    """Scored at the move the agent plays: logits that prefer the lowest empty cell."""
    codes = decision_positions(O)
    exact = game_values(move_outcomes(codes), ZERO_SUM)
    logits = torch.arange(9, 0, -1).float().expand(len(codes), -1)  # cell 0 highest
    block = value_accuracy(lambda v: exact + 0.6, ZERO_SUM, O, logits=lambda v: logits)
    # +0.6 reads a draw as a win and a loss (-0.4) as a draw: right only where the lowest
    # empty cell wins
    lowest = [ref.legal(b)[0] for b in map(tuple, game.tables().board[codes].tolist())]
    wins = sum(int(o[cell]) == 1 for o, cell in zip(reference_outcomes(codes), lowest, strict=True))
    assert block["sign_agreement"] == pytest.approx(wins / 2097, abs=1e-12)
    assert value_accuracy(lambda v: None, ZERO_SUM, O) is None


def test_a_population_is_scored_member_by_member_with_its_own_tables():
    codes = decision_positions(O)
    exact = game_values(move_outcomes(codes), ANTIREZ).float()  # float32, as a net's values
    column = lambda a, b: torch.tensor([[a], [b]])  # noqa: E731 (N, 1): one value per member
    tables = Reward(column(1.0, 2.0), column(0.3, 0.0), column(-2.0, -1.0))
    first, second = value_accuracy(exact.expand(2, -1, -1), tables, O)
    assert first == {"sign_agreement": 1.0, "mae": pytest.approx(0.0, abs=1e-7), "decision_points": 2097}
    # antirez's values under 2 / 0 / -1: a win (1) is halfway to the tie, a tie (0.3) a tie,
    # a loss (-2) a loss; errors 1, 0.3 and 1 on 1,368 / 1,216 / 4,952 legal moves of 7,536
    assert second["mae"] == pytest.approx((1368 + 0.3 * 1216 + 4952) / 7536, abs=1e-7)
    assert 0 < second["sign_agreement"] < 1
    assert value_lines({"value_accuracy": first}) == [
        "learned values: sign agrees with minimax at 1.0000 of 2097 decision points, mean |error| 0.0000 "
        "(reward units, against the minimax value of every legal move)"]
    assert value_lines({}) == []


def test_a_population_reads_fewer_positions_a_part_and_scores_the_same(monkeypatch):
    # A DQN row's 30 members on 4,4,4 read 2^18 positions a part each: 17.6 GB and rising at
    # its final evaluation. The part shrinks with the members; the figures stay the whole's.
    from ttt_research.evaluation import values as accuracy

    codes = decision_positions(BOTH)
    q = torch.randn(3, codes.numel(), TIC_TAC_TOE.cells, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    whole = value_accuracy(q, ZERO_SUM, BOTH)
    seen = []

    def values(view):
        seen.append(view.shape[0])
        start = sum(seen[:-1])
        return q[:, start:start + view.shape[0]]

    monkeypatch.setattr(accuracy, "ROWS", 3000)
    monkeypatch.setattr(accuracy, "MIN_ROWS", 500)
    parts = value_accuracy(values, ZERO_SUM, BOTH, members=3)
    assert max(seen) == 1000 and sum(seen) == codes.numel() > 3000  # the parts cover every position once
    for a, b in zip(whole, parts, strict=True):
        assert a["sign_agreement"] == b["sign_agreement"] and a["mae"] == pytest.approx(b["mae"], rel=1e-12)
    seen.clear()
    monkeypatch.setattr(accuracy, "MIN_ROWS", 2000)  # never fewer than MIN_ROWS a part
    value_accuracy(values, ZERO_SUM, BOTH, members=3)
    assert max(seen) == 2000
