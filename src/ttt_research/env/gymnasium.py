"""A gymnasium environment of our game, for external learners (SB3, CleanRL, ...).

One environment is one game at a time, seen from the learner's side: the learner moves,
the opponent answers inside the same ``step``, and the learner sees the board again when
it is its turn. Everything about the game comes from the engine: ``game.step`` plays a
move (including the forfeit rule for an occupied cell), ``game.tables`` gives the mover's
view and the legal moves, ``opponents.build`` the opponent, ``reward.Reward`` the reward
table. This module only does the bookkeeping gymnasium asks for.

* Observation: float32 (9,), the board from the learner's view (+1 own, -1 opponent,
  0 empty), cells 0..8 row by row: the same input as the ONNX contract.
* Action: ``Discrete(9)``, the cell to play. ``action_masks()`` (sb3-contrib MaskablePPO's
  convention) and ``info["action_mask"]`` give the legal cells as a bool (9,) array.
* An occupied cell forfeits (the engine's rule): the episode ends with ``reward.illegal``
  and ``info["illegal"] = True``. Learners that use the mask never see it.
* Seat: ``x``, ``o``, ``both`` (drawn per episode) or ``alternate`` (X, O, X, ... per
  episode). As O, the opponent's first move is already on the board after ``reset``.
* Seeding: ``reset(seed=...)`` seeds gymnasium's ``np_random``, from which the seat draw
  and a torch generator for the opponent's moves are derived, so a seeded episode
  replays exactly.

``gymnasium.make("ttt_research/TicTacToe-v0", opponent="minimax", seat="o")`` works once
this module is imported (the wrappers hide ``action_masks``: call it on ``env.unwrapped``).

Gymnasium is an optional dependency (the ``compare`` and ``dev`` extras).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("ttt_research.gym needs gymnasium: pip install -e '.[compare]'") from e

from ttt_research.contract import SEAT_PIECE, TRAINING_SEATS
from ttt_research.env import game
from ttt_research.env.opponents import Opponent, SelfPlay, build
from ttt_research.env.reward import Reward

# A training seat, or ``alternate``: X, O, X, ... per episode.
GYM_SEATS = (*TRAINING_SEATS, "alternate")
# The PPO seed's table: +1 win, +0.5 tie, -1 loss, -10 for an illegal move.
SEED_REWARD = Reward(win=1.0, tie=0.5, loss=-1.0, illegal=-10.0)


class TicTacToeEnv(gymnasium.Env):
    """The learner against a batched opponent from ``ttt_research.env.opponents``, one game.

    Args:
        opponent: an opponent name (``random``, ``minimax``, ``rules``, ``mixed``, as in the
            config group) or an ``Opponent`` object (policy-free: ``self`` is not a gym
            opponent, the learner would have to move for both sides).
        seat: ``x``, ``o``, ``both`` (random per episode) or ``alternate``.
        reward: a ``reward.Reward`` or a dict with ``win``, ``tie``, ``loss``, ``illegal``.
        p_perfect, strong: for ``opponent="mixed"``: the chance per game of the strong
            player (``minimax`` or ``rules``), else random.
        render_mode: ``None`` or ``"ansi"`` (a three-line text board).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, opponent: str | Opponent = "random", seat: str = "both",
                 reward: Reward | dict | None = None, p_perfect: float = 0.5,
                 strong: str = "minimax", render_mode: str | None = None):
        if seat not in GYM_SEATS:
            raise ValueError(f"seat must be one of {GYM_SEATS}, got {seat!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.opponent = build(opponent, p_perfect, strong) if isinstance(opponent, str) else opponent
        if isinstance(self.opponent, SelfPlay):
            raise ValueError("opponent 'self' has no moves of its own: pick a fixed opponent")
        self.reward = Reward(**reward) if isinstance(reward, dict) else (reward or SEED_REWARD)
        self.seat_mode, self.render_mode = seat, render_mode
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(game.CELLS,), dtype=np.float32)
        self.action_space = spaces.Discrete(game.CELLS)
        self.t = game.tables()
        # The engine's tables as numpy arrays for the per-step lookups: a gather of one row.
        self._view = self.t.view.numpy().astype(np.float32)  # (N, 9)
        self._legal = self.t.legal.numpy()  # (N, 9) bool
        self.code = torch.tensor([game.EMPTY_CODE])  # (1,): one game, in the engine's shape
        self.seat = game.X
        self._episodes = 0
        self._gen: torch.Generator | None = None

    # ----------------------------------------------------------------- what the learner sees

    def _obs(self) -> np.ndarray:
        return self._view[int(self.code)].copy()  # (9,) float32, learner's view (it is to move)

    def action_masks(self) -> np.ndarray:
        """(9,) bool: the legal cells now (sb3-contrib MaskablePPO calls this)."""
        return self._legal[int(self.code)].copy()

    def _info(self, **extra: Any) -> dict:
        return {"action_mask": self.action_masks(), "seat": "x" if self.seat == game.X else "o",
                **extra}

    # ----------------------------------------------------------------- the gymnasium API

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None or self._gen is None:
            # Derived from np_random, so reset(seed=s) fixes the opponent's moves as well.
            self._gen = torch.Generator().manual_seed(int(self.np_random.integers(2**62)))
        if seed is not None:
            self._episodes = 0  # a seeded reset restarts the alternation too: X first
        if self.seat_mode == "both":
            self.seat = game.X if self.np_random.random() < 0.5 else game.O
        elif self.seat_mode == "alternate":
            self.seat = game.X if self._episodes % 2 == 0 else game.O
        else:
            self.seat = SEAT_PIECE[self.seat_mode]
        self._episodes += 1
        self.code = torch.tensor([game.EMPTY_CODE])
        self.opponent.reset(torch.ones(1, dtype=torch.bool), self._gen)  # mixed: strong or weak
        if self.seat == game.O:  # the opponent opens; an empty board cannot end in one move
            self.code = game.step(self.code, self.opponent.act(self.code, self._gen), self.t).code
        return self._obs(), self._info()

    def step(self, action):
        s = game.step(self.code, torch.tensor([int(action)]), self.t)  # forfeits if occupied
        forfeit = bool(s.illegal)  # the learner's forfeit: the only one that earns `illegal`
        if not bool(s.ended):
            self.code = s.code
            s = game.step(self.code, self.opponent.act(self.code, self._gen), self.t)
        self.code = s.code  # a forfeit leaves the board as it was
        ended = bool(s.ended)
        outcome = int(s.winner) * self.seat  # from the learner's side: +1 win, 0 tie, -1 loss
        reward = 0.0
        extra: dict[str, Any] = {}
        if ended:
            reward = float(self.reward.of(torch.tensor([outcome]), torch.tensor([forfeit])))
            extra = {"outcome": outcome, "illegal": forfeit}
        return self._obs(), reward, ended, False, self._info(**extra)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        marks = {game.X: "X", game.O: "O", game.EMPTY: "."}
        cells = [marks[int(v)] for v in self.t.board[int(self.code)]]
        return "\n".join(" ".join(cells[r * 3:r * 3 + 3]) for r in range(3)) + "\n"


ENV_ID = "ttt_research/TicTacToe-v0"
if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point=TicTacToeEnv)
