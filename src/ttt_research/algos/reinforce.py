"""antirez-style REINFORCE with reward scaling, batched (``algo=reinforce``).

antirez's ttt-rl learns from each finished game like this, for every move the network
made: take the game's reward (win / tie / loss from the table), scale it by how late the
move came, ``0.5 + 0.5 * ply / plies`` (ply counts both players' moves), and nudge the
softmax output towards a target: the move it played if the scaled reward is >= 0, else
uniform over the *other* legal moves. The nudge is the cross-entropy gradient
``softmax - target`` times ``|scaled reward|``.

    Note: with a target of "the move played", ``|r| * CE`` is exactly the REINFORCE
    loss ``-r * log pi(a|s)`` for r >= 0; for r < 0 antirez pushes probability towards
    the alternatives rather than just away from the move, which keeps the update
    bounded (a plain ``-r * log pi`` grows without limit as pi(a|s) -> 0).

Three ways to run it:

* **batched**: ``games_per_update`` games per training step, played as
  ``rollouts`` successive batches of games in lockstep; after each batch, ``minibatches``
  optimiser steps on random shares of its moves (the loss is the mean over games). Moves
  are sampled from the masked softmax at ``temperature`` (0 = greedy, the seed's),
  annealed linearly to ``temperature_final`` over the budget when that is set.

    Why anneal: at temperature 1 the rule's fixed point is soft (a loss pushes towards
    *every* other move, like an entropy bonus, and weighs only ``1 / (legal - 1)`` on
    the move itself), so the greedy policy read off it still loses 2-3% of games to the
    random player; a sharp behaviour policy is risk-averse (a loss then costs the played
    move its whole ``|r|``) but stops exploring. Exploring at 1 and ending near 0.1 gets
    most of both. Per move, small batches (a few hundred games) learned best; the
    position table below lifts that limit.
* **position table** (``position_table=true``, the default): the same loss, computed per
  *distinct position* rather than per move. Before each batch of games the network runs
  once on every position where the learner can be to move (4,520; 2,097 as O)
  and the batch is played by looking its logits up; afterwards the moves' weighted
  targets are summed per position (``index_add_``), so one forward and one backward pass
  over that table give exactly the gradient of the per-move loss, whatever the number of
  games. The cost of an update stops growing with the batch: batches of 2,048 games with
  one SGD step each (momentum 0.9, the learning rate annealed with ``lr_final``) train at
  ~570,000 games per second (experiments/reinforce_default, BENCHMARKS.md).
* **faithful** (``faithful=true``): the seed, move for move: one game at a time, greedy,
  an SGD step after each of the network's moves, the softmax over all 9 outputs (the
  network must learn that occupied cells are bad). ``games_per_update`` games are played
  this way within one training step (a Lightning step per game would cost more than the
  game); the experiment ``antirez_repro`` sets the rest of the seed (net, reward, seat).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .. import game
from ..game import view_code
from ..nets import MASKED, sample
from ..opponents import RandomOpponent, SelfPlay
from ..rollout import play_batch
from . import faithful
from .base import RLModule


def move_importance(ply: torch.Tensor, plies: torch.Tensor) -> torch.Tensor:
    """antirez's scaling: late moves count more. (M,) move index (0-based, both players'
    moves counted) and (M,) moves in the game -> (M,) in [0.5, 1)."""
    return 0.5 + 0.5 * ply.float() / plies.float()


def antirez_targets(action: torch.Tensor, legal: torch.Tensor, scaled: torch.Tensor) -> torch.Tensor:
    """(M,) moves played, (M, 9) legal masks, (M,) scaled rewards -> (M, 9) target rows:
    one-hot on the move when the reward is >= 0, else uniform over the other legal cells
    (all zero when there is no other cell: nothing to learn from a forced move)."""
    played = F.one_hot(action, game.CELLS).bool()
    others = (legal & ~played).float()
    others = others / others.sum(-1, keepdim=True).clamp_min(1.0)
    return torch.where((scaled >= 0)[:, None], played.float(), others)


def weighted_cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                           weight: torch.Tensor) -> torch.Tensor:
    """(M, 9) logits, (M, 9) target distributions, (M,) weights -> (M,) weighted CE.
    Its gradient in the logits is ``weight * (softmax - target)``: antirez's deltas."""
    return -weight * (targets * F.log_softmax(logits, -1)).sum(-1)


