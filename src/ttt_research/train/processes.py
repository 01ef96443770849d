"""The processes of a run (``trainer=ddp``): how many there are, and what they share: one
tensor from each, one object from each, the mean of some numbers over all, and a
population's members gathered from every process's share at the end. Without DDP each is
the process's own value. A part of ``RLModule`` (``train/module.py``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ttt_research.models.stacks import blank_like


class Processes:
    """``RLModule``'s part that speaks to the other processes."""

    @property
    def processes(self) -> int:
        """Training processes (DDP's world size; 1 before the module is given a Trainer)."""
        return self._trainer.world_size if self._trainer is not None else 1

    @property
    def split(self) -> bool:
        """A population whose members are shared out over processes (trainer=ddp)."""
        return self.stacked and self.processes > 1

    def _per_process(self, value: torch.Tensor) -> list[torch.Tensor]:
        """One ``value`` from every process, in rank order (a list of one without DDP)."""
        if self.trainer.world_size == 1:
            return [value]
        value = value.to(self.device)  # NCCL gathers CUDA tensors only
        gathered = [torch.empty_like(value) for _ in range(self.trainer.world_size)]
        dist.all_gather(gathered, value)
        return [g.cpu() for g in gathered]

    def gather_objects(self, obj) -> list:
        """One picklable ``obj`` from every process, in rank order (a list of one alone)."""
        if self._trainer is None or self.trainer.world_size == 1:
            return [obj]
        out = [None] * self.trainer.world_size
        dist.all_gather_object(out, obj)
        return out

    def mean_over_processes(self, values: torch.Tensor) -> torch.Tensor:
        """(K, ...) numbers of this process -> their means over all processes (DDP), one all-reduce."""
        if self.processes == 1 or self._trainer is None:
            return values
        return self.trainer.strategy.reduce(values, reduce_op="mean")

    def gather_population(self) -> dict:
        """Every process's members, for the run folder: the stacked weights of each process's
        share (state dicts, in rank order), and the members, games, stops and activity."""
        shares = self.gather_objects({
            "net": {k: v.detach().cpu() for k, v in self.net.state_dict().items()},
            "members": self.members, "member_games": self.member_games.clone(),
            "active": self.active.clone(), "stopped": dict(self.stopped)})
        net = blank_like(self.net, self.population_size)  # an MLPStack, or a QTableStack
        with torch.no_grad():
            for name, p in net.state_dict().items():  # parameters and buffers (a table's visits)
                p.copy_(torch.cat([s["net"][name] for s in shares]))
        return {"net": net.to(self.device), "members": [m for s in shares for m in s["members"]],
                "member_games": torch.cat([s["member_games"] for s in shares]),
                "active": torch.cat([s["active"] for s in shares]),
                "stopped": {k: v for s in shares for k, v in s["stopped"].items()}}
