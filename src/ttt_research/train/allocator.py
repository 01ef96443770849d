"""``kept_freed_memory``: while a population trains, its process keeps the memory it frees for
its next tensors.

glibc's ``malloc`` serves every block above its mmap threshold (which grows with use but
never past 32 MiB) with a fresh ``mmap`` and returns it to the kernel on ``free``. A
population's activations pass that size from about 64 members of ``mlp128`` on (64 members x
1,100 positions x 128 units x 4 bytes is 34 MiB), and torch allocates them again every
minibatch: the kernel then zero-fills every page anew, one page fault per 4 KiB. A PPO
population of 64 took 11.5 million page faults to train 20,480 games a member, and 0.4 million
with the blocks kept (93k -> 123-126k learner steps per second on the 2-core host; BENCHMARKS.md).

So while a population trains, every block comes from the heap (``M_MMAP_MAX`` 0) and the
heap's free top is not given back below 2 GiB (``M_TRIM_THRESHOLD``): a freed block is reused
by the next tensor that fits in it. The heap can fragment, so the peak may grow (a PPO
population of 100, 20,480 games a member: 1.77 GB, against the memory estimate's 1.71 GB).
Afterwards glibc's defaults come back and the free memory is returned (``malloc_trim``), so
the next job of a sweep in the same process starts as before. A single run's blocks stay under
the threshold: it is left as it is. The numbers computed do not change. Outside Linux, or
where the C library has no ``mallopt`` (not glibc), nothing is done.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# mallopt's parameters (glibc's malloc.h) and glibc's defaults for them
M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD = -1, 128 * 1024
M_MMAP_MAX, DEFAULT_MMAP_MAX = -4, 65536
KEEP_TOP = 2**31 - 1  # the largest value mallopt takes (an int): free heap top kept up to 2 GiB


def _glibc():
    """The process's C library if it has glibc's ``mallopt`` and ``malloc_trim``, else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the symbols the process already has: its C library's
        libc.mallopt.argtypes, libc.mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = (ctypes.c_size_t,), ctypes.c_int
    except (OSError, AttributeError):  # a C library without them (not glibc)
        return None
    return libc


@contextmanager
def kept_freed_memory(population: bool = True) -> Iterator[bool]:
    """Within: freed blocks kept for reuse, if ``population`` and the C library allows (yields
    whether it did); after: glibc's defaults, and the free memory given back."""
    libc = _glibc() if population else None
    kept = (libc is not None  # mallopt returns 1 on success, 0 on error
            and libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, KEEP_TOP) == 1)
    try:
        yield kept
    finally:
        if libc is not None:
            libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
            libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
            libc.malloc_trim(0)
