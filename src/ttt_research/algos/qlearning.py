"""Tabular Q-learning (``algo=qlearning``): one value per (position, move), learned by TD.

The learner keeps Q(s, a), the return it expects after playing ``a`` in ``s`` and then
playing greedily, in the reward table's units, in a ``models.qtable.QTable``: a (3^9, 9)
table indexed by the mover's view code, so one table serves both seats. Its greedy policy
(argmax of the masked values, ties to the lowest cell) is what the exact evaluation, the
export and the play commands see.

One update:

1. **Play** ``games_per_update / rollouts`` games with ``env.rollout.play_batch``, all at
   once (a population's members each their own, one batch; an update plays ``rollouts``
   such batches, learning from each before the next), acting epsilon-greedy on the table:
   with probability epsilon a move uniform over the legal cells, else the greedy one.
   Epsilon is annealed linearly over the budget from ``epsilon`` to ``epsilon_final``.
2. **Transitions**, one per learner move, from the ``Episodes`` record (``env/transitions.py``,
   shared with DQN):

   * against a fixed opponent the game is an MDP from the learner's side: its step is its
     move *and the opponent's reply*, so s' is its next decision state in that game, two
     plies later, and the step is terminal when it has no next move (the game ended with
     its move or with the reply); the reward is the reward table's value of the game's end
     (``run.reward.of``, a forfeit included), given on the terminal step only;
   * in self-play (``opponent=self``: the learner moves for both sides) the negamax form:
     s' is the very next ply, where the *opponent* is to move; its best value is the
     opponent's, so the mover's is its negation. Exact for a zero-sum table
     (``reward=zero_sum``); under a table where a loss costs more than a win gains, the
     negation values the opponent's win at ``-win``, not at ``loss``.

3. **Targets** (``td_targets``): r on a terminal step; else ``gamma * max_a' Q(s', a')``
   (self-play: ``-gamma * max``), the max over the legal cells of s' only (``masked_max``:
   an occupied cell is never bootstrapped from, whatever its value). All targets come from
   the table as it was before the update.

       Note: this is the classic one-step Q-learning target, off-policy: it bootstraps
       from the greedy value of s' whichever move the epsilon-greedy behaviour then plays,
       so what it learns is the greedy policy's value against this opponent.

4. **Step** (``averaged_step``): each (s, a) played in the batch moves towards the *mean*
   of its targets, ``Q[s, a] += lr * (mean target - Q[s, a])``: a move played 300 times
   in a batch takes one step of size ``lr`` towards its average outcome, not the sum of
   300 steps taken from the same value (which overshoots for any lr > 1/300). With
   ``running_mean`` (the default) the step is ``max(lr, c / n)`` for an entry with c
   targets in this batch and n so far: each value is the mean of all the targets it has
   had, until the latest batch would weigh less than ``lr``; then it follows them at rate
   ``lr``, annealed linearly to ``lr_final``.

       Why: against a random opponent a target is one draw of the opponent's reply, and
       the values the moves are told apart by differ by a few hundredths of a win. A fixed
       rate either learns slowly (small) or stays noisy (large); the running mean (the
       classic 1/n step size) takes whole steps on an entry's first targets and shrinks
       its noise like 1/sqrt(n); the floor keeps it following targets that move as the
       values downstream improve (they are bootstrapped, not fixed).

It is not a gradient method: the table is a parameter without gradient, written in place,
and there is no optimiser (``configure_optimizers`` returns None: Lightning then runs
without one). The table and its visit counts are the module's state, so a checkpoint
restores them exactly and a resumed run continues as the uninterrupted one.

Why these defaults (conf/algo/qlearning.yaml, experiments/qlearning/README.md): seat
``both`` (one table for X's and O's positions), reward ``cautious`` (a loss costs five
wins: the reward-optimal agent against a random player is then the unbeatable one at the
win ceilings), gamma 1 (undiscounted: values are comparable with game-theoretic ones).
"""

from __future__ import annotations

import torch

from ttt_research.algos.base import Algorithm, Run, Update, epsilon_greedy, number
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.opponents import SelfPlay
from ttt_research.env.rollout import play_batch, rates
from ttt_research.env.transitions import transitions
from ttt_research.evaluation.exploit import Acting


