"""Exact minimax over every position of a game (tic-tac-toe unless told), as lookup tables.

The game tree is small (5,478 reachable positions), so we solve it completely once, by
backward induction over plies, and then every question about perfect play is a gather
by board code (see ``game.tables``):

* ``value[code]``: the game's result under perfect play, from X's side: +1 X wins,
  0 draw, -1 O wins.
* ``optimal[code, cell]``: the legal moves that keep that value (minimax-optimal moves).

It also owns the policy-free tables and sums built on the tree, which both the opponents
and the exact evaluator use: move-probability tables over all codes (``random_probs``,
``perfect_probs``, ``uniform_over``, ``one_hot``), the exact outcome probabilities of two
such tables playing each other (``outcome_probs``), and the best response to one
(``best_response``).

Backward induction works layer by layer: a position with ``p`` pieces only leads to
positions with ``p + 1``, so solving plies 9, 8, ..., 0 in turn needs 10 batched steps,
not a recursive search. X takes the max of its children's values, O the min. Another
board (``solve(game=...)``) is solved by its positions (``Game.positions``, the same
induction in numpy, kept in the user's cache), over the rows of its tables.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE, Game


@dataclass(frozen=True)
class Solution:
    value: torch.Tensor  # (N,) int8, perfect-play result from X's side: +1 / 0 / -1
    optimal: torch.Tensor  # (N, cells) bool, legal moves that keep the value


def _solve() -> Solution:
    t = game.tables("cpu")
    nxt = t.next2d  # (N, 9)
    value = t.winner.clone()  # terminal positions keep their result; others are filled in
    for ply in range(game.CELLS - 1, -1, -1):
        rows = ((t.ply == ply) & ~t.done).nonzero().squeeze(-1)
        child = value[nxt[rows]]  # (R, 9)
        legal = t.legal[rows]
        is_x = (t.mover[rows] == game.X)[:, None]
        # The mover picks its best child: X maximises, O minimises (illegal cells excluded).
        best_x = torch.where(legal, child, -2).amax(-1)
        best_o = torch.where(legal, child, 2).amin(-1)
        value[rows] = torch.where(is_x.squeeze(-1), best_x, best_o)
    optimal = t.legal & (value[nxt] == value[:, None])  # (N, 9)
    return Solution(value=value, optimal=optimal)


def _solve_board(g: Game) -> Solution:
    """Another board's solution over its tables' rows: the values its positions were solved
    with, and the legal moves whose child keeps the value."""
    t = g.tables("cpu")
    value = g.values()  # (N,) int8, rows as the tables' (kept from their build: no second read)
    child = value.index_select(0, t.next).view(t.states, t.cells)  # (N, cells): int32 rows as they are
    return Solution(value=value, optimal=t.legal & (child == value[:, None]))


@functools.lru_cache(maxsize=2)
def _solution_cpu(g: Game = TIC_TAC_TOE) -> Solution:
    return _solve() if g == TIC_TAC_TOE else _solve_board(g)


@functools.lru_cache(maxsize=4)
def _solution_on(device: str, g: Game = TIC_TAC_TOE) -> Solution:
    cpu = _solution_cpu(g)
    if device == "cpu":
        return cpu
    return Solution(**{k: v.to(device) for k, v in vars(cpu).items()})


def solve(device: torch.device | str = "cpu", g: Game = TIC_TAC_TOE) -> Solution:
    """The exact solution of ``g`` on ``device``, computed once per process and cached."""
    return _solution_on(str(torch.device(device)), g)


# --------------------------------------------------------------------------- move tables


def uniform_over(mask: torch.Tensor) -> torch.Tensor:
    """(N, cells) bool -> (N, cells) float64 probabilities, uniform over the True cells (rows
    with none stay all zero)."""
    m = mask.double()
    return m / m.sum(-1, keepdim=True).clamp_min(1.0)


# The (N, cells) float64 tables below suit tic-tac-toe and boards up to 3,4,3 (112k rows:
# 11 MB); on 4x4 one would be 1.2 GB, so the evaluation of a big board computes a ply's rows
# where it reads them (``evaluation/tree.py``), with the same ``uniform_over``.


def random_probs(g: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(N, cells) float64: a uniformly random legal move at every row of ``g``'s tables."""
    return uniform_over(g.tables().legal)


