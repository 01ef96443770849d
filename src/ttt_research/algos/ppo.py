"""PPO with action masking (``algo=ppo``), written out as in the paper.

Each training step plays ``games_per_update`` complete games (``rollout.play_batch``), sampling
the learner's moves from its masked policy, then runs ``epochs`` passes of
``minibatches`` clipped-surrogate updates over the learner's moves. The pieces are small
pure functions, one per term, each checked by a test on hand-computed numbers:

* ``gae``: generalised advantage estimation over each side's own moves. An episode, for
  a side, is the sequence of positions where *it* is to move; the opponent's replies are
  part of the environment. The only reward is the game's result, at the side's last move.
* ``policy_loss``: ``max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps))``.
* ``value_loss``: ``0.5 * (V - R)^2``.
* ``masked_entropy``: the entropy over legal moves only.

    Note on masking: illegal moves get a logit of -1e9 before the softmax, so they have
    probability 0, contribute nothing to the entropy, and their gradient is 0. The policy
    never wastes capacity learning the rules, which is most of what makes a masked agent
    learn faster than one penalised for illegal moves (Huang & Ontanon, 2020).

With ``masking=false`` the policy samples from all 9 logits; an occupied cell forfeits the
game (``game.step``'s rule) with ``reward.illegal``.

Self-play (``opponent=self``): the learner plays both sides, and both sides' moves are
learned from, each with its own result.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import game
from ..nets import MLP, sample
from ..rollout import Episodes, play_batch
from .base import RLModule, Update

# ----------------------------------------------------------------------------- the terms


def gae(reward: torch.Tensor, value: torch.Tensor, mask: torch.Tensor, last: torch.Tensor,
        gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns over one side's moves on a (T, B) grid of plies x games.

    Args:
        reward: (T, B) reward received after each move (non-zero at a side's last move).
        value: (T, B) value estimates before each move.
        mask: (T, B) bool, the side moved at this ply.
        last: (T, B) bool, this was the side's last move in the game.
    Returns:
        (advantages, returns), (T, B), zero where ``mask`` is False.

    Backwards over plies: delta = r + gamma * V(next own position) - V, and
    A = delta + gamma * lam * A(next own move), both cut at the side's last move.
    """
    T, B = mask.shape
    adv = torch.zeros_like(value)
    next_value = torch.zeros(B, device=value.device)
    next_adv = torch.zeros(B, device=value.device)
    for t in range(T - 1, -1, -1):
        go_on = (~last[t]).float()
        delta = reward[t] + gamma * next_value * go_on - value[t]
        a = delta + gamma * lam * go_on * next_adv
        m = mask[t]
        adv[t] = torch.where(m, a, 0.0)
        next_value = torch.where(m, value[t], next_value)
        next_adv = torch.where(m, a, next_adv)
    return adv, torch.where(mask, adv + value, 0.0)


def policy_loss(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor,
                clip: float) -> torch.Tensor:
    """PPO's clipped surrogate, to minimise: mean of max(-A r, -A clip(r))."""
    ratio = torch.exp(logp - logp_old)
    return torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()


