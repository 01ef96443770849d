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
"""

from __future__ import annotations

import torch


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

    def __init__(self, params, n: int, lr=0.1, momentum: float = 0.0):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        super().__init__(params, lr, n, {"momentum": float(momentum)})

    @torch.no_grad()
    def step(self, closure=None):
        for group, p in self._params():
            lr = _per_member(self.lr.to(p.device, p.dtype), p)
            on = _per_member(self.active.to(p.device), p)
            g = p.grad
            if group["momentum"]:
                state = self.state[p]
                if "momentum_buffer" not in state:
                    buf = torch.where(on, g, 0.0)
                else:
                    buf = torch.where(on, state["momentum_buffer"] * group["momentum"] + g,
                                      state["momentum_buffer"])
                state["momentum_buffer"] = buf
                g = buf
            p.copy_(torch.where(on, p - lr * g, p))


class MemberAdam(_MemberOptimizer):
    """Adam, member k at learning rate ``lr[k]``, as ``torch.optim.Adam`` writes it:
    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, and
    ``p -= lr[k] / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``. The step count t is
    one for all (members step together); an inactive member's moments do not move."""

    def __init__(self, params, n: int, lr=1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        super().__init__(params, lr, n, {"betas": tuple(betas), "eps": float(eps)})

    @torch.no_grad()
    def step(self, closure=None):
        for group, p in self._params():
            b1, b2 = group["betas"]
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p)
                state["exp_avg_sq"] = torch.zeros_like(p)
            state["step"] += 1
            t = state["step"]
            on = _per_member(self.active.to(p.device), p)
            g = torch.where(on, p.grad, 0.0)
            m = torch.where(on, state["exp_avg"].lerp(g, 1 - b1), state["exp_avg"])
            v = torch.where(on, state["exp_avg_sq"] * b2 + (1 - b2) * g * g, state["exp_avg_sq"])
            state["exp_avg"], state["exp_avg_sq"] = m, v
            step_size = _per_member(self.lr.to(p.device, p.dtype), p) / (1 - b1 ** t)
            denom = (v.sqrt() / (1 - b2 ** t) ** 0.5).add_(group["eps"])
            p.copy_(torch.where(on, p - step_size * m / denom, p))
