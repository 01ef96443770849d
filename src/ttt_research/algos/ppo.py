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

Any m,n,k board (``game``, a ``board.Game``): every shape below is (..., cells). Tic-tac-toe's
games read the policy from a table of its 4,520 decision positions (one pass an update);
another board's are too many to table (9M on 4,4,4), so there the policy runs once per ply
on the live games.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from ttt_research.algos.base import Algorithm, Run, Update, lookup, number, per_member
from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.reward import Reward
from ttt_research.env.rollout import Episodes, play_batch
from ttt_research.env.streams import sample
from ttt_research.evaluation.exact import greedy_actions
from ttt_research.evaluation.exploit import Acting
from ttt_research.models import member_optim
from ttt_research.models.nets import MLP

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


def mean_last(x: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over the last axis; with ``valid`` (same shape, bool), over the valid entries
    only (a population's padded moves)."""
    if valid is None:
        return x.mean(-1)
    return torch.where(valid, x, 0.0).sum(-1) / valid.sum(-1).clamp_min(1)


def var_last(x: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Unbiased variance over the last axis (of the ``valid`` entries)."""
    if valid is None:
        return x.var(-1)
    n = valid.sum(-1, keepdim=True)
    centred = torch.where(valid, x - torch.where(valid, x, 0.0).sum(-1, keepdim=True) / n.clamp_min(1), 0.0)
    return ((centred ** 2).sum(-1, keepdim=True) / (n - 1).clamp_min(1)).squeeze(-1)


def policy_loss(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor,
                clip: float, valid: torch.Tensor | None = None) -> torch.Tensor:
    """PPO's clipped surrogate, to minimise: mean of max(-A r, -A clip(r)) over the last
    axis (a population's (N, M) moves give (N,) losses; ``valid``: see ``mean_last``)."""
    ratio = torch.exp(logp - logp_old)
    return mean_last(torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)), valid)


def value_loss(v: torch.Tensor, ret: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """0.5 * mean squared error of the value estimates against the returns."""
    return 0.5 * mean_last((v - ret) ** 2, valid)


def log_softmax9(logits: torch.Tensor) -> torch.Tensor:
    """``F.log_softmax(logits, -1)`` of (B, 9) or (N, B, 9) logits, on the CPU computed over a
    middle axis: torch's CPU kernel for so short a last axis is several times slower (forward
    and backward of (64, 1,000, 9) on one thread: 14.3 -> 2.4 ms). The same numbers up to float
    rounding; the result is a transposed view (``reshape``, not ``view``)."""
    if logits.is_cuda:  # CUDA's last-axis kernel is its fast one: no transposes
        return F.log_softmax(logits, -1)
    return F.log_softmax(logits.transpose(-1, -2), -2).transpose(-1, -2)


def masked_entropy(logits: torch.Tensor, legal: torch.Tensor,
                   weight: torch.Tensor | None = None) -> torch.Tensor:
    """Mean entropy of the policy over legal moves. (..., M, 9) logits, (..., M, 9) legal;
    with (..., M) ``weight``, the weighted mean (row i counted ``weight[i]`` times; all weights
    0, as for a population's member with no move in a minibatch: 0, not 0/0)."""
    return entropy_of(log_softmax9(logits), legal, weight)


def entropy_of(logp: torch.Tensor, legal: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """``masked_entropy`` from the (..., M, 9) log-probabilities (``log_softmax9`` of the logits)."""
    h = -(logp.exp() * logp).where(legal, 0.0).sum(-1)
    if weight is None:
        return h.mean(-1)
    total = weight.sum(-1)
    return (h * weight).sum(-1) / torch.where(total > 0, total, 1.0)


def normalise(x: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Advantage normalisation over the last axis: zero mean, unit standard deviation (a
    single value: 0). With ``valid``, statistics of the valid entries only."""
    if valid is None:
        if x.shape[-1] < 2:
            return x - x.mean(-1, keepdim=True)
        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-8)
    n = valid.sum(-1, keepdim=True)
    centred = x - torch.where(valid, x, 0.0).sum(-1, keepdim=True) / n.clamp_min(1)
    std = var_last(x, valid).unsqueeze(-1).sqrt()
    return torch.where(n < 2, centred, centred / (std + 1e-8))


def explained_variance(v: torch.Tensor, ret: torch.Tensor,
                       valid: torch.Tensor | None = None) -> torch.Tensor:
    """1 - Var(R - V) / Var(R): 1 is a perfect critic, 0 no better than a constant."""
    var = var_last(ret, valid)
    return torch.where(var > 0, 1 - var_last(ret - v, valid) / var, 0.0)


def take_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """(N, M) or (N, M, 9) per-move values -> the rows ``index`` (N, W) of each member.

    A (N, M, 9) tensor's rows are copied whole (``index_select`` of the (N M, 9) rows): a
    ``gather`` with the index spread over the 9 cells reads it cell by cell, several times
    slower (64 members, 1,900 of 7,600 rows: 13 -> 1.6 ms on one thread). An index past M
    would read the next member's rows, not fail: the callers' indices are below M."""
    if x.dim() == 2:
        return x.gather(1, index)
    N, M = x.shape[:2]
    flat = (index + torch.arange(N, device=index.device)[:, None] * M).reshape(-1)
    return x.reshape(N * M, *x.shape[2:]).index_select(0, flat).view(*index.shape, *x.shape[2:])


class Moves:
    """The learner's moves of one update, member by member: (N, M) rows, M the most moves
    any member made, each member's in playing order (ply, then game) and padded after its
    ``counts`` moves (``valid``; None when every member made M, as a single run always does).

    ``take`` (N, M) says where each row sits on the member's (T x B) grid, so per-ply
    quantities (advantages, returns) are gathered with ``gather``."""

    def __init__(self, take: torch.Tensor, counts: torch.Tensor, valid: torch.Tensor | None,
                 grid_view: torch.Tensor, grid_legal: torch.Tensor, grid_action: torch.Tensor,
                 g: Game = TIC_TAC_TOE):
        self.take, self.counts, self.valid = take, counts, valid
        self.view = take_rows(grid_view, take)  # (N, M, cells) int8
        self.legal = take_rows(grid_legal, take)  # (N, M, cells)
        self.action = grid_action.gather(1, take)  # (N, M)
        self.x = self.view.float()  # (N, M, cells) the networks' input
        self.code = g.view_code(self.x)  # (N, M) equal codes, equal positions
        # Set by ``PPO.trajectories``: the cells the policy picks among, what the batch's policy
        # and critic said of each move, the advantages and the returns.
        self.choices: torch.Tensor | None = None  # (N, M, 9) bool
        self.logp_old: torch.Tensor | None = None  # (N, M)
        self.value_old: torch.Tensor | None = None  # (N, M)
        self.adv: torch.Tensor | None = None
        self.ret: torch.Tensor | None = None

    @classmethod
    def of(cls, ep: Episodes, g: Game = TIC_TAC_TOE) -> Moves:
        """The moves where ``ep.learner`` is set, from (T, N, B) episodes of ``g``."""
        T, N, B = ep.learner.shape
        mask = ep.learner.permute(1, 0, 2).reshape(N, T * B)
        counts = mask.sum(-1)  # (N,)
        width = int(counts.max())
        # A stable sort puts each member's moves first, in grid order (ply, then game).
        take = torch.sort((~mask).to(torch.uint8), dim=1, stable=True).indices[:, :width]
        valid = torch.arange(width, device=mask.device) < counts[:, None]
        grid = lambda x: x.transpose(0, 1).reshape(N, T * B, *x.shape[3:])  # noqa: E731
        return cls(take, counts, None if bool(valid.all()) else valid,
                   grid(ep.view), grid(ep.legal), grid(ep.action), g)

    def gather(self, per_ply: torch.Tensor) -> torch.Tensor:
        """(T, N, B) per-ply values -> (N, M) at the moves."""
        T, N, B = per_ply.shape
        return per_ply.transpose(0, 1).reshape(N, T * B).gather(1, self.take)


# ----------------------------------------------------------------------------- the module


class PPO(Algorithm):
    """``algo=ppo``: the clipped surrogate, GAE, a value network and an entropy bonus."""

    name = "ppo"  # its algo= option: in checkpoints, ONNX metadata and console lines

    # Every hyperparameter's default is in algos/ppo_spec.py (Hyper): written once, there.
    def __init__(self, net, *, games_per_update: int, lr: float, lr_final: float | None,
                 gamma: float, gae_lambda: float, clip: float,
                 ent_coef: float, ent_final: float | None, vf_coef: float,
                 epochs: int, minibatches: int, max_grad_norm: float,
                 masking: bool, shared_trunk: bool, norm_adv: bool,
                 optimizer, value_net: torch.nn.Module | None = None, game: Game = TIC_TAC_TOE):
        super().__init__(net, games_per_update, game)
        # A population's members may each set these: then an (N,) tensor (``number``).
        self.lr = number(lr)
        self.lr_final = lr_final  # (kept as given: a number, None or (N,))
        self.gamma, self.gae_lambda, self.clip = float(gamma), float(gae_lambda), float(clip)
        self.ent_coef = number(ent_coef)
        self.ent_final, self.vf_coef = ent_final, float(vf_coef)
        self.epochs, self.minibatches = int(epochs), int(minibatches)
        self.max_grad_norm = float(max_grad_norm)
        self.masking, self.shared_trunk, self.norm_adv = bool(masking), bool(shared_trunk), bool(norm_adv)
        self.optimizer_factory = optimizer
        if self.shared_trunk:  # one body, two heads
            self.value_head = torch.nn.Linear(self.net.body[-1].in_features, 1)
        elif value_net is not None:  # built by the caller (a population's: each under its seed)
            self.value_net = value_net
        else:  # a separate network of the same shape, as in the seed
            self.value_net = self.companion_nets(self.net)["value_net"]

    @staticmethod
    def companion_nets(net: MLP) -> dict[str, MLP]:
        """The networks built right after the policy (a population builds them per member,
        under the member's seed, so each member starts as its single run does)."""
        spec = net.spec()
        return {"value_net": MLP(spec["hidden"], spec["encoding"], outputs=1, cells=net.cells)}

    def configure_optimizers(self):
        if self.optimizer_factory is None:  # Adam (a stack's: each member at its own rate)
            return member_optim.adam(self.net, self.parameters(), lr=self.lr)
        return self.optimizer_factory(self.parameters(), lr=self.lr)

    # ------------------------------------------------------------------ acting

    def logits(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) view -> (B, 9) logits the policy samples from (masked unless masking=false);
        a population's: (N, B, 9) views (or shared (B, 9)) -> (N, B, 9)."""
        return self.net(view) if self.masking else self.net.raw_logits(view)

    def value(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) view -> (B,) value estimates from the mover's side ((N, B) for a population)."""
        if self.shared_trunk:
            return self.value_head(self.net.trunk(view)).squeeze(-1)
        return self.value_net.raw_logits(view).squeeze(-1)

    @torch.no_grad()
    def act(self, view: torch.Tensor, legal: torch.Tensor, streams) -> torch.Tensor:
        """Sample from the policy by the Gumbel-max trick: argmax(logits + Gumbel noise)."""
        return sample(self.logits(view), streams)

    @torch.no_grad()
    def act_from_table(self, view: torch.Tensor, legal: torch.Tensor, table: torch.Tensor,
                       row_of: torch.Tensor, streams) -> torch.Tensor:
        """``act`` with the logits read from the update's position table (``lookup``)."""
        return sample(lookup(table, view, row_of), streams)

    # ------------------------------------------------------------------ learning

    def trajectories(self, ep: Episodes, reward: Reward) -> Moves:
        """The learned-from moves of ``ep``, member by member, with what the networks that
        played them said (``logp_old``, ``value_old``: one pass per distinct position), and
        their advantages and returns."""
        T, N, B = ep.learner.shape
        device = ep.learner.device
        moves = Moves.of(ep, self.game)
        # the cells the policy picks among (masking=false: every cell)
        moves.choices = moves.legal if self.masking else torch.ones_like(moves.legal)
        with torch.no_grad():  # the batch's policy and critic, once per distinct position
            moves.logp_old, moves.value_old, _ = self._heads(moves.x, moves.code, moves.action,
                                                             moves.choices, moves.valid)
        side = torch.where(torch.arange(T, device=device) % 2 == 0, game.X, game.O)
        side = side.view(T, 1, 1).expand(T, N, B)  # who moved at each ply
        winner = ep.outcome * ep.seat  # (N, B) from X's side
        v = moves.value_old  # the critic's estimates, on a (T, N, B) grid for GAE
        grid = torch.zeros(N, T * B, device=device)
        grid.scatter_(1, moves.take, v if moves.valid is None else v.masked_fill(~moves.valid, 0))
        value = grid.view(N, T, B).transpose(0, 1)
        adv = torch.zeros(T, N, B, device=device)
        ret = torch.zeros(T, N, B, device=device)
        for s in (game.X, game.O):  # each side is its own episode
            mask = ep.learner & (side == s)
            if not bool(mask.any()):
                continue
            # The side's last move: no move of its own follows in the same game.
            later = mask.flip(0).long().cumsum(0).flip(0) - mask.long()
            last = mask & (later == 0)
            result = (winner * s).to(torch.int8)
            r_game = reward.of(result, ep.forfeit & (result < 0))  # (N, B)
            at_last = torch.where(last, r_game[None], 0.0)  # the reward, at the side's last move
            a, r = gae(*(x.reshape(T, N * B) for x in (at_last, value, mask, last)),
                       self.gamma, self.gae_lambda)
            adv, ret = adv + a.view(T, N, B), ret + r.view(T, N, B)
        moves.adv, moves.ret = moves.gather(adv), moves.gather(ret)
        return moves

    def _heads(self, view: torch.Tensor, code: torch.Tensor, action: torch.Tensor,
               legal: torch.Tensor, valid: torch.Tensor | None = None):
        """Per move: log-probability of its action, value, and the legal log-probs' entropy.

        (N, W) moves of each member (``valid``: which are real, None: all). A batch of
        moves repeats positions (every game starts on the empty board), so the networks run
        once per distinct position (``code``) of each member, and the results are gathered
        per move: the same numbers and gradients as running them on every move, for a
        fraction of the work. A population's members have different numbers of distinct
        positions: each member's are padded to the most any has (empty rows, counted 0
        times). Returns (logp (N, W), value (N, W), entropy (N,)).
        """
        N, W = code.shape
        C = view.shape[-1]  # cells
        dev = view.device
        codes = self.game.view_codes  # every view's code is below it
        key = code + torch.arange(N, device=dev)[:, None] * codes  # (N, W) member-major
        uniq, inv = torch.unique(key.reshape(-1), return_inverse=True)  # sorted: member by member
        U = uniq.numel()
        first = torch.empty(U, dtype=torch.long, device=dev)
        first.scatter_(0, inv, torch.arange(N * W, device=dev))
        owner = uniq // codes  # (U,) the member of each distinct position
        per_member = torch.bincount(owner, minlength=N)  # (N,)
        width = int(per_member.max())  # the most distinct positions of any member
        local = torch.arange(U, device=dev) - (per_member.cumsum(0) - per_member)[owner]
        slot = owner * width + local  # (U,) row in the padded (N x width) layout
        u = view.new_zeros(N * width, C).index_copy_(0, slot, view.reshape(-1, C)[first])
        u_legal = legal.new_zeros(N * width, C).index_copy_(0, slot, legal.reshape(-1, C)[first])
        u, u_legal = u.view(N, width, C), u_legal.view(N, width, C)
        at = local[inv].view(N, W)  # each move's row among its member's positions
        logp_u = log_softmax9(self.logits(u)).reshape(N, width * C)
        logp = logp_u.gather(1, at * C + action)
        count = torch.zeros(N, width, device=dev).scatter_add_(
            1, at, torch.ones_like(at, dtype=torch.float32) if valid is None else valid.float())
        # masked_entropy over every move = its per-position values weighted by their counts
        ent = entropy_of(logp_u.view(N, width, C), u_legal, count)
        return logp, self.value(u).view(N, width).gather(1, at), ent

    def minibatch(self, order: torch.Tensor, counts: torch.Tensor, j: int):
        """Minibatch ``j`` of this epoch, per member as ``torch.chunk`` cuts its own shuffled
        moves into ``minibatches`` parts: (N, W) indices into the moves and the (N, W) mask
        of real ones (None when every member has W), or None when no member has one."""
        size = -(-counts // self.minibatches)  # (N,) chunk size of each member
        length = (counts - j * size).clamp(0).minimum(size)  # (N,) moves in this chunk
        width = int(length.max())
        if width == 0:
            return None
        pos = (j * size)[:, None] + torch.arange(width, device=order.device)
        index = order.gather(1, pos.clamp_max(order.shape[1] - 1))
        valid = torch.arange(width, device=order.device) < length[:, None]
        return index, None if bool(valid.all()) else valid

    def update(self, run: Run) -> Update:
        opt = run.optimizer()
        lr = run.scheduled(self.lr, self.lr_final)
        ent_coef = run.scheduled(self.ent_coef, self.ent_final)
        member_optim.set_lr(opt.optimizer, lr)
        if self.game == TIC_TAC_TOE:
            # The policy is fixed while the batch is played: its logits at every decision
            # position, once, and the games read them (the same numbers as a forward per ply).
            views, row_of = run.positions()
            with torch.no_grad():
                table = self.logits(views).reshape(-1, views.shape[-1])  # (P, 9) or (N P, 9)
            act = partial(self.act_from_table, table=table, row_of=row_of, streams=run.streams)
        else:  # another board: a pass per ply over the live games (its positions are too many to table)
            act = partial(self.act, streams=run.streams)
        ep = play_batch(self.games_per_update, act, run.opponent, run.seat, run.device, run.streams,
                        self.game)
        mv = self.trajectories(ep, run.reward)
        view, code, action, legal, valid = mv.x, mv.code, mv.action, mv.choices, mv.valid
        logp_old, value_old = mv.logp_old, mv.value_old
        N = mv.take.shape[0]  # members (1: a single run)
        sums = torch.zeros(5, N, device=run.device)  # pg, vl, entropy, approx_kl, clip fraction
        n = torch.zeros(N, device=run.device)  # (N,) minibatches each member stepped on
        ent_coef_m = per_member(ent_coef, sums[0])
        for _ in range(self.epochs):
            order = run.streams.randperm(mv.counts.tolist())  # (N, M): each member's shuffle
            for j in range(self.minibatches):
                cut = self.minibatch(order, mv.counts, j)
                if cut is None:
                    break
                idx, ok = cut
                pick = partial(take_rows, index=idx)
                logp, v, ent = self._heads(pick(view), pick(code), pick(action), pick(legal), ok)
                a = normalise(pick(mv.adv), ok) if self.norm_adv else pick(mv.adv)
                pg = policy_loss(logp, pick(logp_old), a, self.clip, ok)
                vl = value_loss(v, pick(mv.ret), ok)
                loss = pg + self.vf_coef * vl - ent_coef_m * ent  # (N,): one per member
                opt.zero_grad(set_to_none=True)
                run.backprop(loss.sum())  # a member's gradient is its own loss's
                if self.max_grad_norm > 0:
                    run.clip_grad_norm(opt, self.max_grad_norm)
                # A member with no move in this minibatch does not step (its single run makes
                # fewer steps); a single run's minibatches always hold moves (``ok`` None).
                opt.step(**({} if ok is None else {"only": ok.any(-1).cpu()}))
                with torch.no_grad():
                    log_ratio = logp - pick(logp_old)
                    ratio_m1 = log_ratio.exp() - 1
                    sums += torch.stack((pg, vl, ent, mean_last(ratio_m1 - log_ratio, ok),
                                         mean_last((ratio_m1.abs() > self.clip).float(), ok))).detach()
                n += 1 if ok is None else ok.any(-1).float()  # a member with no move: as its single run
        with torch.no_grad():
            sums = sums / n.clamp_min(1)
            stats = dict(zip(("policy_loss", "value_loss", "entropy", "approx_kl",
                              "clip_fraction"), sums.unbind(), strict=True))
            # Of the critic that produced this batch's advantages (as SB3 reports it).
            stats["explained_variance"] = explained_variance(value_old, mv.ret, valid)
            stats["lr"] = torch.as_tensor(lr)
            stats["ent_coef"] = torch.as_tensor(ent_coef)
        # The learner's moves are PPO's environment steps (SB3's unit): the shell counts them.
        return Update(ep.batch, ep.rates(), stats, moves=mv.counts)

    def acting(self, run: Run) -> Acting:
        """PPO plays a sample of its policy: the softmax of the masked logits."""
        return Acting(temperature=1.0)

    def extra_report(self) -> dict[str, float]:
        """Without masking: how often the raw policy would pick an occupied cell."""
        return {} if self.masking else {"raw_illegal_move_rate": self.raw_illegal_rate()}

    @torch.no_grad()
    def raw_illegal_rate(self) -> float:
        """Share of decision positions where the unmasked argmax is an occupied cell."""
        device = next(self.net.parameters()).device
        if self.game != TIC_TAC_TOE:
            return self._raw_illegal_rate_board(device)
        _, raw_illegal = greedy_actions(lambda v: self.net.raw_logits(v.to(device)))
        codes = game.tables().reachable & ~game.tables().done
        return float(raw_illegal[codes].double().mean())

    def _raw_illegal_rate_board(self, device: torch.device, chunk: int = 1 << 16) -> float:
        """``raw_illegal_rate`` on another board: its tables' rows are its reachable positions,
        read a chunk of rows at a time (4,4,4's 9M decision positions at once: 0.6 GB of views)."""
        t = self.game.tables("cpu")
        rows = (~t.done).nonzero().squeeze(1)  # (P,) the decision positions
        illegal = 0
        for part in rows.split(chunk):
            view = t.view.index_select(0, part).to(device).float()  # (R, cells)
            best = self.net.raw_logits(view).argmax(-1, keepdim=True)
            illegal += int((view.gather(1, best) != 0).sum())
        return illegal / max(1, rows.numel())

