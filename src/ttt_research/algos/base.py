"""What a learning algorithm is: its networks, how it acts, and one ``update``.

An algorithm is an ``Algorithm`` (a ``torch.nn.Module``: its networks are its children)
in one file of ``algos/``, built by Hydra from ``conf/algo/NAME.yaml`` (``_target_``).
It never sees Lightning's Trainer, a process count or a population: the shell that runs
it (``train/module.py``) hands every ``update`` a ``Run``, the services it may use (the
device, the random streams, the opponent, the seat, the reward, the optimiser, backprop,
gradient clipping, the budget's schedules, the table of decision positions), and does the
bookkeeping every algorithm shares (the budget, counting, logging, the numerical guard,
checkpoints, populations, DDP).

Written for a stack of N members: a single run is N = 1 with the plain ``MLP``, a
population N members with ``MLPStack`` (``models/nets.py``), whose every tensor has a
leading member axis; both nets and their optimisers (``models/member_optim.py``) answer
the same calls, so an algorithm writes its update once. A hyperparameter that members set
for themselves arrives as an (N,) tensor instead of a number (``per_member`` broadcasts
it). ``docs/extending.md`` walks through adding one.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Protocol

import torch

from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.opponents import Opponent
from ttt_research.env.reward import Reward
from ttt_research.env.streams import Streams, sample, uniform
from ttt_research.evaluation.exploit import Acting
from ttt_research.models.nets import MASKED


@dataclass
class Update:
    """What one update did in this process, as the algorithm's ``update()`` returns it."""

    games: int  # complete games this process played (per member)
    rates: dict[str, torch.Tensor | float]  # sampled win / loss / tie rates -> rollout/*
    terms: dict[str, torch.Tensor | float] = field(default_factory=dict)  # loss terms, lr -> train/*
    moves: torch.Tensor | None = None  # learner moves played (environment steps), if counted


