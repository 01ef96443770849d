"""Masked DQN (``algo=dqn``): a Q network on the project's nets, replay, a target network.

Each update plays ``games_per_update`` complete games (``rollout.play_batch``) with an
epsilon-greedy policy over the online net's Q values (epsilon annealed linearly over the
first ``epsilon_fraction`` of the budget, then held), turns the learner's moves into
transitions, pushes them into a replay ring, and, once the ring holds ``warmup_games``
games' worth, takes ``gradient_steps`` Adam steps on minibatches of ``batch_size``
transitions drawn uniformly from it. The pieces are small pure functions, each checked by
a test on hand-built numbers:

* ``transitions`` (``env/transitions.py``, shared with qlearning): the learner's moves on
  the (T, N, B) grid of plies x games -> (s, a, R, s', discount, done). Against a fixed
  opponent the game is an MDP from the learner's view: its step is its move *plus the
  opponent's reply*, so s' is its next decision position, two plies later, and the only
  reward is the game's result (``reward.of``) at its last move. With ``opponent=self`` the
  learner moves at every ply and the step is one ply (negamax): s' is the opponent's view
  and its value counts negated (discount -gamma). ``n_step`` > 1: R sums n of the
  learner's steps (the result if the game ends within them, discounted), and s' is the
  position n steps on.
* ``td_target``: R + discount * Q_target(s', a*), a* the online net's argmax over the legal
  cells of s' (double DQN) or the target net's own (``double=false``); 0 after a terminal move.
  The legal cells of s' are its empty ones: the net masks the rest (``MASKED``), so an
  occupied cell is never the max, whatever the net says of it.
* ``symmetries`` (off by default): each sampled transition is turned by one of the board's
  symmetries at random (``MNK.symmetries``: 8 on a square, 4 on a rectangle, where a quarter
  turn would swap rows and columns), s, a and s' alike (``turned``, ``turned_cell``), so what
  is learned of one corner opening is learned of all four.
* ``huber``: the loss of Q(s, a) against the target (``huber_delta``). Beyond delta the
  gradient is clipped, so the fit leans from the mean towards the median: with a loss worth
  -5 a rare loss is then underweighted and a risky move looks better than it is.

    Note on masking: the behaviour never chooses an occupied cell (epsilon draws uniform
    over the empty ones, the greedy move is the masked argmax) and no target bootstraps from
    one, so the Q net only ever learns values of legal moves.

The replay is preallocated tensors, a ring per member (``Replay``: (N, capacity, ...)), a
child module, so its buffers (and the counters of games and gradient steps) land in the
checkpoint beside ``net.*`` and ``target_net.*``: a resumed run samples what it would have.
A population's members each fill and sample only their own ring, from their own stream.

Any m,n,k board (``game``, a ``board.Game``): every (..., 9) is (..., cells), the replay's
records hold views of the board's cells, and the games read the Q values from a pass per ply
over the live games (tic-tac-toe's from a table of its 4,520 decision positions, once an
update; another board's positions are too many to table: 9M on 4,4,4).
"""

from __future__ import annotations

import copy
from functools import partial

import torch
import torch.nn.functional as F

from ttt_research.algos.base import Algorithm, Run, Update, epsilon_greedy, lookup, number
from ttt_research.algos.replay import Ring
from ttt_research.env.board import TIC_TAC_TOE, Game, symmetries, turned, turned_cell
from ttt_research.env.opponents import SelfPlay
from ttt_research.env.rollout import play_batch
from ttt_research.env.streams import uniform
from ttt_research.env.transitions import transitions
from ttt_research.evaluation.exploit import Acting
from ttt_research.models import member_optim

# ----------------------------------------------------------------------------- the terms


def td_target(reward: torch.Tensor, discount: torch.Tensor, q_next_online: torch.Tensor,
              q_next_target: torch.Tensor, double: bool = True) -> torch.Tensor:
    """R + discount * Q_target(s', a*): a* = argmax of the online net's masked values (double
    DQN) or of the target's own; (..., cells) masked values of s'. ``discount`` 0 (terminal) cuts it."""
    if double:
        best = q_next_online.argmax(-1, keepdim=True)
        boot = q_next_target.gather(-1, best).squeeze(-1)
    else:  # the net has already masked the occupied cells (``MASKED``): a plain max
        boot = q_next_target.max(-1).values
    return reward + torch.where(discount == 0, 0.0, discount * boot)


