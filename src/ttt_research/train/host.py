"""The machine a result came from: what ``run.json`` records of a run's host
(``run_json_host``) and what ``bench`` says of its own (``machine``, with the load before it
measured and ``busy_warning``).

Float sums depend on SIMD width, so two results compare bit for bit only on the same kind of
host with the same threads: ``run.json`` names the CPU, its SIMD level and the thread count.
A benchmark on a busy host (other work on the cores) is low on every figure: its load is
recorded and, above ``BUSY``, named on stderr.
"""

from __future__ import annotations

import os
import platform

import lightning as L
import torch


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_json_host() -> dict:
    """``run.json``'s ``host``: the host a run ran on, CPU model and SIMD level (torch's
    kernels), threads, versions, and the GPU when one is used."""
    info = {"cpu": cpu_model(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__, "lightning": L.__version__}
    if torch.cuda.is_available():
        info["cuda_device"] = torch.cuda.get_device_name()
    return info


# A 1-minute load above this share of the logical CPUs means other work is running: two torch
# runs on a 2-core host each keep under a third of their speed (docs/reliability.md#busy-hosts).
BUSY = 0.5


def machine() -> dict:
    """The machine a benchmark's figures belong to: CPU model, logical CPUs, and its load now."""
    return {"cpu": cpu_model() or "unknown", "logical_cpus": os.cpu_count(), "system": platform.system(),
            "load": host_load()}


def host_load() -> dict | None:
    """The load averages over 1, 5 and 15 minutes, the logical CPUs, and whether the host is
    busy (1-minute load above ``BUSY`` per CPU); None where the OS has no load average."""
    try:
        one, five, fifteen = os.getloadavg()
    except (OSError, AttributeError):  # Windows
        return None
    cpus = os.cpu_count() or 1
    return {"1min": round(one, 2), "5min": round(five, 2), "15min": round(fifteen, 2),
            "logical_cpus": cpus, "busy": one > BUSY * cpus}


def busy_warning(load: dict | None) -> str | None:
    """The stderr warning for a busy host (None when it is not, or its load is unknown)."""
    if not load or not load["busy"]:
        return None
    return (f"warning: the host is busy before the bench starts (load {load['1min']:.2f} over 1 min on "
            f"{load['logical_cpus']} logical CPU(s), above {BUSY:g} per CPU): other work shares the "
            "cores and every figure will be low; rerun on an idle host")