class Run(Protocol):
    """What the shell gives an algorithm's ``update`` (``train.module.RLModule`` is one)."""

    device: torch.device
    streams: Streams  # one random stream per member: every draw of a rollout comes from it
    opponent: Opponent
    seat: str  # x, o or both (``contract.TRAINING_SEATS``)
    reward: Reward  # its fields: numbers, or (N, 1) tensors when members set them
    progress: float  # share of the game budget played before this update, in [0, 1]

    def optimizer(self):
        """The optimiser of ``configure_optimizers``, in Lightning's wrapper (``step``,
        ``zero_grad``; ``.optimizer`` is the optimiser itself)."""

    def backprop(self, loss: torch.Tensor) -> None:
        """Backward through the precision plugin and DDP's gradient averaging."""

    def clip_grad_norm(self, opt, max_norm: float) -> None:
        """Scale the gradient to norm ``max_norm`` at most (each member's own)."""

    def scheduled(self, start, final, games_ahead: int = 0):
        """A linear schedule from ``start`` to ``final`` over the game budget (None: constant)."""

    def positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(P, 9) float views of the learner's decision positions, and the (3^9,) map from a
        view's code to its row (-1: none). Tic-tac-toe's only: another board's are too many
        to table (9M on 4,4,4), its algorithms read the positions they reach (``reached.py``)."""


def per_member(value, like: torch.Tensor):
    """A number, or an (N,) tensor reshaped to broadcast against ``like`` (N, ...)."""
    if isinstance(value, torch.Tensor) and value.dim() == 1:
        return value.view(-1, *([1] * (like.dim() - 1)))
    return value


def number(value):
    """A hyperparameter as an algorithm keeps it: a float, None, or (N,) per-member values."""
    if value is None or isinstance(value, torch.Tensor):
        return value
    return float(value)


def epsilon_greedy(moves: torch.Tensor, legal: torch.Tensor, eps, streams) -> torch.Tensor:
    """(...) moves and (..., 9) bool legal cells -> (...) moves, each replaced with
    probability ``eps`` (a number, or (N,) per member) by a move uniform over the legal
    cells. A member whose ``eps`` is 0 draws nothing, as its single run does (its stream
    stays where a greedy single run leaves it)."""
    draws = None
    if isinstance(eps, torch.Tensor):  # (N,): only the exploring members draw
        draws = (eps > 0).cpu()
        if not bool(draws.any()):
            return moves
        draws = None if bool(draws.all()) else draws
    elif eps <= 0:
        return moves
    u = uniform(tuple(moves.shape), moves.device, streams, draws)
    random = sample(torch.where(legal, 0.0, MASKED), streams, 1.0, members=draws)
    return torch.where(u < per_member(eps, u), random, moves)


def lookup(table: torch.Tensor, view: torch.Tensor, row_of: torch.Tensor) -> torch.Tensor:
    """Logits of (B, 9) (a stack's (N, B, 9)) views read from ``table``, the (P, 9) logits
    of the positions (a stack's N blocks of P rows): a gather in place of a forward pass,
    so a batch of games costs one pass over the P positions per member, not one per ply.

    Finished games ride along in lockstep; their boards have no row (-1), and whatever
    is drawn for them is ignored: row 0 stands in."""
    return table.index_select(0, table_rows(view, row_of, table.shape[0])).view(view.shape)


def table_rows(view: torch.Tensor, row_of: torch.Tensor, rows_in_all: int) -> torch.Tensor:
    """(B * N,) rows of a table of ``rows_in_all`` rows (N blocks of P, one per member) for
    the (B, 9) (a stack's (N, B, 9)) views; ``lookup``'s rows, for other tables of the same rows."""
    rows = row_of.index_select(0, game.view_code(view).reshape(-1)).clamp_min(0)
    if view.dim() == 3 and view.shape[0] > 1:  # member k's games look up block k
        P = rows_in_all // view.shape[0]
        rows = rows + (torch.arange(view.shape[0], device=rows.device) * P).repeat_interleave(view.shape[1])
    return rows


class Algorithm(torch.nn.Module):
    """The part of a training run that is the algorithm's own."""

    name = "algorithm"  # each algorithm: its algo= option (checkpoints, ONNX metadata, console)

    def __init__(self, net: torch.nn.Module, games_per_update: int, game: Game = TIC_TAC_TOE):
        super().__init__()
        self.net = net  # the policy: (..., cells) views -> masked logits; what evaluation and export see
        self.games_per_update = int(games_per_update)
        # The board it plays (``board.Game``): an algorithm whose spec says ``any_board`` is given
        # the run's; the others play tic-tac-toe (``train/validate.py`` refuses another board).
        self.game = game

    @staticmethod
    def companion_nets(net: torch.nn.Module) -> dict[str, torch.nn.Module]:
        """Networks an algorithm builds right after the policy, by name (PPO: its value
        network), each a constructor argument; a population builds them per member, under
        the member's seed, and passes them stacked."""
        return {}

    def values_to(self, device: torch.device) -> None:
        """A population's own values per member ((N,) tensors: ``lr``, ``temperature``,
        ``epsilon``, ``ent_coef``, ...; a single run's are numbers) onto ``device``. They are
        plain attributes, not buffers, which ``Module.to`` leaves where they are: on a GPU a
        CPU (N,) against the games' tensors fails."""
        for name, value in list(vars(self).items()):
            if isinstance(value, torch.Tensor):
                setattr(self, name, value.to(device))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The optimiser of the algorithm's parameters (``models.member_optim`` picks a
        single run's torch optimiser or a stack's per-member one from the net)."""
        raise NotImplementedError

    def update(self, run: Run) -> Update:
        """Play and learn from one batch of games: ``games_per_update`` per member."""
        raise NotImplementedError

    @property
    def finished(self) -> bool:
        """Whether nothing is left to learn: the run ends after this update, evaluated and
        checkpointed as at its budget's end (``algo=teacher`` once its net is frozen). For
        algorithms of one agent in one process."""
        return False

    @torch.no_grad()
    def policy_logits(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's views -> (B, 9) masked logits; their argmax is the greedy policy
        that the exact evaluation and the export see."""
        return self.net(view).float()

    @torch.no_grad()
    def action_values(self, view: torch.Tensor) -> torch.Tensor | None:
        """(B, 9) mover's views (a stack's (N, B, 9) or shared (B, 9)) -> (B, 9) (a stack's
        (N, B, 9)) the learned value of each move for the mover: the return it expects after
        playing that cell, in the reward table's units (a win is worth ``reward.win``), the
        occupied cells anything. None (the default): the algorithm learns no action values.
        The exact evaluation compares them with the game-theoretic values (``eval.json``'s
        ``value_accuracy``)."""
        return None

    def values_held(self) -> contextlib.AbstractContextManager:
        """A context in which ``action_values`` may keep what every call would compute again
        (the weights do not change inside it: one evaluation's calls, part after part of the
        positions). The default keeps nothing."""
        return contextlib.nullcontext()

    def acting(self, run: Run) -> Acting:
        """The policy this algorithm plays while training, as a transform of ``policy_logits``,
        at its schedules' values for the share of the budget played (``run.scheduled``: at
        the end, their final values; the same after a resume): what eval.json's
        ``as_trained`` block scores. The default: the greedy policy itself."""
        return Acting()

    def extra_report(self) -> dict[str, float]:
        """Figures of this algorithm's own that ``eval.json`` adds to the exact evaluation."""
        return {}

    def member_reports(self) -> list[dict] | None:
        """A population's ``extra_report``: one dict per member, merged into each member's
        report of every exact evaluation (``population.json``); None: nothing to add."""
        return None
