"""Issue 60, target 3: the bench's time to a safe agent alone, for the networks and seeds asked,
on a quiet host (the whole bench takes a quarter of an hour more for figures this does not need).

    PYTHONPATH=src python experiments/cells/time_to_safe.py SRC NETS SEEDS OUT.json [--population-only]
    e.g. ... ../shared/reference/antirez-ttt-rl/ttt.c mlp25,mlp100 5 experiments/cells/time_to_safe.json

SRC: antirez's ttt.c (built here, patched and seeded as the bench builds it, once per hidden
size: ``bench/safe.py``'s ``prepare``). Then ``time_to_safe`` exactly as ``bench --compare antirez``
runs it: seed by seed, sides alternating, the C for its 2M games beside one command of ours a
seed, then ours again as one population of those seeds on one thread. Prints the bench's lines
and writes its ``time_to_safe`` block, with the host and the start time, to OUT.json.

``--population-only``: no command of ours a seed (at 1M games a minute each on the 2-core host,
what keeps the bench's seeds few): the C's seeds, then ours as one population of them all
(``time_to_safe(singles=False)``).
"""
import json
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from ttt_research.bench import safe
from ttt_research.errors import UserError

args = [a for a in sys.argv[1:] if a != "--population-only"]
singles = len(args) == len(sys.argv) - 1
src, nets, seeds, out = Path(args[0]), args[1].split(","), int(args[2]), Path(args[3])
started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
begin = time.perf_counter()
try:
    with tempfile.TemporaryDirectory(prefix="ttt-c-") as build:
        binaries = safe.prepare(src, seeds, Path(build), nets, log=print)
        block = safe.time_to_safe(binaries, seeds, nets=nets, log=print, population=True, singles=singles)
except UserError as err:  # a missing source, a failed command (AntirezError too): one line, as the bench's
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)
print("\n".join(safe.format_lines(block)))
cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")), platform.processor())
block.update(host=f"{cpu}, {platform.python_version()}", started=started,
             wall_s=round(time.perf_counter() - begin, 1))
out.write_text(json.dumps(block, indent=1) + "\n")
print(f"wrote {out} ({block['wall_s']:.0f} s)")
