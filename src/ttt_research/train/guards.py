"""The numerical guard: a non-finite loss term or parameter stops the run (a population:
the member) at the update where it appears, before any checkpoint can store it.

One check for one agent and many (``check``): it reads the module and writes nothing, and
returns a ``Verdict`` (which members, and the first non-finite value of each); the module
acts on it (``accounting.py``): a single run stops with ``Verdict.error``, a population
stops those members alone. ``train/module.py`` runs it at the end of every update, before
the callbacks of the step (exact evaluation, checkpoint) see the module, so the last
checkpoint on disk is always a finite one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ttt_research.errors import NonFiniteError


@dataclass
class Verdict:
    """What the guard found in one update: the members to stop ((N,) bool, of this process's
    members; a single run: (1,)) and the first non-finite value of each, by its position."""

    bad: torch.Tensor
    what: dict[int, str]
    update: int  # 1-based
    total: int
    games: int

    def why(self, members: list) -> dict[int, str]:
        """Why each bad member stops, by its index in the population (population.json)."""
        return {members[k].index: f"non-finite {what} at update {self.update} of {self.total} "
                                  f"(after {self.games:,} games)" for k, what in self.what.items()}

    def error(self) -> NonFiniteError:
        """A single run's end: the update and the first non-finite value, in one line."""
        return NonFiniteError(f"non-finite value at update {self.update} of {self.total} (after "
                              f"{self.games:,} games): {self.what[0]}; training stopped")


def check(module, terms: dict[str, torch.Tensor], games: int) -> Verdict | None:
    """Which members still training have a non-finite loss term or parameter (None: none).

    ``terms``: each a number per member, (N,) (``accounting`` repeats a number the update
    gives for all members, so a non-finite one stops them all; a term of another size is
    not read); a parameter is a member's when its leading axis is the members' (a stack),
    and every parameter is a single run's. Every term of the update is read, ``train/*`` and
    those in their own namespace (``search/*``) alike. One
    synchronisation for all the checks (a (K, N) bool tensor read once). In a single run
    under DDP the terms are already averaged and the parameters are the same in every
    process, so all processes reach the same verdict.
    """
    n = module.n
    per_term = {k: torch.as_tensor(v, device=module.device).reshape(-1) for k, v in terms.items()}
    per_term = {k: v for k, v in per_term.items() if v.numel() == n}
    params = {k: p.detach().reshape(n, -1) for k, p in module.named_parameters()
              if not module.stacked or (p.dim() and p.shape[0] == n)}  # name -> (N, size)
    checks = [torch.isfinite(v) for v in per_term.values()]
    checks += [torch.isfinite(p).all(1) for p in params.values()]
    finite = torch.stack(checks)  # (K, N)
    bad = (~finite.all(0)).cpu() & module.active
    if not bool(bad.any()):
        return None
    names = list(per_term) + [f"parameter {k}" for k in params]
    what = {}
    for k in bad.nonzero().flatten().tolist():
        first = int((~finite[:, k]).nonzero()[0])
        what[k] = names[first] + (f" = {float(per_term[names[first]][k])}" if first < len(per_term) else "")
    return Verdict(bad, what, module.update_index + 1, module.total_updates, games)


def none_left(stopped: dict[int, str], update: int) -> NonFiniteError:
    """The error that ends a population whose every member went non-finite."""
    return NonFiniteError(f"every member of the population went non-finite by update {update}: "
                          + "; ".join(f"member {k}: {why}" for k, why in sorted(stopped.items())))

@torch.no_grad()
def zero_members(module, members: torch.Tensor) -> None:
    """Zero the stacked parameters and optimiser state of ``members`` ((N,) bool), and
    tell the optimisers to leave them alone."""
    n = module.n

    def zero(t: torch.Tensor) -> None:
        if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == n:
            t.copy_(torch.where(members.view(-1, *([1] * (t.dim() - 1))).to(t.device), 0, t))

    for p in module.parameters():
        zero(p)
    for opt in module.trainer.optimizers:
        for state in opt.state.values():
            for value in state.values():
                zero(value)
        if hasattr(opt, "active"):
            opt.active &= ~members.to(opt.active.device)
