"""Play a person against a trained agent: in the terminal, or in the browser with ``--web``.

    python -m ttt_research.play PATH [--seat x|o]        # terminal game
    python -m ttt_research.play PATH --web [--port N]     # the browser game (see web/server.py)

PATH is a training checkpoint (``.ckpt``) or an ONNX file that follows the contract. The
agent is the evaluated one: the greedy policy (masked argmax, ties to the lowest cell),
so what you play against is exactly what ``evaluate`` scored. After each of its moves
the agent's move probabilities (softmax over the empty cells) are shown as a 3x3 grid:
greedy play always takes the largest, the grid shows how sure it was.

The person types cells 1-9 (row by row, as the numbers beside the board show). Bad input
gets a message and a new prompt, at "play again?" too (y, s or n); end of input, ``q`` or
Ctrl-C end the program with exit code 0. A bad model file gets one line on stderr and exit
code 2, and so does a policy without a legal greedy move somewhere (NaN or all -inf logits,
an occupied cell preferred): the loader checks every position before the first game, and
each move is checked again, so the agent never "plays" a taken cell.

Torch, the engine and the loaders are imported by the functions that use them, so ``--help``,
a missing file and a bad ``--port`` answer before torch loads (issue 43).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from ttt_research.contract import EVAL_SEATS, SEAT_PIECE
from ttt_research.errors import command
from ttt_research.evaluation.options import port_number, require_path

if TYPE_CHECKING:  # torch and the engine load with the first game (a function's import)
    import torch

    from ttt_research.evaluation.exact import PolicyFn

SYMBOL = {SEAT_PIECE["x"]: "X", SEAT_PIECE["o"]: "O", 0: "."}  # game.X, game.O, game.EMPTY


class Quit(Exception):
    """The person asked to stop (q), or the input ended."""


def decide(policy: PolicyFn, code: int) -> tuple[int, torch.Tensor]:
    """The greedy move at ``code`` and the (9,) move probabilities behind it.

    The same rule as ``exact.greedy_actions``: mask occupied cells, argmax, ties to the
    lowest cell (torch.argmax returns the first maximum). Probabilities are the softmax
    over the empty cells; a model that masks its own logits gives the same numbers.
    Logits without a legal greedy move here raise ``errors.IllegalMoveError`` (one line
    naming the board), the strict rule of a policy file.
    """
    import torch

    from ttt_research.env import game
    from ttt_research.evaluation.exact import check_logits

    t = game.tables()
    with torch.no_grad():
        logits = policy(t.view[code][None].float())[0].to("cpu", torch.float32)  # (9,)
    check_logits(logits[None], torch.tensor([code]), strict=True)
    masked = torch.where(t.legal[code], logits, -torch.inf)
    return int(masked.argmax()), torch.softmax(masked.double(), -1)


# --------------------------------------------------------------------------- drawing


def render(code: int) -> str:
    """The board with the cell numbers (1-9) of the empty cells beside it."""
    from ttt_research.env import game

    board = game.tables().board[code].tolist()
    rows = []
    for r in range(3):
        cells = board[3 * r: 3 * r + 3]
        left = " | ".join(SYMBOL[c] for c in cells)
        right = " | ".join(str(3 * r + i + 1) if c == game.EMPTY else " " for i, c in enumerate(cells))
        rows.append(f"  {left}        {right}".rstrip())
        if r < 2:
            rows.append("  --+---+--        --+---+--")
    return "\n".join(rows)


def render_probs(probs: torch.Tensor, chosen: int) -> str:
    """(9,) probabilities as a 3x3 grid of percentages; the chosen cell in brackets,
    occupied cells as '-'."""
    cells = []
    for i, p in enumerate(probs.tolist()):
        text = "-" if p == 0.0 else f"{100 * p:.1f}%"
        cells.append(f"[{text}]" if i == chosen else f" {text} ")
    return "\n".join(("  " + "".join(f"{c:>9}" for c in cells[3 * r: 3 * r + 3])).rstrip()
                     for r in range(3))


# --------------------------------------------------------------------------- one game


def ask_cell(code: int, read: Callable[[str], str], say: Callable[[str], None]) -> int:
    """Prompt until the person names an empty cell; returns it as 0..8."""
    from ttt_research.env import game

    legal = game.tables().legal[code]
    while True:
        text = read("your move (1-9, q to quit): ").strip()
        if text.lower() in ("q", "quit", "exit"):
            raise Quit
        try:
            n = int(text)
        except ValueError:
            say(f"'{text}' is not a cell number: type a number from 1 to 9")
            continue
        if not 1 <= n <= 9:
            say(f"{n} is out of range: cells are numbered 1 to 9")
            continue
        if not legal[n - 1]:
            free = " ".join(str(i + 1) for i in legal.nonzero().flatten().tolist())
            say(f"cell {n} is taken: choose an empty cell ({free})")
            continue
        return n - 1


AGAIN = {"": "yes", "y": "yes", "yes": "yes", "s": "switch", "switch": "switch",
         "n": "stop", "no": "stop", "q": "stop", "quit": "stop"}  # "" is the [Y]es default


def ask_again(read: Callable[[str], str], say: Callable[[str], None]) -> str:
    """"play again?" until the answer is one of ``AGAIN``: ``yes``, ``switch`` or ``stop``.
    Anything else ("9", a cell typed one game too late) asks again rather than guessing."""
    while True:
        text = read("play again? [Y]es, [s]witch sides, [n]o: ").strip()
        if text.lower() in AGAIN:
            return AGAIN[text.lower()]
        say(f"'{text}' is not an answer: type y (or Enter) to play again, s to switch sides, n to stop")


def play_game(policy: PolicyFn, seat: int, read: Callable[[str], str],
              say: Callable[[str], None]) -> int:
    """One game, the person as ``seat``; returns the winner (+1 X, -1 O, 0 draw)."""
    from ttt_research.env import game

    t = game.tables()
    code = game.EMPTY_CODE
    say(f"\nYou are {SYMBOL[seat]}, the agent is {SYMBOL[-seat]}. X moves first.")
    while not t.done[code]:
        if t.mover[code] == seat:
            say(render(code))
            cell = ask_cell(code, read, say)
        else:
            cell, probs = decide(policy, code)
            say(f"agent ({SYMBOL[-seat]}) plays {cell + 1}; its move probabilities:")
            say(render_probs(probs, cell))
        code = int(t.next2d[code, cell])
    say(render(code))
    winner = int(t.winner[code])
    say({seat: "You win!", -seat: "The agent wins.", 0: "Draw."}[winner])
    return winner


def play_session(policy: PolicyFn, seat: int, read: Callable[[str], str] = input,
         say: Callable[[str], None] = print) -> dict[str, int]:
    """Games until the person stops; returns the tally from the person's side."""
    tally = {"win": 0, "loss": 0, "draw": 0}
    try:
        while True:
            winner = play_game(policy, seat, read, say)
            tally["draw" if winner == 0 else "win" if winner == seat else "loss"] += 1
            say(f"you {tally['win']} - agent {tally['loss']} - draws {tally['draw']}")
            again = ask_again(read, say)
            if again == "stop":
                break
            if again == "switch":
                seat = -seat
    except (Quit, EOFError):
        say("")  # end the prompt's line: the terminal is left tidy
    return tally


