"""The bench's command line: its options, their defaults, and the checks of their values.

The standard library and ``errors.py`` only, so ``python -m ttt_research.bench --help`` and a
refused option answer before torch and Lightning load (about 5 s of the bench's start,
``bench/suite.py``'s imports). The budgets antirez's program runs with live here for that
reason: ``baselines/antirez.py`` and ``bench/safe.py`` read them from this module.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ttt_research.errors import UserError

DEFAULT_GAMES = {"reinforce": (6_000_000, 500_000), "ppo": (800_000, 800_000)}  # (full, quick)
ANTIREZ_GAMES = 300_000  # training games of each timed run of antirez's C program
SAFE_GAMES = 2_000_000  # ttt-rl's README: "With 2 million games ... it usually no longer loses"
SAFE_SEEDS = (5, 3)  # seeds per side of the time to a safe agent (full, --quick)
SAFE_NETS = ("mlp25", "mlp100", "mlp128")  # the card's networks, each timed to a safe agent (conf/net)
COUNTS = ("threads", "repeats", "reinforce_games", "ppo_games", "sb3_steps", "antirez_games",
          "population_games", "antirez_safe_games")  # options that must be positive


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ttt_research.bench",
                                description="Speed figures: games/s, steps/s, time to unbeatable, "
                                            "move latency; --compare times another program in the "
                                            "same run (docs/benchmarks.md).")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the engine and the training runs go (cuda: trainer=gpu)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (about a minute)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: the configs' own, auto: one per single run, "
                        "a population on the cores nothing else uses)")
    p.add_argument("--repeats", type=int, default=None,
                   help="training runs per trained figure, and of antirez's program; their median "
                        "is reported (default 3, --quick 1)")
    p.add_argument("--reinforce-games", type=int, default=None, help="REINFORCE budget in games")
    p.add_argument("--ppo-games", type=int, default=None, help="PPO budget in games (cap)")
    p.add_argument("--compare", choices=["sb3", "antirez"], action="append", default=None,
                   help="also time another program in this run and report the ratios: 'antirez' (its C "
                        "ttt-rl, needs --antirez-bin or --antirez-src), 'sb3' (SB3 MaskablePPO, extra "
                        "'compare'); may be given twice")
    p.add_argument("--sb3-steps", type=int, default=50_000, help="SB3 steps for --compare sb3")
    p.add_argument("--no-populations", action="store_true",
                   help="skip the population_* figures (many agents per process)")
    p.add_argument("--population-sizes", default=None,
                   help="population sizes, comma-separated (default: REINFORCE 16,64, PPO 16)")
    p.add_argument("--population-games", type=int, default=None,
                   help="training games per member of each population run (and per agent of "
                        "population_vs_parallel_singles)")
    p.add_argument("--no-parallel", action="store_true",
                   help="skip population_vs_parallel_singles (N agents as one population vs as single "
                        "runs two at a time; CPU only, skipped with --no-populations too)")
    p.add_argument("--parallel-sizes", default=None,
                   help="agents of population_vs_parallel_singles, comma-separated (default 16,64,100; "
                        "--quick 16)")
    p.add_argument("--no-boards", action="store_true",
                   help="skip the m,n,k boards (3,4,3 and 4,4,4; --quick 3,4,3): tables built and "
                        "loaded, one exact evaluation and its peak memory (bench/boards.py)")
    p.add_argument("--antirez-bin", type=Path, default=None,
                   help="antirez's ttt-rl, built (cc -O3 -ffast-math -o ttt ttt.c -lm)")
    p.add_argument("--antirez-src", type=Path, default=None,
                   help="antirez's ttt.c: build it with cc into a temporary folder and time that")
    p.add_argument("--antirez-games", type=int, default=ANTIREZ_GAMES,
                   help=f"training games of each antirez run (default {ANTIREZ_GAMES:,})")
    # The time to a safe agent (bench/safe.py).
    p.add_argument("--safe-seeds", type=int, default=None,
                   help="with --compare antirez --antirez-src: seeds per side of the time to a safe agent "
                        "(unbeatable as O), per network a seeded copy of the C program built with its "
                        "hidden size and our python -m ttt_research algo=reinforce net=NET seed=S in turn, "
                        f"each agent evaluated exactly (default {SAFE_SEEDS[0]}, --quick {SAFE_SEEDS[1]}; "
                        "0 skips it)")
    p.add_argument("--safe-nets", default=",".join(SAFE_NETS),
                   help="the networks of the time to a safe agent, comma-separated (default "
                        f"{','.join(SAFE_NETS)}: the card's; the C has no two-layer network, so mlp128 "
                        "is ours alone)")
    p.add_argument("--safe-population", action=argparse.BooleanOptionalAction, default=True,
                   help="with the time to a safe agent: ours also trains the same seeds as one "
                        "population on one thread (population.size=SEEDS threads=1), timed as one command "
                        "(default: on)")
    p.add_argument("--antirez-safe-games", type=int, default=SAFE_GAMES,
                   help=f"training games of each C run of the time to a safe agent (default {SAFE_GAMES:,}, "
                        "its README's)")
    return p


def _sizes(text: str | None, option: str) -> tuple[int, ...] | None:
    """``16,64`` -> (16, 64); None stays None (the default)."""
    if text is None:
        return None
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise UserError(f"{option} must be positive integers separated by commas, got {text!r}")
    return sizes


def check(args: argparse.Namespace) -> tuple[int, ...] | None:
    """``UserError`` for values out of range or options that do not go together; returns the
    population sizes asked for (None: the default)."""
    sizes = _sizes(args.population_sizes, "--population-sizes")
    args.parallel_sizes = _sizes(args.parallel_sizes, "--parallel-sizes")
    for name in COUNTS:
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UserError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    if args.safe_seeds is not None and args.safe_seeds < 0:
        raise UserError(f"--safe-seeds must be 0 or a positive integer, got {args.safe_seeds}")
    nets = tuple(args.safe_nets.split(","))
    if not nets or not set(nets) <= set(SAFE_NETS) or len(set(nets)) != len(nets):
        raise UserError(f"--safe-nets must be some of {','.join(SAFE_NETS)}, comma-separated, each once; "
                        f"got {args.safe_nets!r}")
    args.safe_nets = nets
    compare = args.compare or []
    if "antirez" in compare and (args.antirez_bin is None) == (args.antirez_src is None):
        raise UserError("--compare antirez needs one of --antirez-bin PATH or --antirez-src ttt.c")
    if "antirez" not in compare and (args.antirez_bin or args.antirez_src):
        raise UserError("--antirez-bin and --antirez-src are used only with --compare antirez")
    return sizes
