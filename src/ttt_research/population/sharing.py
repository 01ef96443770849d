"""How a population is shared out between training processes (``trainer=ddp``, SLURM): how
many processes a trainer's devices and nodes make, which rank this process is, and which
members each rank trains. Plain Python over the environment: no torch and no config (the
trainer's settings come read, from ``train/runspec.py``), so the config check can use it
before anything heavy loads.
"""
from __future__ import annotations

import os

from ttt_research.errors import is_int
from ttt_research.population.spec import Member


def processes(devices, nodes) -> int:
    """How many training processes a trainer's ``devices`` (a count, a list of device ids, or
    ``auto``) on ``nodes`` machines make (devices x nodes; 1 device a node when the count is
    only known at run time, e.g. auto)."""
    if isinstance(devices, list | tuple):
        per_node = len(devices)
    else:
        per_node = devices if is_int(devices) and devices > 0 else 1
    return per_node * (nodes or 1)


def shard(members: list[Member], rank: int, processes: int) -> list[Member]:
    """The members process ``rank`` of ``processes`` trains (``trainer=ddp``): consecutive
    shares, as even as they go (the first ``N % processes`` processes one more), so that the
    processes' members joined in rank order are the population in order."""
    size, extra = divmod(len(members), processes)
    start = rank * size + min(rank, extra)
    return members[start:start + size + (rank < extra)]


def rank_from_environment(devices_per_node: int) -> int:
    """This process's global rank, parsed from the environment variables where SLURM and
    Lightning's launchers put it before any Trainer exists: ``SLURM_PROCID`` under SLURM
    (``SLURM_NTASKS`` > 1), else ``NODE_RANK`` (or ``GROUP_RANK``) x ``devices_per_node`` +
    ``LOCAL_RANK`` (0 in the process a user started)."""
    if int(os.environ.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in os.environ:
        return int(os.environ["SLURM_PROCID"])
    node = int(os.environ.get("NODE_RANK", os.environ.get("GROUP_RANK", 0)))
    return node * devices_per_node + int(os.environ.get("LOCAL_RANK", 0))