def masked_max(q: torch.Tensor, view: torch.Tensor) -> torch.Tensor:
    """(M, 9) values of positions and their (M, 9) views -> (M,) the largest value over
    the empty cells (an occupied cell never counts, however large its value)."""
    return q.masked_fill(view != 0, float("-inf")).max(-1).values


def td_targets(next_max: torch.Tensor, has_next: torch.Tensor, reward: torch.Tensor,
               gamma: float, negamax: bool = False) -> torch.Tensor:
    """(M,) TD targets: ``reward`` where the step is terminal (``has_next`` False), else
    ``gamma * next_max`` (``negamax``: the next state is the opponent's, so ``-gamma *
    next_max``). ``next_max`` of a terminal step is ignored (it may be -inf)."""
    sign = -1.0 if negamax else 1.0
    return torch.where(has_next, sign * gamma * torch.nan_to_num(next_max, neginf=0.0), reward)


def averaged_step(q: torch.Tensor, index: torch.Tensor, target: torch.Tensor, lr,
                  visits: torch.Tensor | None = None) -> torch.Tensor:
    """Move the flat table ``q`` (its entries (member, code, cell) in one axis) at ``index``
    (M,) towards ``target`` (M,), in place: each distinct entry once, towards the mean of
    its targets, by ``lr`` (a number, or an (M,) rate per step: its member's). With
    ``visits`` (the flat counts of targets each entry has had, updated here), the rate is
    ``max(lr, c / n)`` for an entry with c targets now and n in all: the running mean of
    all its targets, until that weighs the latest batch less than ``lr``. Returns the (M,)
    values before the step."""
    before = q.index_select(0, index)
    entries, inverse = torch.unique(index, return_inverse=True)
    sums = torch.zeros(entries.numel(), dtype=q.dtype, device=q.device).index_add_(0, inverse, target)
    counts = torch.bincount(inverse, minlength=entries.numel()).to(q.dtype)
    rate = lr if not isinstance(lr, torch.Tensor) else (
        torch.zeros_like(sums).index_copy_(0, inverse, lr.to(q.dtype)))  # a step's member's rate
    if visits is not None:
        visits.index_add_(0, entries, counts)
        rate = torch.maximum(torch.as_tensor(rate, dtype=q.dtype, device=q.device),
                             counts / visits.index_select(0, entries))
    old = q.index_select(0, entries)
    q.index_copy_(0, entries, old + rate * (sums / counts - old))
    return before


