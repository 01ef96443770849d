"""Every reachable position of an m,n,k game (``mnk.MNK``), solved exactly, and its facts.

A table per code and cell (``game.py``'s way for 3^9 codes) would not fit a 4x4 board
(3^16 codes x 16 cells), so the positions reachable from the empty board are indexed
instead, ply by ply, and every step is a batched numpy operation, never a Python loop over
positions:

* **Forward, building** (``build``): a ply's unfinished codes, expanded by every empty cell
  (the mover's digit added at that cell's place value), sorted and made unique, are the next
  ply; a child is finished when the player who just moved has a line of k, or the board is
  full (the game stops at the first line). The same pass carries the number of move
  sequences that reach each position (whole numbers in float64, exact: at most 16! < 2^53).
  Under random play every sequence of p moves has the same probability, 1 / (cells (cells -
  1) ... (cells - p + 1)), so the random-vs-random outcome is an exact fraction, and the
  number of complete games a sum, over the finished positions.
* **Backward, solving**: the value of each position under perfect play, from X's side (+1,
  0, -1), from the last ply to the first: X takes the best of its children, O the worst. A
  child is found by ``searchsorted`` in the next ply's sorted codes; the same pass keeps it
  (``next``: the row after each move, what the rule tables of ``indexed.py`` step with).

``positions(game)`` builds once per board and keeps the result in the user's cache folder
(``cache.py``); its ``facts`` are what ``python -m ttt_research.solve`` prints.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ttt_research.env.mnk import MNK, O_DIGIT, X_DIGIT

SHOW_AFTER_S = 2.0  # a build that takes longer shows its progress on stderr
# A game's value in words, from X's side (the contract's WORST_NAME is a seat's own: win/draw/loss).
VALUE_WORDS = dict(zip((1, 0, -1), ("X wins", "draw", "O wins"), strict=True))


@dataclass(frozen=True)
class Positions:
    """The reachable positions of ``game``, ply after ply, each ply's codes sorted."""

    game: MNK
    codes: np.ndarray  # (N,) int64, ply 0 first; sorted within each ply
    offsets: np.ndarray  # (plies + 1,) int64: ply p is codes[offsets[p]:offsets[p + 1]]
    winner: np.ndarray  # (N,) int8, +1 X has a line, -1 O has one, 0 nobody
    done: np.ndarray  # (N,) bool, a line or a full board: nobody is to move
    value: np.ndarray  # (N,) int8, the result under perfect play from X's side
    next: np.ndarray  # (N * cells,) int32, flat: [row * cells + cell] is the row after the move
    #                   (the row itself where the cell is taken or the game is over)
    facts: dict = field(compare=False)  # the figures ``solve`` prints (``_positions``), from the build

    def ply(self, p: int) -> slice:
        return slice(int(self.offsets[p]), int(self.offsets[p + 1]))

    def index(self, codes: np.ndarray) -> np.ndarray:
        """(B,) codes of reachable positions -> their rows; -1 where a code is not one."""
        codes = np.asarray(codes, dtype=np.int64)
        order = np.argsort(self.codes, kind="stable")
        at = np.searchsorted(self.codes, codes, sorter=order).clip(0, self.codes.size - 1)
        rows = order[at]
        return np.where(self.codes[rows] == codes, rows, -1)


