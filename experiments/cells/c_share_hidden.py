"""Issue 60: the C's share of safe agents with another hidden size, judged as the bench judges its
own (``baselines/antirez.py``: ``run_seeded`` for 2M games, then ``evaluate_dump``, exact, as O).

    python experiments/cells/c_share_hidden.py 25 BINARY 31-60 > experiments/cells/c_share_hidden25.jsonl

BINARY: the bench's seeded copy built with ``NN_HIDDEN_SIZE`` 25 (``antirez.build_seeded(src,
folder, hidden=25)``, as ``wall_vs_c.sh`` and the bench build it). The dump is read at that width
(``evaluate_dump``'s ``hidden``: a dump of another width is refused).
"""
import json
import sys
import tempfile
from pathlib import Path

from ttt_research.baselines import antirez

hidden, binary = int(sys.argv[1]), Path(sys.argv[2])
lo, hi = map(int, sys.argv[3].split("-"))
with tempfile.TemporaryDirectory() as folder:
    for seed in range(lo, hi + 1):
        out = Path(folder) / f"c{hidden}-{seed}.bin"
        seconds = antirez.run_seeded(binary, 2_000_000, seed, out)
        ev = antirez.evaluate_dump(out, hidden)  # checks the dump's logits against the network read from it
        print(json.dumps({"seed": seed, "seconds": seconds, "unbeatable_as_o": ev["unbeatable_as_o"],
                          "o": ev["o"], "parity": ev["parity_max_abs_diff"]}), flush=True)