def huber(q: torch.Tensor, target: torch.Tensor, delta: float = 1.0) -> torch.Tensor:
    """Huber loss over the last axis, (N, K) -> (N,) one per member: 0.5 e^2 for |e| <= delta,
    delta (|e| - 0.5 delta) beyond (``torch.nn.functional.huber_loss``)."""
    return F.huber_loss(q, target, reduction="none", delta=delta).mean(-1)


# ----------------------------------------------------------------------------- the replay


class Replay(Ring):
    """A ring of ``capacity`` transitions per member (``algos/replay.py``) of a board of
    ``cells`` cells, and the counters of games played and gradient steps taken."""

    def __init__(self, n: int, capacity: int, cells: int = TIC_TAC_TOE.cells):
        super().__init__(n, capacity, {
            "view": ((cells,), torch.int8), "action": ((), torch.int8), "reward": ((), torch.float32),
            "next_view": ((cells,), torch.int8), "discount": ((), torch.float32), "done": ((), torch.bool)})
        self.register_buffer("games", torch.zeros((), dtype=torch.long))  # games pushed (per member)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))  # gradient steps taken

    def push(self, tr: dict) -> None:
        """Write (M,) transitions (``transitions``' dict), each into its member's ring."""
        super().push(tr["member"], tr)


# ----------------------------------------------------------------------------- the algorithm


