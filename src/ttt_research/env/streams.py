"""Random streams, one per member of a population, drawn as one tensor.

A population of N agents plays its games as one (N, B) batch, but each member must draw
from its *own* random stream, the very one a single run with that member's seed uses: then
member k's first update plays exactly the games of ``seed=<its seed>`` alone, and a member's
results do not depend on who its neighbours are. ``Streams`` holds N ``torch.Generator``s
and answers every draw with an (N, ...) tensor whose row k comes from generator k, in the
order a single run would draw it.

This is the one place where the population code loops over members: torch has no batched
generator with N independent states. The loop fills rows of one preallocated tensor
(``out=``), a few microseconds per member and draw; everything computed from the draws is
batched. A draw can skip members (``members``, an (N,) bool mask): a member that would not
draw in a single run (a greedy one) must not advance its stream here either.

Code that draws takes ``generator`` as either a ``torch.Generator`` (one stream, any shape)
or ``Streams`` (leading axis = members) and calls ``uniform``/``randint``/``randperm`` here,
so one implementation serves a single run and a population. ``sample`` draws moves from
logits with them (Gumbel-max), for the opponents here and the algorithms above.
"""

from __future__ import annotations

import torch

Generator = torch.Generator  # what draws take: a torch.Generator, a Streams, or None


class Streams:
    """N independent random streams on one device; ``seeds[k]`` seeds stream k."""

    def __init__(self, seeds: list[int], device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.generators = []
        for s in seeds:
            g = torch.Generator(device=self.device)
            g.manual_seed(int(s))
            self.generators.append(g)

    @property
    def n(self) -> int:
        return len(self.generators)

    def _each(self, out: torch.Tensor, members: torch.Tensor | None, draw) -> torch.Tensor:
        take = range(self.n) if members is None else members.nonzero().flatten().tolist()
        for k in take:
            draw(self.generators[k], out[k])
        return out

    def rand(self, *shape: int, members: torch.Tensor | None = None) -> torch.Tensor:
        """(N, *shape) uniform floats in [0, 1); rows of members not drawing are 0."""
        out = (torch.empty if members is None else torch.zeros)((self.n, *shape), device=self.device)
        return self._each(out, members, lambda g, o: torch.rand(shape, generator=g, out=o))

    def randint(self, high: int, *shape: int) -> torch.Tensor:
        """(N, *shape) integers in [0, high)."""
        out = torch.empty((self.n, *shape), dtype=torch.long, device=self.device)
        return self._each(out, None, lambda g, o: torch.randint(high, shape, generator=g, out=o))

    def randperm(self, sizes: list[int]) -> torch.Tensor:
        """(N, max(sizes)): row k starts with a permutation of range(sizes[k]) (padded with
        its own indices past ``sizes[k]``, which callers mask)."""
        width = max(sizes)
        out = torch.arange(width, device=self.device).repeat(self.n, 1)
        for k, (g, size) in enumerate(zip(self.generators, sizes, strict=True)):
            out[k, :size] = torch.randperm(size, generator=g, device=self.device)
        return out

    # ------------------------------------------------------------------ checkpoints

    def get_state(self) -> torch.Tensor:
        """(N, L) uint8: every stream's state, stacked (for a checkpoint)."""
        return torch.stack([g.get_state() for g in self.generators])

    def set_state(self, state: torch.Tensor) -> None:
        """Undo ``get_state``; a (L,) state (a single run's older checkpoint) sets stream 0."""
        state = state.reshape(-1, state.shape[-1]) if state.dim() else state
        if state.shape[0] != self.n:
            raise ValueError(f"the checkpoint holds {state.shape[0]} random streams, "
                             f"this run has {self.n} members")
        for g, s in zip(self.generators, state, strict=True):
            g.set_state(s.clone())  # its own storage: set_state ignores a view's offset


def uniform(shape: tuple[int, ...], device: torch.device, generator=None,
            members: torch.Tensor | None = None) -> torch.Tensor:
    """Uniform floats of ``shape``: from one generator, or from ``Streams`` (``shape[0]`` is
    then the number of members, each row from its own stream)."""
    if isinstance(generator, Streams):
        if shape[0] != generator.n:
            raise ValueError(f"a population draw needs the members first: shape {shape}, "
                             f"{generator.n} members")
        return generator.rand(*shape[1:], members=members)
    return torch.rand(shape, device=device, generator=generator)


def randint(high: int, shape: tuple[int, ...], device: torch.device, generator=None) -> torch.Tensor:
    """Integers in [0, high) of ``shape``, as ``uniform`` draws them."""
    if isinstance(generator, Streams):
        return generator.randint(high, *shape[1:])
    return torch.randint(high, shape, device=device, generator=generator)


def sample(logits: torch.Tensor, generator=None, temperature: float | torch.Tensor = 1.0,
           members: torch.Tensor | None = None) -> torch.Tensor:
    """(..., 9) logits -> (...) cells drawn from softmax(logits / temperature), by the
    Gumbel-max trick: argmax of logits / T plus Gumbel noise (masked cells stay at -1e9,
    so they are never drawn). One uniform draw per cell, on the logits' device.

    ``generator``: a ``torch.Generator``, or ``streams.Streams`` for (N, B, 9) logits of a
    population (row k drawn from member k's stream; ``members`` (N,) bool: only those draw).
    ``temperature``: a number, or a tensor that broadcasts against the logits ((N, 1, 1)).
    """
    u = uniform(logits.shape, logits.device, generator, members)
    gumbel = u.clamp_(1e-20, 1.0).log_().neg_().log_()  # log(-log u), in place: a fresh tensor
    return (logits / temperature - gumbel).argmax(-1)


def inverse_cdf(cdf: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """(..., 9) running sums of a distribution's probabilities and (...) uniforms in [0, 1)
    -> (...) cells: the first cell whose running sum exceeds ``u`` times the row's total.

    One uniform per row instead of ``sample``'s nine, and no logarithms: for a table of
    probabilities computed once and read by many games. A cell of probability 0 is never
    drawn (its running sum equals the one before it). The threshold is kept below the total,
    so that a ``u * total`` rounded up to it still lands on the row's last cell of positive
    probability: one (..., 1) operation where a second (..., 9) bound would cost as much as
    the draw. The comparison is summed as the bytes it is (at most 9): a bool sum's default
    int64 first copies it to eight bytes a cell (for 524,288 rows on one thread: 28 ms a draw
    with that copy, 9 ms without)."""
    total = cdf[..., -1:]  # (..., 1)
    below = torch.minimum(u[..., None] * total, torch.nextafter(total, torch.zeros_like(total)))
    return (cdf <= below).view(torch.uint8).sum(-1, dtype=torch.uint8).long()
