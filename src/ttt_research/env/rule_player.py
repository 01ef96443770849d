"""The rule-based player on any m,n,k board: the cells its rules name, for B boards at once.

Tic-tac-toe's rule player is the PPO seed's, a table over its 3^9 codes (``opponents.rules_probs``,
kept exactly as it was): win, block, fork, block a fork, centre, a corner, a side. The first
four rules say the same on any board; centre, corner and side are tic-tac-toe's names for a
preference the lines give on every board, so the general player ends with it:

1. **win**: a cell that completes a line of mine (its other k - 1 cells mine);
2. **block**: a cell that would complete a line of theirs;
3. **fork**: a cell after which I threaten two lines or more (a threat: a line with k - 1 of
   mine and its last cell empty: a win next move);
4. **block a fork**: a cell where their stone would give them two threats or more;
5. **most open lines**: the cell on the most lines still open to me (no stone of theirs on
   it). On the empty 3x3 board that is the seed's order: centre 4 lines, a corner 3, a side 2.

The first rule that names a cell decides; its cells are equally likely. On tic-tac-toe the
first four rules name exactly the table's cells (``tests/env/test_rule_player.py``); only the
last differs (the table keeps centre > corner > side on any board, open or not).

Every rule is a count over the board's lines: with the (L, cells) incidence of its lines,
each line's count of my stones is one matmul of the (B, cells) boards, and a rule's cells
one matmul back, so a batch of boards is a few matmuls and no loop over games.
"""

from __future__ import annotations

import functools

import torch

from ttt_research.env.mnk import MNK


@functools.lru_cache(maxsize=8)
def incidence(g: MNK, device: torch.device | str = "cpu") -> torch.Tensor:
    """(L, cells) float32: 1 where line l passes through the cell (``g.lines``)."""
    lines = torch.tensor(g.lines, dtype=torch.long)  # (L, k)
    out = torch.zeros(lines.shape[0], g.cells)
    out.scatter_(1, lines, 1.0)
    return out.to(device)


def forcing_cells(board: torch.Tensor, mover: torch.Tensor, g: MNK) -> tuple[torch.Tensor, torch.Tensor]:
    """The first four rules (win, block, fork, block a fork) for (B, cells) boards (+1 X, -1 O,
    0 empty) and (B,) movers (+1 / -1): ((B, cells) bool, the cells the first rule that applies
    names; (B,) bool, whether one applied)."""
    inc = incidence(g, board.device)  # (L, cells)
    view = board.float() * mover.float()[:, None]  # (B, cells) +1 mine, -1 theirs
    empty = view == 0  # (B, cells)
    on_mine = (view > 0).float() @ inc.T  # (B, L) my stones on each line
    on_theirs = (view < 0).float() @ inc.T
    k = g.k

    def cells_of(lines: torch.Tensor) -> torch.Tensor:
        """(B, L) bool lines -> (B, cells) bool: the empty cells on any of them."""
        return ((lines.float() @ inc) > 0) & empty

    def threats_after(own: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """(B, cells): the threats ``own`` holds after a stone on each cell. A line is a threat
        with k - 1 own stones and none of ``other``: the lines through the cell gain a stone,
        the rest keep theirs (two matmuls, no (B, cells, L) tensor)."""
        free = other == 0
        now = (free & (own == k - 1)).float()  # (B, L) threats already there
        made = (free & (own == k - 2)).float()  # (B, L) threats a stone on the line makes
        return now.sum(-1, keepdim=True) - now @ inc + made @ inc

    rules = (
        cells_of((on_mine == k - 1) & (on_theirs == 0)),  # win
        cells_of((on_theirs == k - 1) & (on_mine == 0)),  # block
        empty & (threats_after(on_mine, on_theirs) >= 2),  # fork
        empty & (threats_after(on_theirs, on_mine) >= 2),  # block a fork
    )
    chosen = torch.zeros_like(empty)
    decided = torch.zeros_like(empty[:, 0])
    for cells in rules:  # four rules, each over the whole batch
        use = cells.any(-1) & ~decided
        chosen |= cells & use[:, None]
        decided |= use
    return chosen, decided


def rule_cells(board: torch.Tensor, mover: torch.Tensor, g: MNK) -> torch.Tensor:
    """(B, cells) boards (+1 X, -1 O, 0 empty) and (B,) movers (+1 / -1) -> (B, cells) bool:
    the empty cells the first rule that applies names (``forcing_cells``, else the cells on the
    most lines open to the mover; none on a full board: the caller passes positions in play)."""
    chosen, decided = forcing_cells(board, mover, g)
    inc = incidence(g, board.device)
    view = board.float() * mover.float()[:, None]
    empty = view == 0
    open_lines = ((view < 0).float() @ inc.T == 0).float() @ inc  # (B, cells) lines with none of theirs
    open_lines = torch.where(empty, open_lines, -1.0)
    most = empty & (open_lines == open_lines.amax(-1, keepdim=True))
    return chosen | (most & ~decided[:, None])


def rule_table(g: MNK, board: torch.Tensor, mover: torch.Tensor, legal: torch.Tensor,
               chunk: int = 1 << 16) -> torch.Tensor:
    """(N, cells) bool: ``rule_cells`` at every row of a board's tables (``board``, ``mover``,
    ``legal``: its fields), a chunk of rows at a time; finished rows name no cell."""
    out = torch.zeros_like(legal)
    for rows in torch.arange(board.shape[0]).split(chunk):
        out[rows] = rule_cells(board[rows], mover[rows], g) & legal[rows]
    return out