class QLearning(Algorithm):
    """``algo=qlearning``: tabular Q-learning, epsilon-greedy, on a ``QTable`` (a stack's
    ``QTableStack``)."""

    name = "qlearning"

    # Every hyperparameter's default is in algos/qlearning_spec.py (Hyper): written once, there.
    def __init__(self, net, *, games_per_update: int, lr: float, lr_final: float | None,
                 epsilon: float, epsilon_final: float | None, gamma: float,
                 running_mean: bool, rollouts: int, game: Game = TIC_TAC_TOE):
        super().__init__(net, games_per_update, game)
        if not hasattr(net, "q"):
            raise ValueError("algo=qlearning learns a table: use net=qtable")
        if game != TIC_TAC_TOE:  # another board's table: a row per reachable position (models/qtable.py)
            net.attach(game)
        self.lr = number(lr)  # a number, or a population's (N,) when members vary it
        self.lr_final = number(lr_final)
        self.epsilon = number(epsilon)
        self.epsilon_final = number(epsilon_final)
        self.gamma = float(gamma)
        self.running_mean = bool(running_mean)
        self.rollouts = max(1, int(rollouts))

    def configure_optimizers(self):
        return None  # the update writes the table itself: nothing for an optimiser to do

    # ------------------------------------------------------------------ acting

    def acting(self, run: Run) -> Acting:
        """Epsilon-greedy on the table at its scheduled epsilon: with the default schedule,
        greedy (epsilon 0) at the end."""
        return Acting(temperature=0.0, epsilon=run.scheduled(self.epsilon, self.epsilon_final))

    @torch.no_grad()
    def act(self, view: torch.Tensor, legal: torch.Tensor, eps, streams) -> torch.Tensor:
        """(B, 9) views (a stack's (N, B, 9)) -> (B,) moves: greedy on the table, or with
        probability ``eps`` (a number or (N,)) a move uniform over the legal cells. A member
        whose ``eps`` is 0 draws nothing, as its single run."""
        q = self.net(view)  # occupied cells masked: never chosen
        return epsilon_greedy(q.argmax(-1), legal, eps, streams)

    # ------------------------------------------------------------------ learning

    @torch.no_grad()
    def update(self, run: Run) -> Update:
        # One update plays ``games_per_update`` games as ``rollouts`` successive batches, each
        # learned from before the next is played: each batch is one backup step, and the
        # shell's fixed costs per update (logging) are paid once, not once per batch.
        games = self.games_per_update // self.rollouts
        outcomes, terms = [], []
        for i in range(self.rollouts):
            ep, done = self._learn(run, games, i * games)
            outcomes.append(ep.outcome)
            terms.append(done)
        mean = {k: sum(t[k] for t in terms) / len(terms) for k in ("td_error", "q_mean")}
        last = terms[-1]
        moves = sum(t["moves"] for t in terms)
        outcome = torch.cat(outcomes, dim=-1)
        return Update(outcome.shape[-1], rates(outcome),
                      {**mean, "epsilon": last["epsilon"], "lr": last["lr"]}, moves=moves)

    def _learn(self, run: Run, games: int, games_ahead: int):
        """Play ``games`` games epsilon-greedy and step the table on their transitions; the
        schedules read at ``games_ahead`` games into the update. Returns the episodes and
        the batch's figures (per member: (N,), or () for a single run)."""
        eps = run.scheduled(self.epsilon, self.epsilon_final, games_ahead)
        lr = run.scheduled(self.lr, self.lr_final, games_ahead)
        ep = play_batch(games, lambda v, legal: self.act(v, legal, eps, run.streams),
                        run.opponent, run.seat, run.device, run.streams, self.game)
        self_play = isinstance(run.opponent, SelfPlay)
        tr = transitions(ep, run.reward, self_play, self.gamma)  # (M,) steps, (M, cells) views
        s, s_next, member = tr["view"], tr["next_view"], tr["member"]
        R, C = self.net.q.shape[-2:]  # rows (tic-tac-toe: its 3^9 view codes) and cells
        q = self.net.q.view(-1, C)  # (N * R, cells): member k's rows are block k
        next_rows = self.net.rows(s_next) + member * R
        target = td_targets(masked_max(q.index_select(0, next_rows), s_next), ~tr["done"],
                            tr["reward"], self.gamma, negamax=self_play)
        index = (self.net.rows(s) + member * R) * C + tr["action"]  # flat (member, row, cell)
        step = lr.to(q.device).index_select(0, member) if isinstance(lr, torch.Tensor) else lr
        before = averaged_step(self.net.q.view(-1), index, target, step,
                               self.net.visits.view(-1) if self.running_mean else None)
        stacked = hasattr(self.net, "n")
        members = self.net.n if stacked else 1

        def per(values: torch.Tensor) -> torch.Tensor:  # (M,) -> each member's mean, (N,) or ()
            sums = torch.zeros(members, device=q.device).index_add_(0, member, values)
            counts = torch.zeros(members, device=q.device).index_add_(0, member, torch.ones_like(values))
            out = sums / counts.clamp_min(1)
            return out if stacked else out.squeeze(0)

        moves = torch.zeros(members, dtype=torch.long, device=q.device).index_add_(
            0, member, torch.ones_like(member))
        return ep, {"td_error": per((target - before).abs()), "q_mean": per(before), "epsilon": eps,
                    "lr": lr, "moves": moves if stacked else moves.squeeze(0)}

    # ------------------------------------------------------------------ values

    @torch.no_grad()
    def action_values(self, view: torch.Tensor) -> torch.Tensor:
        """The table itself: Q(s, a) of every cell of the views (occupied cells: their
        untouched initial value)."""
        return self.net.raw_logits(view).float()
