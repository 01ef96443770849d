"""Batched opponents: who the learner plays against.

Every opponent answers one question for B games at once: given the board codes (B,)
where it is to move, which cells does it play? (``act``). Opponents that remember
something per game (``mixed`` draws its strong-or-weak choice once per game) are told
which games just started (``reset``).

Most opponents here are fixed move distributions over all 19,683 codes (``probs``, an
(N, 9) table), so acting is a gather and an inverse-CDF draw, and the exact evaluator
can use the very same table:

* ``random``: uniform over legal moves (with a faster path: no (B, 9) tensor at all).
* ``minimax``: uniform over minimax-optimal moves; it never loses.
* ``rules``: the rule-based "perfect" player the PPO seed trained against. In order:
  win, block, fork, block a fork, centre, corner, side; uniform among the cells that the
  first applicable rule names. It is not perfect: see ``rules_record`` and docs/design.md.
  On another board centre, corner, side become "the cell on most open lines"
  (``rule_player.py``).
* ``mixed``: per game, the strong player with probability ``p_perfect``, else random.

Opponents made of policies join through the same interface, and hear about every update
(``on_update``): ``self`` (a marker: the learner plays both sides), ``pool`` (snapshots of
the learner) and ``curriculum`` (a schedule over any of the above).

Any m,n,k board (``board.Game``, given as ``game``): every opponent here. Another board's
move tables would not fit (4,4,4: (9.7M, 16) float64, 1.2 GB), so there ``random``,
``minimax`` and ``rules`` draw from the rule tables, the solver's optimal moves and the rules'
cells (``rule_player.rule_cells``) as they play; ``pool`` snapshots a network of the board,
and ``mixed`` and ``curriculum`` hand the board to the opponents they are made of
(``on_board``: Hydra builds a curriculum's stages before the run hands it the board).
"""

from __future__ import annotations

import copy

import torch

from ttt_research.contract import REPORT_KEY
from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.rule_player import rule_cells, rule_table
from ttt_research.env.solver import outcome_probs, perfect_probs, random_probs, solve, uniform_over
from ttt_research.env.streams import randint, sample, uniform


class Opponent:
    """The interface: ``act`` picks moves for B games; ``reset`` hears which games restart.

    A population's games come as (N, B) codes with ``streams.Streams`` as the generator
    (row k: member k's games, drawn from its stream); a single run's as (B,) codes and a
    ``torch.Generator``. Opponents draw through ``streams.uniform``/``randint`` and keep
    the leading axes as they come, so each serves both."""

    name = "opponent"

    def reset(self, started: torch.Tensor, generator: torch.Generator | None = None) -> None:
        """``started`` (B,) bool marks games that begin now (all True at the start)."""

    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """(B,) codes where this opponent is to move -> (B,) int64 cells."""
        raise NotImplementedError

    def on_update(self, net: torch.nn.Module, progress: float, update: int) -> None:
        """Called before each update with the learner's network, the share of the budget
        played so far and the update index (snapshot pools and curricula listen)."""

    def state(self) -> dict:
        """What this opponent has learned from training so far (pool snapshots, curriculum
        stage), for checkpoints: a resumed run must meet the opponent it would have met."""
        return {}

    def restore(self, state: dict, net: torch.nn.Module) -> None:
        """Undo ``state()``; ``net`` is the learner's network, a template for snapshots."""

    def on_board(self, g: Game) -> Opponent:
        """This opponent made to play ``g`` (itself, changed where it must be): a composite
        hands it to its parts. The default keeps ``game`` and forgets a tic-tac-toe table."""
        self.game = g
        if g != TIC_TAC_TOE and getattr(self, "probs", None) is not None:
            self.probs = None  # tic-tac-toe's table: another board draws as it plays
        return self


class SelfPlay(Opponent):
    """``opponent=self``: the learner plays both sides (``rollout.play_batch`` sees this marker and
    lets the learner move everywhere; both sides' moves are learned from)."""

    name = "self"

    def __init__(self, game: Game = TIC_TAC_TOE):
        self.game = game  # any board: the learner's moves are all there is

    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        raise RuntimeError("self-play has no separate opponent: rollout.play_batch moves for both sides")


