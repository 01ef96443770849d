"""Batched opponents: legal moves only, the right distributions, the rule player's record."""

import pytest
import torch

from tests.helpers import reference as ref
from ttt_research.env import game, opponents
from ttt_research.env.solver import solve
from ttt_research.evaluation import exact as ev

T = game.tables()
ALL = ["random", "minimax", "rules", "mixed"]


@pytest.mark.parametrize("name", ALL)
def test_opponents_only_play_legal_moves(name):
    opp = opponents.build(name, p_perfect=0.5)
    gen = torch.Generator().manual_seed(0)
    codes = ev.decision_codes().repeat(20)
    opp.reset(torch.ones_like(codes, dtype=torch.bool), gen)
    moves = opp.act(codes, gen)
    assert T.legal[codes, moves].all()


def test_minimax_opponent_only_plays_optimal_moves_and_varies():
    opp = opponents.build("minimax")
    gen = torch.Generator().manual_seed(1)
    codes = ev.decision_codes().repeat(20)
    moves = opp.act(codes, gen)
    assert solve().optimal[codes, moves].all()
    # On the empty board every cell is optimal: all nine get played.
    first = opp.act(torch.zeros(2000, dtype=torch.long), gen)
    assert set(first.tolist()) == set(range(9))


def test_table_sampling_follows_the_table():
    probs = torch.zeros(game.N_CODES, 9, dtype=torch.float64)
    probs[game.EMPTY_CODE, [1, 4, 8]] = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    opp = opponents.TableOpponent(probs)
    gen = torch.Generator().manual_seed(2)
    moves = opp.act(torch.zeros(100_000, dtype=torch.long), gen)
    freq = torch.bincount(moves, minlength=9).double() / moves.numel()
    assert freq[[0, 2, 3, 5, 6, 7]].sum() == 0
    assert freq[[1, 4, 8]].tolist() == pytest.approx([0.2, 0.5, 0.3], abs=0.01)


def test_rules_player_wins_blocks_and_takes_centre():
    rules = opponents.rules_probs()

    def moves(b):
        return set(rules[ref.code(b)].nonzero().squeeze(-1).tolist())

    # X to move can win at 2 and must not block O's 3-4-5 instead:
    #  X X .
    #  O O .
    #  . . .
    assert moves((1, 1, 0, -1, -1, 0, 0, 0, 0)) == {2}
    # O to move, no win of its own, blocks X at 2:
    #  X X .
    #  . O .
    #  . . .
    assert moves((1, 1, 0, 0, -1, 0, 0, 0, 0)) == {2}
    # Empty board: centre.
    assert moves(ref.EMPTY_BOARD) == {4}
    # X forks: after X 0, O 1, X 4? Here X (to move) at 0 and 8 with O at 4 and 1:
    #  X O .
    #  . O .     O threatens 1-4-7: X must block at 7 (block beats fork).
    #  . . X
    assert moves((1, -1, 0, 0, -1, 0, 0, 0, 1)) == {7}


def test_rules_player_loses_to_minimax_only_as_o():
    record = opponents.rules_record()
    assert record["as_x"] == {"win": 0.0, "loss": 0.0, "tie": 1.0}
    # As O it falls into a fork in exactly 1 game in 14 against a uniform minimax player.
    assert record["as_o"]["win"] == 0.0
    assert record["as_o"]["loss"] == pytest.approx(1 / 14, abs=1e-12)


def test_mixed_picks_the_strong_player_per_game():
    gen = torch.Generator().manual_seed(3)
    opp = opponents.build("mixed", p_perfect=0.3)
    started = torch.ones(100_000, dtype=torch.bool)
    opp.reset(started, gen)
    assert opp.is_strong.double().mean().item() == pytest.approx(0.3, abs=0.01)
    before = opp.is_strong.clone()
    # Only restarted games redraw; the others keep their opponent for the whole game.
    some = torch.zeros_like(started)
    some[:10] = True
    opp.reset(some, gen)
    assert torch.equal(opp.is_strong[10:], before[10:])


def test_mixed_rejects_bad_probability_and_unknown_names():
    with pytest.raises(ValueError, match="p_perfect"):
        opponents.build("mixed", p_perfect=1.5)
    with pytest.raises(ValueError, match="unknown opponent"):
        opponents.build("grandmaster")
