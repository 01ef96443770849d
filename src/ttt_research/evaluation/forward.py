"""One agent's network over every decision point of another board, read once, block by block.

``exploit.evaluate_agent`` needs three things from an agent's (M, cells) logits: the evaluator's
check (``exact.check_logits``), the greedy moves (``exact.checked_greedy``) and the logits at
each ply's empty cells (``window.at_empty_cells``, what the as-trained pass reads). On 4,4,4
(M = 9,062,619) the whole table is 0.58 GB, written once and read three times. Here each block of
``ROWS`` positions is checked, its greedy moves taken and its empty cells' logits kept while it is
in the core's cache, and the table is never made; the blocks are shared among ``tree.Workers``'
threads. Every number is the one the three passes make from the table: each is a row's own (a
masked argmax, a test, a gather), and a row's logits do not depend on the block it is computed
in (tests/evaluation/test_any_board.py holds the report to the table's).
"""

from __future__ import annotations

import bisect

import torch

from ttt_research.env.board import Game
from ttt_research.errors import IllegalMoveError
from ttt_research.evaluation import exact
from ttt_research.evaluation.exact import PolicyFn
from ttt_research.evaluation.tree import Tree, Workers, decision_codes
from ttt_research.evaluation.window import empty_cells

# Positions per block: ``exact.FORWARD_ROWS`` is one thread's best (4,096: the activations in the
# core's cache); shared between two threads, 8,192 took ~5% less on 4,4,4 (half the switches
# between them). The logits are bit for bit the same for any split.
ROWS = 2**13


def agent_pass(policy: PolicyFn, c: Tree, game: Game,
               workers: Workers) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``policy`` over ``decision_codes(game)`` -> ``(actions, parts)``: (rows,) int64 greedy moves
    over the game's tables (``checked_greedy``'s) and, per ply, (u, e) float32 logits at its
    unfinished rows' empty cells (``at_empty_cells``'). A policy without a legal greedy move
    somewhere is refused by ``check_logits`` (one more forward, on that path only)."""
    t, codes = game.tables(), decision_codes(game)
    actions = torch.zeros(t.states, dtype=torch.long)
    parts = [torch.empty(rows.numel(), c.cells - ply, dtype=torch.float32)  # (u, e) per ply
             for ply, rows in enumerate(c.plies)]
    starts = [0]  # where each ply's rows start among the decision positions (a ply after the last)
    for rows in c.plies:
        starts.append(starts[-1] + rows.numel())

    size = ROWS

    def block(lo: int) -> bool:
        part = codes[lo:lo + size]
        with torch.inference_mode():  # a thread's own mode: entered in the thread that runs the block
            # (index_select: the rows' bytes copied; an indexing took 4x as long on these tables)
            x = policy(t.view.index_select(0, part).float()).to("cpu", torch.float32)  # (b, cells)
            masked = torch.where(t.legal.index_select(0, part), x, -torch.inf)
            best = masked.argmax(-1, keepdim=True)  # the greedy move: the first maximum
            # ``checked_greedy``'s rule: a NaN on an empty cell, or an infinite logit at the greedy
            # move, in one test: an argmax lands on the first NaN, so a NaN there is the greedy logit.
            bad = not bool(x.gather(-1, best).isfinite().all())
            actions.index_copy_(0, part, best.squeeze(-1))
            hi = lo + part.numel()
            ply = bisect.bisect_right(starts, lo) - 1  # the plies this block overlaps, from the first
            while ply < len(parts) and starts[ply] < hi:
                a, b = max(lo, starts[ply]), min(hi, starts[ply + 1])
                at = slice(a - starts[ply], b - starts[ply])
                parts[ply][at] = x[a - lo:b - lo].gather(1, empty_cells(c, ply, c.plies[ply][at]))
                ply += 1
        return bad

    if any(workers.map(block, range(0, codes.numel(), size))):
        # Raises, naming the first such position (a second forward, on this path only).
        exact.check_logits(exact.decision_logits(policy, game), game=game)
        raise IllegalMoveError("the policy has no legal greedy move somewhere in one pass over the "
                               "decision positions and has one everywhere in another; refused, not scored")
    return actions, parts