def value_loss(v: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
    """0.5 * mean squared error of the value estimates against the returns."""
    return 0.5 * ((v - ret) ** 2).mean()


def masked_entropy(logits: torch.Tensor, legal: torch.Tensor,
                   weight: torch.Tensor | None = None) -> torch.Tensor:
    """Mean entropy of the policy over legal moves. (M, 9) logits, (M, 9) legal; with
    (M,) ``weight``, the weighted mean (row i counted ``weight[i]`` times)."""
    logp = F.log_softmax(logits, -1)
    h = -(logp.exp() * logp).where(legal, 0.0).sum(-1)
    return h.mean() if weight is None else (h * weight).sum() / weight.sum()


def normalise(x: torch.Tensor) -> torch.Tensor:
    """Advantage normalisation: zero mean, unit standard deviation (a single value: 0)."""
    if x.numel() < 2:
        return x - x.mean()
    return (x - x.mean()) / (x.std() + 1e-8)


def explained_variance(v: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
    """1 - Var(R - V) / Var(R): 1 is a perfect critic, 0 no better than a constant."""
    var = ret.var()
    return 1 - (ret - v).var() / var if var > 0 else torch.zeros((), device=v.device)


# ----------------------------------------------------------------------------- the module


class PPO(RLModule):
    """The LightningModule for ``algo=ppo`` (manual optimisation)."""

    name = "ppo"  # its algo= option: in checkpoints, ONNX metadata and console lines

    def __init__(self, *args, lr: float = 1e-3, lr_final: float | None = None,
                 gamma: float = 1.0, gae_lambda: float = 0.95, clip: float = 0.2,
                 ent_coef: float = 0.01, ent_final: float | None = None, vf_coef: float = 0.5,
                 epochs: int = 4, minibatches: int = 4, max_grad_norm: float = 0.5,
                 masking: bool = True, shared_trunk: bool = False, norm_adv: bool = True,
                 optimizer=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lr, self.lr_final = float(lr), lr_final
        self.gamma, self.gae_lambda, self.clip = float(gamma), float(gae_lambda), float(clip)
        self.ent_coef, self.ent_final, self.vf_coef = float(ent_coef), ent_final, float(vf_coef)
        self.epochs, self.minibatches = int(epochs), int(minibatches)
        self.max_grad_norm = float(max_grad_norm)
        self.masking, self.shared_trunk, self.norm_adv = bool(masking), bool(shared_trunk), bool(norm_adv)
        self.optimizer_factory = optimizer
        spec = self.net.spec()
        if self.shared_trunk:  # one body, two heads
            self.value_head = torch.nn.Linear(self.net.body[-1].in_features, 1)
        else:  # a separate network of the same shape, as in the seed
            self.value_net = MLP(spec["hidden"], spec["encoding"], outputs=1)
        self.save_hyperparameters(ignore=["net", "opponent", "reward", "optimizer"])

    def configure_optimizers(self):
        if self.optimizer_factory is None:
            return torch.optim.Adam(self.parameters(), lr=self.lr, fused=True)
        return self.optimizer_factory(self.parameters(), lr=self.lr)

    # ------------------------------------------------------------------ acting

    def logits(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) view -> (B, 9) logits the policy samples from (masked unless masking=false)."""
        return self.net(view) if self.masking else self.net.raw_logits(view)

    def value(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) view -> (B,) value estimates from the mover's side."""
        if self.shared_trunk:
            return self.value_head(self.net.trunk(view)).squeeze(-1)
        return self.value_net.raw_logits(view).squeeze(-1)

    @torch.no_grad()
    def act(self, view: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """Sample from the policy by the Gumbel-max trick: argmax(logits + Gumbel noise)."""
        return sample(self.logits(view), self.generator)

    # ------------------------------------------------------------------ learning

    def trajectories(self, ep: Episodes):
        """Flatten the learned-from moves of ``ep`` with their advantages and returns."""
        T, B = ep.learner.shape
        ply_side = torch.where(torch.arange(T, device=self.device) % 2 == 0, game.X, game.O)
        side = ply_side[:, None].expand(T, B)  # (T, B) who moved at each ply
        winner = ep.outcome * ep.seat  # (B,) from X's side
        with torch.no_grad():
            value = torch.zeros(T, B, device=self.device)
            value[ep.learner] = self.value(ep.view[ep.learner].float())
        adv = torch.zeros(T, B, device=self.device)
        ret = torch.zeros(T, B, device=self.device)
        for s in (game.X, game.O):  # each side is its own episode
            mask = ep.learner & (side == s)
            if not bool(mask.any()):
                continue
            # The side's last move: no move of its own follows in the same game.
            later = mask.flip(0).long().cumsum(0).flip(0) - mask.long()
            last = mask & (later == 0)
            result = (winner * s).to(torch.int8)
            r_game = self.reward.of(result, ep.forfeit & (result < 0))  # (B,)
            reward = torch.where(last, r_game[None], 0.0)
            a, r = gae(reward, value, mask, last, self.gamma, self.gae_lambda)
            adv, ret = adv + a, ret + r
        m = ep.learner
        return ep.view[m].float(), ep.legal[m], ep.action[m], adv[m], ret[m]

    def _heads(self, view: torch.Tensor, code: torch.Tensor, action: torch.Tensor,
               legal: torch.Tensor):
        """Per move: log-probability of its action, value, and the legal log-probs' entropy.

        A batch of moves repeats positions (every game starts on the empty board), so the
        networks run once per distinct position (``code``) and the results are gathered
        per move: the same numbers and gradients as running them on every move, for a
        fraction of the work. Returns (logp (M,), value (M,), entropy (0-dim)).
        """
        uniq, inv = torch.unique(code, return_inverse=True)
        first = torch.empty(uniq.numel(), dtype=torch.long, device=view.device)
        first.scatter_(0, inv, torch.arange(code.numel(), device=view.device))
        u = view[first]
        logp_u = F.log_softmax(self.logits(u), -1)  # (U, 9)
        logp = logp_u.flatten()[inv * 9 + action]
        count = torch.bincount(inv, minlength=uniq.numel()).float()
        # masked_entropy over every move = its per-position values weighted by their counts
        ent = masked_entropy(logp_u, legal[first], count)
        return logp, self.value(u)[inv], ent

    def update(self) -> Update:
        opt = self.optimizers()  # Lightning's wrapper: precision and accelerator plugins apply
        lr = self.scheduled(self.lr, self.lr_final)
        ent_coef = self.scheduled(self.ent_coef, self.ent_final)
        for group in opt.param_groups:
            group["lr"] = lr
        ep = play_batch(self.games_per_update, self.act, self.opponent, self.seat, self.device,
                  self.generator)
        view, legal, action, adv, ret = self.trajectories(ep)
        legal = legal if self.masking else torch.ones_like(legal)
        code = game.view_code(view)  # (M,) equal codes, equal positions
        with torch.no_grad():
            logp_old, value_old, _ = self._heads(view, code, action, legal)
        sums = torch.zeros(5, device=self.device)  # pg, vl, entropy, approx_kl, clip fraction
        n = 0
        for _ in range(self.epochs):
            order = torch.randperm(view.shape[0], device=self.device, generator=self.generator)
            for idx in order.chunk(self.minibatches):
                logp, v, ent = self._heads(view[idx], code[idx], action[idx], legal[idx])
                a = normalise(adv[idx]) if self.norm_adv else adv[idx]
                pg = policy_loss(logp, logp_old[idx], a, self.clip)
                vl = value_loss(v, ret[idx])
                loss = pg + self.vf_coef * vl - ent_coef * ent
                opt.zero_grad(set_to_none=True)
                self.manual_backward(loss)
                self.clip_gradients(opt, gradient_clip_val=self.max_grad_norm,
                                    gradient_clip_algorithm="norm")
                opt.step()
                with torch.no_grad():
                    log_ratio = logp - logp_old[idx]
                    ratio_m1 = log_ratio.exp() - 1
                    sums += torch.stack((pg, vl, ent, (ratio_m1 - log_ratio).mean(),
                                         (ratio_m1.abs() > self.clip).float().mean())).detach()
                n += 1
        with torch.no_grad():
            sums = sums / n
            stats = dict(zip(("policy_loss", "value_loss", "entropy", "approx_kl",
                              "clip_fraction"), sums.unbind(), strict=True))
            # Of the critic that produced this batch's advantages (as SB3 reports it).
            stats["explained_variance"] = explained_variance(value_old, ret)
            stats["lr"] = torch.tensor(lr)
            stats["ent_coef"] = torch.tensor(ent_coef)
        # The learner's moves are PPO's environment steps (SB3's unit): the base counts them.
        return Update(ep.batch, ep.rates(), stats, moves=ep.learner.sum())

    def extra_report(self) -> dict[str, float]:
        """Without masking: how often the raw policy would pick an occupied cell."""
        return {} if self.masking else {"raw_illegal_move_rate": self.raw_illegal_rate()}

    @torch.no_grad()
    def raw_illegal_rate(self) -> float:
        """Share of decision positions where the unmasked argmax is an occupied cell."""

        from ..evaluate import greedy_actions

        _, raw_illegal = greedy_actions(lambda v: self.net.raw_logits(v.to(self.device)))
        codes = game.tables().reachable & ~game.tables().done
        return float(raw_illegal[codes].double().mean())

