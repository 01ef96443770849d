"""train/allocator.py: a training process keeps the large blocks it frees, so torch's next
tensor of that size reuses their pages instead of faulting in fresh zeroed ones."""

import subprocess
import sys

import pytest

# Allocate, touch and free a 64 MiB tensor 10 times, then 10 more, counted: print the minor
# page faults those took. (The heap settles in the first few: glibc still gives back some.)
SCRIPT = """
import resource, sys, torch
from ttt_research.train.allocator import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else False
for _ in range(10):  # before counting: the heap grows to the size
    torch.empty(16 * 2**20).fill_(1.0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    torch.empty(16 * 2**20).fill_(1.0)  # 64 MiB, 16,384 pages of 4 KiB
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES = 16 * 2**20 * 4 // 4096  # one allocation's pages


def faults(mode: str) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    kept, n = out.stdout.split()
    return kept == "True", int(n)


def test_freed_blocks_are_reused_instead_of_faulted_in_again():
    kept, with_keep = faults("keep")
    if not kept:
        pytest.skip("this C library has no mallopt (not glibc)")
    _, plain = faults("plain")
    assert plain > 10 * PAGES  # glibc by default: each 64 MiB block mapped anew, every page faulted
    assert with_keep < PAGES  # kept: the 10 allocations reuse the same pages
