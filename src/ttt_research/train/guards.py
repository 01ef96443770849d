"""The numerical guard: a non-finite loss term or parameter stops the run (a population:
the member) at the update where it appears, before any checkpoint can store it.

``train/module.py`` calls these at the end of every update, before the callbacks of the
step (exact evaluation, checkpoint) see the module, so the last checkpoint on disk is
always a finite one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ttt_research.errors import NonFiniteError


def check_finite(module, terms: dict[str, torch.Tensor]) -> None:
    """Stop at the first non-finite loss term or parameter, naming the update.

    One synchronisation for all the checks (a (K,) bool tensor read once); parameters are
    the same in every DDP process and the terms are already averaged, so all processes
    stop together.
    """
    params = dict(module.named_parameters())
    finite = torch.stack([torch.isfinite(v).all() for v in terms.values()]
                         + [torch.isfinite(p).all() for p in params.values()])
    if bool(finite.all()):
        return
    bad = int((~finite).nonzero()[0])
    names = list(terms) + list(params)
    what = (f"{names[bad]} = {float(terms[names[bad]])}" if bad < len(terms)
            else f"parameter {names[bad]}")
    raise NonFiniteError(
        f"non-finite value at update {module.update_index + 1} of {module.total_updates} "
        f"(after {module.games_played:,} games): {what}; training stopped")


@dataclass
class Verdict:
    """What the population's guard found in one update: the members to stop ((N,) bool, of this
    process's members) and why each stops, by its index in the population."""

    bad: torch.Tensor
    why: dict[int, str]


def check_members(module, terms: dict[str, torch.Tensor], games: int) -> Verdict | None:
    """A population's guard: which members still training have a non-finite loss term or
    parameter (None: none). It reads the module and writes nothing: the module stops those
    members alone (``RLModule.stop_members``: their parameters and optimiser state zeroed, so no
    checkpoint stores a non-finite value, their games no longer counted, their row in
    population.json saying why) and the others go on.
    """
    n = module.n
    per_term = {k: torch.as_tensor(v, device=module.device).reshape(-1) for k, v in terms.items()}
    per_term = {k: v for k, v in per_term.items() if v.numel() == n}
    stacked = {k: p for k, p in module.named_parameters() if p.dim() and p.shape[0] == n}
    checks = [torch.isfinite(v) for v in per_term.values()]
    checks += [torch.isfinite(p.detach()).flatten(1).all(1) for p in stacked.values()]
    finite = torch.stack(checks)  # (K, N)
    bad = (~finite.all(0)).cpu() & module.active
    if not bool(bad.any()):
        return None
    names = list(per_term) + [f"parameter {k}" for k in stacked]
    why = {}
    for k in bad.nonzero().flatten().tolist():
        first = int((~finite[:, k]).nonzero()[0])
        what = names[first] + (f" = {float(per_term[names[first]][k])}" if first < len(per_term) else "")
        why[module.members[k].index] = (f"non-finite {what} at update {module.update_index + 1} of "
                                         f"{module.total_updates} (after {games:,} games)")
    return Verdict(bad, why)


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
