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

Two ways to run it, one loss (``antirez_loss``):

* **batched**: ``games_per_update`` games per training step, played as
  ``rollouts`` successive batches of games in lockstep; after each batch, ``minibatches``
  optimiser steps on random shares of its moves (the loss is the mean over games). Moves
  are sampled from the masked softmax at ``temperature`` (0 = greedy, the seed's),
  annealed linearly to ``temperature_final`` over the budget when that is set.

    Why anneal: at temperature 1 the rule's fixed point is soft (a loss pushes towards
    *every* other move, like an entropy bonus, and weighs only ``1 / (legal - 1)`` on
    the move itself), so the greedy policy read off it still loses 2-3% of games to the
    random player; a sharp behaviour policy is risk-averse (a loss then costs the played
    move its whole ``|r|``) but stops exploring, and a move that loses now and then in a
    rarely seen position stays the argmax when nothing else is played there. Exploring at 1
    and ending at 0.5 (the default; at 0.1, 0.78 of seeds ended unbeatable, at 0.5 0.88:
    experiments/reinforce_default) gets most of both. Per move, small batches (a few
    hundred games) learned best; the position table below lifts that limit.
* **position table** (``position_table=true``, the default): the same loss, computed per
  *distinct position* rather than per move. At each ply of a batch the network runs once
  on the positions the live games are at (``algos/reached.py``: of the 2,097 where O
  moves, all at first, a few hundred once the policy is sharp), each position's sampling
  distribution is computed once (``table_cdf``) and the games draw their moves from those;
  afterwards the moves' weighted targets are summed per position (``position_targets``,
  from (M,) numbers), so one backward pass over those rows gives exactly the gradient of
  the per-move loss, whatever the number of games. The cost of an update stops growing
  with the batch, which is why the default plays 2 batches of 8,192 games an update with
  one SGD step each (momentum 0.9, the learning rate annealed with ``lr_final``) on two
  layers of 128: on a 2-core Intel Xeon host one agent trains at ~360,000 games per
  second, 3.5x antirez's C program timed in the same run (BENCHMARKS.md), and is
  unbeatable as O in 99 of 100 fresh seeds.

**Symmetries** (``symmetries=true``, off by default): every update also learns each position
turned by the board's symmetries (``MNK.symmetries``: 8 on a square, 4 on a rectangle), its
targets turned alike (``board.every_turn``). With the position table the turned rows' weighted
targets are summed per distinct turned position (``_turned_positions``), so a position gets the
targets of every game played in any of its symmetric siblings, one forward and backward pass
over the distinct ones. The loss terms, with S symmetries:

* a move's term becomes S terms, its position and targets turned by each symmetry, each weighted
  ``1 / S`` (the average over the turns, not their sum): the sum is S times the average, the
  same step as the learning rate times S (8 on a square), so averaging keeps a game's step and
  the learning rates tuned without symmetries; what changes is where the step lands: each
  position of an orbit gets the orbit's mean targets, a rarely reached turn the same as the
  common one.

On one layer of 100 (``conf/tuned/reinforce_mlp100.yaml``, where it is on) it took the fresh
seeds unbeatable as O from 79 of 100 to 99 of 100 (experiments/cells). ``symmetries_until``
(a share of the budget; null: all of it) turns only the batches that start before it: the
later ones learn each position from its own games, as without symmetries.

