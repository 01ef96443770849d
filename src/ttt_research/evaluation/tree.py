"""The game tree as the exact evaluation's dynamic programmes read it (``Tree``), for any board.

Every DP of ``exact.py``, ``exploit.py`` and ``crossplay.py`` walks the reachable positions
ply by ply (backwards for values, forwards for reach), following moves with a gather of the
row after each move. ``Tree`` gives them those rows in one indexing, the "compact rows"
0..R-1, with the tables a DP reads in it:

* tic-tac-toe's rule tables have a row per code (3^9, ``game.tables``); its tree keeps the
  5,478 reachable codes, in code order, as it always has (``codes`` maps a compact row back
  to its code);
* another board's tables are over its reachable positions already (``env/indexed.py``), so
  its compact rows are the tables' rows and every table is the tables' own (views, no copy:
  4,4,4's 9.7M rows x 16 cells are 1.8 GB once, not again here).

The opponents' move probabilities (``random``: uniform over the empty cells, ``perfect``:
uniform over the minimax-optimal ones) are made for one ply's rows where a DP reads them
(``opponent``), never as an (R, cells) float64 table: 1.2 GB on 4,4,4. Row by row they are
the very numbers of ``solver.random_probs`` / ``perfect_probs``, so the 3x3 figures do not move.

A policy given as (n, M, cells) at the decision positions (``exact.decision_codes``, M of
them) is read a ply at a time too: ``decisions[ply]`` says where the ply's rows sit among them.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
from collections.abc import Callable, Iterator

import torch

from ttt_research.env import game as rules
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.solver import solve, uniform_over


@contextlib.contextmanager
def one_thread(device: torch.device | str = "cpu") -> Iterator[None]:
    """Run the block on one torch thread when on the CPU, then restore the count: for work
    made of many small operations (crossplay's "Threads": two threads spin against each other on
    a busy host; the DPs here, the ratings' Newton steps too)."""
    threads = torch.get_num_threads()
    if torch.device(device).type == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class Workers:
    """``k`` Python threads that share an evaluation's independent blocks (another board's
    forward blocks, a ply's blocks of the as-trained pass, the greedy report beside it), each
    running torch on one thread. Torch releases the interpreter's lock inside an operation, so
    two threads keep two cores busy (4,4,4's evaluation 1.75x one thread's speed on the 2-core
    host), with no OpenMP team whose threads wait for each other at each operation's end (10x
    slower under load: the "Threads" of crossplay.py). On a host whose cores other jobs hold, a
    second thread gains nothing and can lose (each waits for the lock, then for a core): give
    such a process one torch thread, as training runs have. A block's numbers do not depend on
    which thread runs it, so the figures are the same for any ``k``; ``k = 1`` runs everything in
    place."""

    def __init__(self, k: int) -> None:
        self.k = max(1, int(k))
        self._pool = (concurrent.futures.ThreadPoolExecutor(self.k, initializer=torch.set_num_threads,
                                                            initargs=(1,)) if self.k > 1 else None)

    def map(self, fn: Callable, items) -> list:
        """``[fn(item) for item in items]``, shared among the threads."""
        return [fn(i) for i in items] if self._pool is None else list(self._pool.map(fn, items))

    def submit(self, fn: Callable, *args) -> concurrent.futures.Future:
        """``fn(*args)`` on a free thread (in place for ``k = 1``); ``.result()`` waits for it."""
        if self._pool is not None:
            return self._pool.submit(fn, *args)
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result(fn(*args))
        return done

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown()


def decision_codes(game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(M,) the reachable rows of ``game``'s tables where somebody is to move, in row order
    (tic-tac-toe: codes, M = 4,520; 3,4,3: 79,563; 4,4,4: 9,062,619). Do not write into it."""
    return _decision_codes(game)


@functools.lru_cache(maxsize=4)
def _decision_codes(game: Game) -> torch.Tensor:
    t = game.tables()
    return (t.reachable & ~t.done).nonzero().squeeze(-1)


class Tree:
    """The reachable positions of ``game`` as rows 0..R-1, with the tables the DPs need in
    that indexing, on one device (built on the CPU, then moved)."""

    def __init__(self, device: str, game: Game = TIC_TAC_TOE) -> None:
        t = game.tables()
        self.game = game
        self.cells = t.cells
        if game == TIC_TAC_TOE:
            self.codes = t.reachable.nonzero().squeeze(-1)  # (R,) codes, R = 5,478, code order
            index = torch.full((t.states,), -1, dtype=torch.long)
            index[self.codes] = torch.arange(self.codes.numel())
            # Occupied cells "lead" to the same board (game.tables), so every entry is reachable.
            self.next = index[t.next2d[self.codes]]  # (R, 9) rows after each move
            self.legal = t.legal[self.codes]  # (R, 9)
            self.mover = t.mover[self.codes]  # (R,)
            self.winner = t.winner[self.codes]  # (R,)
            self.done = t.done[self.codes]  # (R,)
            self.empty = int(index[rules.EMPTY_CODE])
            self.decision = index[decision_codes(game)]  # (M,) the row of each decision position
            self.optimal = solve(g=game).optimal[self.codes]  # (R, 9)
            ply = t.ply[self.codes]
            self.kth = None  # only the windowed DP of another board reads it (window.both_seats)
        else:  # the tables' rows are the reachable positions: every table as it is
            self.codes = torch.arange(t.states, dtype=torch.int32)  # the identity (int32: 4x4's 9.7M rows)
            self.next = t.next2d  # (R, cells) int32 rows after each move
            self.legal, self.mover, self.winner, self.done = t.legal, t.mover, t.winner, t.done
            self.empty = 0  # the empty board is row 0 (indexed.py)
            self.decision = decision_codes(game).int()  # row numbers fit int32 (indexed.py)
            self.optimal = solve(g=game).optimal  # (R, cells)
            self.kth = t.kth_legal.view(-1, t.cells)  # (R, cells) int8: the empty cells first, ascending
            ply = t.ply
        self.size = int(self.codes.numel())  # R
        # Another board's rows come ply after ply (indexed.py): ply p is rows offsets[p]:offsets[p + 1].
        self.offsets = None if game == TIC_TAC_TOE else [0] + torch.bincount(
            t.ply.long(), minlength=t.cells + 1).cumsum(0).tolist()
        # Unfinished rows per ply, ply 0 first (as solver.plies_backwards, reversed).
        self.plies = [((ply == p) & ~self.done).nonzero().squeeze(-1).to(self.decision.dtype)
                      for p in range(t.cells)]
        # Who moves at each ply (X at even plies, O at odd ones), as Python ints: no device sync.
        self.ply_mover = [rules.X if p % 2 == 0 else rules.O for p in range(t.cells)]
        # Where each ply's rows sit among the decision positions (the order of a policy's M rows).
        at = torch.full((self.size,), -1, dtype=torch.long)
        at[self.decision] = torch.arange(self.decision.numel())
        self.decisions = [at[rows].to(self.decision.dtype) for rows in self.plies]
        del at
        for name, value in vars(self).items():
            if isinstance(value, torch.Tensor):
                setattr(self, name, value.to(device))
        self.plies = [rows.to(device) for rows in self.plies]
        self.decisions = [d.to(device) for d in self.decisions]

    def opponent(self, which: str | torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """(r, cells) float64 move probabilities at ``rows`` (r,) of a fixed opponent:
        ``"random"`` (uniform over the empty cells), ``"perfect"`` (uniform over the
        minimax-optimal moves), or a table given by compact row ((R, cells) or (R, n, cells))."""
        if isinstance(which, torch.Tensor):
            return which[rows]
        mask = {"random": self.legal, "perfect": self.optimal}[which]
        return uniform_over(mask[rows])

    def by_row(self, probs: torch.Tensor) -> torch.Tensor:
        """(n, M, cells) probabilities at the decision positions -> (R, n, cells) by compact
        row, finished rows all zero (for small boards: 4,4,4's would be 1.2 GB per member)."""
        out = torch.zeros(self.size, probs.shape[0], self.cells, dtype=torch.float64, device=probs.device)
        out[self.decision] = probs.transpose(0, 1).to(torch.float64)
        return out


@functools.lru_cache(maxsize=4)
def tree(device: str, game: Game = TIC_TAC_TOE) -> Tree:
    """``game``'s tree on ``device``, built once per process."""
    return Tree(device, game)
