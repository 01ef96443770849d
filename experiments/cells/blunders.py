"""Where a tic-tac-toe population's greedy O loses to the random X (issue 60, the cells' mlp25 rows).

    PYTHONPATH=src python experiments/cells/blunders.py runs/cells/reinforce_mlp25/tuning/ROW [--top 3]

For each member of the population's last checkpoint: its exact loss as O against the random X, and
the O decision positions it reaches where its greedy move gives up the minimax value (a draw
turned into a loss), by the probability that the random X leads the game there. Each position is
named by its orbit under the board's 8 symmetries (the smallest code among its turns), so the
same mistake in different orientations, or in different seeds, reads the same. A member reading
``orbit`` lines that every seed shares says the update converges to one fixed point there.
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import torch

from ttt_research.env import game as rules
from ttt_research.env.board import TIC_TAC_TOE, symmetries, turned
from ttt_research.evaluation.exact import board_text, greedy_actions_stack
from ttt_research.evaluation.tree import decision_codes, tree
from ttt_research.models.nets import MLPStack


def members_logits(ckpt: Path) -> torch.Tensor:
    """(N, M, 9) logits of the checkpoint's members at the decision positions."""
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    spec = state["net_spec"]
    weights = {k.removeprefix("net."): v for k, v in state["state_dict"].items() if k.startswith("net.")}
    n = weights["weights.0"].shape[0]
    stack = MLPStack(n, spec["hidden"], spec.get("encoding", "planes18"))
    stack.load_state_dict(weights)
    views = TIC_TAC_TOE.tables().view[decision_codes()].float()  # (M, 9)
    with torch.no_grad():
        return stack(views)


def orbit(code: int) -> int:
    """The smallest code among the position's 8 turns."""
    board = TIC_TAC_TOE.tables().board[code]  # (9,)
    sym = symmetries(TIC_TAC_TOE, torch.device("cpu"))
    turns = turned(board.expand(sym.shape[0], -1), torch.arange(sym.shape[0]), sym)
    return int(rules.encode(turns).min())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--top", type=int, default=3)
    a = ap.parse_args()
    logits = members_logits(a.run / "checkpoints" / "last.ckpt")
    actions, _ = greedy_actions_stack(logits)  # (N, states)
    c = tree("cpu")
    act = actions[:, c.codes].T.contiguous()  # (R, N)
    n = act.shape[1]
    members = torch.arange(n)
    reach = torch.zeros(c.size, n, dtype=torch.float64)
    reach[c.empty] = 1.0
    for ply in range(c.cells):
        rows = c.plies[ply]
        nxt = c.next[rows]  # (r, 9)
        if c.ply_mover[ply] == rules.O:  # the member's greedy move
            reach.index_put_((nxt.gather(1, act[rows]), members.expand(rows.numel(), n)), reach[rows],
                             accumulate=True)
        else:  # the random X: every empty cell alike
            legal = c.legal[rows].double()  # (r, 9)
            share = legal / legal.sum(-1, keepdim=True)
            for cell in range(c.cells):
                reach.index_add_(0, nxt[:, cell], reach[rows] * share[:, cell, None])
    lost = reach[c.done & (c.winner == rules.X)].sum(0)  # (N,)
    o_rows = (~c.done & (c.mover == rules.O)).nonzero().squeeze(1)
    wrong = ~c.optimal[o_rows].gather(1, act[o_rows])  # (r, N)
    shared = Counter()
    for k in range(n):
        at = o_rows[wrong[:, k] & (reach[o_rows, k] > 0)]
        p = reach[at, k]
        order = p.argsort(descending=True)[: a.top]
        named = []
        for i in order:
            code = int(c.codes[at[i]])
            named.append((orbit(code), board_text(code), int(act[at[i], k]), float(p[i])))
        shared.update({o for o, *_ in named})
        print(f"member {k}: O loses {float(lost[k]):.4f}; {at.numel()} reached positions give up the value; "
              + "; ".join(f"orbit {o} {b} plays {m} (reached {q:.4f})" for o, b, m, q in named))
    print("orbits among the members' top mistakes:", shared.most_common(6))


if __name__ == "__main__":
    main()
