"""``python -m ttt_research.export CHECKPOINT [-o OUT.onnx]``: a checkpoint's greedy policy as
an ONNX model of the contract (``evaluation/onnx.py`` writes it and checks its parity with
torch), with the ``eval`` metadata a run's ``policy.onnx`` has: the exact evaluation of the
exported policy (``eval.json``'s report). The default output is CHECKPOINT with ``.onnx``.
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
