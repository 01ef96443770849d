"""antirez's ttt-rl training loop, reproduced (``algo=reinforce_faithful``).

The seed learns from one game at a time: it plays a game greedily (the highest output
among the empty cells), then replays the network's moves and takes one plain SGD step
after each, on the loss of ``algos/reinforce.py`` (the move's target times its scaled
reward), with the softmax over all 9 outputs: the network has to learn that occupied
cells are bad. There are no batches, no temperature, no momentum and no schedules, so the
only hyperparameters are the learning rate (the seed's 0.1) and how many games one
training step plays (``games_per_update``: a Lightning step per game would cost more than
the game). The experiment ``antirez_repro`` sets the rest of the seed: 18 -> 100 -> 9
with uniform initialisation, the rewards 1 / 0.3 / -2, O against a random X.

Two implementations of the same loop:

* **NumPy** (``train_games`` below), for the seed's own setting: a network with one
  hidden layer on planes18, on the CPU, playing X or O against the random player. It
  updates the network's weights in place, about ten times faster than torch on one
  board at a time.
* **torch**, for everything else (deeper nets, other opponents, seat=both, a GPU): the
  same games and steps with autograd, through Lightning's optimizer wrapper.

Both play one game at a time and update outside DDP's gradient averaging, so this
algorithm trains in one process only (``train/validate.py`` refuses it with several).

Any m,n,k board (``game``, a ``board.Game``): antirez's two input bits a cell become
2 x cells inputs (planes18 encodes every cell alike), the softmax runs over all the cells,
and the torch loop plays the board (``play_batch`` of the game). The NumPy loop reads
tic-tac-toe's tables as Python lists (3^9 codes): another board's are too many for that
(9.7M positions on 4,4,4), so it is tic-tac-toe's only.
"""

from __future__ import annotations

import numpy as np
import torch

from ttt_research.algos.base import Algorithm, Run, Update
from ttt_research.algos.reinforce import antirez_loss, antirez_targets, concat, learner_moves
from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.opponents import RandomOpponent
from ttt_research.env.reward import Reward
from ttt_research.env.rollout import play_batch

# The NumPy loop: antirez's ttt-rl, move for move, on views of the net's own parameters.


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
            target = np.zeros(W2.shape[0], dtype=np.float32)  # a row per cell
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


class ReinforceFaithful(Algorithm):
    """``algo=reinforce_faithful``: one game at a time, one SGD step per move."""

    name = "reinforce_faithful"  # its algo= option: in checkpoints, ONNX metadata and console lines

    # Every hyperparameter's default is in algos/reinforce_faithful_spec.py (Hyper): written once, there.
    def __init__(self, net, *, games_per_update: int, lr: float, game: Game = TIC_TAC_TOE):
        super().__init__(net, games_per_update, game)
        self.lr = float(lr)

    def configure_optimizers(self):
        return torch.optim.SGD(self.net.parameters(), lr=self.lr)  # the seed's plain SGD

    def numpy_loop(self, run: Run) -> bool:
        """Whether ``train_games`` can run this setting (else the torch loop does)."""
        return (self.game == TIC_TAC_TOE and supports(self.net)
                and isinstance(run.opponent, RandomOpponent) and run.seat in ("x", "o"))

    @torch.no_grad()
    def act(self, view: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """(B, 9) view -> (B,) greedy moves: the highest logit among the empty cells."""
        return self.net(view).argmax(-1)

    def update(self, run: Run) -> Update:
        if self.numpy_loop(run):
            return self._numpy_games(run)
        return self._torch_games(run)

    def _numpy_games(self, run: Run) -> Update:
        """``games_per_update`` games in NumPy on the network's own weights."""
        # Drawn from the run's stream, which keeps runs reproducible.
        seed = int(torch.randint(2**62, (1,), generator=run.streams.generators[0]))
        seat = game.X if run.seat == "x" else game.O
        with torch.no_grad():
            s = train_games(self.net, self.games_per_update, run.reward, self.lr, seat,
                            np.random.default_rng(seed))
        n = self.games_per_update
        rates = {"win_rate": s["win"] / n, "loss_rate": s["loss"] / n, "tie_rate": s["tie"] / n}
        return Update(n, rates, {"loss": s["loss_sum"] / n, "lr": self.lr})

    def _torch_games(self, run: Run) -> Update:
        """The same loop with torch: one game, then one SGD step per learner move, in order."""
        opt = run.optimizer()
        results = []
        total = torch.zeros((), device=run.device)
        for _ in range(self.games_per_update):
            ep = play_batch(1, self.act, run.opponent, run.seat, run.device,
                            run.streams.generators[0], self.game)  # one game, no member axis
            view, legal, action, scaled, _ = learner_moves(ep, run.reward)
            targets = antirez_targets(action, legal, scaled)
            for i in range(view.shape[0]):  # one SGD step per move, in playing order
                m = slice(i, i + 1)
                loss = antirez_loss(self.net.raw_logits(view[m]), targets[m], scaled[m].abs(), 1.0)
                opt.zero_grad()
                run.backprop(loss)
                opt.step()
                total += loss.detach()
            results.append(ep)
        merged = concat(results)
        return Update(merged.batch, merged.rates(), {"loss": total / merged.batch, "lr": self.lr})
