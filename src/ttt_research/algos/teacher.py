"""The solver as a teacher (``algo=teacher``): the policy network fitted to the exact optimal moves.

Not reinforcement learning: on a board small enough to solve (4,4,4: 9,062,619 decision
positions), the solver knows every position's minimax-optimal moves (``solver.solve(g=game)
.optimal``, (R, cells) bool over the board's table rows). Each update takes a batch of
decision positions and takes one Adam step on

    loss = -log sum_{a optimal} softmax(masked logits)_a     (mean over the batch)

the probability mass the policy puts on the optimal set. Any optimal move will do (a drawn
position usually has several), so the loss asks for the set, not for one of its moves; where
the mover has lost, every legal move keeps the value and the row costs nothing.

The table is the teacher, not the agent: only the network plays (the exact evaluation, the
export and play read ``net``), and it must generalise from the rows it was shown to the ones
it never saw. Where the rows come from is the question this algorithm exists to study:

* ``uniform`` positions drawn uniformly over every decision position of the board (the
  measure of ``optimal_move_rate_all``), and
* the positions where the learner moved in ``games_per_update`` games of its greedy policy
  (``epsilon`` of moves at random) against a uniformly random opponent, half as X and half
  as O: every opponent reply has a chance, so these are the positions its worst case
  (``holds_value``) depends on, weighted by how often a careless opponent reaches them;
* ``hard`` positions drawn from those where its greedy move is not optimal in the tree its
  greedy policy spans against every opponent move, from each seat (``wrong_rows``: the rows
  that decide ``holds_value``, the exact evaluation's walk without the outcome sums),
  found again every ``recheck_every`` updates. A random opponent reaches a line of eight
  chosen replies about once in 10^7 games; this walk finds it at once. Not in the
  checkpoint: a resumed run walks again at its first update (with ``hard`` > 0 it is then
  not bit for bit the run never stopped). ``hard_from=value`` keeps only the rows where the
  greedy move gives up the game's value for that seat (a drawn game's draw, a won game's
  win): none in a seat's tree is exactly ``holds_value`` for a seat the game does not lose
  (the opponent, playing every move, can steer to any of them and then play perfectly; with
  none, no line drops below the value), so the walk is then an exact certificate: from both
  seats on 4,4,4 (a draw), X's forced win on 4,4,3. A lost seat (O on 4,4,3) has nothing to
  give up and is not walked (its ``holds_value``, an optimal move everywhere it can reach, is
  the ``wrong`` walk's).

``freeze_after``: once that share of the budget is played, the first walk that finds no hard
row freezes the net: no more steps (each could break what it holds), no more walks, and the
run ends after that update (``finished``), evaluated exactly and exported as at its budget's
end (it played the rest of the budget's games before, learning nothing from them: 4,4,4's
fresh seeds 62100-62109 still did). A resumed frozen run walks once, finds none again (the
same net) and ends.

The games' results are the update's sampled rates (``rollout/*``), and the budget counts
those games.
"""

from __future__ import annotations

import functools

import torch

from ttt_research.algos.base import Algorithm, Run, Update, number
from ttt_research.env import game as rules
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.rollout import draw_seats, rates
from ttt_research.env.solver import solve
from ttt_research.env.streams import randint, uniform
from ttt_research.evaluation.tree import decision_codes
from ttt_research.models import member_optim


def teacher_loss(logits: torch.Tensor, optimal: torch.Tensor) -> torch.Tensor:
    """(B, cells) masked logits and (B, cells) bool optimal moves (at least one a row) ->
    the mean over rows of -log(the softmax's mass on the optimal cells)."""
    on_optimal = torch.logsumexp(logits.masked_fill(~optimal, float("-inf")), -1)  # (B,)
    return (torch.logsumexp(logits, -1) - on_optimal).mean()


@functools.lru_cache(maxsize=4)
def decision_rows(game: Game, device: str) -> torch.Tensor:
    """(M,) the table rows of ``game`` where somebody is to move, on ``device`` (the exact
    evaluation's decision points, ``optimal_move_rate_all``'s denominator)."""
    return decision_codes(game).to(device)


