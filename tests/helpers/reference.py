"""A plain one-board tic-tac-toe in pure Python: the slow, obvious reference that the
batched engine and the exact DPs are checked against. Boards are tuples of 9 ints
(+1 X, -1 O, 0 empty)."""

from __future__ import annotations

from fractions import Fraction
from functools import cache

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
EMPTY_BOARD = (0,) * 9


def winner(b) -> int:
    for i, j, k in LINES:
        if b[i] != 0 and b[i] == b[j] == b[k]:
            return b[i]
    return 0


def mover(b) -> int:
    return 1 if sum(b) == 0 else -1


def done(b) -> bool:
    return winner(b) != 0 or all(c != 0 for c in b)


def legal(b) -> list[int]:
    return [] if done(b) else [i for i, c in enumerate(b) if c == 0]


def play(b, cell):
    out = list(b)
    out[cell] = mover(b)
    return tuple(out)


def code(b) -> int:
    return sum((c % 3) * 3**i for i, c in enumerate(b))


@cache
def minimax(b) -> int:
    """Perfect-play value from X's side."""
    if done(b):
        return winner(b)
    vals = [minimax(play(b, c)) for c in legal(b)]
    return max(vals) if mover(b) == 1 else min(vals)


def outcome(b, choose_x, choose_o) -> tuple[Fraction, Fraction, Fraction]:
    """Exact (P X wins, P O wins, P tie) when each side's move distribution is given by a
    function board -> {cell: probability}. Plain recursion with Fractions."""
    if done(b):
        w = winner(b)
        return (Fraction(w == 1), Fraction(w == -1), Fraction(w == 0))
    dist = (choose_x if mover(b) == 1 else choose_o)(b)
    total = [Fraction(0)] * 3
    for cell, p in dist.items():
        sub = outcome(play(b, cell), choose_x, choose_o)
        total = [t + p * s for t, s in zip(total, sub, strict=True)]
    return tuple(total)


def uniform_random(b):
    cells = legal(b)
    return {c: Fraction(1, len(cells)) for c in cells}


def uniform_perfect(b):
    cells = [c for c in legal(b) if minimax(play(b, c)) == minimax(b)]
    return {c: Fraction(1, len(cells)) for c in cells}
