"""Policy tables: any player's moves at every position, as a file the exact evaluator scores.

This module owns the format, its reader (one-line errors) and its writer. A Python function,
an OpenSpiel or PettingZoo bot, a person or a language model answers each of the 4,520
positions where somebody is to move; the answers go in a file that ``evaluate`` scores
exactly (docs/contracts.md, "Policy tables"; recipes in docs/policy-tables.md). One row per
position: the board as 9 characters ``x``/``o``/``.``, row-major (cells 0..8 as drawn in
``env/game.py``; X is to move when the counts are equal), and one move (a cell 0-8) or nine
probabilities. CSV has a header, ``board,move`` or ``board,p0,...,p8``, and ``#`` comments::

    board,move            board,p0,p1,p2,p3,p4,p5,p6,p7,p8
    .........,4           .........,0,0,0,0,1,0,0,0,0

JSON is ``{"format": "ttt-policy-table/1", "rows": [{"board": ..., "move": 4} or {"board": ...,
"probs": [9 numbers]}]}`` (docs/policy-table.schema.json). Reading gives ``probs`` (M, 9)
float64 in the order of ``exact.decision_codes()`` (what ``exploit.policy_report`` scores)
and counts of what the file held. A position without a row, or a move on an occupied cell
(an *illegal answer*), is refused unless a fill rule is named (``uniform`` over the empty
cells, or the ``first`` empty cell). Torch and the standard library only.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import torch

from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.solver import solve
from ttt_research.errors import UserError
from ttt_research.evaluation.exact import decision_codes
from ttt_research.evaluation.exploit import board_string
from ttt_research.evaluation.options import FILLS, ILLEGAL, is_table  # noqa: F401 (is_table: its name too)
from ttt_research.files import untrusted
from ttt_research.files.atomic import write_atomic

FORMAT = "ttt-policy-table/1"
MOVE_HEADER = ["board", "move"]
PROBS_HEADER = ["board", *(f"p{i}" for i in range(game.CELLS))]
TOLERANCE = 1e-6  # how far from 1 probabilities may sum (then they are renormalised)
EXACT = 1e-12  # sums this close to 1 are float64 rounding: kept as written, so tables round-trip
MOVE = re.compile(r"[+-]?[0-9]+")  # a CSV move: ASCII digits, one sign at most
MAX_BYTES = 8 * 2**20  # a complete table is 0.15 MB of moves, 0.6 MB of repr'd probabilities


class PolicyTableError(UserError):
    """A policy table that cannot be scored: the message names the file, where and why."""


def boards() -> list[str]:
    """The 4,520 positions where somebody is to move, as board strings, in table order."""
    return [board_string(c) for c in decision_codes().tolist()]


def board_code(board: str) -> int:
    """A 9-character board (``x``/``o``/``.``) -> its code (cell i has place value 3**i)."""
    return sum({"x": 1, "o": 2, ".": 0}[ch] * 3**i for i, ch in enumerate(board))


def _board_problem(board: str) -> str | None:
    """Why ``board`` is no position where somebody is to move, or None."""
    if len(board) != game.CELLS or set(board) - set("xo."):
        return (f"board {board[:20]!r} is not 9 characters of x, o and . "
                "(cells 0-8 row by row, e.g. 'x...o....')")
    problem = game.outside_problem(board_code(board))  # impossible boards too, not only finished ones
    return None if problem is None else f"board {board} is {problem}"


def _number(text, where: str) -> float:
    """One probability: a finite number >= 0."""
    try:
        p = float(text) if not isinstance(text, bool) else float("")  # JSON's true is no number
    except OverflowError:  # a JSON integer of 400 digits: past float64, as good as infinite
        raise PolicyTableError(f"{where}: probability {str(text)[:20]}... is not finite "
                               f"(an integer of {len(str(text)):,} digits)") from None
    except (TypeError, ValueError):
        raise PolicyTableError(f"{where}: probability {_shown(text)!r} is not a number") from None
    if not math.isfinite(p):
        raise PolicyTableError(f"{where}: probability {text} is not finite")
    if p < 0:
        raise PolicyTableError(f"{where}: probability {text} is negative")
    return p


def _probs(values, legal: list[bool], where: str) -> list[float]:
    """Nine probabilities, checked: finite, >= 0, zero on taken cells, summing to 1."""
    if not isinstance(values, list) or len(values) != game.CELLS:
        got = len(values) if isinstance(values, list) else f"a {type(values).__name__}"
        raise PolicyTableError(f"{where}: expected 9 probabilities, got {got}")
    p = [_number(v, where) for v in values]
    taken = [i for i in range(game.CELLS) if p[i] > 0 and not legal[i]]
    if taken:
        raise PolicyTableError(f"{where}: probability {p[taken[0]]:g} on the occupied cell {taken[0]}")
    total = sum(p)
    if abs(total - 1) > TOLERANCE:
        raise PolicyTableError(f"{where}: probabilities sum to {total:.9g}, not 1 (tolerance {TOLERANCE:g})")
    return p if abs(total - 1) <= EXACT else [v / total for v in p]


def _shown(value) -> str:
    """The first 20 characters of a value, for a message; a list nested too deep for ``str``
    (JSON parses up to about 1,000 levels) is named as a list."""
    try:
        return str(value)[:20]
    except RecursionError:
        return "[a deeply nested list]"


def _move(value, where: str) -> int:
    """One move: an integer cell 0-8 (a JSON number or CSV text)."""
    if isinstance(value, str):
        value = _move_text(value.strip(), where)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise PolicyTableError(f"{where}: move {_shown(value)!r} is not an integer cell 0-8")
    if not 0 <= value < game.CELLS:
        raise PolicyTableError(f"{where}: move {_long(str(value))} is outside 0-8")  # JSON: 4,300 digits
    return value


def _move_text(text: str, where: str) -> int:
    """A CSV move as an integer: ASCII digits after at most one sign. ``str.isdigit`` takes '²'
    (which int() refuses) and ``lstrip("+-")`` let '+-3' through; int() also refuses more than
    4,300 digits, so only short numbers reach it (a longer one is outside 0-8 anyway)."""
    if not MOVE.fullmatch(text):
        raise PolicyTableError(f"{where}: move {text[:20]!r} is not an integer cell 0-8")
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 3:
        raise PolicyTableError(f"{where}: move {_long(text)} is outside 0-8")
    return -int(digits) if text.startswith("-") else int(digits)


def _long(number: str) -> str:
    """A number for a message: as it is up to 20 characters, else its first 20 and its length."""
    return number if len(number) <= 20 else f"{number[:20]}... ({len(number.lstrip('+-')):,} digits)"


# --------------------------------------------------------------------------- reading


def _text(path: Path) -> str:
    """The file's text; missing, not a regular file, over ``MAX_BYTES``, unreadable, not UTF-8
    or empty: one line."""
    if not path.is_file():
        raise PolicyTableError(f"{path}: no such file")
    try:  # report's cap on files from anywhere, at a table's scale: parsing 218 MB took 7.4 GB
        data = untrusted.read_bytes(path, str(path), MAX_BYTES)
    except untrusted.Malformed as e:
        raise PolicyTableError(str(e)) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        bad = f"byte {e.start:,} is 0x{data[e.start]:02x}"
        raise PolicyTableError(f"{path}: not UTF-8 text ({bad})") from None
    if not text.strip():
        raise PolicyTableError(f"{path}: empty file; expected a header 'board,move' or 'board,p0,...,p8' "
                               "(or a JSON object)")
    return text


def _csv_rows(path: Path, text: str) -> list[tuple[str, str, str | int | list]]:
    """(where, board, move or probabilities) per data line of a CSV table."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)]
    lines = [(n, line) for n, line in lines if line and not line.startswith("#")]
    if not lines:
        raise PolicyTableError(f"{path}: empty file (only comments); expected a header 'board,move' "
                               "or 'board,p0,...,p8'")
    n, header = lines[0]
    fields = [f.strip().lower() for f in header.split(",")]
    if fields not in (MOVE_HEADER, PROBS_HEADER):
        raise PolicyTableError(f"{path}: line {n}: header {header[:40]!r} is neither 'board,move' "
                               "nor 'board,p0,p1,...,p8'")
    rows = []
    for n, line in lines[1:]:
        cells = [f.strip() for f in line.split(",")]
        where = f"{path}: line {n}"
        if len(cells) != len(fields):
            raise PolicyTableError(f"{where}: {len(cells)} fields, the header has {len(fields)}")
        rows.append((where, cells[0], cells[1] if fields == MOVE_HEADER else cells[1:]))
    return rows