# --------------------------------------------------------------------------- command line


@command()
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ttt_research.play",
                                description="Play against a trained agent (greedy policy).")
    p.add_argument("path", help="policy file: a checkpoint (.ckpt) or an ONNX model (.onnx)")
    p.add_argument("--seat", choices=EVAL_SEATS, default="x", help="your side (X moves first)")
    p.add_argument("--web", action="store_true", help="serve the browser game on localhost instead")
    p.add_argument("--port", default="8000", help="port for --web, 0 to 65535 (0: any free port)")
    args = p.parse_args(argv)
    port = port_number(args.port) if args.web else None
    require_path(args.path)
    from ttt_research.evaluation.policy_file import require_tic_tac_toe  # PolicyFileError: a UserError

    require_tic_tac_toe(args.path, "the page" if args.web else "the terminal game")  # its board unread
    try:
        if args.web:
            from ttt_research.web.server import serve

            return serve(args.path, port)
        from ttt_research.env import game
        from ttt_research.evaluation.policy_file import load_policy  # PolicyFileError: a UserError

        policy, _ = load_policy(args.path, played=True)  # a board at a time: every board checked alone
        decide(policy, game.EMPTY_CODE)  # a model that loads but cannot run fails here
        play_session(policy, SEAT_PIECE[args.seat])
    except KeyboardInterrupt:
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