class Teacher(Algorithm):
    """``algo=teacher``: one Adam step an update on -log P(optimal set), from the solver's moves."""

    name = "teacher"  # its algo= option: in checkpoints, ONNX metadata and console lines

    # Every hyperparameter's default is in algos/teacher_spec.py (Hyper): written once, there.
    def __init__(self, net, *, games_per_update: int, uniform: int, hard: int, recheck_every: int,
                 epsilon: float, lr: float, lr_final: float | None, hard_from: str,
                 freeze_after: float | None, game: Game = TIC_TAC_TOE):
        super().__init__(net, games_per_update, game)
        self.uniform = int(uniform)
        self.hard = int(hard)
        self.hard_from = str(hard_from)
        self.recheck_every = int(recheck_every)
        self.freeze_after = None if freeze_after is None else float(freeze_after)
        self.wrong: torch.Tensor | None = None  # (W,) hard rows of the last walk
        self.since_walk = 0  # updates since that walk
        self.frozen = False  # a walk past freeze_after found no hard row: no more steps
        self.epsilon = float(epsilon)
        self.lr = number(lr)
        self.lr_final = number(lr_final)

    def configure_optimizers(self):
        return member_optim.adam(self.net, self.net.parameters(), lr=self.lr)

    @property
    def finished(self) -> bool:
        """Frozen: nothing is left to learn, the run ends here (``freeze_after``)."""
        return self.frozen

    def update(self, run: Run) -> Update:
        opt = run.optimizer()
        member_optim.set_lr(opt.optimizer, run.scheduled(self.lr, self.lr_final))
        device = torch.device(run.device)
        t = self.game.tables(device)
        solution = solve(device, g=self.game)
        optimal = solution.optimal  # (rows, cells) bool
        played, outcome, kept = self._play(run, t, optimal)
        everywhere = decision_rows(self.game, str(device))
        drawn = everywhere.index_select(0, randint(everywhere.numel(), (1, self.uniform), device,
                                                   run.streams)[0])
        rows = torch.cat([played, drawn, self._hard_rows(run, t, solution)])  # (B,) table rows
        with torch.set_grad_enabled(not self.frozen):  # frozen: the loss is only logged
            loss = teacher_loss(self.net(t.view.index_select(0, rows).float()), optimal.index_select(0, rows))
        if not self.frozen:
            opt.zero_grad()
            run.backprop(loss)
            opt.step()
        return Update(self.games_per_update, rates(outcome),
                      {"loss": loss.detach(), "lr": member_optim.learning_rate(opt.optimizer),
                       "played_optimal": kept, "positions": float(rows.numel()), "frozen": float(self.frozen),
                       **({"wrong_in_tree": float(self.wrong.numel())} if self.wrong is not None else {})},
                      moves=torch.tensor([played.numel()]))

    @torch.no_grad()
    def _play(self, run: Run, t: rules.Tables, optimal: torch.Tensor):
        """``games_per_update`` games of the greedy policy (``epsilon`` of moves random) against
        a uniformly random opponent, a seat drawn per game, walked over the table rows ply by
        ply (every game in lockstep). Returns the (P,) rows where the learner moved, the (G,)
        outcomes from its side, and the share of its moves there that were optimal."""
        G, C, device = self.games_per_update, t.cells, torch.device(run.device)
        seat = draw_seats((1, G), "both", device, run.streams)[0]  # (G,) int8
        row = torch.zeros(G, dtype=torch.long, device=device)  # row 0: the empty board
        mine_rows, kept = [], []
        for ply in range(C):
            live = ~t.done.index_select(0, row)  # (G,)
            # The same draws every ply, whoever moves: a run's draws do not depend on its net.
            u_random, u_explore = uniform((1, 2, G), device, run.streams)[0]
            if not bool(live.any()):
                break
            mover = rules.X if ply % 2 == 0 else rules.O
            mine = live & (seat == mover)
            # A uniformly random legal cell: the k-th legal one, k = floor(u * legal cells).
            k = (u_random * t.n_legal.index_select(0, row).long()).long()
            move = t.kth_legal.index_select(0, row * C + k).long()  # (G,)
            at = row[mine]
            greedy = self.net(t.view.index_select(0, at).float()).argmax(-1)
            move[mine] = torch.where(u_explore[mine] < self.epsilon, move[mine], greedy)
            mine_rows.append(at)
            kept.append(optimal.index_select(0, at).gather(1, move[mine][:, None]).squeeze(1))
            row = torch.where(live, t.next.index_select(0, row * C + move).long(), row)
        outcome = t.winner.index_select(0, row) * seat  # (G,) +1 the learner won
        kept = torch.cat(kept)
        return torch.cat(mine_rows), outcome[None], kept.float().mean() if kept.numel() else 1.0

    def _hard_rows(self, run: Run, t: rules.Tables, solution) -> torch.Tensor:
        """``hard`` rows drawn uniformly from the last walk's hard rows (walking again every
        ``recheck_every`` updates); none when ``hard`` is 0, the walk found nothing or the net
        is frozen (a walk past ``freeze_after`` that found nothing froze it)."""
        device = torch.device(run.device)
        if self.hard == 0 or self.frozen:
            return torch.zeros(0, dtype=torch.long, device=device)
        if self.wrong is None or self.since_walk >= self.recheck_every:
            value = solution.value if self.hard_from == "value" else None
            self.wrong, self.since_walk = wrong_rows(self.net, t, solution.optimal, value), 0
            self.frozen = (self.freeze_after is not None and float(run.progress) >= self.freeze_after
                           and self.wrong.numel() == 0)
        self.since_walk += 1
        if self.wrong.numel() == 0:
            return self.wrong
        return self.wrong.index_select(0, randint(self.wrong.numel(), (1, self.hard), device, run.streams)[0])


