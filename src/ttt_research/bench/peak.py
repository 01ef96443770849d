"""The peak resident size of this process since it started its program, in GB.

Linux's ``ru_maxrss`` keeps the largest size the process had before ``exec`` too, so a child
the bench starts (``python -c``) from a parent holding 1.2 GB reports at least 1.2 GB whatever
it used itself. ``VmHWM`` in ``/proc/self/status`` is the high-water mark of the program's own
memory; ``ru_maxrss`` stands in where there is no ``/proc`` (not Linux).
"""
from __future__ import annotations

import resource
from pathlib import Path


def peak_gb() -> float:
    """This program's peak resident size in GB (1e9 bytes)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e9  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
