"""Benchmark harness: ``python -m ttt_research.bench [--json] [--device cpu|cuda] [--quick]``.

Measures speed, never correctness (the tests do that). Each figure is the median of
several repeats, so one noisy moment on a shared machine does not decide it. Figures:

* ``env_games_per_s``: complete random-vs-random games per second with auto-reset, at
  the best of a few batch sizes (both players draw with ``game.random_moves``).
* ``reinforce_games_per_s``: training games per second of the default batched REINFORCE
  (``algo=reinforce``, its own config), updates included: games played over the training
  loop's wall time.
* ``ppo_steps_per_s`` and ``time_to_unbeatable_s``: the flagship PPO (``algo=ppo
  net=mlp128``): learner environment steps per second, updates included, and the training
  loop's wall time until the exact evaluation (run after every update, its own time not
  counted) first shows 0 losses vs random from both seats; ``null`` if the budget ends first.
* ``population_reinforce_games_per_s`` and ``population_ppo_steps_per_s``: the same two
  trainings as populations (``population.size=N``, a few N), summed over the members, with
  their ratios to the single runs above (and to antirez's C, when it ran) in
  ``population_ratios``; ``--no-populations`` skips them.
* ``population_vs_parallel_singles``: N agents as one population against the same N as single
  runs two at a time (``bench/parallel.py``), REINFORCE and PPO; ``--no-parallel`` skips it.
* ``search_us_per_game``: ``algo=alphazero``'s self-play on one torch thread: microseconds
  per complete game of ``SEARCH_BATCH`` games played at once, every move searched with
  ``algo.simulations=16``, the network's tables and every position's subtree (built once
  per batch, as once per update) included, learning not (``search_phases_ms`` splits it).
* ``eval_s``: one exact evaluation of a greedy policy (forward pass plus the DPs).
* ``nashconv_ms``: the exact NashConv of one random stochastic policy (both seats' best
  responses, ``evaluation/exploit.py``), milliseconds; ``nashconv_report_ms`` its whole report
  (and the outcomes vs random and perfect), ``nashconv_reports_100_ms`` 100 reports at once.
* ``tournament_100_s``: an exact round robin of 100 random stochastic policies
  (``bench/crossplay.py``): ``cross_play`` of the 10,000 ordered pairs plus the Davidson-Beaver
  ratings, what ``python -m ttt_research.tournament`` spends besides loading its participants.
* ``move_latency_ms``: one greedy move for one board with the flagship's network,
  ``{"torch": ..., "onnxruntime": ...}`` (the exported ``policy.onnx`` graph).
* ``command_floor_s``: a 1-game run's whole command less importing Lightning (``bench/floor.py``).
* ``boards``: per m,n,k board (3,4,3 and 4,4,4; ``--quick`` 3,4,3; ``--no-boards`` skips them),
  in fresh processes (``bench/boards.py``): its positions built and solved in an empty cache and
  its rule tables derived (``build_s``), read back (``load_s``, ``tables_s``), and one exact
  evaluation of an agent over every decision point (``eval_s``) with the process's peak memory.
* ``board_training``: per board (3,3,3, 3,4,3 and 4,4,4; ``--quick`` the first two; skipped with
  ``--no-boards``), REINFORCE's and PPO's training games per second on that board and one exact
  evaluation of the trained agent, in fresh processes (``bench/board_training.py``).

Speeds from different hosts do not divide, so every ratio printed is one measured in the same
run. ``--compare antirez --antirez-bin PATH`` (or ``--antirez-src ttt.c``, built with ``cc``)
times antirez's C ttt-rl (``baselines/antirez.py``) between REINFORCE's training runs, alternating
which goes first, and reports the ratio of the medians. ``--compare sb3`` adds SB3 +
sb3-contrib MaskablePPO with the seed's network on the gym adapter (``baselines/sb3.py``, the
``compare`` extra) and the ratios to it.

With ``--antirez-src`` it also measures the **time to a safe agent** (``bench/safe.py``, under
``compare.antirez.time_to_safe``): ``--safe-seeds K`` seeds per side (default 5, ``--quick`` 3; 0
skips it), alternating, per network of ``--safe-nets`` (the card's ``mlp25,mlp100,mlp128``), of a
seeded copy of the C program built with that hidden size (``--antirez-safe-games``, 2,000,000; none
for the two-layer ``mlp128``) and of ``python -m ttt_research algo=reinforce net=NET seed=S``: the
share unbeatable as O, the median seconds per agent and the seconds per safe agent, and the C/ours
ratios.

The reference rows beside the table are constants from the project's development host,
labelled so, and never divided by. The output names the host's CPU and the torch threads of
each figure, and the host's load when the bench started (``host.load``: ``os.getloadavg()``
beside the logical CPUs); a busy host (a 1-minute load above ``host.BUSY`` per CPU: other work
shares the cores) gets a warning on stderr, since every figure measured then is low.
"""

from __future__ import annotations

from ttt_research.bench.options import check, parser
from ttt_research.errors import command


@command()
def main(argv: list[str] | None = None) -> int:
    """Parse and check the options (``bench/options.py``, the standard library), then run the
    figures (``bench/suite.py``, which imports torch and Lightning: about 5 s that ``--help``
    and a refused option do without)."""
    args = parser().parse_args(argv)
    sizes = check(args)
    import ttt_research.bench.suite as suite

    return suite.execute(args, sizes)


def __getattr__(name: str):
    """``bench.run``, ``bench.format_table``, ...: the suite's names, imported when first asked
    for (the package itself stays light for the command line)."""
    if name.startswith("__") or name == "suite":  # "suite" itself: asked for while it is imported
        raise AttributeError(name)
    import ttt_research.bench.suite as suite

    return getattr(suite, name)