class Reinforce(RLModule):
    """The LightningModule for ``algo=reinforce``."""

    def __init__(self, *args, lr: float = 0.1, temperature: float = 1.0,
                 masked_softmax: bool = True, faithful: bool = False, baseline: bool = False,
                 minibatches: int = 1, optimizer=None, temperature_final: float | None = None,
                 rollouts: int = 1, position_table: bool = False, momentum: float = 0.0,
                 lr_final: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.optimizer_factory = optimizer  # a partial (Hydra ``_partial_: true``) or None: SGD
        self.lr = float(lr)
        self.momentum = 0.0 if faithful else float(momentum)
        self.lr_final = None if faithful or lr_final is None else float(lr_final)
        self.temperature = 0.0 if faithful else float(temperature)
        self.masked_softmax = masked_softmax and not faithful
        self.faithful = bool(faithful)
        self.baseline = bool(baseline) and not faithful
        self.minibatches = int(minibatches)
        self.rollouts = max(1, int(rollouts))
        self.position_table = bool(position_table) and not faithful
        self._positions: tuple[torch.Tensor, torch.Tensor] | None = None  # views, row_of
        self._table: torch.Tensor | None = None  # (P, 9) this batch's logits, for acting
        # Temperature annealing: linear in the share of the budget played, from
        # ``temperature`` to ``temperature_final`` (None: constant).
        self.temperature_start = self.temperature
        self.temperature_final = (None if faithful or temperature_final is None
                                  else float(temperature_final))
        self.save_hyperparameters(ignore=["net", "opponent", "reward", "optimizer"])

    def configure_optimizers(self):
        if self.optimizer_factory is None or self.faithful:  # the seed: plain SGD
            return torch.optim.SGD(self.net.parameters(), lr=self.lr, momentum=self.momentum)
        return self.optimizer_factory(self.net.parameters(), lr=self.lr)

    # ------------------------------------------------------------------ acting

    def logits(self, view: torch.Tensor) -> torch.Tensor:
        return self.net(view) if self.masked_softmax else self.net.raw_logits(view)

    @torch.no_grad()
    def act(self, view: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """(B, 9) view and legal mask -> (B,) moves: greedy, or a softmax sample at
        ``temperature`` drawn by the Gumbel-max trick (argmax of logits/T + Gumbel noise)."""
        logits = self.net(view)  # masked: occupied cells are never chosen
        if self.temperature <= 0:
            return logits.argmax(-1)
        return sample(logits, self.generator, self.temperature)

    def anneal(self, raw_opt, games_this_update: int = 0) -> None:
        """Set the sampling temperature (and the learning rate, with ``lr_final``) from the
        share of the budget played, counting the games already played in this update (so
        the schedules do not depend on how batches are grouped into updates)."""
        self.temperature = self.scheduled(self.temperature_start, self.temperature_final,
                                          games_this_update)
        if self.lr_final is not None:
            for group in raw_opt.param_groups:
                group["lr"] = self.scheduled(self.lr, self.lr_final, games_this_update)

    # ------------------------------------------------------------------ learning

    def move_batch(self, ep):
        """Flatten the learner's moves of ``ep``: views, legal masks, moves, scaled rewards."""
        m = ep.learner  # (T, B)
        T, B = m.shape
        ply = torch.arange(T, device=m.device)[:, None].expand(T, B)[m]
        plies = ep.plies[None].expand(T, B)[m]
        reward = self.reward.of(ep.outcome, ep.forfeit)
        if self.baseline:  # compare each game with the batch's average game
            reward = reward - reward.mean()
        reward = reward[None].expand(T, B)[m]
        scaled = reward * move_importance(ply, plies)
        return ep.view[m].float(), ep.legal[m], ep.action[m], scaled

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        if self.faithful:
            return self._faithful_step(opt)
        raw_opt = opt.optimizer  # Lightning's wrapper costs about as much as a small step
        # One Lightning step plays ``games_per_update`` games as ``rollouts`` successive
        # batches, each learned from before the next is played: small batches keep the
        # data close to the current policy, and the step's fixed costs (logging) are paid
        # once per step rather than once per batch.
        games = -(-self.games_per_update // self.rollouts)
        results = []
        total = torch.zeros((), device=self.device)
        for i in range(self.rollouts):
            self.anneal(raw_opt, i * games)
            if self.position_table:
                total += self._learn_by_position(raw_opt, games, results)
                continue
            ep = play_batch(games, self.act, self.opponent, self.seat, self.device, self.generator)
            total += self._learn(raw_opt, ep)
            results.append(ep)
        merged = results[0] if len(results) == 1 else _concat(results)
        steps = self.rollouts * (1 if self.position_table else self.minibatches)
        self.log_rollout(merged, {"loss": total / steps,
                                  "lr": torch.tensor(raw_opt.param_groups[0]["lr"]),
                                  "temperature": torch.tensor(self.temperature)})

    def _learn(self, raw_opt, ep) -> torch.Tensor:
        """``minibatches`` SGD steps on the moves of ``ep``; returns the summed loss."""
        view, legal, action, scaled = self.move_batch(ep)
        targets = antirez_targets(action, legal, scaled)
        # Several SGD steps per batch of games, each on a random share of the moves: many
        # small updates learn faster than one big one, and playing stays batched.
        order = torch.randperm(view.shape[0], device=self.device, generator=self.generator)
        total = torch.zeros((), device=self.device)
        for idx in order.chunk(self.minibatches):
            share = ep.batch * idx.numel() / view.shape[0]  # games' worth of moves in this step
            loss = weighted_cross_entropy(self.logits(view[idx]), targets[idx],
                                          scaled[idx].abs()).sum() / share
            raw_opt.zero_grad()
            self.manual_backward(loss)
            raw_opt.step()
            total += loss.detach()
        return total

    # ------------------------------------------------------------------ position table

    def positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The learner's decision positions: (P, 9) mover's views and the (3^9,) map from a
        view's code (``view_code``) to its row (-1: not a decision position)."""
        if self._positions is None or self._positions[0].device != self.device:
            t = game.tables(self.device)
            side = torch.ones_like(t.done)  # seat both, or self-play: every position
            if self.seat in ("x", "o") and not isinstance(self.opponent, SelfPlay):
                side = t.mover == (game.X if self.seat == "x" else game.O)
            codes = torch.nonzero(t.reachable & ~t.done & side).squeeze(-1)
            views = t.view[codes]
            row_of = torch.full((game.N_CODES,), -1, dtype=torch.long, device=self.device)
            row_of[view_code(views)] = torch.arange(codes.numel(), device=self.device)
            self._positions = (views.float(), row_of)
        return self._positions

    @torch.no_grad()
    def act_from_table(self, view: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """``act`` with the logits looked up in this batch's table instead of a forward pass."""
        # Finished games ride along in lockstep; their boards have no row (-1), and whatever
        # is drawn for them is ignored: row 0 stands in.
        rows = self.positions()[1].index_select(0, view_code(view)).clamp_min(0)
        logits = self._table.index_select(0, rows)  # (B, 9), masked
        if self.temperature <= 0:
            return logits.argmax(-1)
        return sample(logits, self.generator, self.temperature)

    def _learn_by_position(self, raw_opt, games: int, results: list) -> torch.Tensor:
        """Play ``games`` games from the position table, then one optimiser step on the
        per-move loss summed per position. Returns the loss (mean per game)."""
        views, row_of = self.positions()
        logits = self.logits(views)  # (P, 9) with autograd: reused for the update
        # Acting is always masked; without the masked softmax, mask the same logits here.
        table = logits.detach()
        self._table = table if self.masked_softmax else table.masked_fill(views != 0, MASKED)
        ep = play_batch(games, self.act_from_table, self.opponent, self.seat, self.device,
                  self.generator)
        results.append(ep)
        view, legal, action, scaled = self.move_batch(ep)
        # Sum over moves of |r| * target, per position: sum_m |r_m| CE(t_m) at a position is
        # CE against the summed targets, because CE is linear in its target.
        weighted = antirez_targets(action, legal, scaled) * scaled.abs()[:, None]  # (M, 9)
        target = torch.zeros_like(logits).index_add_(0, row_of[view_code(view)], weighted)
        loss = -(target * F.log_softmax(logits, -1)).sum() / games
        raw_opt.zero_grad()
        self.manual_backward(loss)
        raw_opt.step()
        return loss.detach()

    def _faithful_step(self, opt):
        """``games_per_update`` games, each learned from move by move as the seed does."""
        if faithful.supports(self.net) and isinstance(self.opponent, RandomOpponent) \
                and self.seat in ("x", "o"):
            return self._faithful_fast()
        raw_opt = opt.optimizer  # the plain SGD: Lightning's wrapper costs more than the step
        results = []
        total = torch.zeros((), device=self.device)
        for _ in range(self.games_per_update):
            ep = play_batch(1, self.act, self.opponent, self.seat, self.device, self.generator)
            view, legal, action, scaled = self.move_batch(ep)
            targets = antirez_targets(action, legal, scaled)
            for i in range(view.shape[0]):  # one SGD step per move, in playing order
                loss = weighted_cross_entropy(self.logits(view[i:i + 1]), targets[i:i + 1],
                                              scaled[i:i + 1].abs()).sum()
                raw_opt.zero_grad()
                self.manual_backward(loss)
                raw_opt.step()
                total += loss.detach()
            results.append(ep)
        merged = _concat(results)
        self.log_rollout(merged, {"loss": total / merged.batch, "lr": torch.tensor(self.lr)})


    def _faithful_fast(self):
        """The same loop in NumPy on the network's own weights (``algos/faithful.py``)."""
        seed = int(torch.randint(2**62, (1,), generator=self.generator))  # keeps runs reproducible
        seat = game.X if self.seat == "x" else game.O
        with torch.no_grad():
            s = faithful.train_games(self.net, self.games_per_update, self.reward, self.lr, seat,
                                     np.random.default_rng(seed))
        n = self.games_per_update
        rates = {"win_rate": s["win"] / n, "loss_rate": s["loss"] / n, "tie_rate": s["tie"] / n}
        self.log_results(n, rates, {"loss": torch.tensor(s["loss_sum"] / n),
                                    "lr": torch.tensor(self.lr)})


def _concat(eps):
    """Join single-game ``Episodes`` along the batch axis (for logging the faithful mode)."""
    from ..rollout import Episodes

    fields = {}
    for name in Episodes.__dataclass_fields__:
        parts = [getattr(e, name) for e in eps]
        fields[name] = torch.cat(parts, dim=1 if parts[0].dim() >= 2 else 0)
    return Episodes(**fields)