class DQN(Algorithm):
    name = "dqn"

    def __init__(self, net, *, games_per_update: int, lr: float,
                 lr_final: float | None, gamma: float, epsilon: float,
                 epsilon_final: float, epsilon_fraction: float,
                 capacity: int, batch_size: int,
                 warmup_games: int, gradient_steps: int, target_every: int,
                 tau: float | None, double: bool, n_step: int,
                 max_grad_norm: float, huber_delta: float, symmetries: bool,
                 game: Game = TIC_TAC_TOE):
        super().__init__(net, games_per_update, game)
        self.lr, self.lr_final = number(lr), lr_final  # a number, or a population's (N,)
        self.gamma = float(gamma)
        self.epsilon, self.epsilon_final = number(epsilon), epsilon_final
        self.epsilon_fraction = float(epsilon_fraction)
        if not 0 < self.epsilon_fraction <= 1:
            raise ValueError(f"algo.epsilon_fraction must be in (0, 1], got {epsilon_fraction}")
        self.batch_size, self.warmup_games = int(batch_size), int(warmup_games)
        self.gradient_steps, self.target_every = int(gradient_steps), int(target_every)
        self.tau = None if tau is None else float(tau)
        self.double, self.n_step = bool(double), int(n_step)
        self.max_grad_norm = float(max_grad_norm)
        self.huber_delta = float(huber_delta)
        self.symmetries = bool(symmetries)
        # The target starts as the online net (a copy: no random draw, so a population's
        # member starts as its single run does) and only ever moves by copying it.
        self.target_net = copy.deepcopy(net).requires_grad_(False)
        self.replay = Replay(getattr(net, "n", 1), capacity, game.cells)

    def configure_optimizers(self):
        return member_optim.adam(self.net, self.net.parameters(), lr=self.lr)

    @torch.no_grad()
    def action_values(self, view: torch.Tensor) -> torch.Tensor:
        """The online net's masked Q values: its estimate of each move's return."""
        return self.net(view).float()

    @torch.no_grad()
    def act(self, view, legal, table, row_of, epsilon, streams):
        return epsilon_greedy(lookup(table, view, row_of).argmax(-1), legal, epsilon, streams)

    @torch.no_grad()
    def act_live(self, view, legal, epsilon, streams):
        """``act`` with the values of a pass over the live games' views (another board's)."""
        return epsilon_greedy(self.net(view).argmax(-1), legal, epsilon, streams)

    def acting(self, run: Run) -> Acting:
        """Epsilon-greedy on the online net's values at its scheduled epsilon: with the
        default schedule, greedy at the end."""
        return Acting(temperature=0.0, epsilon=self.scheduled_epsilon(run.progress))

    def scheduled_epsilon(self, progress: float):
        """Epsilon at ``progress`` (share of the budget played): linear from ``epsilon`` to
        ``epsilon_final`` over the first ``epsilon_fraction`` of the budget, then held."""
        if self.epsilon_final is None:
            return self.epsilon
        return self.epsilon + min(1.0, progress / self.epsilon_fraction) * (self.epsilon_final - self.epsilon)

    def sync_target(self) -> None:
        """Hard copy of the online net into the target (``tau`` None), or Polyak averaging."""
        with torch.no_grad():
            for t, o in zip(self.target_net.parameters(), self.net.parameters(), strict=True):
                if self.tau is None:
                    t.copy_(o)
                else:
                    t.lerp_(o, self.tau)

    def update(self, run: Run) -> Update:
        opt = run.optimizer()
        lr = run.scheduled(self.lr, self.lr_final)
        member_optim.set_lr(opt.optimizer, lr)
        epsilon = self.scheduled_epsilon(run.progress)
        if self.game == TIC_TAC_TOE:
            # The online net is fixed while the batch is played: its values at every decision
            # position once, and the games read them (the same numbers as a forward per ply).
            views, row_of = run.positions()
            with torch.no_grad():
                table = self.net(views).reshape(-1, views.shape[-1])
            act = partial(self.act, table=table, row_of=row_of, epsilon=epsilon, streams=run.streams)
        else:  # another board: a pass per ply over the live games (its positions are too many to table)
            act = partial(self.act_live, epsilon=epsilon, streams=run.streams)
        ep = play_batch(self.games_per_update, act, run.opponent, run.seat, run.device, run.streams,
                        self.game)
        self_play = isinstance(run.opponent, SelfPlay)
        self.replay.push(transitions(ep, run.reward, self_play, self.gamma, self.n_step))
        self.replay.games += ep.batch
        N = ep.outcome.shape[0]
        sums = torch.zeros(3, N, device=run.device)  # loss, |td error|, Q(s, a)
        steps = 0
        if int(self.replay.games) >= self.warmup_games:
            for _ in range(self.gradient_steps):
                sums += self.learn(run, opt)
                steps += 1
        sums = sums / max(steps, 1)
        terms = dict(zip(("loss", "td_error", "q_mean"), sums.unbind(0), strict=True))  # (N,) each
        terms["epsilon"] = torch.as_tensor(epsilon, dtype=torch.float32)
        terms["lr"] = torch.as_tensor(lr, dtype=torch.float32)
        return Update(ep.batch, ep.rates(), terms, moves=ep.learner.sum((0, 2)))

    def learn(self, run: Run, opt) -> torch.Tensor:
        """One gradient step on a minibatch per member; (3, N) loss, mean |TD error|, mean Q."""
        b = self.replay.sample(self.batch_size, run.streams)
        if self.symmetries:  # each transition turned by one of the board's symmetries, at random
            shape, device = b["action"].shape, b["action"].device  # (N, K)
            sym = symmetries(self.game, device)  # (S, cells): 8 on a square, 4 on a rectangle
            S = sym.shape[0]
            k = (uniform(shape, device, run.streams) * S).long().clamp(max=S - 1)
            b["view"], b["next_view"] = turned(b["view"], k, sym), turned(b["next_view"], k, sym)
            b["action"] = turned_cell(b["action"], k, sym)
        with torch.no_grad():
            nxt = b["next_view"].float()
            target = td_target(b["reward"], b["discount"], self.net(nxt) if self.double else None,
                               self.target_net(nxt), self.double)
        q = self.net(b["view"].float()).gather(-1, b["action"].long()[..., None]).squeeze(-1)  # (N, K)
        loss = huber(q, target, self.huber_delta)  # (N,)
        opt.zero_grad(set_to_none=True)
        run.backprop(loss.sum())  # a member's gradient is its own loss's
        if self.max_grad_norm > 0:
            run.clip_grad_norm(opt, self.max_grad_norm)
        opt.step()
        self.replay.steps += 1
        if self.tau is not None or int(self.replay.steps) % self.target_every == 0:
            self.sync_target()
        with torch.no_grad():
            return torch.stack((loss, (q - target).abs().mean(-1), q.mean(-1))).detach()
