"""``search/gumbel.gumbel_search``'s arguments, searched by the literal trees of
``search/reached.reached_search`` (B trees of K = simulations + 1 nodes, every simulation
walked from the root one depth at a time) with the network read from the same tables: the
reference the shared-subtrees search is checked against, bit for bit."""

from __future__ import annotations

import torch

from ttt_research.env.board import TIC_TAC_TOE
from ttt_research.search.gumbel import Search
from ttt_research.search.reached import reached_search


def tree_search(root, logits, value, simulations, gumbel=None, offset=None, max_considered=9,
                rescale=True, game=TIC_TAC_TOE) -> Search:
    """``gumbel_search(root, logits, value, ...)`` by walking B literal trees."""
    base = torch.zeros_like(root) if offset is None else offset.long()

    def evaluate(rows):  # each tree reads its member's block of the tables
        at = base + rows
        return logits.index_select(0, at), value.index_select(0, at)

    return reached_search(root, evaluate, simulations, gumbel, max_considered, game, rescale)
