"""Optimisers for a population's stacked parameters: one learning rate per member.

A population keeps N members' weights stacked along a first axis (``nets.MLPStack``: a
layer's weight is (N, out, in)). torch's optimisers take one learning rate per parameter
group, and a group cannot split a tensor, so a per-member learning rate needs the update
written out with the rate as an (N,) tensor broadcast over the member axis. These two do
exactly what ``torch.optim.SGD`` (momentum, no dampening, no weight decay) and
``torch.optim.Adam`` (no weight decay, no amsgrad) do to each member's own network with its
own rate, element for element, with no Python loop over members.

``active`` (N,) bool: a member marked inactive (e.g. one that went non-finite) keeps its
parameters and optimiser state exactly as they are, whatever its gradient holds, while the
others go on.

An algorithm does not tell a single run from a stack: ``sgd``, ``adam``, ``set_lr``,
``learning_rate`` and ``clip_grad_norm`` here take the net (or the optimiser) and answer
with torch's own optimiser and rule for a plain ``MLP`` (a single run's numbers stay torch's,
bit for bit) and with the per-member ones for an ``MLPStack``.
"""

from __future__ import annotations

import torch

from ttt_research.models.nets import MLPStack


def _per_member(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(N,) -> (N, 1, ..., 1), broadcastable against a stacked tensor ``like`` (N, ...)."""
    return values.view(-1, *([1] * (like.dim() - 1)))


class _MemberOptimizer(torch.optim.Optimizer):
    """Shared by both: the (N,) learning rates and the ``active`` mask."""

    def __init__(self, params, lr, n: int, defaults: dict):
        super().__init__(params, defaults)
        self.n = int(n)
        self.lr = torch.as_tensor(lr, dtype=torch.float32).expand(self.n).clone()  # (N,)
        self.active = torch.ones(self.n, dtype=torch.bool)

    def stepping(self, like: torch.Tensor, only: torch.Tensor | None) -> torch.Tensor:
        """(N, 1, ...) bool: the members that step now (active, and in ``only`` if given:
        (N,) bool, the members that move this step)."""
        on = self.active if only is None else self.active & only.to(self.active.device)
        return _per_member(on.to(like.device), like)

    def set_lr(self, lr) -> None:
        """Learning rates, a number for all or (N,) one per member (schedules call this)."""
        self.lr = torch.as_tensor(lr, dtype=torch.float32).expand(self.n).clone()

    def _params(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if p.shape[0] != self.n:
                        raise ValueError(f"a stacked parameter's first axis must be the {self.n} "
                                         f"members, got shape {tuple(p.shape)}")
                    yield group, p

    def state_dict(self) -> dict:
        out = super().state_dict()
        out["member_lr"], out["member_active"] = self.lr.clone(), self.active.clone()
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        self.lr = state_dict.pop("member_lr", self.lr).clone()
        self.active = state_dict.pop("member_active", self.active).clone()
        super().load_state_dict(state_dict)


class MemberSGD(_MemberOptimizer):
    """SGD with momentum, member k at learning rate ``lr[k]``:
    ``buf = momentum * buf + g`` (``buf = g`` at the first step), ``p -= lr[k] * buf``."""

    def __init__(self, params, n: int, lr=0.1, momentum=0.0):
        m = torch.as_tensor(momentum, dtype=torch.float32)
        if not bool(((m >= 0) & (m < 1)).all()):
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        super().__init__(params, lr, n, {"momentum": float(m.max())})
        self.momentum = m.expand(self.n).clone()  # (N,) one per member

    @torch.no_grad()
    def step(self, closure=None, only: torch.Tensor | None = None):
        for group, p in self._params():
            lr = _per_member(self.lr.to(p.device, p.dtype), p)
            on = self.stepping(p, only)
            g = p.grad
            if group["momentum"]:  # some member has momentum
                state = self.state[p]
                if "momentum_buffer" not in state:
                    buf = torch.where(on, g, 0.0)
                else:
                    momentum = _per_member(self.momentum.to(p.device, p.dtype), p)
                    buf = torch.where(on, state["momentum_buffer"] * momentum + g,
                                      state["momentum_buffer"])
                state["momentum_buffer"] = buf
                g = buf
            p.copy_(torch.where(on, p - lr * g, p))


class MemberAdam(_MemberOptimizer):
    """Adam, member k at learning rate ``lr[k]``, as ``torch.optim.Adam`` writes it:
    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, and
    ``p -= lr[k] / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``. The step count t is
    each member's own, (N,): a member left out of a step (inactive, or not in ``only``: PPO's
    member with no move in a minibatch, whose single run makes fewer steps) neither moves
    nor counts the step, so its bias corrections stay those of its single run."""

    def __init__(self, params, n: int, lr=1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        super().__init__(params, lr, n, {"betas": tuple(betas), "eps": float(eps)})

    @torch.no_grad()
    def step(self, closure=None, only: torch.Tensor | None = None):
        for group, p in self._params():
            b1, b2 = group["betas"]
            state = self.state[p]
            if not state:
                state["step"] = torch.zeros(self.n, dtype=torch.float32, device=p.device)
                state["exp_avg"] = torch.zeros_like(p)
                state["exp_avg_sq"] = torch.zeros_like(p)
            elif not isinstance(state["step"], torch.Tensor) or state["step"].dim() == 0:
                state["step"] = torch.full((self.n,), float(state["step"]))  # one count for all
            on = self.stepping(p, only)
            state["step"] = state["step"].to(p.device) + on.reshape(-1)
            t = state["step"].double().clamp_min(1)  # (N,); 0: never stepped (and does not now)
            bias1 = _per_member((1 - b1 ** t).to(p.dtype), p)
            bias2_sqrt = _per_member((1 - b2 ** t).sqrt().to(p.dtype), p)
            g = torch.where(on, p.grad, 0.0)
            m = torch.where(on, state["exp_avg"].lerp(g, 1 - b1), state["exp_avg"])
            v = torch.where(on, state["exp_avg_sq"] * b2 + (1 - b2) * g * g, state["exp_avg_sq"])
            state["exp_avg"], state["exp_avg_sq"] = m, v
            step_size = _per_member(self.lr.to(p.device, p.dtype), p) / bias1
            denom = (v.sqrt() / bias2_sqrt).add_(group["eps"])
            p.copy_(torch.where(on, p - step_size * m / denom, p))


@torch.no_grad()
def clip_member_grad_norm(params, max_norm: float, n: int) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for each member of stacked parameters: member k's
    gradient (its slices of every parameter) is scaled to norm ``max_norm`` if it is larger.
    Returns the (N,) norms before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g.reshape(n, -1), dim=1) for g in grads], 1)
    total = torch.linalg.vector_norm(norms, dim=1)  # (N,)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(_per_member(coef.to(g.dtype), g))
    return total


# ----------------------------------------------------------------------------- one interface


def sgd(net: torch.nn.Module, params, lr, momentum) -> torch.optim.Optimizer:
    """SGD with momentum for ``net``'s algorithm: torch's for a plain net, ``MemberSGD`` (each
    member at its own rate and momentum, (N,) or a number) for a stack."""
    if isinstance(net, MLPStack):
        return MemberSGD(params, net.n, lr=lr, momentum=momentum)
    return torch.optim.SGD(params, lr=lr, momentum=momentum)


def adam(net: torch.nn.Module, params, lr) -> torch.optim.Optimizer:
    """Adam: torch's (fused) for a plain net, ``MemberAdam`` for a stack."""
    if isinstance(net, MLPStack):
        return MemberAdam(params, net.n, lr=lr)
    return torch.optim.Adam(params, lr=lr, fused=True)


def set_lr(optimizer: torch.optim.Optimizer, lr) -> None:
    """Set the learning rate: a number for every parameter group, or a stack's (N,)."""
    if isinstance(optimizer, _MemberOptimizer):
        optimizer.set_lr(lr)
    else:
        for group in optimizer.param_groups:
            group["lr"] = lr


def learning_rate(optimizer: torch.optim.Optimizer):
    """The learning rate in use: a number, or a stack's (N,) (for the logs)."""
    if isinstance(optimizer, _MemberOptimizer):
        return optimizer.lr
    return optimizer.param_groups[0]["lr"]


def is_stacked(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` steps a stack's members (one rate, state and step count each)."""
    return isinstance(optimizer, _MemberOptimizer)
