"""The CPUs this process may use, read without torch: the config check bounds ``threads`` by
them (``allowed``) before torch loads, and ``threads=auto`` (``cores.py``) shares them.

``threads=100000000`` asked OpenMP for that many threads and ended in a segmentation fault
(exit 139) once the run folder was claimed; a count above the CPUs this process may run on
(its affinity, ``os.sched_getaffinity``) only makes threads wait for each other, so the
config check refuses it in one line.
"""

from __future__ import annotations

import math
import os


def affinity() -> set[int] | None:
    """The CPUs this process may run on (None where the OS does not say)."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None


def quota_cpus() -> float | None:
    """The CPUs' worth of time the process's cgroup may use (``cpu.max``, cgroup v2, or
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, v1); None without a quota."""
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read())
        period = int(open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError):
        return None


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity (else the host's), capped by its cgroup's
    quota (rounded up)."""
    cpus = allowed()
    quota = quota_cpus()
    return max(1, min(cpus, math.ceil(quota))) if quota is not None else cpus


def allowed() -> int:
    """How many CPUs this process may run on: its affinity (else the host's count). A cgroup's
    CPU quota is not counted: it slows threads beyond it, it does not stop them."""
    return len(affinity() or ()) or os.cpu_count() or 1
