"""``python -m ttt_research.export CHECKPOINT [-o OUT.onnx]``: a checkpoint's greedy policy as
an ONNX model of the contract (``evaluation/onnx.py`` writes it and checks its parity with
torch), with the ``eval`` metadata a run's ``policy.onnx`` has: the exact evaluation of the
exported policy (``eval.json``'s report), on the checkpoint's board (``game`` metadata off
tic-tac-toe, as training writes it). The default output is CHECKPOINT with ``.onnx``.

``--table OUT.csv|OUT.json`` writes the policy of a checkpoint, an ONNX file or a run folder
as a policy table instead (``evaluation/policy_table.py``; tic-tac-toe's only, a policy of
another board is refused): greedy moves by default, or the
probabilities of ``--temperature`` / ``--epsilon`` / ``--as-trained``. ``evaluate`` scores the
table to the same numbers as the file. Neither output is ever the input nor a file of a run
folder (``files/outputs.check_output``: ``RUN/eval.json`` would replace the run's record).
Torch and onnxruntime are imported once the options passed: ``--help`` and a refused option
or a missing file answer before torch loads.
"""
from __future__ import annotations

import json
from pathlib import Path

from ttt_research.errors import UserError, command
from ttt_research.evaluation.options import add_acting_args, is_table, require_path
from ttt_research.files.outputs import check_output

# A refusal here is a UserError (``onnx.ExportError`` is one): one line, exit 2, no torch.


@command(OSError)
def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m ttt_research.export",
                                description="Export a checkpoint's greedy policy to ONNX, with its "
                                            "exact evaluation in the metadata.")
    p.add_argument("checkpoint", help="a ttt_research Lightning checkpoint (.ckpt); with --table "
                                      "also a policy.onnx or a run folder")
    p.add_argument("-o", "--output", default=None, metavar="OUT.onnx",
                   help="the ONNX file to write (default: the checkpoint's path with .onnx, "
                        "e.g. checkpoints/last.onnx beside checkpoints/last.ckpt)")
    p.add_argument("--table", default=None, metavar="OUT.csv|OUT.json",
                   help="write the policy (of a checkpoint, an ONNX file or a run folder) as a policy "
                        "table instead: greedy moves, or probabilities with the options below")
    add_acting_args(p)
    args = p.parse_args(argv)
    if args.table is not None:
        return _table(args)
    if args.temperature is not None or args.epsilon is not None or args.as_trained:
        raise UserError("--temperature, --epsilon and --as-trained apply to --table (an ONNX "
                          "export holds the logits: its reader chooses how to act)")
    checkpoint = Path(args.checkpoint)
    require_path(checkpoint)
    if checkpoint.is_dir() or checkpoint.suffix.lower() == ".onnx":  # what --table takes, not this
        what = "a folder" if checkpoint.is_dir() else "an ONNX model already"
        raise UserError(f"{checkpoint}: {what}; export takes a checkpoint (.ckpt, e.g. "
                        "RUN/checkpoints/last.ckpt), --table also a policy.onnx or a run folder")
    out = Path(args.output) if args.output else checkpoint.with_suffix(".onnx")
    check_output(out, checkpoint, "-o", "the checkpoint")  # nor a file of a run folder
    from ttt_research.evaluation.exact import evaluate_policy
    from ttt_research.evaluation.onnx import export
    from ttt_research.evaluation.policy_file import game_of, load_checkpoint
    from ttt_research.evaluation.text import unbeatable_line

    net, meta = load_checkpoint(checkpoint)  # its board, its shapes on it, then every position's move
    board = game_of(checkpoint, meta)  # the board it names (checkpoint_file.checkpoint_game)
    report = evaluate_policy(net, game=board)  # the exact evaluation, as train.write_outputs stores it
    figures = export(net, out, {**meta, "eval": json.dumps(report)}, game=board)
    ties = figures["near_ties"]
    apart = f" ({ties} near ties not compared, onnx.TIE)" if ties else ""
    print(f"wrote {out}: parity on {figures['positions']} positions, "
          f"max |diff| {figures['max_abs_diff']:.2e}, greedy moves identical{apart}; "
          f"{unbeatable_line(report)}")
    return 0


def _table(args) -> int:
    """``export --table``: the policy as a policy table, moves or probabilities."""
    if args.output is not None:
        raise UserError("--table writes the table only: leave out -o")
    if not is_table(args.table):
        raise UserError(f"{args.table}: a policy table is a .csv or .json file")
    require_path(args.checkpoint)
    check_output(args.table, args.checkpoint, "--table")  # as -o: never the input, never a run's file
    from ttt_research.evaluation.policy_file import file_game, load_probs
    from ttt_research.evaluation.policy_table import require_tic_tac_toe, write_table

    require_tic_tac_toe(args.checkpoint, file_game(args.checkpoint))  # before its policy runs anywhere
    probs, _, acting = load_probs(args.checkpoint, args.temperature, args.epsilon, args.as_trained)
    write_table(args.table, probs)
    deterministic = bool((probs.amax(-1) == 1).all())
    print(f"wrote {args.table}: {probs.shape[0]:,} positions, "
          f"{'one move' if deterministic else 'nine probabilities'} each ({acting.describe()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
