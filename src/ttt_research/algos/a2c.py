"""Synchronous advantage actor-critic (``algo=a2c``), masked, GAE optional.

A2C (Mnih et al. 2016, the synchronous form of A3C, as SB3 and CleanRL write it): play a
batch of games with the current policy, then one gradient step on

    loss = -mean(A * log pi(a|s)) + vf_coef * 0.5 * mean((V - R)^2) - ent_coef * entropy

over the learner's moves: no importance ratio, no clipping, no second pass over the batch.
The advantages come from PPO's ``gae`` with ``gae_lambda`` (1.0, SB3's A2C default: the
Monte-Carlo return minus the value; below 1, GAE's trade of bias for variance).
``minibatches`` > 1 cuts the batch into that many steps, each on its own moves (one pass:
the later ones learn from a policy one step older, as A3C's workers do).

Everything that is not the loss is PPO's (``algos/ppo.py``): the masked policy, the value
network, the per-side episodes and GAE, the heads run once per distinct position, the
population's per-member steps. What A2C lacks beside PPO is the ratio's clip, hence the
several epochs over a batch that the clip makes safe: each batch of games is learned from once.

Any m,n,k board (``game``, a ``board.Game``): PPO's way, every (..., 9) is (..., cells) and the
policy runs once per ply on the live games (another board's positions are too many to table).
"""

from __future__ import annotations

from functools import partial

import torch

from ttt_research.algos.base import Run, Update, per_member
from ttt_research.algos.ppo import PPO, explained_variance, mean_last, normalise, take_rows, value_loss
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.rollout import play_batch
from ttt_research.models import member_optim


def policy_gradient_loss(logp: torch.Tensor, adv: torch.Tensor,
                         valid: torch.Tensor | None = None) -> torch.Tensor:
    """A2C's policy term, to minimise: -mean(A * log pi(a|s)) over the last axis (a
    population's (N, M) moves give (N,) losses; ``valid``: its real moves)."""
    return mean_last(-adv * logp, valid)


class A2C(PPO):
    """``algo=a2c``: one actor-critic gradient step per batch of games (per minibatch)."""

    name = "a2c"  # its algo= option: in checkpoints, ONNX metadata and console lines

    # Every hyperparameter's default is in algos/a2c_spec.py (Hyper): written once, there.
    def __init__(self, net, *, games_per_update: int, lr: float, lr_final: float | None,
                 gamma: float, gae_lambda: float, ent_coef: float, ent_final: float | None,
                 vf_coef: float, minibatches: int, max_grad_norm: float, masking: bool,
                 shared_trunk: bool, norm_adv: bool, optimizer,
                 value_net: torch.nn.Module | None = None, game: Game = TIC_TAC_TOE):
        super().__init__(net, games_per_update=games_per_update, lr=lr, lr_final=lr_final, gamma=gamma,
                         gae_lambda=gae_lambda, clip=1.0, ent_coef=ent_coef, ent_final=ent_final,
                         vf_coef=vf_coef, epochs=1, minibatches=minibatches,
                         max_grad_norm=max_grad_norm, masking=masking, shared_trunk=shared_trunk,
                         norm_adv=norm_adv, optimizer=optimizer, value_net=value_net,
                         game=game)  # clip: unused

    def update(self, run: Run) -> Update:
        opt = run.optimizer()
        lr = run.scheduled(self.lr, self.lr_final)
        ent_coef = run.scheduled(self.ent_coef, self.ent_final)
        member_optim.set_lr(opt.optimizer, lr)
        if self.game == TIC_TAC_TOE:
            views, row_of = run.positions()
            with torch.no_grad():  # the policy is fixed while the batch is played
                table = self.logits(views).reshape(-1, views.shape[-1])  # (P, 9) or (N P, 9)
            act = partial(self.act_from_table, table=table, row_of=row_of, streams=run.streams)
        else:  # another board: a pass per ply over the live games (PPO's ``update``)
            act = partial(self.act, streams=run.streams)
        ep = play_batch(self.games_per_update, act, run.opponent, run.seat, run.device, run.streams,
                        self.game)
        mv = self.trajectories(ep, run.reward)  # (N, M) moves, their advantages and returns
        view, code, action, legal = mv.x, mv.code, mv.action, mv.choices
        N = mv.take.shape[0]
        sums = torch.zeros(3, N, device=run.device)  # policy loss, value loss, entropy
        n = torch.zeros(N, device=run.device)  # (N,) steps each member took
        ent_coef_m = per_member(ent_coef, sums[0])
        explained = None
        order = run.streams.randperm(mv.counts.tolist())  # (N, M): each member's shuffle
        for j in range(self.minibatches):
            cut = self.minibatch(order, mv.counts, j)
            if cut is None:
                break
            idx, ok = cut
            pick = partial(take_rows, index=idx)
            logp, v, ent = self._heads(pick(view), pick(code), pick(action), pick(legal), ok)
            a = normalise(pick(mv.adv), ok) if self.norm_adv else pick(mv.adv)
            pg = policy_gradient_loss(logp, a, ok)
            vl = value_loss(v, pick(mv.ret), ok)
            loss = pg + self.vf_coef * vl - ent_coef_m * ent  # (N,): one per member
            opt.zero_grad(set_to_none=True)
            run.backprop(loss.sum())  # a member's gradient is its own loss's
            if self.max_grad_norm > 0:
                run.clip_grad_norm(opt, self.max_grad_norm)
            opt.step(**({} if ok is None else {"only": ok.any(-1).cpu()}))
            with torch.no_grad():
                sums += torch.stack((pg, vl, ent)).detach()
                if j == 0:  # of the critic that gave this batch's advantages (all of it, or a chunk)
                    explained = explained_variance(v, pick(mv.ret), ok)
            n += 1 if ok is None else ok.any(-1).float()
        with torch.no_grad():
            sums = sums / n.clamp_min(1)
            stats = dict(zip(("policy_loss", "value_loss", "entropy"), sums.unbind(), strict=True))
            if explained is not None:
                stats["explained_variance"] = explained
            stats["lr"] = torch.as_tensor(lr)
            stats["ent_coef"] = torch.as_tensor(ent_coef)
        return Update(ep.batch, ep.rates(), stats, moves=mv.counts)
