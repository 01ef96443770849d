"""ONNX export of a greedy policy, with a parity check against onnxruntime.

The exported graph follows the contract: input ``board`` float32 [N, 9] in the mover's
view, output ``logits`` float32 [N, 9] with occupied cells masked; the network's own
encoding (``planes18`` or ``signed9``) is inside the graph. Metadata properties carry
``algo``, ``net``, ``seed``, ``games_trained`` and the ``eval.json`` summary.

Parity: after writing the file we run it with onnxruntime on all 4,520 positions where
somebody is to move and compare with torch: the largest absolute difference over the
unmasked logits is reported, and the greedy moves must be identical. Both sides' logits
must give every position a legal greedy move (``exact.check_logits``, strict: no NaN,
the argmax on an empty cell); otherwise nothing is written. The file is written through
``atomic.atomic_path``: a kill or a failed check leaves the old file or none, never a torn one.

    python -m ttt_research.export CHECKPOINT [-o OUT.onnx]   # default: CHECKPOINT with .onnx

The command adds the ``eval`` metadata a run's ``policy.onnx`` has: the exact evaluation
of the exported policy (``eval.json``'s report).
"""
from __future__ import annotations

import json
from pathlib import Path

from ttt_research.errors import command
from ttt_research.evaluation.exact import (
    evaluate_policy,
    unbeatable_line,
)
from ttt_research.evaluation.onnx import ExportError, export
from ttt_research.evaluation.policy_file import load_checkpoint


@command(OSError)
def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m ttt_research.export",
                                description="Export a checkpoint's greedy policy to ONNX, with its "
                                            "exact evaluation in the metadata.")
    p.add_argument("checkpoint", help="a ttt_research Lightning checkpoint (.ckpt)")
    p.add_argument("-o", "--output", default=None, metavar="OUT.onnx",
                   help="the ONNX file to write (default: the checkpoint's path with .onnx, "
                        "e.g. checkpoints/last.onnx beside checkpoints/last.ckpt)")
    args = p.parse_args(argv)
    checkpoint = Path(args.checkpoint)
    out = Path(args.output) if args.output else checkpoint.with_suffix(".onnx")
    if out.resolve() == checkpoint.resolve():
        raise ExportError(f"{out}: that is the checkpoint itself; choose another -o")
    net, meta = load_checkpoint(checkpoint)  # checks its shapes, then every position's move
    report = evaluate_policy(net)  # the exact evaluation, as train.write_outputs stores it
    figures = export(net, out, {**meta, "eval": json.dumps(report)})
    print(f"wrote {out}: parity on {figures['positions']} positions, "
          f"max |diff| {figures['max_abs_diff']:.2e}, greedy moves identical; {unbeatable_line(report)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