class TableOpponent(Opponent):
    """An opponent given by a fixed (N, 9) move-probability table over all codes (None: a
    board other than tic-tac-toe's, whose subclass draws its moves another way)."""

    def __init__(self, probs: torch.Tensor | None, name: str = "table"):
        self.probs = None if probs is None else probs.double()  # (N, 9) float64, exact, for the evaluator
        self.name = name
        self._cdf: dict[str, torch.Tensor] = {}

    def cdf(self, device: torch.device) -> torch.Tensor:
        """(N, 9) float32 cumulative probabilities on ``device``; cells from a row's last
        legal cell on are set above 1, so rounding can never pick a cell past it."""
        key = str(device)
        if key not in self._cdf:
            p = self.probs.float()
            cdf = p.cumsum(-1)
            last = torch.where(p > 0, torch.arange(game.CELLS), -1).amax(-1, keepdim=True)
            cdf = torch.where(torch.arange(game.CELLS) >= last, 2.0, cdf)
            self._cdf[key] = cdf.to(device)
        return self._cdf[key]

    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        cdf = game.at(self.cdf(code.device), code.reshape(-1)).view(*code.shape, game.CELLS)  # (..., 9)
        u = uniform((*code.shape, 1), code.device, generator)
        # Inverse CDF: the first cell whose cumulative probability exceeds u.
        return (cdf <= u).sum(-1)


class RandomOpponent(TableOpponent):
    """Uniform over legal moves, on any board (``game``)."""

    def __init__(self, game: Game = TIC_TAC_TOE):
        super().__init__(random_probs() if game == TIC_TAC_TOE else None, "random")
        self.game = game

    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return game.random_moves(code, generator, self.game.tables(code.device))


class MinimaxOpponent(TableOpponent):
    """Uniform over minimax-optimal moves: a perfect player that varies its play, on any
    board (``game``; tic-tac-toe's from its table, another's from ``solve(device, game)``)."""

    def __init__(self, game: Game = TIC_TAC_TOE):
        super().__init__(perfect_probs() if game == TIC_TAC_TOE else None, "minimax")
        self.game = game

    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if self.probs is not None:
            return super().act(code, generator)
        optimal = solve(code.device, self.game).optimal  # (N, cells) bool
        return draw(game.at(optimal, code.reshape(-1)).view(*code.shape, -1), generator)


