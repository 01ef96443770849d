"""Play a person against a trained agent, on the board it was trained on: in the terminal, or
in the browser with ``--web``.

    python -m ttt_research.play PATH [--seat x|o] [--game M,N,K]   # terminal game
    python -m ttt_research.play PATH --web [--port N]               # the browser game (see web/server.py)

PATH is a training checkpoint (``.ckpt``) or an ONNX file that follows the contract. Its board
is the one the file names (an ONNX file's ``game`` metadata, a checkpoint's ``game``; none:
tic-tac-toe); ``--game`` says which board the model must be of, and a model of another is
refused in one line. The agent is the evaluated one: the greedy policy (masked argmax, ties to
the lowest cell), so what you play against is exactly what ``evaluate`` scored. After each of
its moves the agent's move probabilities (softmax over the empty cells) are shown as a grid of
the board: greedy play always takes the largest, the grid shows how sure it was.

The person types cells 1 to m*n (row by row, n to a row, as the numbers beside the board
show); k in a row of the game's lines wins (the rule tables of ``env/board.py``'s game). Bad
input (not a number, out of range, a taken cell) gets one line and a new prompt, at "play
again?" too (y, s or n); end of input, ``q`` or Ctrl-C end the program with exit code 0. A bad
model file gets one line on stderr and exit code 2, and so does a policy without a legal greedy
move somewhere (NaN or all -inf logits, an occupied cell preferred): the loader checks every
position before the first game, and each move is checked again, so the agent never "plays" a
taken cell.

Torch, the engine and the loaders are imported by the functions that use them, so ``--help``,
a missing file and a bad ``--port`` answer before torch loads (issue 43).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from ttt_research.contract import EVAL_SEATS, SEAT_PIECE
from ttt_research.env.mnk import game_option
from ttt_research.errors import command
from ttt_research.evaluation.options import port_number, require_path

if TYPE_CHECKING:  # torch and the engine load with the first game (a function's import)
    import torch

    from ttt_research.env.board import Game
    from ttt_research.evaluation.exact import PolicyFn

SYMBOL = {SEAT_PIECE["x"]: "X", SEAT_PIECE["o"]: "O", 0: "."}  # game.X, game.O, game.EMPTY


class Quit(Exception):
    """The person asked to stop (q), or the input ended."""


def _board(game: Game | None) -> Game:
    """``game``, or tic-tac-toe when None (the default of every function here)."""
    from ttt_research.env.board import TIC_TAC_TOE

    return TIC_TAC_TOE if game is None else game


def decide(policy: PolicyFn, code: int, game: Game | None = None) -> tuple[int, torch.Tensor]:
    """The greedy move at row ``code`` of ``game``'s tables and the (cells,) move probabilities
    behind it.

    The same rule as ``exact.greedy_actions``: mask occupied cells, argmax, ties to the
    lowest cell (torch.argmax returns the first maximum). Probabilities are the softmax
    over the empty cells; a model that masks its own logits gives the same numbers.
    Logits without a legal greedy move here raise ``errors.IllegalMoveError`` (one line
    naming the board), the strict rule of a policy file.
    """
    import torch

    from ttt_research.evaluation.exact import check_logits

    game = _board(game)
    t = game.tables()
    with torch.no_grad():
        logits = policy(t.view[code][None].float())[0].to("cpu", torch.float32)  # (cells,)
    check_logits(logits[None], torch.tensor([code]), strict=True, game=game)
    masked = torch.where(t.legal[code], logits, -torch.inf)
    return int(masked.argmax()), torch.softmax(masked.double(), -1)


# --------------------------------------------------------------------------- drawing


def render(code: int, game: Game | None = None) -> str:
    """The board, m rows of n cells, with the numbers (1 to m*n, right-aligned to the widest)
    of the empty cells beside it; a row of dashes and '+' between rows."""
    game = _board(game)
    board = game.tables().board[code].tolist()
    wide = len(str(game.cells))  # 1 on tic-tac-toe: its board as it always was drawn
    rows = []
    for r in range(game.m):
        cells = board[game.n * r: game.n * (r + 1)]
        left = " | ".join(SYMBOL[c] for c in cells)
        right = " | ".join(f"{game.n * r + i + 1:>{wide}}" if c == 0 else " " * wide
                           for i, c in enumerate(cells))
        rows.append(f"  {left}        {right}".rstrip())
        if r < game.m - 1:
            rows.append("  " + "        ".join("".join("+" if ch == "|" else "-" for ch in side)
                                               for side in (left, right)))
    return "\n".join(rows)


def render_probs(probs: torch.Tensor, chosen: int, game: Game | None = None) -> str:
    """(cells,) probabilities as a grid of the board (m rows of n) in percentages; the chosen
    cell in brackets, occupied cells as '-'."""
    game = _board(game)
    cells = []
    for i, p in enumerate(probs.tolist()):
        text = "-" if p == 0.0 else f"{100 * p:.1f}%"
        cells.append(f"[{text}]" if i == chosen else f" {text} ")
    return "\n".join(("  " + "".join(f"{c:>9}" for c in cells[game.n * r: game.n * (r + 1)])).rstrip()
                     for r in range(game.m))


# --------------------------------------------------------------------------- one game


def ask_cell(code: int, read: Callable[[str], str], say: Callable[[str], None],
             game: Game | None = None) -> int:
    """Prompt until the person names an empty cell; returns it as 0..cells-1."""
    game = _board(game)
    legal = game.tables().legal[code]
    last = game.cells
    while True:
        text = read(f"your move (1-{last}, q to quit): ").strip()
        if text.lower() in ("q", "quit", "exit"):
            raise Quit
        try:
            n = int(text)
        except ValueError:
            say(f"'{text}' is not a cell number: type a number from 1 to {last}")
            continue
        if not 1 <= n <= last:
            say(f"{n} is out of range: cells are numbered 1 to {last}")
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
              say: Callable[[str], None], game: Game | None = None) -> int:
    """One game on ``game``'s board, the person as ``seat``; returns the winner (+1 X, -1 O,
    0 draw). A position is a row of the game's tables (row 0 the empty board): a move is a
    gather of ``next``, the end and the winner are looked up (the k-in-a-row lines of the game)."""
    game = _board(game)
    t = game.tables()
    code = 0  # the empty board's row, on every board (env/indexed.py)
    say(f"\nYou are {SYMBOL[seat]}, the agent is {SYMBOL[-seat]}. X moves first.")
    while not t.done[code]:
        if t.mover[code] == seat:
            say(render(code, game))
            cell = ask_cell(code, read, say, game)
        else:
            cell, probs = decide(policy, code, game)
            say(f"agent ({SYMBOL[-seat]}) plays {cell + 1}; its move probabilities:")
            say(render_probs(probs, cell, game))
        code = int(t.next2d[code, cell])
    say(render(code, game))
    winner = int(t.winner[code])
    say({seat: "You win!", -seat: "The agent wins.", 0: "Draw."}[winner])
    return winner


def play_session(policy: PolicyFn, seat: int, read: Callable[[str], str] = input,
                 say: Callable[[str], None] = print, game: Game | None = None) -> dict[str, int]:
    """Games until the person stops; returns the tally from the person's side. Off
    tic-tac-toe the first line names the game (its board and the line that wins)."""
    from ttt_research.env.board import TIC_TAC_TOE

    game = _board(game)
    if game != TIC_TAC_TOE:  # tic-tac-toe's session starts as it always has
        say(f"The {game.name} game: {game.m} rows of {game.n} cells; {game.k} in a row "
            "(across, down or diagonal) wins.")
    tally = {"win": 0, "loss": 0, "draw": 0}
    try:
        while True:
            winner = play_game(policy, seat, read, say, game)
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
                                description="Play against a trained agent (greedy policy) on its board.")
    p.add_argument("path", help="policy file: a checkpoint (.ckpt) or an ONNX model (.onnx)")
    p.add_argument("--seat", choices=EVAL_SEATS, default="x", help="your side (X moves first)")
    p.add_argument("--game", default=None, metavar="M,N,K",
                   help="the board the model must be of (default: the one it names; a model of "
                        "another board is refused)")
    p.add_argument("--web", action="store_true", help="serve the browser game on localhost instead")
    p.add_argument("--port", default="8000", help="port for --web, 0 to 65535 (0: any free port)")
    args = p.parse_args(argv)
    port = port_number(args.port) if args.web else None
    sizes = game_option(args.game)
    require_path(args.path)
    from ttt_research.env.board import Game

    asked = None if sizes is None else Game(*sizes)  # a model of another board: refused before it runs
    try:
        if args.web:
            from ttt_research.web.server import serve

            return serve(args.path, port, asked)
        from ttt_research.evaluation.policy_file import game_of, load_policy  # PolicyFileError: a UserError

        # a board at a time: the boards are checked alone (policy_file.ALONE_MAX of them)
        policy, meta = load_policy(args.path, played=True, game=asked)
        board = game_of(args.path, meta)
        decide(policy, 0, board)  # a model that loads but cannot run fails here
        play_session(policy, SEAT_PIECE[args.seat], game=board)
    except KeyboardInterrupt:
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
