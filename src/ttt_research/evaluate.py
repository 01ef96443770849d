"""``python -m ttt_research.evaluate PATH [--json]``: the exact evaluation of a policy file.

Apart from ``evaluation/exact.py`` so that the evaluator itself needs only torch: loading a policy
file brings in ``policy_file`` and, for an ONNX model, onnxruntime.
"""

from __future__ import annotations

import argparse
import json

from ttt_research.errors import command
from ttt_research.evaluation.exact import eval_table, evaluate_policy
from ttt_research.evaluation.policy_file import load_policy


@command()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ttt_research.evaluate",
        description="Exact evaluation of a greedy policy over the whole game tree.")
    parser.add_argument("path", help="policy file: .onnx (following the contract) or .ckpt")
    parser.add_argument("--json", action="store_true", help="print the eval.json report")
    args = parser.parse_args(argv)
    policy, _ = load_policy(args.path)
    report = evaluate_policy(policy)
    print(json.dumps(report, indent=2) if args.json else eval_table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
