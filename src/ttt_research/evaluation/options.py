"""The command-line options the policy commands share, and what they need to know to parse
them: the fill rules of a policy table, what names a table, the built-in players, the
options that choose how a file's logits act, a port to serve the browser game on.

The standard library and ``errors.py`` only. ``evaluate``, ``export``, ``play`` and ``tournament`` build their
parsers from this module alone, so ``--help`` and a refused option answer before torch is
imported (about 1.5 s of a command's start, of which ``--help`` needs none).
``policy_table``, ``policy_file`` and ``participants`` use the same names.
"""

from __future__ import annotations

from pathlib import Path

from ttt_research.errors import UserError

FILLS = ("refuse", "uniform", "first")  # a table's positions without a row
ILLEGAL = ("refuse", "fill")  # a table's moves on an occupied cell
TABLE_SUFFIXES = (".csv", ".json")  # a policy table's files
RESPONDER = "best-response"  # the tournament's player that meets each opponent with its best response
BUILTINS = ("random", "perfect", "rules", RESPONDER)  # the tournament's players that need no file


def is_table(path: str | Path) -> bool:
    """Whether ``path`` names a policy table (by its suffix)."""
    return Path(path).suffix.lower() in TABLE_SUFFIXES


def require_path(path: str | Path) -> None:
    """Refuse a path that does not exist in the loaders' own words, before they are imported."""
    if not Path(path).exists():
        raise UserError(f"{path}: no such file")


def require_participant(arg: str) -> None:
    """Refuse a tournament's participant that names neither a built-in player nor anything on
    disk (``participants.resolve`` asks the same first)."""
    if arg not in BUILTINS and not Path(arg).exists():
        hint = f"; built-in players: {', '.join(BUILTINS)}" if "/" not in arg else ""
        raise UserError(f"{arg}: no such file or folder{hint}")


def port_number(text: str | int) -> int:
    """``play --web --port``: an integer from 0 (any free port) to 65535; ``UserError`` otherwise."""
    try:
        port = int(text)
    except (TypeError, ValueError):
        port = -1
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be an integer from 0 to 65535 (0: any free port), "
                        f"got {str(text)[:40]!r}")
    return port


def add_acting_args(parser) -> None:
    """The command-line options of ``policy_file.acting_for`` (``evaluate`` and ``export --table``)."""
    parser.add_argument("--temperature", type=float, default=None, metavar="T",
                        help="score the softmax of the logits at temperature T (default 0: greedy)")
    parser.add_argument("--epsilon", type=float, default=None, metavar="E",
                        help="mix a share E of moves uniform over the empty cells into it (default 0)")
    parser.add_argument("--as-trained", action="store_true",
                        help="the policy as its training played it (T and E from the file's 'acting' "
                             "metadata)")