CHUNK = 1 << 16  # positions per forward pass of the walk: bounds its activations


@torch.no_grad()
def wrong_rows(net, t: rules.Tables, optimal: torch.Tensor,
               value: torch.Tensor | None = None) -> torch.Tensor:
    """(W,) the distinct table rows where ``net``'s greedy move is not optimal, over the
    positions it reaches from either seat when it plays greedily and the opponent plays every
    legal move: ply by ply, its own plies keep one child a position, the opponent's all.

    With ``value`` (the solver's (rows,) int8 values from X's side), only the rows where the
    greedy move gives up the game's value for the seat (v, the empty board's value from its
    side): the row is worth >= v to the mover and the child < v. The walk then leaves those
    children (below v, nothing under them can be mended there) and skips a lost seat (v = -1:
    nothing to give up). None found from a seat the game does not lose: the net holds its value."""
    C, found = t.cells, []
    for seat in (rules.X, rules.O):
        v = None if value is None else int(value[0]) * seat  # the game's value for this seat
        if v == -1:
            continue
        rows = torch.zeros(1, dtype=torch.long, device=optimal.device)  # the empty board
        for ply in range(C):
            rows = rows[~t.done.index_select(0, rows)]
            if rows.numel() == 0:
                break
            if (rules.X if ply % 2 == 0 else rules.O) == seat:
                move = torch.cat([net(t.view.index_select(0, part).float()).argmax(-1)
                                  for part in rows.split(CHUNK)])
                children = t.next.index_select(0, rows * C + move).long()
                if value is None:
                    bad = ~optimal.index_select(0, rows).gather(1, move[:, None]).squeeze(1)
                else:
                    keeps = value.index_select(0, children).long() * seat >= v  # (P,)
                    bad = (value.index_select(0, rows).long() * seat >= v) & ~keeps
                    children = children[keeps]
                found.append(rows[bad])
            else:
                at, cell = t.legal.index_select(0, rows).nonzero(as_tuple=True)
                children = t.next.index_select(0, rows.index_select(0, at) * C + cell).long()
            rows = torch.unique(children)
    if not found:
        return torch.zeros(0, dtype=torch.long, device=optimal.device)
    return torch.unique(torch.cat(found))
