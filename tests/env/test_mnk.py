"""The m,n,k games (env/mnk.py, env/positions.py): the facts of issue 59's table, a board and its
transpose alike, tic-tac-toe's values those of the 3x3 solver, every value that of a plain
recursive minimax written here, symmetries that keep lines and values, bad boards refused."""

from __future__ import annotations

import functools
import sys
from fractions import Fraction

import numpy as np
import pytest

from ttt_research.env import game as ttt
from ttt_research.env import solver
from ttt_research.env.mnk import MNK, problem
from ttt_research.env.positions import build
from ttt_research.errors import ConfigError

# Issue 59's table: reachable, finished, to move, value, random vs random X / draw / O
# (to the digits given), complete games.
TABLE = {
    (3, 3, 3): (5_478, 958, 4_520, "draw", (0.5849, 0.1270, 0.2881), 255_168),
    (3, 4, 3): (111_973, 32_410, 79_563, "X wins", (0.5871, 0.0303, 0.3826), 151_188_768),
    (4, 4, 3): (6_036_001, 2_572_460, 3_463_541, "X wins", (0.587629, 0.001399, 0.410973),
                1_281_016_086_768),
    (4, 4, 4): (9_722_011, 659_392, 9_062_619, "draw", (0.316590, 0.416162, 0.267248),
                15_038_733_958_272),
}
SLOW = {(4, 4, 3), (4, 4, 4)}


def facts_row(f: dict) -> tuple:
    r = f["random_vs_random"]
    return f["reachable"], f["terminal"], f["to_move"], f["value"], (r["x_wins"], r["draw"], r["o_wins"]), \
        f["complete_games"]


@functools.cache
def solved(m: int, n: int, k: int):
    return build(MNK(m, n, k))


@pytest.mark.parametrize("board", [pytest.param(b, marks=[pytest.mark.slow] if b in SLOW else [])
                                   for b in TABLE])
def test_the_facts_are_the_tables(board):
    reachable, terminal, to_move, value, random, games = TABLE[board]
    f = build(MNK(*board)).facts
    got = facts_row(f)
    assert got[:4] == (reachable, terminal, to_move, value) and got[5] == games
    digits = 4 if board[0] * board[1] < 16 else 6
    assert tuple(round(p, digits) for p in got[4]) == random
    assert sum(f["to_move_by_ply"]) == to_move and f["to_move_by_ply"][0] == 1
    exact = f["random_vs_random_exact"]
    assert tuple(float(Fraction(exact[w])) for w in ("x_wins", "draw", "o_wins")) == got[4]
    assert sum(Fraction(p) for p in exact.values()) == 1
    if board == (3, 3, 3):  # docs/facts.md's fractions
        assert exact == {"x_wins": "737/1260", "draw": "8/63", "o_wins": "121/420"}


def test_a_board_and_its_transpose_have_the_same_facts():
    wide, tall = solved(3, 4, 3).facts, solved(4, 3, 3).facts
    assert (wide["m"], wide["n"], tall["m"], tall["n"]) == (3, 4, 4, 3)
    same = {k: v for k, v in wide.items() if k not in ("game", "m", "n")}
    assert same == {k: v for k, v in tall.items() if k not in ("game", "m", "n")}
    assert solved(2, 5, 3).facts["complete_games"] == solved(5, 2, 3).facts["complete_games"]


def test_tic_tac_toe_is_the_3x3_solver_position_for_position():
    p = solved(3, 3, 3)
    t = ttt.tables()
    codes = np.flatnonzero(t.reachable.numpy())
    assert sorted(p.codes.tolist()) == codes.tolist()  # the same 5,478 codes, as ttt's encoding
    rows = p.index(codes)
    assert (rows >= 0).all()
    assert (p.value[rows] == solver.solve().value.numpy()[codes]).all()
    assert (p.winner[rows] == t.winner.numpy()[codes]).all() and (p.done[rows] == t.done.numpy()[codes]).all()
    assert (p.index(np.array([1 + 3, 0])) == [-1, 0]).all()  # two x: no position; the empty board


