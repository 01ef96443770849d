"""A replay ring per population member, as preallocated tensors that are checkpointed.

``Ring(n, capacity, fields)`` holds, for each of n members, the last ``capacity`` records
of the named fields (each (n, capacity, *shape) of its dtype, a registered buffer: the
ring lands in the checkpoint and a resumed run samples what it would have). ``push``
writes a batch of records, each into its member's ring at its head, in order; ``sample``
draws each member's minibatch uniformly from its own filled slots, from its own random
stream. DQN keeps transitions in one, AlphaZero positions with their search targets.
"""

from __future__ import annotations

import torch

from ttt_research.env.streams import uniform


class Ring(torch.nn.Module):
    """``capacity`` records per member of ``fields``: name -> (shape of one record, dtype)."""

    def __init__(self, n: int, capacity: int, fields: dict[str, tuple[tuple[int, ...], torch.dtype]]):
        super().__init__()
        self.capacity = int(capacity)
        self.fields = tuple(fields)
        for name, (shape, dtype) in fields.items():
            self.register_buffer(name, torch.zeros(n, self.capacity, *shape, dtype=dtype))
        self.register_buffer("size", torch.zeros(n, dtype=torch.long))  # (N,) filled slots
        self.register_buffer("head", torch.zeros(n, dtype=torch.long))  # (N,) next slot to write

    def push(self, member: torch.Tensor, records: dict[str, torch.Tensor]) -> None:
        """Write (M,) records (``member`` (M,) says whose), each into its member's ring at
        its head, in order; a member with more than ``capacity`` new ones keeps its last."""
        order = torch.argsort(member, stable=True)  # member by member, each in its order
        member = member[order]
        N, C = self.size.shape[0], self.capacity
        count = torch.bincount(member, minlength=N)  # (N,)
        start = count.cumsum(0) - count
        rank = torch.arange(member.numel(), device=member.device) - start[member]  # order within member
        keep = rank >= (count - C)[member]
        slot = (self.head[member] + rank) % C
        m, s = member[keep], slot[keep]
        for name in self.fields:
            buf = getattr(self, name)
            buf[m, s] = records[name][order][keep].to(buf.dtype)
        self.head.copy_((self.head + count) % C)
        self.size.copy_((self.size + count).clamp(max=C))

    def sample(self, batch: int, streams) -> dict[str, torch.Tensor]:
        """(N, batch, ...) records, member k's drawn uniformly from its own ring (its stream)."""
        u = uniform((self.size.shape[0], batch), self.size.device, streams)
        idx = (u * self.size[:, None]).long().minimum((self.size - 1).clamp_min(0)[:, None])  # (N, batch)
        out = {}
        for name in self.fields:
            buf = getattr(self, name)
            extra = buf.dim() - 2
            out[name] = buf.gather(1, idx.view(*idx.shape, *[1] * extra).expand(*idx.shape, *buf.shape[2:]))
        return out
