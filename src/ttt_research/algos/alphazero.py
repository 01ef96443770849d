"""Gumbel AlphaZero (``algo=alphazero``): self-play with a batched tree search.

The network is the project's ``MLP`` (nine masked logits: the policy that is evaluated,
exported and played) with a value head over its last hidden layer (``models.heads``:
tanh, the mover's expected result). Each update:

1. **Tables.** The net's masked logits and value at every unfinished position (one pass
   over the 4,520 decision positions per member), written into tables indexed by the
   board code (a population's members one block each), and every position's subtree
   played once from them (``search/gumbel.subtrees``): the search reads both by gather.
2. **Play** ``games_per_update`` games (``rollout.play_batch``), every learner move chosen
   by ``search/gumbel.gumbel_search`` with ``simulations`` simulations: Gumbel noise from the
   member's stream, scaled by the temperature (annealed to ``temperature_final``; 0: no
   noise, a deterministic search), top-k sampling and sequential halving at the root.
3. **Targets.** Each searched position with the search's improved policy (softmax of the
   prior logits plus sigma of the completed q values) and the game's result for its mover
   (+1, 0, -1; with ``value_mix`` > 0 mixed with the search's value of the position) goes
   into the member's replay ring.
4. **Learn.** ``gradient_steps`` Adam steps on minibatches of ``batch_size`` positions,
   each turned by a random one of the board's 8 symmetries (``symmetries``):

       loss = cross-entropy(improved policy, softmax(logits))
              + value_coef * (v - z)^2
              + weight_decay * sum of squared weights

Against a fixed opponent (``opponent=random`` ...) the learner searches its own moves
with the same self-play tree (the opponent is modelled by the net) and learns from its
own positions only. Values are in game results (win 1, tie 0, loss -1): the reward table
must be zero-sum (``reward=zero_sum``, the default), and ``action_values`` reports them in
its units.

Any m,n,k board (``game``, a ``board.Game``): every (..., 9) below is (..., cells), the tables
and the subtrees are over the board's positions (``search/gumbel.py``; a view finds its row
through ``models.qtable.view_rows``), and the symmetries turned in learning are the board's
own (``mnk.MNK.symmetries``: 8 on a square, 4 on a rectangle).

At test time the search is a policy too: ``search_actions`` runs the deterministic search
(no noise, ties to the lowest cell) from every decision position, and ``eval.json`` gets
its exact evaluation under ``search`` (``test_simulations``).
"""

from __future__ import annotations

import contextlib
from dataclasses import fields
from functools import partial

import torch

from ttt_research.algos.alphazero_spec import reached_self_play
from ttt_research.algos.base import Algorithm, Run, Update, number
from ttt_research.algos.replay import Ring
from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.opponents import SelfPlay
from ttt_research.env.rollout import play_batch
from ttt_research.env.streams import uniform
from ttt_research.evaluation.exact import evaluate_actions, evaluate_actions_stack
from ttt_research.evaluation.exploit import Acting, policy_reports
from ttt_research.models import member_optim
from ttt_research.models.heads import ValueHead
from ttt_research.models.nets import MASKED
from ttt_research.models.qtable import board_codes, view_rows
from ttt_research.search.gumbel import Search, gumbel_search, subtrees
from ttt_research.search.reached import reached_search

CHUNK = 1 << 18  # positions a forward pass or a search takes at once (4,4,4 has 9.1M)

# ----------------------------------------------------------------------------- the terms


