"""A board sent by the page (``POST /logits``), on the served model's board: why it is no
position where somebody is to move (``problem``), and its row in the game's rule tables
(``row_of``), where the strict check of a policy file's logits looks it up.

Tic-tac-toe's boards are judged as they always were, by ``game.outside_problem`` over its 3^9
codes (a code is its tables' row). Another board's tables hold its reachable positions only
(``env/indexed.py``), so a board is judged from the game's lines instead: the counts (X moves
first), then k in a row (``MNK.lines``), then a full board. A board that passes is reachable
(no prefix of it has a line either, so its pieces can be laid in any alternating order), and
``row_of`` finds its row by laying them so, one gather of ``next`` a piece.
"""

from __future__ import annotations

import numpy as np
import torch

from ttt_research.env import game as rules
from ttt_research.env.board import TIC_TAC_TOE, Game


def problem(game: Game, board: list[int]) -> str | None:
    """Why ``board`` (cells of 1 X, -1 O, 0 empty) is no position where somebody is to move on
    ``game``, to follow "this board is ..."; None when somebody is to move."""
    if game == TIC_TAC_TOE:
        return rules.outside_problem(int(rules.encode(torch.tensor([board]))[0]))
    cells = np.asarray(board, dtype=np.int64)
    nx, no = int((cells == rules.X).sum()), int((cells == rules.O).sum())
    if nx - no not in (0, 1):
        return f"impossible: {nx} x and {no} o (X moves first, so x = o or o + 1)"
    sums = cells[np.asarray(game.lines)].sum(-1)  # (lines,) +k: X's line, -k: O's
    x_line, o_line = bool((sums == game.k).any()), bool((sums == -game.k).any())
    k = f"{game.k} in a row"
    if x_line and o_line:
        return f"impossible: both x and o have {k} (the game ends at the first line)"
    if x_line or o_line:
        line, other = ("x", "o") if x_line else ("o", "x")
        if nx - no == (0 if x_line else 1):  # the other side moved after the line: X's line ends at x = o + 1
            return f"impossible: {line} has {k}, yet {other} moved after the game was over"
        return f"a finished game ({line} has {k}): nobody is to move"
    if nx + no == game.cells:
        return "a finished game (the board is full): nobody is to move"
    return None


def row_of(game: Game, board: list[int]) -> int:
    """The row of ``game``'s tables holding ``board``, a position ``problem`` passed: its code
    on tic-tac-toe; another board's by laying X's and O's pieces in turn from the empty board
    (row 0)."""
    if game == TIC_TAC_TOE:
        return int(rules.encode(torch.tensor([board]))[0])
    nxt = game.tables().next2d
    xs = [i for i, v in enumerate(board) if v == rules.X]
    os = [i for i, v in enumerate(board) if v == rules.O]
    row = 0
    for ply in range(len(xs) + len(os)):
        row = int(nxt[row, (xs if ply % 2 == 0 else os)[ply // 2]])
    return row