def _json_rows(path: Path, text: str) -> list[tuple[str, str, int | list]]:
    """(where, board, move or probabilities) per row of a JSON table."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise PolicyTableError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None
    except RecursionError:  # thousands of nested brackets, as untrusted.load_json says
        raise PolicyTableError(f"{path}: not valid JSON (nested too deep)") from None
    except ValueError as e:  # an integer of over 4,300 digits: Python refuses to convert it
        raise PolicyTableError(f"{path}: not valid JSON ({str(e).split(':')[0].lower()})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("rows"), list):
        raise PolicyTableError(f"{path}: not a policy table: expected a JSON object with "
                               f'"format": "{FORMAT}" and a list "rows"')
    rows = []
    for i, row in enumerate(doc["rows"]):
        where = f"{path}: rows[{i}]"
        if not isinstance(row, dict) or not isinstance(row.get("board"), str) or \
                len({"move", "probs"} & set(row)) != 1 or set(row) - {"board", "move", "probs"}:
            raise PolicyTableError(f'{where}: expected {{"board": "...", "move": cell}} or '
                                   '{"board": "...", "probs": [9 numbers]}')
        rows.append((where, row["board"], row["move"] if "move" in row else row["probs"]))
    return rows


def _fill_row(legal: torch.Tensor, fill: str) -> torch.Tensor:
    """(k, 9) legal masks -> (k, 9) float64 move probabilities by the fill rule."""
    if fill == "uniform":
        return legal.double() / legal.sum(-1, keepdim=True)
    return torch.nn.functional.one_hot(legal.to(torch.int8).argmax(-1), game.CELLS).double()  # first


def _answers(rows: list, illegal: str) -> tuple[torch.Tensor, dict[int, str], list, list[int]]:
    """Check every row: ``(probs (M, 9) with the given rows set, where each position's row
    is, the (row, cell) of each legal move, the rows of illegal moves to fill)``."""
    t, codes = game.tables(), decision_codes()
    index = torch.full((game.N_CODES,), -1, dtype=torch.long)  # each code's row, -1: nobody moves
    index[codes] = torch.arange(codes.numel())
    probs = torch.zeros(codes.numel(), game.CELLS, dtype=torch.float64)  # (M, 9)
    seen: dict[int, str] = {}
    moved, bad = [], []
    for where, board, answer in rows:
        problem = _board_problem(board)
        if problem:
            raise PolicyTableError(f"{where}: {problem}")
        row = int(index[board_code(board)])
        if row in seen:
            raise PolicyTableError(f"{where}: board {board} again (first at {seen[row].split(': ')[-1]})")
        seen[row] = where
        legal = t.legal[codes[row]].tolist()
        if isinstance(answer, list):
            probs[row] = torch.tensor(_probs(answer, legal, where), dtype=torch.float64)
            continue
        cell = _move(answer, where)
        if legal[cell]:
            probs[row, cell] = 1.0
            moved.append((row, cell))
        elif illegal == "fill":
            bad.append(row)
        else:
            raise PolicyTableError(f"{where}: move {cell} is on an occupied cell of {board} "
                                   "(an illegal answer; --illegal fill replaces such answers)")
    return probs, seen, moved, bad


def read_table(path: str | Path, fill: str = "refuse", illegal: str = "refuse") -> tuple[torch.Tensor, dict]:
    """Read a policy table (.csv or .json): ``(probs, info)``.

    ``probs``: (M, 9) float64 at ``decision_codes()``. ``info``: ``rows`` (given),
    ``positions`` (4,520), ``moves`` / ``distributions`` (rows of each kind), ``illegal``
    (moves on a taken cell, filled), ``missing`` (positions without a row), ``filled`` (both),
    ``fill`` (the rule that filled them: ``fill``, or uniform for illegal answers alone), and
    for moves ``legal_answers`` and ``optimal_move_rate`` (the share of the legal moves
    that keep the minimax value, None without any)."""
    if fill not in FILLS or illegal not in ILLEGAL:
        raise ValueError(f"fill must be one of {FILLS} and illegal one of {ILLEGAL}")
    path = Path(path)
    text = _text(path)
    rows = _json_rows(path, text) if path.suffix.lower() == ".json" else _csv_rows(path, text)
    probs, seen, moved, bad = _answers(rows, illegal)
    codes = decision_codes()
    missing = sorted(set(range(codes.numel())) - set(seen))
    if missing and fill == "refuse":
        raise PolicyTableError(f"{path}: {len(missing):,} of {codes.numel():,} positions have no row, the "
                               f"first {board_string(int(codes[missing[0]]))}; --fill uniform or "
                               "--fill first fills them")
    rule = "uniform" if fill == "refuse" else fill
    empty = torch.tensor(missing + bad, dtype=torch.long)
    if empty.numel():
        probs[empty] = _fill_row(game.tables().legal[codes[empty]], rule)
    info = {"rows": len(rows), "positions": int(codes.numel()), "moves": len(moved) + len(bad),
            "distributions": len(rows) - len(moved) - len(bad), "illegal": len(bad),
            "missing": len(missing), "filled": len(missing) + len(bad), "fill": rule}
    if moved or bad:
        cells = torch.tensor(moved, dtype=torch.long).reshape(-1, 2)  # (k, 2) row, cell
        kept = solve().optimal[codes[cells[:, 0]], cells[:, 1]]
        rate = float(kept.double().mean()) if moved else None
        info |= {"legal_answers": len(moved), "optimal_move_rate": rate}
    return probs, info


# --------------------------------------------------------------------------- writing


def table_text(probs: torch.Tensor, suffix: str, deterministic: bool | None = None) -> str:
    """The (M, 9) policy ``probs`` as a table's text (``.csv`` or ``.json``): one move per row
    when ``deterministic`` (default: when every row is one-hot; forced: the argmax, ties to the
    lowest cell), else nine probabilities written with ``repr`` (float64 round-trips)."""
    moves = deterministic_actions(probs) is not None if deterministic is None else deterministic
    pairs = list(zip(boards(), probs.argmax(-1).tolist() if moves else probs.tolist(), strict=True))
    if suffix.lower() == ".json":
        rows = ",\n".join(json.dumps({"board": b, "move" if moves else "probs": a}) for b, a in pairs)
        return f'{{"format": "{FORMAT}", "rows": [\n{rows}\n]}}\n'  # one row a line
    number = {0.0: "0", 1.0: "1"}  # the common values short; any other as repr
    lines = [f"# {FORMAT}: one row per position where somebody is to move (docs/policy-tables.md)",
             ",".join(MOVE_HEADER if moves else PROBS_HEADER)]
    lines += [f"{b},{a}" if moves else ",".join([b, *(number.get(p) or repr(p) for p in a)])
              for b, a in pairs]
    return "\n".join(lines) + "\n"


def write_table(path: str | Path, probs: torch.Tensor, deterministic: bool | None = None) -> None:
    """Write the (M, 9) policy ``probs`` to ``path`` (.csv or .json, atomically); see ``table_text``."""
    path = Path(path)
    if not is_table(path):
        raise PolicyTableError(f"{path}: a policy table is a .csv or .json file")
    write_atomic(path, table_text(probs, path.suffix, deterministic))


def require_tic_tac_toe(path: str | Path, board: Game) -> None:
    """A table's rows are tic-tac-toe's positions, 9-character boards: ``PolicyTableError``
    (one line) for a policy or a tournament of another board (docs/policy-tables.md: 3,4,3's
    table would hold 79,563 rows, 4,4,4's 9 million)."""
    if board != TIC_TAC_TOE:
        raise PolicyTableError(f"{path}: a policy of the {board.name} board; policy tables hold "
                               f"tic-tac-toe's positions only ({TIC_TAC_TOE.cells}-character boards; "
                               "evaluate and tournament take the model itself)")


def deterministic_actions(probs: torch.Tensor, board: Game = TIC_TAC_TOE) -> torch.Tensor | None:
    """The (rows,) action table over ``board``'s tables (0 where nobody moves; 19,683 rows on
    tic-tac-toe) of an (M, cells) policy that is one-hot at every position, for
    ``exact.evaluate_actions``; None for a stochastic policy."""
    if not bool((probs.amax(-1) == 1).all()):
        return None
    actions = torch.zeros(board.tables().states, dtype=torch.long)
    actions[decision_codes(board)] = probs.argmax(-1)
    return actions
