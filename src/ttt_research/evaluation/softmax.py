"""The probabilities a policy given as logits plays: a softmax at a temperature, over the empty
cells (``exploit.logits_to_probs`` composes them with the greedy move and epsilon).

Tic-tac-toe's softmax is torch's, as it always was; another board's is ``softmax_down``'s, whose
numbers are each row's own wherever it is computed: the whole table of a file's policy and the
as-trained pass's blocks give the same bits (tests/evaluation/test_any_board.py).
"""

from __future__ import annotations

import torch

from ttt_research.env.board import TIC_TAC_TOE, Game

# Rows per step of another board's softmax over a whole table (``softmax``): its (rows, cells)
# float64 temporaries stay near 30 MB, where 4,4,4's whole table is 1.2 GB each.
ROWS = 2**18


def plain_softmax(temperature, epsilon) -> bool:
    """Whether ``logits_to_probs`` at this temperature and epsilon is one softmax: a number
    above 0, and no epsilon (``softmax``)."""
    return not isinstance(temperature, torch.Tensor) and temperature > 0 and not (
        isinstance(epsilon, torch.Tensor) or epsilon)


def plain_greedy(temperature, epsilon) -> bool:
    """Whether ``logits_to_probs`` at this temperature and epsilon is the greedy move alone: a
    number at most 0, and no epsilon."""
    return not isinstance(temperature, torch.Tensor) and temperature <= 0 and not (
        isinstance(epsilon, torch.Tensor) or epsilon)


def scaled(x: torch.Tensor, temperature: float) -> torch.Tensor:
    """Logits over a ``temperature`` above 0 (a number): as they are at 1."""
    return x if temperature == 1 else x / max(float(temperature), 1e-300)


def softmax(scaled: torch.Tensor, game: Game) -> torch.Tensor:
    """The float64 softmax of each (..., cells) row of ``scaled`` masked logits (-inf at the
    taken cells, 0 there in the result).

    Tic-tac-toe's is torch's softmax of the row, as it always was (the 3x3 figures do not
    move). Another board's is ``softmax_down``'s, a row a column: its taken cells add an exp
    of 0 between the empty cells' terms, which leaves each partial sum as it is, so a row's
    numbers are those of its empty cells alone, in cell order: what the as-trained pass makes
    from them a ply at a time (``exploit._Acted.at_cells``). The same probabilities as torch's up to
    the last bits, in a fifth of its time on 4,4,4's rows (torch's softmax along a short row
    spends ~100 ns on it)."""
    if game == TIC_TAC_TOE:
        return torch.softmax(scaled, -1)
    x = scaled.reshape(-1, scaled.shape[-1])
    out = torch.empty_like(x)
    for lo in range(0, x.shape[0], ROWS):
        out[lo:lo + ROWS] = softmax_down(x[lo:lo + ROWS].T.contiguous()).T
    return out.view(scaled.shape)


def softmax_down(x: torch.Tensor) -> torch.Tensor:
    """(e, r) float64 logits of r rows, a cell's a line, -> their softmax down each column, in
    place: the largest subtracted, ``exp``, the e terms added from the first line in order,
    each divided by their sum. Each column's numbers are its own, wherever it sits among
    how many columns (every step is elementwise, ``exp`` included: checked in the tests), which
    torch's softmax along a short axis does not give (its tail columns take another path)."""
    x = x.sub_(x.amax(0)).exp_()
    total = x[0].clone()
    for k in range(1, x.shape[0]):
        total.add_(x[k])
    return x.div_(total)