class _Shown:
    """Progress on stderr once a build has taken ``SHOW_AFTER_S``: a rich bar on a terminal,
    a line per step off one (a log keeps lines, not a redrawn bar)."""

    def __init__(self, what: str, steps: int):
        self.what, self.steps, self.start = what, steps, time.perf_counter()
        self.bar = self.task = None

    def __call__(self, done: int, note: str) -> None:
        elapsed = time.perf_counter() - self.start
        if elapsed < SHOW_AFTER_S and self.bar is None:
            return
        if sys.stderr.isatty():
            if self.bar is None:
                from rich.console import Console
                from rich.progress import Progress

                self.bar = Progress(console=Console(stderr=True), transient=True)
                self.bar.start()
                self.task = self.bar.add_task(self.what, total=self.steps)
            self.bar.update(self.task, completed=done, description=f"{self.what}: {note}")
        else:
            print(f"{self.what}: {note} ({done}/{self.steps}, {elapsed:.1f} s)", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _mover_digit(ply: int) -> int:
    return X_DIGIT if ply % 2 == 0 else O_DIGIT


def _children(game: MNK, live: np.ndarray, ply: int, empty: np.ndarray | None = None):
    """For each cell: the rows of ``live`` (a ply's unfinished codes) where it is empty, and
    the codes after the mover plays it there (sorted, since ``live`` is). ``empty``: live's
    empty cells, when the caller has them."""
    empty = game.digits(live) == 0 if empty is None else empty
    d = _mover_digit(ply)
    for i in range(game.cells):
        rows = np.flatnonzero(empty[:, i])
        yield rows, live[rows] + d * game.pow3[i]


def _next_ply(game: MNK, live: np.ndarray, ply: int, empty: np.ndarray) -> np.ndarray:
    """The sorted distinct codes the moves from ``live`` reach: every child written into one
    array, sorted in place and deduplicated (``np.unique`` would sort a second copy)."""
    out = np.empty(int(empty.sum()), np.int64)
    at = 0
    for _, child in _children(game, live, ply, empty):
        out[at:at + child.size] = child
        at += child.size
    out.sort()
    keep = np.empty(out.size, bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def _lined(game: MNK, codes: np.ndarray, digit: int) -> np.ndarray:
    """(B,) bool: the player of ``digit`` has a line of k on each board."""
    mine = game.digits(codes) == digit
    won = np.zeros(codes.size, dtype=bool)
    for line in game.lines:
        won |= np.logical_and.reduce([mine[:, c] for c in line])
    return won


def build(game: MNK) -> Positions:
    """Every reachable position of ``game``, solved, with its facts (see the module)."""
    shown = _Shown(f"positions of {game.name}", 2 * game.cells)
    try:
        return _build(game, shown)
    finally:
        shown.close()


def _build(game: MNK, shown: _Shown) -> Positions:
    codes, winner, done = [np.zeros(1, np.int64)], [np.zeros(1, np.int8)], [np.zeros(1, bool)]
    paths = np.ones(1)  # this ply's: the move sequences that reach each position
    # Every unfinished board at ply p offers cells - p moves, so each sequence of p moves has
    # probability 1 / (cells (cells - 1) ... (cells - p + 1)) under random play: the outcome is
    # a sum of whole numbers over those, exact (a transposed board gives the same digits).
    ended = {1: Fraction(0), 0: Fraction(0), -1: Fraction(0)}
    sequences_of_ply = 1
    games = 0
    for ply in range(game.cells):
        live_rows = np.flatnonzero(~done[ply])
        live = codes[ply][live_rows]
        if live.size == 0:
            break
        empty = game.digits(live) == 0
        nxt = _next_ply(game, live, ply, empty)
        moves = game.cells - ply  # every empty cell of an unfinished board is a legal move
        sequences_of_ply *= moves
        sequences, paths = paths[live_rows], np.zeros(nxt.size)
        for rows, child in _children(game, live, ply, empty):
            paths += np.bincount(np.searchsorted(nxt, child), weights=sequences[rows], minlength=nxt.size)
        del empty, sequences
        d = _mover_digit(ply)
        won = _lined(game, nxt, d)
        codes.append(nxt)
        winner.append(np.where(won, 1 if d == X_DIGIT else -1, 0).astype(np.int8))
        done.append(won | (ply + 1 == game.cells))
        whole = paths.astype(np.int64)  # exact: each count is below 16! < 2^53
        for w in ended:
            ended[w] += Fraction(int(whole[done[-1] & (winner[-1] == w)].sum()), sequences_of_ply)
        games += int(whole[done[-1]].sum())
        shown(ply + 1, f"ply {ply + 1}, {nxt.size:,} positions")
    offsets = np.cumsum([0] + [c.size for c in codes]).astype(np.int64)
    value, nxt = _solve(game, codes, offsets, winner, done, shown)
    return _positions(game, codes, offsets, winner, done, value, nxt, ended, games)


def _solve(game: MNK, codes, offsets, winner, done, shown: _Shown) -> tuple[list[np.ndarray], np.ndarray]:
    """Backward induction, last ply first: each ply's values from the next ply's; and the
    (N, cells) rows after each move (``Positions.next``), found on the way."""
    value = [w.copy() for w in winner]
    # int32: 9.7M rows of 4x4 fit, at half int64's 1.2 GB. Untaken moves lead to the row itself.
    nxt = np.repeat(np.arange(int(offsets[-1]), dtype=np.int32)[:, None], game.cells, axis=1)
    for ply in range(len(codes) - 2, -1, -1):
        live_rows = np.flatnonzero(~done[ply])
        x_moves = _mover_digit(ply) == X_DIGIT
        best = np.full(live_rows.size, -2 if x_moves else 2, np.int8)
        pick = np.maximum if x_moves else np.minimum
        here = nxt[offsets[ply]:offsets[ply + 1]]
        for cell, (rows, child) in enumerate(_children(game, codes[ply][live_rows], ply)):
            at = np.searchsorted(codes[ply + 1], child)
            here[live_rows[rows], cell] = at + offsets[ply + 1]
            best[rows] = pick(best[rows], value[ply + 1][at])
        value[ply][live_rows] = best
        shown(2 * game.cells - ply, f"solved ply {ply}")
    return value, nxt.reshape(-1)


def _positions(game, codes, offsets, winner, done, value, nxt, ended, games) -> Positions:
    to_move = [int((~d).sum()) for d in done]
    facts = {
        "game": game.name, "m": game.m, "n": game.n, "k": game.k,
        "lines": len(game.lines), "symmetries": len(game.symmetries),
        "reachable": int(offsets[-1]), "terminal": int(sum(int(d.sum()) for d in done)),
        "to_move": sum(to_move), "to_move_by_ply": to_move,
        "value": VALUE_WORDS[int(value[0][0])],
        "random_vs_random": {"x_wins": float(ended[1]), "draw": float(ended[0]), "o_wins": float(ended[-1])},
        "random_vs_random_exact": {"x_wins": str(ended[1]), "draw": str(ended[0]), "o_wins": str(ended[-1])},
        "complete_games": games,
    }
    cat = np.concatenate
    return Positions(game, cat(codes), offsets, cat(winner), cat(done), cat(value), nxt, facts)
