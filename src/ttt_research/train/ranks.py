"""Which process of a run this is: the first, which owns the run folder and writes its files,
or a later one (a DDP rank, a SLURM task). Standard library only, so the command can ask
before torch and Lightning load."""

from __future__ import annotations

import os


def secondary() -> bool:
    """Whether this process is a DDP rank > 0 or a SLURM task > 0 of a run whose first
    process owns the folder (Lightning reruns the command for local ranks > 0 with
    ``LOCAL_RANK`` set; torchrun and SLURM set ``RANK`` / ``SLURM_PROCID`` for every task)."""
    for var in ("LOCAL_RANK", "RANK", "NODE_RANK", "SLURM_PROCID"):
        value = os.environ.get(var, "0")
        if value.isdigit() and int(value) > 0:
            return True
    return False
