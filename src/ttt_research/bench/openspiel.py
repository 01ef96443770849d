"""``python -m ttt_research.bench.openspiel [--repeats N]``: the NashConv figures
(``bench/exploit.py``) and OpenSpiel's exact ``nash_conv`` of the same policy, in one run on one
host, so their ratio means something (the ``openspiel`` extra)."""

from __future__ import annotations

import argparse
import statistics
import time

from ttt_research.bench.crossplay import random_policies
from ttt_research.bench.exploit import bench_nashconv
from ttt_research.errors import MissingExtra, command
from ttt_research.evaluation.crossplay import one_thread
from ttt_research.evaluation.exploit import nash_conv
from ttt_research.evaluation.policy_table import boards


def openspiel_seconds(probs, repeats: int = 1) -> float:
    """Seconds for OpenSpiel's ``exploitability.nash_conv`` of the same (M, 9) policy on its
    ``tic_tac_toe`` (a ``TabularPolicy`` over its 294,778 histories, each row our row of its
    board), median of ``repeats``; checks that both NashConvs agree to 1e-12."""
    try:
        import pyspiel
        from open_spiel.python import policy as os_policy
        from open_spiel.python.algorithms import exploitability
    except ImportError as e:
        raise MissingExtra("openspiel", "OpenSpiel's nash_conv", e) from None

    os_game = pyspiel.load_game("tic_tac_toe")
    table = os_policy.TabularPolicy(os_game)
    row = {b: i for i, b in enumerate(boards())}
    for i, state in enumerate(table.states):  # its boards print as three rows of x, o and '.'
        table.action_probability_array[i, :] = probs[row[str(state).replace("\n", "")]].numpy()
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = exploitability.nash_conv(os_game, table)
        times.append(time.perf_counter() - start)
    if abs(value - nash_conv(probs)) > 1e-12:
        raise RuntimeError(f"OpenSpiel's NashConv {value!r} is not ours {nash_conv(probs)!r}")
    return statistics.median(times)


@command()
def main(argv: list[str] | None = None) -> int:
    """The NashConv figures, then OpenSpiel's time for the same policy in the same run."""
    p = argparse.ArgumentParser(prog="python -m ttt_research.bench.openspiel",
                                description="NashConv: ours and OpenSpiel's, same policy, same run")
    p.add_argument("--repeats", type=int, default=5, help="repeats of our figures (median)")
    args = p.parse_args(argv)
    with one_thread():
        res = bench_nashconv(args.repeats)
        theirs = openspiel_seconds(random_policies(1, seed=1)[0])
    ratio = theirs * 1000 / res["nashconv_ms"]
    print(f"OpenSpiel's nash_conv of the same policy: {theirs:.1f} s, {ratio:,.0f}x ours, in this "
          "run (the same NashConv to 1e-12)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
