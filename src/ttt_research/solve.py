"""``python -m ttt_research.solve [game=ttt|mnk|mnk343|mnk443|mnk444] [game.m=M game.n=N game.k=K] [--json]``
(or ``ttt-solve``): the exact facts of an m,n,k game.

The game is a small Hydra config composed, not run (``conf/solve.yaml``, the ``game`` group
of ``conf/game/``): no run folder is made. Training is untouched: it composes
``config.yaml`` and plays tic-tac-toe. The positions come from the user's cache folder, or
are built and kept there (``env/cache.py``; a 4x4 board: ~30-60 s once, ~1 s after).

Printed: the positions reachable from the empty board, how many are finished, how many have
somebody to move (and per ply), the value of the empty board under perfect play, the
outcome of two uniformly random players, and the number of complete games. docs/facts.md
lists them for the presets.

    python -m ttt_research.solve                                  # tic-tac-toe
    python -m ttt_research.solve game=mnk game.m=4 game.n=4 game.k=4
    python -m ttt_research.solve game=mnk343 --json
"""

from __future__ import annotations

import argparse
import json

from ttt_research.env import cache
from ttt_research.env.mnk import MNK, config_problem
from ttt_research.errors import ConfigError, UserError, command
from ttt_research.train import hydra_errors
from ttt_research.train.confdir import config_dir


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ttt_research.solve",
        description="The exact facts of an m,n,k game (m rows, n columns, k in a line wins, X "
                    "first): positions, the value under perfect play, random vs random, complete "
                    "games. Boards of at most 16 cells, 1 < k <= max(m, n).")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="game=ttt (default), game=mnk with game.m, game.n, game.k, or a preset: "
                        "game=mnk343, game=mnk443, game=mnk444")
    p.add_argument("--json", action="store_true", help="print the facts as a JSON object")
    return p


def game_of(overrides: list[str]) -> MNK:
    """The board the overrides ask for; ``UserError`` (Hydra's own errors as one line) or
    ``ConfigError`` naming the key otherwise."""
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(str(config_dir()), version_base="1.3"):
            cfg = compose("solve", overrides=overrides)
    except Exception as e:
        line = hydra_errors.one_line(e, hydra_errors.overrides(overrides))
        if line is None:
            raise  # a bug: its traceback
        raise UserError(line) from e
    if (why := config_problem(cfg.game)) is not None:
        raise ConfigError(why)
    return MNK(cfg.game.m, cfg.game.n, cfg.game.k)


def facts_text(f: dict) -> str:
    """The facts as aligned lines (``--json``: the dict itself)."""
    r = " / ".join(f"{f['random_vs_random'][w]:.6f}" for w in ("x_wins", "draw", "o_wins"))
    rows = [
        ("positions reachable from the empty board", f"{f['reachable']:,}"),
        ("  finished (a line of k, or a full board)", f"{f['terminal']:,}"),
        ("  with somebody to move (decision points)", f"{f['to_move']:,}"),
        ("value of the empty board, perfect play", f["value"]),
        ("random vs random: X wins / draw / O wins", r),
        ("complete games (move sequences)", f"{f['complete_games']:,}"),
    ]
    width = max(len(a) for a, _ in rows)
    head = (f"the {f['game']} game: {f['m']} rows, {f['n']} columns, {f['k']} in a line wins, X moves "
            f"first ({f['lines']} lines, {f['symmetries']} symmetries)")
    per_ply = ", ".join(f"{p}: {c:,}" for p, c in enumerate(f["to_move_by_ply"]) if c)
    return "\n".join([head, *(f"{a:<{width}}  {b}" for a, b in rows), f"decision points by ply: {per_ply}"])


@command(ConfigError)
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    game = game_of(args.overrides)
    facts = cache.positions(game).facts
    print(json.dumps(facts, indent=2) if args.json else facts_text(facts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
