"""The game as a value (``env/board.py``): tic-tac-toe's tables are the ones every 3x3 run has
used, and another board's tables (``env/indexed.py``, rows = reachable positions) follow the
rules: random play over them gives the exact facts the solver prints."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch

from ttt_research.env import game as rules
from ttt_research.env.board import TIC_TAC_TOE, Game, every_turn, of_config, symmetries, turned
from ttt_research.errors import ConfigError


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TTT_RESEARCH_CACHE", str(tmp_path))


def test_tic_tac_toe_is_the_3x3_tables_themselves():
    assert TIC_TAC_TOE.tables() is rules.tables()
    assert TIC_TAC_TOE.tables().states == 3**9 and TIC_TAC_TOE.tables().cells == 9


def _random_outcome(t: rules.Tables) -> list[Fraction]:
    """X wins / draw / O wins under random play, exactly, by a pass over the rows backwards
    (a child always has one more piece, so a later ply is solved first)."""
    ply = t.ply.long()
    out = [[Fraction(0)] * 3 for _ in range(t.states)]
    for p in range(int(ply.max()), -1, -1):
        for row in (ply == p).nonzero().squeeze(-1).tolist():
            if t.done[row]:
                out[row] = [Fraction(int(t.winner[row] == w)) for w in (1, 0, -1)]
                continue
            cells = t.legal[row].nonzero().squeeze(-1).tolist()
            kids = [out[int(t.next2d[row, c])] for c in cells]
            out[row] = [sum((k[i] for k in kids), Fraction(0)) / len(cells) for i in range(3)]
    return out[rules.EMPTY_CODE]


def test_another_boards_tables_play_its_exact_random_outcome():
    g = Game(3, 4, 3)
    t = g.tables()
    facts = g.positions().facts
    assert (t.states, t.cells) == (facts["reachable"], 12) == (111_973, 12)
    assert int((~t.done).sum()) == facts["to_move"] == 79_563
    want = [Fraction(facts["random_vs_random_exact"][w]) for w in ("x_wins", "draw", "o_wins")]
    assert _random_outcome(t) == want
    # kth_legal's first legal cell, and a step: the row after a move holds the mover's piece there.
    row = int(t.next2d[0, 5])
    assert t.board[row].tolist() == [0] * 5 + [1] + [0] * 6 and int(t.mover[row]) == rules.O
    assert int(t.kth_legal.view(-1, 12)[row, 5]) == 6  # cell 5 is taken: the 6th legal is cell 6


def test_another_boards_rows_read_as_on_paper():
    """Each row's board is its code's base-3 digits (``MNK.decode``, 8 cells a lookup), and its
    ``kth_legal`` lists the empty cells in cell order, then the taken ones (a lookup by the row's
    pattern of empty cells): both against the plain rules, row by row, on 2,3,2 and 3,4,3."""
    for g in (Game(2, 3, 2), Game(3, 4, 3)):
        t, codes = g.tables(), g.positions().codes.tolist()
        kth = t.kth_legal.view(-1, g.cells).tolist()
        for row in range(0, t.states, 7):
            code, digits = codes[row], []
            for _ in range(g.cells):
                code, d = divmod(code, 3)
                digits.append({0: 0, 1: 1, 2: -1}[d])
            assert t.board[row].tolist() == digits
            empty = [c for c in range(g.cells) if digits[c] == 0 and not bool(t.done[row])]
            assert kth[row] == empty + [c for c in range(g.cells) if c not in empty]


def test_games_step_another_board_with_auto_reset():
    t = Game(3, 4, 3).tables()
    g = rules.Games(512, t=t)
    gen = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(40):
        s = g.step(rules.random_moves(g.code, gen, t))
        assert not bool(s.illegal.any())
        ended += int(s.ended.sum())
    assert ended > 512  # every game ended at least once within 40 plies (12 at most each)
    assert g.code.dtype == torch.long and bool((g.code < t.states).all())


@pytest.mark.parametrize(("board", "says"), [
    (dict(name="mnk", m=5, n=4, k=4), "game.m=5 game.n=4: a board of 20 cells"),
    (dict(name="mnk", m=3, n=3, k=4), "game.k=4: k must be in 2..3"),
    (dict(name="ttt", m=4, n=4, k=3), "game=ttt is the 3,3,3 board"),
])
def test_a_board_that_is_no_game_is_refused_in_one_line(board, says):
    from omegaconf import OmegaConf

    with pytest.raises(ConfigError, match=says):
        of_config(OmegaConf.create(board))


def test_the_solver_answers_for_another_board_over_its_rows():
    from ttt_research.env.solver import solve

    g = Game(3, 4, 3)
    t, s = g.tables(), solve(g=g)
    assert int(s.value[rules.EMPTY_CODE]) == 1  # X wins 3,4,3
    # An optimal move keeps the value: X's optimal first moves all lead to X-won positions,
    # and some first moves do not (else the test would prove nothing).
    first = s.optimal[rules.EMPTY_CODE]
    assert bool(first.any()) and not bool(first.all())
    assert s.value[t.next2d[rules.EMPTY_CODE][first].long()].tolist() == [1] * int(first.sum())
    assert solve(g=TIC_TAC_TOE) is solve()  # tic-tac-toe: the 3^9-code solution, as before


@pytest.mark.parametrize("board", [TIC_TAC_TOE, Game(3, 4, 3)])
def test_every_turn_is_each_row_turned_by_each_symmetry_in_order(board):
    """``every_turn``'s row r S + k is row r ``turned`` by symmetry k, for boards (int8) and
    per-cell numbers (float) alike: the turned copies reinforce and DQN learn from."""
    sym = symmetries(board, torch.device("cpu"))
    S = sym.shape[0]
    g = torch.Generator().manual_seed(0)
    for rows in (torch.randint(-1, 2, (5, board.cells), generator=g).to(torch.int8),
                 torch.rand(5, board.cells, generator=g)):
        out = every_turn(rows, sym)
        assert out.shape == (5 * S, board.cells) and out.dtype == rows.dtype
        for r in range(5):
            for k in range(S):
                assert torch.equal(out[r * S + k], turned(rows[r], torch.tensor(k), sym))
    assert not torch.equal(every_turn(rows, sym)[1], rows[0])  # a turn moves the cells
