"""Playing another m,n,k board (issue 59, item 5): a view's code exact past float32's integers,
and the opponents of any board (random, minimax) moving only where they may."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ttt_research.env import game, indexed
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.opponents import MinimaxOpponent, RandomOpponent
from ttt_research.env.solver import solve

BOARD = Game(3, 4, 3)


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


def test_a_4x4_view_code_is_exact_where_float32_is_not():
    g = Game(4, 4, 4)
    views = torch.randint(-1, 2, (1000, 16), generator=torch.Generator().manual_seed(0))
    views[0] = 1  # every cell own: the largest code, 3^16 - 1
    views[1] = views[0]
    views[1, 0] = 0  # one digit below it: float32 cannot tell 43,046,720 from 43,046,719
    expected = [sum((int(v) + 1) * 3**i for i, v in enumerate(row)) for row in views.tolist()]
    assert g.view_code(views.float()).tolist() == expected
    assert expected[0] == g.view_codes - 1 == 3**16 - 1 and expected[1] == expected[0] - 1


def test_tic_tac_toe_keeps_its_view_code():
    views = TIC_TAC_TOE.tables().view[:2000].float()
    assert torch.equal(TIC_TAC_TOE.view_code(views), game.view_code(views))


def decision_rows(g: Game) -> torch.Tensor:
    return (~g.tables().done).nonzero().squeeze(1)  # another board's rows are its reachable positions


def test_minimax_on_another_board_plays_only_optimal_moves():
    rows = decision_rows(BOARD)
    assert rows.numel() == 79_563  # issue 59's table: the positions of 3,4,3 where someone is to move
    move = MinimaxOpponent(BOARD).act(rows, torch.Generator().manual_seed(1))
    assert bool(solve("cpu", BOARD).optimal[rows, move].all())
    # X wins 3,4,3 from the empty board, and only some first moves keep the win: drawn uniformly
    first = MinimaxOpponent(BOARD).act(torch.zeros(4000, dtype=torch.long), torch.Generator().manual_seed(2))
    keeps = solve("cpu", BOARD).optimal[0].nonzero().squeeze(1)
    assert sorted(first.unique().tolist()) == keeps.tolist() and 0 < keeps.numel() < 12
    counts = torch.bincount(first, minlength=12)[keeps].float()
    assert bool((counts / 4000 - 1 / keeps.numel()).abs().max() < 0.05)


def test_random_on_another_board_plays_every_legal_cell_and_only_those():
    rows = decision_rows(BOARD)
    t = BOARD.tables()
    move = RandomOpponent(BOARD).act(rows, torch.Generator().manual_seed(3))
    assert bool(t.legal[rows, move].all())
    first = RandomOpponent(BOARD).act(torch.zeros(6000, dtype=torch.long), torch.Generator().manual_seed(4))
    assert sorted(first.unique().tolist()) == list(range(12))


def test_minimax_on_a_finished_board_answers_a_cell_of_the_board():
    done = BOARD.tables().done.nonzero().squeeze(1)[:100]
    move = MinimaxOpponent(BOARD).act(done, torch.Generator().manual_seed(5))
    assert bool(((move >= 0) & (move < 12)).all())


def test_the_board_and_the_step_tables_are_made_when_first_read():
    """Another board's ``board``, ``ends``, ``forfeits`` and ``wins`` (env/indexed.py: an exact
    evaluation reads none of them) are made on first read, equal to the rules', and kept."""
    g = Game(3, 4, 3)
    t = indexed.build(g, g.positions())
    assert not set(indexed.LAZY) & set(vars(t))  # nothing made yet
    codes = g.positions().codes
    assert torch.equal(t.board, torch.from_numpy(g.decode(codes)))
    nxt = t.next2d.long()
    forfeits = ~(t.legal | t.done[:, None])
    ends = (t.done[nxt] & ~t.done[:, None]) | forfeits
    wins = torch.where(forfeits, -t.mover[:, None], t.winner[nxt]) * ends
    assert torch.equal(t.forfeits, forfeits.reshape(-1)) and torch.equal(t.ends, ends.reshape(-1))
    assert torch.equal(t.wins, wins.to(torch.int8).reshape(-1)) and bool(t.ends.any())
    assert t.wins is t.wins and set(indexed.LAZY) <= set(vars(t))  # made once, then kept
    assert int(np.count_nonzero(codes)) == codes.size - 1  # only the empty board has code 0