def policy_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(N, K, 9) masked logits, (N, K, 9) target policies (0 on occupied cells) -> (N,)
    the mean cross-entropy of the target against softmax(logits)."""
    return -(target * torch.log_softmax(logits, -1)).sum(-1).mean(-1)


def value_loss(value: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """(N, K) values, (N, K) results for the mover -> (N,) the mean squared error."""
    return (value - result).pow(2).mean(-1)


def squared_weights(params, n: int | None) -> torch.Tensor:
    """The sum of squared parameters, per member ((N,) for a stack's leading axis, else ())."""
    if n is None:
        return sum(p.pow(2).sum() for p in params)
    return sum(p.pow(2).reshape(n, -1).sum(1) for p in params)


def gumbel(shape: tuple[int, ...], device, streams) -> torch.Tensor:
    """Gumbel(0, 1) noise of ``shape`` (members first), from the members' streams."""
    u = uniform(shape, device, streams).clamp(1e-12, 1 - 1e-7)
    return -torch.log(-torch.log(u))


def mover_result(ep, self_play: bool) -> torch.Tensor:
    """(T, N, B) the game's result (+1 / 0 / -1) for the side that moves at each ply: the
    learner's own against a fixed opponent; in self-play X's result, negated at O's plies."""
    T = ep.learner.shape[0]
    if not self_play:
        return ep.outcome[None].expand(T, *ep.outcome.shape).float()
    side = torch.where(torch.arange(T, device=ep.outcome.device) % 2 == 0, 1.0, -1.0)
    return (ep.outcome * ep.seat).float()[None] * side.view(T, *[1] * ep.outcome.dim())


def codes_of(view: torch.Tensor, g: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(..., cells) mover's views -> (...) their rows of ``g``'s tables: tic-tac-toe's board
    codes (X moves when the pieces are level), another board's through ``view_rows``."""
    if g != TIC_TAC_TOE:
        rows = view_rows(g).to(view.device)
        return rows.index_select(0, board_codes(view).reshape(-1)).view(view.shape[:-1]).long()
    cells = view.shape[-1]
    own, other = (view == 1).sum(-1), (view == -1).sum(-1)
    mover = torch.where(own == other, game.X, game.O)
    return game.encode((view * mover[..., None]).reshape(-1, cells).to(torch.int8)).view(view.shape[:-1])


# ----------------------------------------------------------------------------- the algorithm


class AlphaZero(Algorithm):
    name = "alphazero"

    def __init__(self, net, *, games_per_update: int, simulations: int,
                 test_simulations: int, max_considered: int, lr: float,
                 lr_final: float | None, temperature: float,
                 temperature_final: float | None, value_coef: float, value_mix: float,
                 weight_decay: float, capacity: int, batch_size: int,
                 gradient_steps: int, max_grad_norm: float,
                 symmetries: bool, search: str,
                 value_head: torch.nn.Module | None = None, game: Game = TIC_TAC_TOE):
        super().__init__(net, games_per_update, game)
        t = game.tables()
        self.R, self.C = t.states, t.cells  # the tables' rows (a member's block) and the cells
        self.simulations, self.test_simulations = int(simulations), int(test_simulations)
        self.max_considered = int(max_considered)
        self.lr, self.lr_final = number(lr), lr_final
        self.temperature, self.temperature_final = number(temperature), temperature_final
        self.value_coef, self.weight_decay = float(value_coef), float(weight_decay)
        self.value_mix = float(value_mix)
        self.batch_size, self.gradient_steps = int(batch_size), int(gradient_steps)
        self.max_grad_norm = float(max_grad_norm)
        self.symmetries = bool(symmetries)
        self.reached = reached_self_play(search, game)  # self-play's search over the reached positions
        self.start = int((t.reachable & ~t.done).nonzero()[0])  # a finished game's stand-in root
        self.value_head = value_head if value_head is not None else self.companion_nets(net)["value_head"]
        self.replay = Ring(getattr(net, "n", 1), capacity, {
            "view": ((self.C,), torch.int8), "policy": ((self.C,), torch.float32),
            "result": ((), torch.float32)})
        # (S, cells) the board's symmetries as cell permutations (row 0 the identity)
        self.turns = torch.as_tensor(game.symmetries)  # (a plain tensor: not part of the state)

    @staticmethod
    def companion_nets(net) -> dict[str, torch.nn.Module]:
        """The value head, built right after the policy net (a population's per member)."""
        return {"value_head": ValueHead(net.hidden[-1])}

    def configure_optimizers(self):
        return member_optim.adam(self.net, list(self.net.parameters()) + list(self.value_head.parameters()),
                                 lr=self.lr)

    @property
    def members(self) -> int | None:
        return getattr(self.net, "n", None)

    # ------------------------------------------------------------------ tables and search

    def value(self, view: torch.Tensor) -> torch.Tensor:
        """(..., 9) mover's views -> (...) the value head's estimates."""
        return self.value_head(self.net.trunk(view))

    def heads(self, view: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(..., 9) mover's views -> masked logits (..., 9) and values (...): the hidden
        layers once, both heads on them."""
        h = self.net.trunk(view)
        return self.net.head(h).masked_fill(view != 0, MASKED), self.value_head(h)

    @torch.no_grad()
    def tables(self, logits: bool = True) -> tuple[torch.Tensor | None, torch.Tensor]:
        """(N * rows, cells) masked logits and (N * rows,) values, by member block and board
        code, the tables' row (unreached codes: masked logits, value 0); the forward pass a
        chunk of positions at a time (one on tic-tac-toe). ``logits=False``: the values alone
        (4,4,4: 39 MB a member, where the logits are 0.6 GB), None in the logits' place."""
        t = self.game.tables(self.replay.size.device)
        R, C = self.R, self.C
        codes = (t.reachable & ~t.done).nonzero().squeeze(1)  # (P,)
        n = self.members or 1
        table = torch.full((n, R, C), MASKED, device=codes.device) if logits else None
        values = torch.zeros(n, R, device=codes.device)
        # A part's activations are (N, p, hidden): 30 members on 2^18 positions held 4 GB a
        # layer, so a population's parts are CHUNK / N positions.
        for part in codes.split(max(CHUNK // n, 8192)):  # tic-tac-toe: one part always
            views = t.view.index_select(0, part).float()  # (p, cells) shared by every member
            if table is None:
                values[:, part] = self.value(views).float().view(n, -1)
                continue
            out, value = (x.float() for x in self.heads(views))  # (N, p, cells), (N, p)
            table[:, part] = out.view(n, -1, C)
            values[:, part] = value.view(n, -1)
        return (None if table is None else table.view(n * R, C)), values.view(n * R)

    def value_table(self) -> torch.Tensor:
        """``tables()``'s (N * rows,) values; inside ``values_held`` the ones computed on entering."""
        held = getattr(self, "_held_values", None)
        return held if held is not None else self.tables(logits=False)[1]

    @contextlib.contextmanager
    def values_held(self):
        """The value table computed once for the calls inside: an evaluation reads
        ``action_values`` once per part of its positions (``evaluation/values.py``: 35 parts on
        4,4,4, each a forward pass over all 9M positions otherwise, ~9 minutes where one pass
        takes seconds). 39 MB a member on 4,4,4, let go on leaving."""
        self._held_values = self.tables(logits=False)[1]
        try:
            yield
        finally:
            self._held_values = None

    @torch.no_grad()
    def search_actions(self, simulations: int | None = None, chunk: int = 16) -> torch.Tensor:
        """(N, 3^9) the deterministic search's move at every decision position (0 elsewhere),
        the roots of ``chunk`` members (4,520 positions each) searched at a time."""
        return self.search_all(simulations, chunk)[0]

    @torch.no_grad()
    def search_all(self, simulations: int | None = None,
                   chunk: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
        """``search_actions``, and the (N, M, cells) improved policies softmax(logits + sigma(q))
        of the same noise-free searches at the M decision positions (code order; 4,520 on
        tic-tac-toe), a board of more than ``CHUNK`` of them searched that many roots at a time."""
        k = self.test_simulations if simulations is None else int(simulations)
        R, C = self.R, self.C
        logits, values = self.tables()
        tree = subtrees(logits, values, k, max_considered=self.max_considered, game=self.game)
        del logits  # the tree holds what the searches read: 4,4,4's tables are 0.6 GB a member
        n = values.numel() // R
        t = self.game.tables(values.device)
        codes = (t.reachable & ~t.done).nonzero().squeeze(1)
        actions = torch.zeros(n, R, dtype=torch.long, device=codes.device)
        policies = torch.zeros(n, codes.numel(), C, device=codes.device)
        for first in range(0, n, chunk):
            m = min(chunk, n - first)
            members = torch.arange(first, first + m, device=codes.device)
            for at in torch.arange(codes.numel(), device=codes.device).split(CHUNK):  # tic-tac-toe: one
                roots = codes.index_select(0, at)
                offset = members.repeat_interleave(roots.numel()) * R  # each member's block of the tables
                s = gumbel_search(roots.repeat(m), None, None, k, offset=offset,
                                  max_considered=self.max_considered, tree=tree)
                actions[first:first + m, roots] = s.action.view(m, -1)
                policies[first:first + m, at] = s.policy.view(m, -1, C)
        return actions, policies

    def acting(self, run: Run) -> Acting:
        """The raw network's softmax (temperature 1). What self-play plays is the search's
        choice, at the scheduled temperature, noted here for ``search_trained`` (the shell
        asks for ``acting`` before the extra reports of the same evaluation)."""
        self.acting_temperature = run.scheduled(self.temperature, self.temperature_final)
        return Acting(temperature=1.0, what="the raw network")

    def search_trained(self, policies: torch.Tensor) -> list[dict]:
        """The ``as_trained`` block of the self-play search, per member, from the (N, M, 9)
        improved policies of noise-free searches at ``simulations``. Self-play picks
        argmax(T * Gumbel + logits + sigma(q)) among the root's moves; with q held fixed that
        is a sample of softmax((logits + sigma(q)) / T), the improved policy raised to 1 / T
        and renormalised: the distribution scored here. (The real search's q depends on the
        noise through which moves it visits: this is the Gumbel-max rule on the noise-free
        search's scores, an approximation, said so in eval.json.)"""
        t = getattr(self, "acting_temperature", self.temperature)
        t = t.to(policies.device).view(-1, 1, 1) if isinstance(t, torch.Tensor) else float(t)
        p = policies.double().clamp_min(0)
        if isinstance(t, float) and t <= 0:
            p = torch.nn.functional.one_hot(p.argmax(-1), p.shape[-1]).double()
        else:
            p = p.pow(1.0 / torch.as_tensor(t, dtype=torch.float64)).nan_to_num(0.0)
            p = p / p.sum(-1, keepdim=True)
        out = []
        for k, r in enumerate(policy_reports(p, game=self.game)):
            tk = float(t.flatten()[k]) if isinstance(t, torch.Tensor) else t
            out.append({"policy": f"the self-play search ({self.simulations} simulations): the Gumbel-max "
                                  f"rule at temperature {tk:g} on its noise-free scores",
                        "temperature": tk, "epsilon": 0.0, **r})
        return out

    def extra_report(self) -> dict:
        """The test-time search's exact evaluation (``test_simulations``; 0: none), for eval.json."""
        if self.members is not None or not self.test_simulations:
            return {}
        report = evaluate_actions(self.search_actions()[0].cpu(), self.game)
        trained = self.search_trained(self.search_all(self.simulations)[1].cpu())[0]
        return {"search": {"simulations": self.test_simulations, **report}, "search_as_trained": trained}

    def member_reports(self) -> list[dict]:
        """Each member's test-time search evaluation, for population.json (``test_simulations``
        0: none, an empty report each)."""
        if not self.test_simulations:
            return [{} for _ in range(self.members or 1)]
        reports = evaluate_actions_stack(self.search_actions(), game=self.game)
        trained = self.search_trained(self.search_all(self.simulations)[1].cpu())
        return [{"search": {"simulations": self.test_simulations, **r}, "search_as_trained": t}
                for r, t in zip(reports, trained, strict=True)]

    @torch.no_grad()
    def action_values(self, view: torch.Tensor) -> torch.Tensor:
        """Q(s, a) = -V(s'), s' the opponent's view after the move (exact where it ends the
        game: a win, or a tie on a full board), in the reward table's units (win = 1 here).
        V(s') is read from the value table of every position (``tables``): one pass over
        the 4,520 positions, not one per move of every view. (..., 9) views -> (..., 9); a
        population's (N, B, 9) or shared (P, 9) -> (N, B, 9) or (N, P, 9)."""
        if self.game != TIC_TAC_TOE:
            return self._action_values_board(view)
        after = view.unsqueeze(-2) + torch.eye(self.C, device=view.device)  # (..., 9, 9) each move's board
        wins = game.winner(after.reshape(-1, self.C).to(torch.int8)).view(after.shape[:-1]) == 1  # (..., 9)
        full = (after != 0).all(-1)
        values = self.value_table()  # (n * 3^9,) each position's value for its mover
        code = codes_of(-after)  # (..., 9) the children's codes (occupied cells: any code, unused)
        return torch.where(wins, 1.0, torch.where(full, 0.0, -self._child_values(values, code, view))).float()

    def _child_values(self, values: torch.Tensor, code: torch.Tensor, view: torch.Tensor) -> torch.Tensor:
        """(n * rows,) values read at (..., cells) children's rows, a population's each in its
        member's block."""
        if self.members is not None:
            member = torch.arange(values.numel() // self.R, device=view.device)
            code = code + member.view(-1, *[1] * (code.dim() - (view.dim() == 3))) * self.R  # (N, ..., cells)
        return values.index_select(0, code.reshape(-1)).view(code.shape)

    def _action_values_board(self, view: torch.Tensor) -> torch.Tensor:
        """``action_values`` on another board: each move's result from the rule tables (a win,
        a tie on the full board: exact), else -V of the child row, read a chunk at a time."""
        t = self.game.tables(view.device)
        values = self.value_table()
        out = []
        for part in view.split(CHUNK, dim=-2):
            row = codes_of(part, self.game)  # (...) the views' rows
            flat = (row[..., None] * self.C + torch.arange(self.C, device=view.device))  # (..., cells)
            child = t.next.index_select(0, flat.reshape(-1)).view(flat.shape).long()
            ends = t.ends.index_select(0, flat.reshape(-1)).view(flat.shape)
            wins = t.wins.index_select(0, flat.reshape(-1)).view(flat.shape) == t.mover.index_select(
                0, row.reshape(-1)).view(row.shape)[..., None]
            v = self._child_values(values, child, part)
            out.append(torch.where(ends & wins, 1.0, torch.where(ends, 0.0, -v)).float())
        return torch.cat(out, dim=-2)

    # ------------------------------------------------------------------ learning

    @torch.no_grad()
    def act(self, view, legal, tree, temperature, streams, stash):
        """Searched moves for (N, B, cells) views; the improved policies go into ``stash``."""
        N, B, C = view.shape
        dev = view.device
        noise = gumbel((N, B, C), dev, streams) * torch.as_tensor(temperature, device=dev).view(-1, 1, 1)
        live = legal.reshape(-1, C).any(-1)  # (N * B,) games still going
        codes = codes_of(view, self.game).reshape(-1)  # (N * B,)
        member = torch.arange(N, device=dev).repeat_interleave(B)
        at = live.nonzero().squeeze(1)
        everyone = at.numel() == N * B  # early plies: no game has ended, nothing to pick out
        if at.numel() == 0:
            return torch.zeros(N, B, dtype=torch.long, device=dev)
        pick = (lambda x: x) if everyone else (lambda x: x.index_select(0, at))
        if tree is None:  # the reached positions' trees: every game searched, a finished one from the start
            s = self.search_reached(torch.where(live, codes, self.start), noise.reshape(-1, C), N)
            s = s if everyone else Search(*(getattr(s, f.name).index_select(0, at) for f in fields(s)))
        else:
            s = gumbel_search(pick(codes), None, None, self.simulations, gumbel=pick(noise.reshape(-1, C)),
                              offset=pick(member) * self.R, max_considered=self.max_considered, tree=tree)
        moves = s.action if everyone else torch.zeros(N * B, dtype=torch.long, device=dev).index_copy_(
            0, at, s.action)
        ply = int((view.reshape(-1, C)[at[0]] != 0).sum())  # lockstep: every live game has this many pieces
        stash["policy"][ply].view(N * B, C).index_copy_(0, at, s.policy)
        stash["value"][ply].view(N * B).index_copy_(0, at, s.value)
        stash["improvement"].append(((s.policy - s.prior) * s.q).sum(-1))
        stash["depth"].append(s.depth.float())
        return moves.view(N, B)

    def search_reached(self, roots: torch.Tensor, noise: torch.Tensor, n: int) -> Search:
        """Self-play's search of (n * B,) root rows, member by member blocks of B, over the
        positions it reaches (``search/reached.py``): the network asked at each new node."""
        t = self.game.tables(roots.device)

        def evaluate(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            views = t.view.index_select(0, rows).float()  # (n * B, cells)
            logits, value = self.heads(views if self.members is None else views.view(n, -1, self.C))
            return logits.reshape(-1, self.C), value.reshape(-1)

        return reached_search(roots, evaluate, self.simulations, noise, self.max_considered, self.game)

    @torch.no_grad()
    def self_play(self, games: int, opponent, seat: str, device, streams, temperature):
        """Play ``games`` games per member, every learner move searched with this network's
        tables (computed here, with every position's subtree: once per call), or over the
        positions each search reaches (``reached``: no tables). Returns the ``Episodes`` and
        the stash: the improved policies and the search's values (cells, N, games, ...) by
        ply, and the per-search depths and improvements."""
        N, C = self.members or 1, self.C
        stash = {"policy": torch.zeros(C, N, games, C, device=device),
                 "value": torch.zeros(C, N, games, device=device),
                 "improvement": [], "depth": []}
        per_member = (temperature if isinstance(temperature, torch.Tensor)
                      else torch.full((N,), float(temperature)))
        tree = None
        if not self.reached:
            logits, values = self.tables()
            tree = subtrees(logits, values, self.simulations, max_considered=self.max_considered, game=self.game)
            del logits, values  # the tree holds what the searches read
        act = partial(self.act, tree=tree, temperature=per_member, streams=streams, stash=stash)
        return play_batch(games, act, opponent, seat, device, streams, self.game), stash

    def update(self, run: Run) -> Update:
        opt = run.optimizer()
        lr = run.scheduled(self.lr, self.lr_final)
        member_optim.set_lr(opt.optimizer, lr)
        temperature = run.scheduled(self.temperature, self.temperature_final)
        ep, stash = self.self_play(self.games_per_update, run.opponent, run.seat, run.device, run.streams,
                                   temperature)
        N = ep.seat.shape[0]
        self_play = isinstance(run.opponent, SelfPlay)
        mask = ep.learner  # (T, N, B) every searched move
        member = torch.arange(N, device=run.device).view(1, N, 1).expand_as(mask)[mask]
        # The value target: the game's result for the mover, mixed with the search's value of
        # the position (value_mix; 0: the result alone, as AlphaZero).
        target = (1 - self.value_mix) * mover_result(ep, self_play) + self.value_mix * stash["value"]
        self.replay.push(member, {"view": ep.view[mask], "policy": stash["policy"][mask],
                                  "result": target[mask]})
        sums = torch.zeros(3, N, device=run.device)
        for _ in range(self.gradient_steps):
            sums += self.learn(run, opt)
        sums /= max(self.gradient_steps, 1)
        terms = dict(zip(("loss", "policy_loss", "value_loss"), sums.unbind(0), strict=True))
        terms["lr"] = torch.as_tensor(lr, dtype=torch.float32)
        terms["temperature"] = torch.as_tensor(temperature, dtype=torch.float32)
        if stash["depth"]:
            terms["search/depth"] = torch.cat(stash["depth"]).mean()
            terms["search/improvement"] = torch.cat(stash["improvement"]).mean()
            terms["search/simulations"] = float(self.simulations)
        if self.members is None:  # a single run's terms are numbers
            terms = {k: v.reshape(()) if isinstance(v, torch.Tensor) and v.numel() == 1 else v
                     for k, v in terms.items()}
        return Update(ep.batch, ep.rates(), terms, moves=mask.sum((0, 2)))

    def learn(self, run: Run, opt) -> torch.Tensor:
        """One gradient step on a minibatch per member; (3, N) loss, policy loss, value loss."""
        b = self.replay.sample(self.batch_size, run.streams)
        x = b["view"].float()  # (N, K, cells)
        if self.symmetries:  # each position turned by one of the board's symmetries (8 or 4), at random
            S = self.turns.shape[0]
            k = (uniform(x.shape[:2], x.device, run.streams) * S).long().clamp(max=S - 1)  # (N, K)
            perm = self.turns.to(x.device)[k]  # (N, K, cells): a position and its targets turn alike
            x, b["policy"] = x.gather(-1, perm), b["policy"].gather(-1, perm)
        if self.members is None:
            x = x.squeeze(0)
        logits, v = self.heads(x)
        # (N, K, cells), (N, K)
        logits, v = logits.view(-1, self.batch_size, self.C), v.view(-1, self.batch_size)
        p_loss = policy_loss(logits, b["policy"])
        v_loss = value_loss(v, b["result"])
        params = list(self.net.parameters()) + list(self.value_head.parameters())
        loss = p_loss + self.value_coef * v_loss + self.weight_decay * squared_weights(params, self.members)
        opt.zero_grad(set_to_none=True)
        run.backprop(loss.sum())
        if self.max_grad_norm > 0:
            run.clip_grad_norm(opt, self.max_grad_norm)
        opt.step()
        return torch.stack((loss.expand_as(p_loss), p_loss, v_loss)).detach()

