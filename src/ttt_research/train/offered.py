"""What the shell offers an algorithm beyond the game (``algos.base.Run``): the budget's
progress and the schedules that follow it, the optimiser and its steps, the learner's
decision positions, and the policy that evaluation and export see. A part of ``RLModule``
(``train/module.py``), which it reads: its algorithm, seat, opponent and counters.
"""

from __future__ import annotations

import torch

from ttt_research.env import game
from ttt_research.env.opponents import SelfPlay
from ttt_research.models.member_optim import clip_member_grad_norm


class Offered:
    """``RLModule``'s part that an algorithm's ``update(run)`` calls."""

    @property
    def progress(self) -> float:
        """Share of the game budget played so far, in [0, 1] (schedules follow it; it is
        checkpointed through ``games_played``, so a resumed run continues them)."""
        return min(1.0, self.games_played / max(1, self.budget_games))

    def scheduled(self, start: float, final: float | None, games_ahead: int = 0) -> float:
        """A linear schedule from ``start`` to ``final`` over the budget (None: constant),
        at ``progress`` plus ``games_ahead`` games this process has played in the current
        update (so a schedule stepped within an update does not depend on the grouping)."""
        if final is None:
            return start
        played = self.games_played + games_ahead * self.budget_processes
        final = final if isinstance(final, torch.Tensor) else float(final)
        return start + min(1.0, played / max(1, self.budget_games)) * (final - start)

    def optimizer(self):
        """The algorithm's optimiser in Lightning's wrapper: precision and accelerator
        plugins apply to its steps."""
        return self.optimizers()

    def backprop(self, loss: torch.Tensor) -> None:
        self.manual_backward(loss)

    def clip_grad_norm(self, opt, max_norm: float) -> None:
        """Lightning's norm clipping for one agent; each member's own norm in a stack."""
        if self.stacked:
            clip_member_grad_norm(self.parameters(), max_norm, self.n)
        else:
            self.clip_gradients(opt, gradient_clip_val=max_norm, gradient_clip_algorithm="norm")

    def positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The learner's decision positions: (P, cells) mover's views and the (3^cells,) map
        from a view's code (``Game.view_code``) to its row (-1: not a decision position): on
        tic-tac-toe 4,520 positions, or the 2,097 where O moves (2,423 for X) with a fixed seat.
        Tic-tac-toe's (the algorithms read another board's as they reach them: ``algos/reached.py``;
        a map over 3^16 codes would take 344 MB)."""
        if self._positions is None or self._positions[0].device != self.device:
            t = self.game.tables(self.device)
            side = torch.ones_like(t.done)  # seat both, or self-play: every position
            if self.seat in ("x", "o") and not isinstance(self.opponent, SelfPlay):
                side = t.mover == (game.X if self.seat == "x" else game.O)
            codes = torch.nonzero(t.reachable & ~t.done & side).squeeze(-1)
            views = t.view[codes]
            row_of = torch.full((self.game.view_codes,), -1, dtype=torch.long, device=self.device)
            row_of[self.game.view_code(views)] = torch.arange(codes.numel(), device=self.device)
            self._positions = (views.float(), row_of)
        return self._positions

    @torch.no_grad()
    def policy_logits(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's view -> (B, 9) masked logits; their argmax is the greedy policy
        that evaluation and export see."""
        return self.algo.policy_logits(view.to(self.device))

    def extra_report(self) -> dict[str, float]:
        """Figures of the algorithm's own that ``eval.json`` adds to the exact evaluation."""
        return self.algo.extra_report()
