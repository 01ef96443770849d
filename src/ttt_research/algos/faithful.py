"""antirez's ttt-rl training loop in NumPy, move for move (``algo=reinforce_faithful``).

The seed plays one game (a random X against the network's O), then replays it and, for
each of the network's moves, runs a forward pass and one SGD step (backprop through the
softmax, the ReLU hidden layer, learning rate 0.1) before the next move. Done with torch
on one board at a time, each tiny operation pays torch's per-call overhead (~5 us) and
the loop runs at ~600 games/s; the same arithmetic in NumPy on views of the very same
parameter tensors runs ~10x faster, so this is the one place where we leave torch.

The network must be one hidden ReLU layer (``body.0`` and ``body.2`` of ``nets.MLP``),
as the seed's is, and live on the CPU; ``ReinforceFaithful`` (``reinforce_faithful.py``)
runs its torch loop otherwise. Rules come from ``game.tables`` as plain Python lists (one
board at a time).
"""

from __future__ import annotations

import numpy as np
import torch

from .. import game
from ..rollout import Reward


class RuleLists:
    """The tables ``game.tables`` holds, as Python lists for one-board-at-a-time play."""

    def __init__(self):
        t = game.tables("cpu")
        self.next = t.next2d.tolist()
        self.legal = [row.nonzero().squeeze(-1).tolist() for row in t.legal]
        self.done = t.done.tolist()
        self.winner = t.winner.tolist()
        # planes18 of the mover's view, precomputed per code: (N, 18) float32.
        v = t.view.float()
        self.planes = torch.stack([(v > 0).float(), (v < 0).float()], -1).flatten(-2).numpy()


_RULES: RuleLists | None = None


def supports(net) -> bool:
    """The fast loop handles the seed's shape: planes18 -> one hidden ReLU layer -> 9, on CPU."""
    layers = [m for m in net.body if isinstance(m, torch.nn.Linear)]
    on_cpu = all(p.device.type == "cpu" for p in net.parameters())
    return len(layers) == 2 and net.encoding_name == "planes18" and on_cpu


def train_games(net, games: int, reward: Reward, lr: float, learner_seat: int,
                rng: np.random.Generator) -> dict[str, float]:
    """Play and learn from ``games`` games one by one, as antirez's ttt-rl does.

    Returns counts of the learner's wins, losses and ties and the summed loss.
    """
    global _RULES
    if _RULES is None:
        _RULES = RuleLists()
    r = _RULES
    W1 = net.body[0].weight.detach().numpy()  # (H, 18): views, so updates land in the net
    b1 = net.body[0].bias.detach().numpy()  # (H,)
    W2 = net.body[2].weight.detach().numpy()  # (9, H)
    b2 = net.body[2].bias.detach().numpy()  # (9,)
    stats = {"win": 0, "loss": 0, "tie": 0, "loss_sum": 0.0}
    table = {1: reward.win, 0: reward.tie, -1: reward.loss}
    for _ in range(games):
        code, mover, moves, mine = game.EMPTY_CODE, game.X, [], []
        while not r.done[code]:
            legal = r.legal[code]
            if mover == learner_seat:  # greedy: the highest output among empty cells
                z = W2 @ np.maximum(W1 @ r.planes[code] + b1, 0.0) + b2
                cell = max(legal, key=lambda c: (z[c], -c))
                mine.append(len(moves))
            else:  # the random player: uniform over empty cells
                cell = legal[int(rng.integers(len(legal)))]
            moves.append((code, cell))
            code = r.next[code][cell]
            mover = -mover
        outcome = r.winner[code] * learner_seat
        stats[{1: "win", -1: "loss", 0: "tie"}[outcome]] += 1
        base = table[outcome]
        plies = len(moves)
        for ply in mine:  # replay the learner's moves, one SGD step each
            state, cell = moves[ply]
            scaled = base * (0.5 + 0.5 * ply / plies)
            x = r.planes[state]
            pre = W1 @ x + b1
            h = np.maximum(pre, 0.0)
            z = W2 @ h + b2
            p = np.exp(z - z.max())
            p /= p.sum()
            target = np.zeros(9, dtype=np.float32)
            if scaled >= 0:
                target[cell] = 1.0
            else:
                others = [c for c in r.legal[state] if c != cell]
                if others:
                    target[others] = 1.0 / len(others)
            w = abs(scaled)
            stats["loss_sum"] += float(-w * (target * np.log(np.maximum(p, 1e-30))).sum())
            d_out = (p - target) * w  # antirez's output deltas
            d_hid = (W2.T @ d_out) * (pre > 0)
            W2 -= lr * np.outer(d_out, h)
            b2 -= lr * d_out
            W1 -= lr * np.outer(d_hid, x)
            b1 -= lr * d_hid
    return stats