def draw(mask: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """(..., cells) bool -> (...,) int64: a cell drawn uniformly among the True ones of each
    row (a row with none: the last cell; only finished boards have none)."""
    u = uniform((*mask.shape[:-1], 1), mask.device, generator)
    k = (u * mask.sum(-1, keepdim=True)).long()  # draw the k-th True cell, k < their count
    # The first cell with more than k True cells up to it.
    return (mask.cumsum(-1) <= k).sum(-1).clamp_max(mask.shape[-1] - 1)


def rules_probs(g: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(N, cells) float64: the rule-based player's move distribution at every row of ``g``'s
    tables (tic-tac-toe's below, as the seed wrote it; another board's from
    ``rule_player.rule_table``: a table for a small board, 3,4,3's 112k rows; on 4x4 it would
    be 1.2 GB, where ``RulesOpponent`` draws as it plays).

    Tic-tac-toe's, at every code:

    Computed for all codes at once. For the player to move ("me") and the other ("them"):
    win (a move that completes my line), block (a cell that would complete theirs), fork
    (a move after which I threaten two lines), block a fork (a cell that would give them
    two threats), centre, a corner, a side. The first rule with any cell decides; its cells
    are equally likely.
    """
    if g != TIC_TAC_TOE:
        t = g.tables()
        return uniform_over(rule_table(g, t.board, t.mover, t.legal))
    t = game.tables()
    codes = torch.arange(game.N_CODES)
    me = t.mover.long()
    digit_me = torch.where(me == game.X, 1, 2)[:, None]
    digit_them = 3 - digit_me
    place_them = codes[:, None] + digit_them * game.POW3  # (N, 9) codes if *they* played there
    place_them = torch.where(t.legal, place_them, codes[:, None])
    after_me = t.next2d  # (N, 9)

    lines = t.board[:, game.LINES].sum(-1)  # (N, 8) line sums in -3..3
    threats_x = (lines == 2).sum(-1)  # lines with two X and an empty cell
    threats_o = (lines == -2).sum(-1)

    def threats(code: torch.Tensor, player: torch.Tensor) -> torch.Tensor:
        return torch.where(player == game.X, threats_x[code], threats_o[code])

    legal = t.legal
    pl = me[:, None].expand(-1, game.CELLS)
    rules = [
        legal & (t.winner[after_me] == me[:, None]),  # win
        legal & (t.winner[place_them] == -me[:, None]),  # block
        legal & (threats(after_me, pl) >= 2),  # fork
        legal & (threats(place_them, -pl) >= 2),  # block a fork
        legal & (torch.arange(game.CELLS) == 4),  # centre
        legal & torch.isin(torch.arange(game.CELLS), torch.tensor([0, 2, 6, 8])),  # corner
        legal,  # side (all that is left)
    ]
    chosen = torch.zeros_like(legal)
    decided = torch.zeros(game.N_CODES, dtype=torch.bool)
    for cells in rules:
        use = cells.any(-1) & ~decided
        chosen |= cells & use[:, None]
        decided |= use
    return uniform_over(chosen)


class RulesOpponent(TableOpponent):
    """The seed's rule-based player (see ``rules_probs``), on any board (``game``: another
    board's moves from ``rule_player.rule_cells`` at the positions played, no table)."""

    def __init__(self, game: Game = TIC_TAC_TOE):
        super().__init__(rules_probs() if game == TIC_TAC_TOE else None, "rules")
        self.game = game

    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if self.probs is not None:
            return super().act(code, generator)
        t, flat = self.game.tables(code.device), code.reshape(-1)
        cells = rule_cells(game.at(t.board, flat), game.at(t.mover, flat), self.game)  # (B, cells)
        return draw(cells.view(*code.shape, -1), generator)


class MixedOpponent(Opponent):
    """Per game: ``strong`` with probability ``p_perfect``, else ``weak`` (random)."""

    def __init__(self, p_perfect: float | torch.Tensor = 0.5, strong: Opponent | str = "minimax",
                 weak: Opponent | str = "random", game: Game = TIC_TAC_TOE):
        # A number, or a population's (N, 1) tensor: each member's own chance, over its games.
        each = p_perfect if isinstance(p_perfect, torch.Tensor) else torch.tensor(float(p_perfect))
        if not bool(((each >= 0.0) & (each <= 1.0)).all()):
            raise ValueError(f"opponent.p_perfect must be in [0, 1], got {p_perfect}")
        per_member = isinstance(p_perfect, torch.Tensor)
        self.p_perfect = p_perfect if per_member else float(p_perfect)
        self.game = game  # any board: its two players are given it
        self.strong = (build(strong, game=game) if isinstance(strong, str) else strong).on_board(game)
        self.weak = (build(weak, game=game) if isinstance(weak, str) else weak).on_board(game)
        chance = "each member's" if per_member else f"{self.p_perfect:g}"
        self.name = f"mixed({self.strong.name}@{chance})"
        self.is_strong: torch.Tensor | None = None  # (B,) bool, drawn per game

    def reset(self, started: torch.Tensor, generator: torch.Generator | None = None) -> None:
        p = self.p_perfect  # a number, or a population's (N, 1), one per member
        p = p.to(started.device) if isinstance(p, torch.Tensor) else p
        draw = uniform(started.shape, started.device, generator) < p
        if self.is_strong is None or self.is_strong.shape != started.shape:
            self.is_strong = draw
        else:
            self.is_strong = torch.where(started, draw, self.is_strong)
        self.strong.reset(started, generator)
        self.weak.reset(started, generator)

    def on_update(self, net: torch.nn.Module, progress: float, update: int) -> None:
        self.strong.on_update(net, progress, update)
        self.weak.on_update(net, progress, update)

    def state(self) -> dict:
        return {"strong": self.strong.state(), "weak": self.weak.state()}

    def restore(self, state: dict, net: torch.nn.Module) -> None:
        self.strong.restore(state.get("strong", {}), net)
        self.weak.restore(state.get("weak", {}), net)

    def on_board(self, g: Game) -> Opponent:
        self.game = g
        self.strong, self.weak = self.strong.on_board(g), self.weak.on_board(g)
        return self

    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if self.is_strong is None or self.is_strong.shape != code.shape:
            self.reset(torch.ones(code.shape, dtype=torch.bool, device=code.device), generator)
        # Both players move in every game and we keep one: cheaper than splitting the batch.
        return torch.where(self.is_strong, self.strong.act(code, generator),
                           self.weak.act(code, generator))


FIXED = {"random": RandomOpponent, "minimax": MinimaxOpponent, "rules": RulesOpponent}


class PolicyOpponent(Opponent):
    """A frozen copy of a policy network, sampling from its masked softmax."""

    def __init__(self, net: torch.nn.Module, name: str = "policy", game: Game = TIC_TAC_TOE):
        self.net = copy.deepcopy(net).eval().requires_grad_(False)
        self.name = name
        self.game = game  # any board: the net is one of its board (cells inputs)

    @torch.no_grad()
    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        t = self.game.tables(code.device)
        return sample(self.net(t.view[code].float()), generator)  # occupied cells masked


class PoolOpponent(Opponent):
    """Snapshots of the learner, taken every ``every`` updates (at most ``size``, oldest
    dropped; the latest always among them); each game draws one snapshot to play."""

    def __init__(self, every: int = 10, size: int = 8, game: Game = TIC_TAC_TOE):
        if every < 1 or size < 1:
            raise ValueError(f"opponent.every and opponent.size must be >= 1, got {every}, {size}")
        self.every, self.size = int(every), int(size)
        self.snapshots: list[PolicyOpponent] = []
        self.choice: torch.Tensor | None = None  # (B,) snapshot index per game
        self.name = f"pool({size}, every {every})"
        self.game = game  # any board: the snapshots are of the learner's net, which plays it

    def on_board(self, g: Game) -> Opponent:
        self.game = g
        for s in self.snapshots:
            s.game = g
        return self

    def on_update(self, net: torch.nn.Module, progress: float, update: int) -> None:
        if not self.snapshots or update % self.every == 0:
            snap = PolicyOpponent(net, f"snapshot@{update}", self.game)
            self.snapshots = (self.snapshots + [snap])[-self.size:]

    def state(self) -> dict:
        # Weights only (plain tensors, so checkpoints stay loadable with weights_only=True).
        return {"names": [s.name for s in self.snapshots],
                "weights": [{k: v.detach().cpu() for k, v in s.net.state_dict().items()}
                            for s in self.snapshots]}

    def restore(self, state: dict, net: torch.nn.Module) -> None:
        self.snapshots = []
        for name, weights in zip(state.get("names", []), state.get("weights", []), strict=True):
            snap = PolicyOpponent(net, name, self.game)  # a copy of the learner's shape...
            snap.net.load_state_dict(weights)  # ...with the snapshot's weights
            self.snapshots.append(snap)

    def reset(self, started: torch.Tensor, generator: torch.Generator | None = None) -> None:
        n = max(1, len(self.snapshots))
        draw = randint(n, started.shape, started.device, generator)
        if self.choice is None or self.choice.shape != started.shape:
            self.choice = draw
        else:
            self.choice = torch.where(started, draw, self.choice.clamp_max(n - 1))

    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if not self.snapshots:
            raise RuntimeError("the pool is empty: it fills when training starts")
        if self.choice is None or self.choice.shape != code.shape:
            self.reset(torch.ones(code.shape, dtype=torch.bool, device=code.device), generator)
        moves = torch.stack([s.act(code, generator) for s in self.snapshots])  # (K, B)
        return moves.gather(0, self.choice[None].clamp_max(len(self.snapshots) - 1)).squeeze(0)


class Curriculum(Opponent):
    """A schedule over opponents: ``stages`` is a list of (until, opponent) with ``until``
    the share of the budget at which the stage ends; the last stage runs to the end."""

    def __init__(self, stages: list, game: Game = TIC_TAC_TOE):
        self.stages = [(float(s["until"]), s["opponent"]) for s in stages]
        if not self.stages:
            raise ValueError("opponent.stages must list at least one stage")
        self.on_board(game)  # Hydra built the stages before the board reached this one
        self.index = 0
        self.name = "curriculum(" + " -> ".join(o.name for _, o in self.stages) + ")"

    @property
    def current(self) -> Opponent:
        return self.stages[self.index][1]

    def on_update(self, net: torch.nn.Module, progress: float, update: int) -> None:
        for _, opponent in self.stages:  # every stage hears it: pools keep their snapshots
            opponent.on_update(net, progress, update)
        while self.index < len(self.stages) - 1 and progress >= self.stages[self.index][0]:
            self.index += 1

    def state(self) -> dict:
        return {"index": self.index, "stages": [o.state() for _, o in self.stages]}

    def restore(self, state: dict, net: torch.nn.Module) -> None:
        self.index = int(state.get("index", 0))
        for (_, opponent), sub in zip(self.stages, state.get("stages", []), strict=False):
            opponent.restore(sub, net)

    def on_board(self, g: Game) -> Opponent:
        self.game = g
        self.stages = [(until, opponent.on_board(g)) for until, opponent in self.stages]
        return self

    def reset(self, started: torch.Tensor, generator: torch.Generator | None = None) -> None:
        self.current.reset(started, generator)

    def act(self, code: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.current.act(code, generator)


def build(name: str, p_perfect: float = 0.5, strong: str = "minimax", game: Game = TIC_TAC_TOE) -> Opponent:
    """An opponent by name, of ``game``'s board: random, minimax, rules, mixed (strong player by name)."""
    if name in FIXED:
        return FIXED[name]() if game == TIC_TAC_TOE else FIXED[name](game)
    if name == "mixed":
        if strong not in FIXED:
            raise ValueError(f"opponent.strong must be one of {sorted(FIXED)}, got {strong!r}")
        return MixedOpponent(p_perfect, strong, game=game)
    raise ValueError(f"unknown opponent {name!r}: choose from random, minimax, rules, mixed")


def rules_record() -> dict[str, dict[str, float]]:
    """Exact record of the rule-based player against a minimax player, from each seat:
    the rule player's win / loss / tie."""
    rules, perfect = rules_probs(), perfect_probs()
    as_x = outcome_probs(rules, perfect)[game.EMPTY_CODE]
    as_o = outcome_probs(perfect, rules)[game.EMPTY_CODE]
    return {
        REPORT_KEY["x"]: {"win": float(as_x[0]), "loss": float(as_x[1]), "tie": float(as_x[2])},
        REPORT_KEY["o"]: {"win": float(as_o[1]), "loss": float(as_o[0]), "tie": float(as_o[2])},
    }
