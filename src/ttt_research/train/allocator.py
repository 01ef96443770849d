"""``keep_freed_memory``: a training process keeps the memory it frees for its next tensors.

glibc's ``malloc`` serves every block above its mmap threshold (which grows with use but
never past 32 MiB) with a fresh ``mmap`` and returns it to the kernel on ``free``. A
population's activations pass that size from about 64 members of ``mlp128`` on (64 members x
1,000 positions x 128 units x 4 bytes is 32 MiB), and torch allocates them again every
minibatch: the kernel then zero-fills every page anew, one page fault per 4 KiB. A PPO
population of 64 took 11.5 million page faults to train 20,480 games a member, and 0.4 million
with the blocks kept (93k -> 126k learner steps per second on the 2-core host; BENCHMARKS.md).

So training processes serve every block from the heap (``M_MMAP_MAX`` 0) and never give the
heap's top back (``M_TRIM_THRESHOLD``): freed memory is reused by the next tensor of its size,
and the process's size stays at its peak, which a run reaches in its first update anyway. The
numbers computed do not change. Where the C library has no ``mallopt`` (not glibc) nothing is
done.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt's parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
NEVER_TRIM = 2**31 - 1  # the largest value mallopt takes (an int): 2 GiB of free heap top


def keep_freed_memory() -> bool:
    """Tell glibc's allocator to keep freed blocks for reuse; True where it took the settings."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # no C library found, or one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success, 0 on error
    return mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, NEVER_TRIM) == 1