def plain_minimax(m: int, n: int, k: int) -> tuple[dict[tuple, int], dict[tuple, int]]:
    """Every reachable board (a tuple of 0 / 1 X / 2 O, row by row) -> its value from X's side,
    by plain recursion from the empty board, and -> its winner; written from the rules, not
    from env/mnk.py's lines or codes."""
    values: dict[tuple, int] = {}
    winners: dict[tuple, int] = {}

    grid = {(r, c): r * n + c for r in range(m) for c in range(n)}
    runs = [[grid[r + dr * i, c + dc * i] for i in range(k)] for (r, c) in grid
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)) if (r + dr * (k - 1), c + dc * (k - 1)) in grid]

    def has_line(board: tuple, who: int) -> bool:
        return any(all(board[i] == who for i in run) for run in runs)

    def value(board: tuple, mover: int) -> int:
        if board in values:
            return values[board]
        last = 3 - mover
        if has_line(board, last):
            winners[board] = result = 1 if last == 1 else -1
        elif 0 not in board:
            winners[board] = result = 0
        else:
            winners[board] = 0
            children = [value(board[:i] + (mover,) + board[i + 1:], 3 - mover)
                        for i, d in enumerate(board) if d == 0]
            result = max(children) if mover == 1 else min(children)
        values[board] = result
        return result

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 1000))
    try:
        value((0,) * (m * n), 1)
    finally:
        sys.setrecursionlimit(limit)
    return values, winners


@pytest.mark.parametrize("board", [(3, 3, 3), (3, 4, 3), (4, 3, 4), (2, 5, 3), (2, 6, 2), (1, 6, 3),
                                   (2, 4, 4)])
def test_every_value_is_a_plain_minimaxs(board):
    values, winners = plain_minimax(*board)
    p = solved(*board)
    boards = sorted(values)
    place = 3 ** np.arange(len(boards[0]), dtype=np.int64)
    codes = np.array(boards, dtype=np.int64) @ place
    assert p.codes.size == len(boards)  # the same positions, no more, no fewer
    rows = p.index(codes)
    assert (rows >= 0).all()
    assert (p.value[rows] == [values[b] for b in boards]).all()
    assert (p.winner[rows] == [winners[b] for b in boards]).all()



def test_symmetries_keep_the_lines_and_the_values():
    for board, count in (((3, 3, 3), 8), ((3, 4, 3), 4), ((4, 4, 4), 8), ((2, 5, 2), 4)):
        g = MNK(*board)
        sym = g.symmetries
        assert sym.shape == (count, g.cells) and (sym[0] == np.arange(g.cells)).all()
        assert len({tuple(s) for s in sym}) == count
        lines = {frozenset(line) for line in g.lines}
        for s in sym:
            assert sorted(s) == list(range(g.cells))
            assert {frozenset(int(s[c]) for c in line) for line in lines} == lines
    p = solved(3, 4, 3)
    g = p.game
    boards = g.decode(p.codes)
    for s in g.symmetries:
        rows = p.index(g.encode(boards[:, s]))
        assert (rows >= 0).all() and (p.value[rows] == p.value).all()
    assert (g.decode(g.encode(boards)) == boards).all()
    assert (ttt.symmetries().numpy() == MNK(3, 3, 3).symmetries).all()  # the 3x3 board's own order


def test_lines_are_counted_as_on_paper():
    assert len(MNK(3, 3, 3).lines) == 8
    assert len(MNK(4, 4, 4).lines) == 10
    assert len(MNK(4, 4, 3).lines) == 24  # 8 rows, 8 columns, 8 diagonals
    assert MNK(3, 3, 3).lines[:1] == ((0, 1, 2),)


@pytest.mark.parametrize("board, said", [
    ((5, 4, 3), "game.m=5 game.n=4: a board of 20 cells; at most 16"),
    ((4, 4, 5), "game.k=5: k must be in 2..4 on a 4x4 board"),
    ((3, 3, 1), "game.k=1: k must be in 2..3 on a 3x3 board"),
    ((0, 3, 2), "game.m must be a positive integer, got 0"),
    ((3, True, 2), "game.n must be a positive integer, got True"),
])
def test_a_board_out_of_range_is_refused_in_one_line(board, said):
    assert problem(*board).startswith(said) and "\n" not in problem(*board)
    with pytest.raises(ConfigError, match=f"^{said}"):
        MNK(*board)
