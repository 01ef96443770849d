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
what keeps the bench's seeds few): per network, the C's first half of the seeds, ours as one
population of all of them, the C's second half (so a drift of the host's speed falls on both
sides), and the same summaries (``bench/safe.py``: ``summary``, ``population_summary``).
"""
import json
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from ttt_research.bench import safe

args = [a for a in sys.argv[1:] if a != "--population-only"]
only_population = len(args) < len(sys.argv) - 1
src, nets, seeds, out = Path(args[0]), args[1].split(","), int(args[2]), Path(args[3])
started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
begin = time.perf_counter()


def population_only(binaries: dict, tmp: Path) -> dict:
    """Per network: the C's seeds around ours as one population (see the module)."""
    base = safe.SEED_BASE
    all_seeds = list(range(base, base + seeds))
    block = {"seeds": all_seeds, "safe": safe.SAFE, "algo": "reinforce", "games": safe.SAFE_GAMES,
             "networks": {}}
    for name, hidden in safe.hidden_sizes(nets).items():
        width = safe.c_width(hidden)
        c_runs, half = [], seeds // 2
        for seed in all_seeds[:half]:
            c_runs.append(r := safe.run_c(binaries[width], safe.SAFE_GAMES, seed, tmp, width))
            print(f"net={name} seed {seed}: the C {r['seconds']:.1f} s, safe {r['unbeatable_as_o']}")
        together = safe.run_population(all_seeds, tmp, name)
        print(f"net={name}: ours as one population of {seeds}: {together['seconds']:.1f} s, "
              f"{sum(m['unbeatable_as_o'] for m in together['members'])} safe")
        for seed in all_seeds[half:]:
            c_runs.append(r := safe.run_c(binaries[width], safe.SAFE_GAMES, seed, tmp, width))
            print(f"net={name} seed {seed}: the C {r['seconds']:.1f} s, safe {r['unbeatable_as_o']}")
        c, ours = safe.summary(c_runs), safe.population_summary(together)
        ratio = safe._ratio(c["seconds_per_safe_agent"], ours["seconds_per_safe_agent"])
        block["networks"][name] = {"hidden": hidden, "antirez": c, "ours_population": ours,
                                   "ratio_population_seconds_per_safe_agent": ratio}
        for side, s in (("the C", c), ("ours as one population", ours)):
            per = s["seconds_per_safe_agent"]
            print(f"net={name}, {side}: {s['unbeatable']}/{s['runs']} safe, median "
                  f"{s['median_seconds']:.1f} s per agent, "
                  + ("no safe agent" if per is None else f"{per:.1f} s per safe agent"))
        print(f"net={name}: C / ours per safe agent " + ("n/a" if ratio is None else f"{ratio:.2f}x"))
    return block


with tempfile.TemporaryDirectory(prefix="ttt-c-") as build:
    binaries = safe.prepare(src, seeds, Path(build), nets, log=print)
    if only_population:
        block = population_only(binaries, Path(build))
    else:
        block = safe.time_to_safe(binaries, seeds, nets=nets, log=print, population=True)
        print("\n".join(safe.format_lines(block)))
cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")), platform.processor())
block.update(host=f"{cpu}, {platform.python_version()}", started=started,
             wall_s=round(time.perf_counter() - begin, 1))
out.write_text(json.dumps(block, indent=1) + "\n")
print(f"wrote {out} ({block['wall_s']:.0f} s)")