def perfect_probs(g: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(N, cells) float64: a uniformly random minimax-optimal move at every row."""
    return uniform_over(solve(g=g).optimal)


def one_hot(actions: torch.Tensor, g: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(N,) action table -> (N, cells) float64 deterministic move probabilities (legal rows only)."""
    t = g.tables()
    probs = torch.nn.functional.one_hot(actions, t.cells).double()
    return probs * t.legal.any(-1, keepdim=True)


def plies_backwards(g: Game = TIC_TAC_TOE):
    """The unfinished rows of each ply, from the last ply that moves down to 0: (R,) int64 per ply."""
    t = g.tables()
    for ply in range(t.cells - 1, -1, -1):
        yield ((t.ply == ply) & ~t.done).nonzero().squeeze(-1)


def outcome_probs(pi_x: torch.Tensor, pi_o: torch.Tensor, g: Game = TIC_TAC_TOE) -> torch.Tensor:
    """Exact outcome probabilities when X plays ``pi_x`` and O plays ``pi_o``.

    Args:
        pi_x, pi_o: (N, cells) float64 move probabilities at every row of ``g``'s tables.

    Returns:
        (N, 3) float64: P(X wins), P(O wins), P(tie) from every row.
    """
    t = g.tables()
    pi = torch.where((t.mover == game.X)[:, None], pi_x, pi_o)
    result = torch.stack([t.winner == game.X, t.winner == game.O, t.done & (t.winner == 0)],
                         -1).double()  # terminal rows are one-hot; the rest is filled in
    nxt = t.next2d
    for rows in plies_backwards(g):
        result[rows] = torch.einsum("rc,rck->rk", pi[rows], result[nxt[rows]])
    return result


def best_response(opponent: torch.Tensor, seat: int, reward: tuple[float, float, float],
                  allowed: torch.Tensor | None = None,
                  g: Game = TIC_TAC_TOE) -> tuple[torch.Tensor, torch.Tensor]:
    """The deterministic policy that maximises expected reward against a known opponent.

    Expectimax over the tree: at the agent's positions take the best child (ties to the
    lowest cell), at the opponent's positions average the children with the opponent's
    move probabilities. This is how the best possible record of an agent against the random
    player is computed (``docs/facts.md``).

    Args:
        opponent: (N, cells) float64 move probabilities of the opponent at every row.
        seat: ``game.X`` or ``game.O``, the side the agent plays.
        reward: (win, tie, loss) for the agent.
        allowed: optional (N, cells) bool restricting the agent's moves (e.g. ``optimal``).

    Returns:
        (actions, value): (N,) int64 chosen cells at every row (0 where the agent does
        not move) and (N,) float64 expected rewards from every row.
    """
    t = g.tables("cpu")
    win, tie, loss = reward
    # Terminal rewards from the agent's side: winner * seat is +1 win, -1 loss, 0 tie.
    outcome = (t.winner * seat).double()
    value = torch.where(outcome > 0, win, torch.where(outcome < 0, loss, tie)).double()
    actions = torch.zeros(t.states, dtype=torch.long)
    mask = t.legal if allowed is None else t.legal & allowed
    nxt = t.next2d
    for rows in plies_backwards(g):
        child = value[nxt[rows]]  # (R, cells)
        expected = (opponent[rows] * child).sum(-1)
        # Values equal up to rounding count as ties, which then go to the lowest cell.
        masked = torch.where(mask[rows], child, -torch.inf)
        best = masked.amax(-1, keepdim=True)
        choice = (masked >= best - 1e-12).to(torch.int8).argmax(-1)
        mine = t.mover[rows] == seat
        value[rows] = torch.where(mine, best.squeeze(-1), expected)
        actions[rows] = torch.where(mine, choice, 0)
    return actions, value
