"""Network inputs: the mover's view of a board, encoded for a network.

Every board reaches a network from the view of the player to move (``game.Tables.view``):
``+1`` own piece, ``-1`` opponent's piece, ``0`` empty. One network can then play either
seat, and the ONNX contract takes exactly this view. Encodings turn it into inputs:

* ``signed9`` (the PPO seed): the 9 values as they are. (B, 9)
* ``planes18`` (antirez's ttt-rl): two bits per cell, interleaved cell by cell:
  ``[own_0, opp_0, own_1, opp_1, ...]``. (B, 18).

The names are tic-tac-toe's; on any board (``board.Game``) they encode every cell alike:
``signed9`` gives one input per cell, ``planes18`` two (``width``). antirez's bits are absolute (X, O)
  and his network always plays O; from the mover's view they are the same two bits in
  the other order, which changes nothing for a network whose weights start random.

Both are plain tensor operations, so they trace into the exported ONNX graph.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ttt_research.contract import ENCODING_NAMES
from ttt_research.env.board import TIC_TAC_TOE


def signed9(view: torch.Tensor) -> torch.Tensor:
    """(B, 9) mover's view -> (B, 9) float inputs, unchanged."""
    return view.float()


def planes18(view: torch.Tensor) -> torch.Tensor:
    """(B, 9) mover's view -> (B, 18) float inputs: an own-piece bit and an opponent bit
    per cell, interleaved."""
    v = view.float()
    # The bits interleaved as bytes, then made floats once: the same numbers as stacking two
    # float planes, whose interleaving copy took 0.65 s of 4,4,4's 9M-position evaluation.
    return torch.stack([v > 0, v < 0], dim=-1).flatten(-2).float()


ENCODINGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "signed9": signed9,
    "planes18": planes18,
}
PER_CELL = {"signed9": 1, "planes18": 2}  # inputs per cell of the board
WIDTH = {name: k * TIC_TAC_TOE.cells for name, k in PER_CELL.items()}  # tic-tac-toe's inputs
# The config validation checks net.encoding against contract.ENCODING_NAMES (without torch):
# those names must be exactly the encodings implemented here.
if not set(ENCODINGS) == set(PER_CELL) == set(ENCODING_NAMES):
    raise ImportError(f"encodings {sorted(ENCODINGS)} differ from contract.ENCODING_NAMES {ENCODING_NAMES}")


def width(name: str, cells: int) -> int:
    """The inputs encoding ``name`` gives a network for a board of ``cells`` cells."""
    return PER_CELL[name] * cells


def get(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The encoding called ``name``; a clear error names the choices otherwise."""
    try:
        return ENCODINGS[name]
    except KeyError:
        raise ValueError(f"net.encoding must be one of {sorted(ENCODINGS)}, got {name!r}") from None