Any m,n,k board (``game``, a ``board.Game``): every (..., 9) below is (..., cells), and the
position table holds the positions the games reach, found by their view codes
(``reached.ReachedCodes``: another board's decision positions are too many to table).

The seed's own loop, one game and one SGD step per move, is ``algo=reinforce_faithful``
(``algos/reinforce_faithful.py``); it uses the targets and the loss defined here.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from ttt_research.algos.base import (
    Algorithm,
    Run,
    Update,
    epsilon_greedy,
    lookup,
    number,
    per_member,
    table_rows,
)
from ttt_research.algos.reached import ReachedCodes, ReachedTable
from ttt_research.env.board import TIC_TAC_TOE, Game, every_turn, symmetries
from ttt_research.env.reward import Reward
from ttt_research.env.rollout import Episodes, learner_plies, play_batch, rates
from ttt_research.env.streams import inverse_cdf, sample, uniform
from ttt_research.evaluation.exploit import Acting
from ttt_research.models import member_optim
from ttt_research.models.nets import MASKED, MLPStack


def move_importance(ply: torch.Tensor, plies: torch.Tensor) -> torch.Tensor:
    """antirez's scaling: late moves count more. (M,) move index (0-based, both players'
    moves counted) and (M,) moves in the game -> (M,) in [0.5, 1)."""
    return 0.5 + 0.5 * ply.float() / plies.float()


def antirez_targets(action: torch.Tensor, legal: torch.Tensor, scaled: torch.Tensor) -> torch.Tensor:
    """(M,) moves played, (M, 9) legal masks, (M,) scaled rewards -> (M, 9) target rows:
    one-hot on the move when the reward is >= 0, else uniform over the other legal cells
    (all zero when there is no other cell: nothing to learn from a forced move)."""
    played = F.one_hot(action, legal.shape[-1]).bool()
    others = (legal & ~played).float()
    others = others / others.sum(-1, keepdim=True).clamp_min(1.0)
    return torch.where((scaled >= 0)[:, None], played.float(), others)


def antirez_loss(logits: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor,
                 games: float, rows: torch.Tensor | None = None, members: int = 1) -> torch.Tensor:
    """The loss of every REINFORCE path: the moves' cross-entropies against their targets,
    each weighted by its ``|scaled reward|``, summed and divided by ``games``.

    Args:
        logits: (M, 9) one row per move, or (P, 9) one row per position with ``rows``.
        targets: (M, 9) target distributions (``antirez_targets``).
        weight: (M,) ``|scaled reward|`` of each move.
        rows: (M,) the row of ``logits`` each move is played from (None: row m for move m).
        members: a population's N: ``logits`` are then N blocks of rows, one per member, and
            the loss comes back per member, (N,) (their sum is the loss to differentiate:
            each member's gradient is its own loss's).

    The gradient in a move's logits is ``weight * (softmax - target)``: antirez's output
    deltas. With ``rows``, the weighted targets of the moves made from one position are
    summed first; as the cross-entropy is linear in its target, that is the same loss
    and gradient as one term per move, for one forward and backward pass per position.
    """
    weighted = targets * weight[:, None]  # (M, 9)
    if rows is not None:
        weighted = torch.zeros_like(logits).index_add_(0, rows, weighted)  # (P, 9)
    return summed_loss(logits, weighted, games, members)


def summed_loss(logits: torch.Tensor, weighted: torch.Tensor, games: float, members: int = 1,
                member: torch.Tensor | None = None) -> torch.Tensor:
    """``antirez_loss`` from targets already weighted (and summed per row): (R, 9) logits and
    (R, 9) weighted targets -> the loss, or a population's (N,) over its N blocks of rows
    (with ``member``, (R,) each row's member: the rows of the N members in any order)."""
    terms = weighted * F.log_softmax(logits, -1)
    if member is not None:
        return -terms.new_zeros(members).index_add_(0, member, terms.sum(-1)) / games  # (N,)
    if members > 1:
        return -terms.view(members, -1).sum(-1) / games  # (N,)
    return -terms.sum() / games


def position_targets(rows: torch.Tensor, action: torch.Tensor, scaled: torch.Tensor,
                     legal: torch.Tensor) -> torch.Tensor:
    """The moves' weighted targets summed per position, ``index_add`` of ``antirez_targets``
    times ``|scaled|``, built from (M,) numbers only: (M,) rows of the moves' positions, (M,)
    moves, (M,) scaled rewards and the (R, 9) legal cells of the rows -> (R, 9).

    Why not the (M, 9) targets: a batch of 8,192 games has ~33,000 learner moves, and six
    (M, 9) operations per batch cost more than the network's pass over the positions. A
    won move adds ``|r|`` on its own cell; a lost one adds ``|r| / (n - 1)`` on every other
    legal cell, which is the same as adding it on the row's legal cells (one number per row,
    ``index_add`` of (M,)) and taking it back off the played cell."""
    w = scaled.abs()
    n_other = legal.sum(-1).index_select(0, rows) - 1  # (M,) other legal cells (the move was legal)
    # Products with the masks, not torch.where: a NaN reward must reach the loss, where the
    # numerical guard stops the run (a where would turn it into a silent 0).
    spread = w * ((scaled < 0) & (n_other > 0)) / n_other.clamp_min(1)  # (M,)
    own = w * (scaled >= 0) - spread  # (M,) what the played cell gets
    C = legal.shape[-1]  # cells
    flat = torch.zeros(legal.numel(), dtype=w.dtype, device=w.device)
    flat.index_add_(0, rows * C + action, own)
    per_row = torch.zeros(legal.shape[0], dtype=w.dtype, device=w.device).index_add_(0, rows, spread)
    return flat.view(-1, C) + legal * per_row[:, None]  # (R, cells)


def learner_moves(ep: Episodes, reward: Reward, baseline: bool = False):
    """Flatten the learner's moves of ``ep``: (M, 9) views, (M, 9) legal masks, (M,) moves,
    (M,) scaled rewards (the game's reward times ``move_importance``; with ``baseline``,
    the batch's mean reward is subtracted first) and (M,) members who made them (0 for a
    single run; a population's moves come member by member within each ply)."""
    at, scaled = _flat_moves(ep, reward, baseline)
    member = at % ep.outcome.numel() // ep.batch  # 0 for a single run
    C = ep.view.shape[-1]  # cells
    return (ep.view.reshape(-1, C).index_select(0, at).float(), ep.legal.reshape(-1, C).index_select(0, at),
            ep.action.reshape(-1).index_select(0, at), scaled, member)


def _flat_moves(ep: Episodes, reward: Reward, baseline: bool):
    """(M,) flat (ply, member, game) indices of the learner's moves in ``ep`` and (M,) their
    scaled rewards (``learner_moves``' numbers, without the (M, 9) rows and the members)."""
    m = ep.learner  # (T, B), or (T, N, B) for a population
    games = ep.outcome.numel()  # N x B
    at = m.reshape(-1).nonzero().squeeze(1)  # (M,) flat (ply, member, game) of each move
    ply, game_of = at // games, at % games
    plies = ep.plies.reshape(-1).index_select(0, game_of)
    r = reward.of(ep.outcome, ep.forfeit)  # (B,) or (N, B)
    if baseline:  # compare each game with the member's average game in the batch
        r = r - r.mean(-1, keepdim=True)
    r = r.reshape(-1).index_select(0, game_of)
    return at, r * move_importance(ply, plies)


PER_GAME = ("seat", "outcome", "forfeit", "plies")  # Episodes fields without a ply axis


def concat(eps: list[Episodes]) -> Episodes:
    """Join ``Episodes`` along the games axis (one update's batches, for its rates): the
    last axis of the per-game fields, the one after the member axis (if any) of the others."""
    games_axis = eps[0].seat.dim() - 1  # 0, or 1 after a population's member axis
    fields = {}
    for name in Episodes.__dataclass_fields__:
        parts = [getattr(e, name) for e in eps]
        fields[name] = torch.cat(parts, dim=games_axis + (name not in PER_GAME))
    return Episodes(**fields)


class Reinforce(Algorithm):
    """``algo=reinforce``: antirez's loss, batched, from the position table or per move."""

    name = "reinforce"  # its algo= option: in checkpoints, ONNX metadata and console lines

    # Every hyperparameter's default is in algos/reinforce_spec.py (Hyper): written once, there.
    def __init__(self, net, *, games_per_update: int, lr: float, temperature: float,
                 masked_softmax: bool, baseline: bool,
                 minibatches: int, optimizer, temperature_final: float | None,
                 rollouts: int, position_table: bool, momentum: float,
                 lr_final: float | None, epsilon: float, epsilon_final: float | None, symmetries: bool,
                 symmetries_until: float | None, game: Game = TIC_TAC_TOE):
        super().__init__(net, games_per_update, game)
        self.optimizer_factory = optimizer  # a partial (Hydra ``_partial_: true``) or None: SGD
        # A population's members may each set these: then an (N,) tensor (``number``).
        self.lr = number(lr)
        self.momentum = number(momentum)
        self.lr_final = number(lr_final)
        self.temperature = number(temperature)
        self.epsilon = number(epsilon)
        self.masked_softmax = bool(masked_softmax)
        self.baseline = bool(baseline)
        self.minibatches = int(minibatches)
        self.rollouts = max(1, int(rollouts))
        self.position_table = bool(position_table)
        self.symmetries = bool(symmetries)
        self.symmetries_until = number(symmetries_until)
        self.turning = self.symmetries  # this batch learns the turned positions (``anneal`` decides)
        # Temperature annealing: linear in the share of the budget played, from
        # ``temperature`` to ``temperature_final`` (None: constant).
        self.temperature_start = self.temperature
        self.temperature_final = number(temperature_final)
        self.epsilon_start, self.epsilon_final = self.epsilon, number(epsilon_final)  # the same, for epsilon

    def configure_optimizers(self):
        if self.optimizer_factory is None:  # the seed's SGD, here with momentum (a stack's: per member)
            return member_optim.sgd(self.net, self.net.parameters(), lr=self.lr, momentum=self.momentum)
        return self.optimizer_factory(self.net.parameters(), lr=self.lr)

    # ------------------------------------------------------------------ acting

    def logits(self, view: torch.Tensor) -> torch.Tensor:
        return self.net(view) if self.masked_softmax else self.net.raw_logits(view)

    @torch.no_grad()
    def act(self, view: torch.Tensor, legal: torch.Tensor, streams) -> torch.Tensor:
        """(B, 9) view and legal mask -> (B,) moves: greedy, or a softmax sample at
        ``temperature`` drawn by the Gumbel-max trick (argmax of logits/T + Gumbel noise)."""
        return self._draw(self.net(view), streams)  # masked: occupied cells are never chosen

    @torch.no_grad()
    def act_from_table(self, view: torch.Tensor, legal: torch.Tensor, table: torch.Tensor,
                       row_of: torch.Tensor, streams, cdf: torch.Tensor | None = None) -> torch.Tensor:
        """``act`` with the logits looked up in this batch's (P, 9) table (``lookup``); with
        ``cdf`` (``table_cdf``: the table's sampling distributions), moves drawn from it."""
        if cdf is None:
            return self._draw(lookup(table, view, row_of), streams)
        return self._act_from_rows(table, table_rows(view, row_of, table.shape[0]), legal, streams, cdf)

    def _act_from_rows(self, table: torch.Tensor, rows: torch.Tensor, legal: torch.Tensor, streams,
                       cdf: torch.Tensor | None) -> torch.Tensor:
        """Moves of the games whose (..., 9) ``legal`` cells are given, each reading its row
        of ``rows`` (N B,) in the (R, 9) masked logits ``table`` and their ``cdf``
        (``table_cdf``; None: every member greedy)."""
        if cdf is None:
            return self._draw(table.index_select(0, rows).view(legal.shape), streams)
        greedy, some = self._greedy_members()
        u = uniform(tuple(legal.shape[:-1]), legal.device, streams, None if some is None else ~some)
        moves = inverse_cdf(cdf.index_select(0, rows).view(legal.shape), u)
        if some is not None:
            best = table.index_select(0, rows).view(legal.shape).argmax(-1)
            moves = torch.where(per_member(greedy, moves), best, moves)
        return self._explore(moves, legal, streams)

    def table_cdf(self, table: torch.Tensor, member: torch.Tensor | None = None) -> torch.Tensor | None:
        """(R, 9) masked logits -> (R, 9) running sums of their softmax at the temperature,
        computed once per table (``act_from_table``, each ply's reached rows); None when every
        member is greedy (nothing to draw). With members' own temperatures, ``member`` (R,) says
        whose each row is (required then)."""
        t = self.temperature
        if isinstance(t, torch.Tensor):
            if bool((t <= 0).all()):
                return None
            scale = torch.where(t > 0, t, 1.0).index_select(0, member)[:, None]  # (R, 1)
            return torch.softmax(table / scale, -1).cumsum(-1)
        return None if t <= 0 else torch.softmax(table / t, -1).cumsum(-1)

    def _draw(self, logits: torch.Tensor, streams) -> torch.Tensor:
        """Moves from (..., 9) masked logits: a softmax sample at the temperature, and with
        probability ``epsilon`` instead a move uniform over the legal cells."""
        # Why epsilon on top of the softmax: antirez's rule sends a loss's push to *every*
        # other legal cell, so in a rare position the move that loses stays the argmax as
        # long as it is the only one played (its pushes up on the games it wins and down on
        # those it loses balance below 1/2); at a low temperature nothing else is played
        # there. A few uniform moves keep every alternative sampled, and the safe one, when
        # sampled, is pushed up by its own reward.
        return self._explore(self._sample(logits, streams), logits > MASKED / 2, streams)

    def _explore(self, moves: torch.Tensor, legal: torch.Tensor, streams) -> torch.Tensor:
        """``moves``, each replaced with probability ``epsilon`` by a move uniform over the
        (..., 9) ``legal`` cells (``epsilon_greedy``)."""
        if not isinstance(self.epsilon, torch.Tensor) and self.epsilon <= 0:
            return moves  # the default: nothing drawn on the hot path
        return epsilon_greedy(moves, legal, self.epsilon, streams)

    def _greedy_members(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """A population's (N,) temperatures: the members at <= 0 (greedy) and, when some but
        not all are, the same mask on the CPU (the draws skip their streams); (None, None)
        for a single temperature or no greedy member."""
        t = self.temperature
        if not isinstance(t, torch.Tensor):
            return None, None
        greedy = t <= 0  # (N,)
        return greedy, (greedy.cpu() if bool(greedy.any()) else None)

    def acting(self, run: Run) -> Acting:
        """The softmax of the masked logits at its scheduled temperature (0: greedy), with
        ``epsilon`` of moves uniform on top (per member in a population)."""
        t = run.scheduled(self.temperature_start, self.temperature_final)
        return Acting(temperature=t, epsilon=run.scheduled(self.epsilon_start, self.epsilon_final))

    def _sample(self, logits: torch.Tensor, streams) -> torch.Tensor:
        """Moves from (..., 9) masked logits at the current temperature (<= 0: greedy, no
        draw). A population's temperatures are (N,): greedy members take the argmax and
        leave their random stream untouched, as a greedy single run does."""
        t = self.temperature
        if not isinstance(t, torch.Tensor):
            return logits.argmax(-1) if t <= 0 else sample(logits, streams, t)
        greedy, some = self._greedy_members()
        if bool(greedy.all()):
            return logits.argmax(-1)
        drawn = sample(logits, streams, per_member(torch.where(greedy, 1.0, t), logits),
                       members=None if some is None else ~some)
        return torch.where(per_member(greedy, drawn), logits.argmax(-1), drawn)

    def anneal(self, run: Run, optimizer, games_this_update: int = 0) -> None:
        """Set the sampling temperature (and the learning rate, with ``lr_final``) from the
        share of the budget played, counting the games already played in this update (so
        the schedules do not depend on how batches are grouped into updates)."""
        self.temperature = run.scheduled(self.temperature_start, self.temperature_final,
                                         games_this_update)
        if self.epsilon_final is not None:
            self.epsilon = run.scheduled(self.epsilon_start, self.epsilon_final, games_this_update)
        if self.lr_final is not None:
            member_optim.set_lr(optimizer, run.scheduled(self.lr, self.lr_final, games_this_update))
        # symmetries_until: the turns help early (a rare position learns from its common siblings);
        # after it, each position learns from its own games alone.
        until = self.symmetries_until
        self.turning = self.symmetries and (until is None or run.scheduled(0.0, 1.0, games_this_update) < until)

    # ------------------------------------------------------------------ learning

    def update(self, run: Run) -> Update:
        opt = run.optimizer()
        # One update plays ``games_per_update`` games as ``rollouts`` successive batches,
        # each learned from before the next is played: small batches keep the data close
        # to the current policy, and the step's fixed costs (logging) are paid once per
        # step rather than once per batch.
        games = -(-self.games_per_update // self.rollouts)
        results = []
        total = 0.0  # the batches' losses: a number, or a stack's (N,)
        for i in range(self.rollouts):
            self.anneal(run, opt.optimizer, i * games)
            if self.position_table:
                total = total + self._learn_by_position(run, opt, games, results)
                continue
            ep = play_batch(games, partial(self.act, streams=run.streams), run.opponent, run.seat,
                            run.device, run.streams, self.game)
            total = total + self._learn(run, opt, ep)
            results.append(ep)
        # The update's rates over all its batches: only the outcomes need joining.
        outcome = torch.cat([ep.outcome for ep in results], dim=-1)
        steps = self.rollouts * (1 if self.position_table else self.minibatches)
        return Update(outcome.shape[-1], rates(outcome),
                      {"loss": total / steps, "lr": member_optim.learning_rate(opt.optimizer),
                       "temperature": self.temperature})

    def _step(self, run: Run, opt, loss: torch.Tensor) -> None:
        opt.zero_grad()
        run.backprop(loss)
        opt.step()

    def _learn(self, run: Run, opt, ep: Episodes) -> torch.Tensor:
        """``minibatches`` SGD steps on the moves of ``ep``; returns the summed loss."""
        view, legal, action, scaled, _ = learner_moves(ep, run.reward, self.baseline)
        targets = antirez_targets(action, legal, scaled)
        # Several SGD steps per batch of games, each on a random share of the moves: many
        # small updates learn faster than one big one, and playing stays batched.
        order = run.streams.randperm([view.shape[0]])[0]  # a single run's (train/validate.py)
        total = torch.zeros((), device=run.device)
        for idx in order.chunk(self.minibatches):
            share = ep.batch * idx.numel() / view.shape[0]  # games' worth of moves in this step
            v, t, w = view[idx], targets[idx], scaled[idx].abs()
            if self.turning:  # each move learned turned by every symmetry, 1 / S each
                sym = symmetries(self.game, v.device)  # (S, cells)
                S = sym.shape[0]
                v, t, w, share = every_turn(v, sym), every_turn(t, sym), w.repeat_interleave(S), share * S
            loss = antirez_loss(self.logits(v), t, w, share)
            self._step(run, opt, loss)
            total += loss.detach()
        return total

    def _moves_by_row(self, ep: Episodes, run: Run, reached: ReachedTable):
        """The learner's moves of ``ep`` as (M,) rows of the position table (member k's in
        block k), (M,) moves and (M,) scaled rewards. The rows are those the games read while
        they played (``ReachedTable.games_rows``, one (N B,) per ply the learner was asked at),
        not found again from the moves' views (an (M, 9) gather and a code per move)."""
        at, scaled = _flat_moves(ep, run.reward, self.baseline)
        # -1 where the learner was not asked: a move read from there would fail loudly in ``place_of``.
        by_ply = torch.full((ep.view.shape[0], ep.outcome.numel()), -1, dtype=torch.long, device=at.device)
        asked = learner_plies(run.seat, run.opponent, self.game)
        for ply, rows in zip(asked, reached.games_rows, strict=True):
            by_ply[ply] = rows  # (T, N B): the plies the learner was not asked at hold no move of its
        return by_ply.view(-1).index_select(0, at), ep.action.reshape(-1).index_select(0, at), scaled

    def _learn_by_position(self, run: Run, opt, games: int, results: list) -> torch.Tensor:
        """Play ``games`` games from the position table, then one optimiser step on the
        per-move loss summed per position. Returns the loss (mean per game; a stack's (N,)).

        The table is the positions the games reach, computed ply by ply as they are reached
        (``algos/reached.py``): the rows no game reaches add nothing to the gradient."""
        forward = self._logits_by_member
        if self.turning:  # the loss makes its own pass over the turned positions: none kept here
            forward = torch.no_grad()(forward)
        if self.game == TIC_TAC_TOE:
            reached = ReachedTable(forward, *run.positions())
        else:  # another board: the positions found by their codes as the games reach them
            reached = ReachedCodes(forward, self.game)

        def act(view: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
            logits, boards, owner, rows = reached.read(view, legal)  # (R, cells): with autograd
            # Acting is always masked; without the masked softmax, mask the same logits here.
            table = logits.detach()
            if not self.masked_softmax:
                table = table.masked_fill(boards != 0, MASKED)
            with torch.no_grad():
                return self._act_from_rows(table, rows, legal, run.streams, self.table_cdf(table, owner))

        ep = play_batch(games, act, run.opponent, run.seat, run.device, run.streams, self.game)
        results.append(ep)
        rows, action, scaled = self._moves_by_row(ep, run, reached)
        logits, boards, owner = reached.gathered()  # (W, 9) every member's reached rows
        targets = position_targets(reached.place_of(rows), action, scaled, boards == 0)
        share = games
        if self.turning:  # every row turned by every symmetry, each turn weighing 1 / S
            logits, targets, owner = self._turned_positions(boards, targets, owner, reached.members)
            share = games * symmetries(self.game, boards.device).shape[0]
        # Summed per member: a member's loss is the same number whatever shares its process.
        loss = summed_loss(logits, targets, share, reached.members, owner)
        loss = loss if reached.members > 1 else loss[0]
        self._step(run, opt, loss.sum())  # a member's gradient is its own loss's
        return loss.detach()

    def _turned_positions(self, boards: torch.Tensor, weighted: torch.Tensor, owner: torch.Tensor,
                          members: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The (W, cells) reached positions (float views), their (W, cells) weighted targets and
        (W,) members, each turned by every one of the board's S symmetries and summed per distinct
        turned position of a member -> (U, cells) logits of those positions (with autograd), their
        (U, cells) summed targets and (U,) members, member by member.

        Why summed per position: the loss is linear in its targets (``antirez_loss``), so one
        row per distinct position gives the gradient of the W S turned rows in one pass over at
        most all the member's decision positions (tic-tac-toe: 2,097 of O's, however many turns
        of each were reached)."""
        sym = symmetries(self.game, boards.device)  # (S, cells)
        S = sym.shape[0]
        views, weighted = every_turn(boards, sym), every_turn(weighted, sym)  # (W S, cells)
        key = self.game.view_code(views) + owner.repeat_interleave(S) * self.game.view_codes  # (W S,)
        uniq, inv = torch.unique(key, return_inverse=True)  # (U,) sorted: member by member
        summed = weighted.new_zeros(uniq.numel(), weighted.shape[-1]).index_add_(0, inv, weighted)
        first = torch.empty(uniq.numel(), dtype=torch.long, device=key.device)
        first.scatter_(0, inv, torch.arange(inv.numel(), device=key.device))  # a row of each (any: same view)
        who = torch.div(uniq, self.game.view_codes, rounding_mode="floor")  # (U,)
        logits = self._logits_by_member(views.index_select(0, first),
                                        torch.bincount(who, minlength=members).tolist())
        return logits, summed, who

    def _logits_by_member(self, views: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """(R, 9) views, member by member (``counts`` rows each) -> (R, 9) logits."""
        if isinstance(self.net, MLPStack):
            return self.net.by_member(views, counts, masked=self.masked_softmax)
        return self.logits(views)
