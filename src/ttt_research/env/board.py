"""The game as a value: ``Game(m, n, k)``, the one object every layer is given and asks.

It is an ``mnk.MNK`` (cells, lines, symmetries, codes) with what the rules and the solver
know about it: ``tables`` (the rule tables of ``game.Tables``: tic-tac-toe's over all 3^9
codes, built by ``game.py`` as every 3x3 run always has; another board's over its reachable
positions, ``indexed.py``) and ``positions`` (every reachable position solved, from the
user's cache, ``cache.py``). A training run builds it from the ``game`` config group
(``of_config``); nothing outside ``env/`` writes a board size.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch

from ttt_research.env import cache, indexed
from ttt_research.env import game as rules
from ttt_research.env.mnk import MNK, config_problem
from ttt_research.env.positions import Positions
from ttt_research.errors import ConfigError


@dataclass(frozen=True)
class Game(MNK):
    """An m,n,k game (``Game(3, 3, 3)`` is tic-tac-toe) and its tables."""

    def tables(self, device: torch.device | str = "cpu") -> rules.Tables:
        """The rule tables on ``device``, built once per process and device (another board's
        from the cache of its positions: 4,4,4's hold 1.8 GB)."""
        return _tables(self, str(torch.device(device)))

    def positions(self) -> Positions:
        """Every reachable position, solved (``positions.Positions``), from the cache."""
        return cache.positions(self)

    def values(self) -> torch.Tensor:
        """Another board's (N,) int8 perfect-play values (``Positions.value``) by its tables'
        rows, kept when the CPU tables were built from them: the solver does not read the
        cache's 729 MB again (4,4,4: 1.7 s and 0.7 GB more at the peak)."""
        self.tables()
        return _VALUES[self]

    @property
    def view_codes(self) -> int:
        """How many view codes there are (3^cells): ``view_code`` is below it."""
        return 3**self.cells

    def view_code(self, view: torch.Tensor) -> torch.Tensor:
        """(..., cells) mover's views -> (...,) int64 base-3 codes (digits: 0 opponent,
        1 empty, 2 own); equal codes, equal views. Tic-tac-toe's is ``game.view_code`` (one
        float32 matmul, exact there); another board's in integers: a 16-cell view's code
        reaches 3^16 = 43M, past float32's exact integers (2^24)."""
        if self == TIC_TAC_TOE:
            return rules.view_code(view)
        return ((view.long() + 1) * _pow3(self.cells, view.device)).sum(-1)


TIC_TAC_TOE = Game(3, 3, 3)


def of_config(g) -> Game:
    """The board a composed ``game`` group names (``conf/game/``); ``ConfigError`` naming the
    key when it names none (``mnk.config_problem``)."""
    if (why := config_problem(g)) is not None:
        raise ConfigError(why)
    return Game(g.m, g.n, g.k)


# --------------------------------------------------------------------------- symmetries
# A learner that turns what it learns by the board's symmetries (``algo.symmetries`` of dqn and
# reinforce) turns a position and its per-cell numbers alike with these.


@functools.lru_cache(maxsize=4)
def symmetries(g: Game, device: torch.device) -> torch.Tensor:
    """(S, cells) int64 the board's symmetries (``MNK.symmetries``) on ``device``, once per board
    and device (every minibatch turns with them). Tic-tac-toe's are ``game.symmetries()``, in
    the same order."""
    return torch.from_numpy(g.symmetries).to(device)


def turned(cells: torch.Tensor, k: torch.Tensor, sym: torch.Tensor) -> torch.Tensor:
    """(..., cells) boards, (...) symmetry indices, ``sym`` (S, cells) the board's symmetries as
    cell permutations -> each board turned by its symmetry (``board[..., sym[k]]``)."""
    return cells.gather(-1, sym[k])


def turned_cell(cell: torch.Tensor, k: torch.Tensor, sym: torch.Tensor) -> torch.Tensor:
    """(...) cells, (...) symmetry indices -> where each cell lands when its board is ``turned``
    by k: ``turned(board, k, sym)[..., turned_cell(c, k, sym)] == board[..., c]``."""
    return sym.argsort(-1)[k, cell.long()]


def every_turn(rows: torch.Tensor, sym: torch.Tensor) -> torch.Tensor:
    """(R, cells) boards or per-cell numbers -> (R S, cells) each turned by every one of the S
    symmetries (``turned``): row r's S turns are rows r S .. r S + S - 1, row r S itself (the
    identity is ``sym[0]``)."""
    # One index_select of the S permutations laid end to end, (R, S cells) viewed as (R S, cells):
    # the same numbers as ``turned`` with an (R, S) index, without its (R, S, cells) int64 index
    # (a quarter of the 3x3 reinforce_mlp25 cell's update went to building and reading that).
    R, S = rows.shape[0], sym.shape[0]
    return rows.index_select(1, sym.reshape(-1)).view(R * S, -1)


@functools.lru_cache(maxsize=8)
def _pow3(cells: int, device: torch.device) -> torch.Tensor:
    """(cells,) int64 place values on ``device``, once per board and device (every ply reads them)."""
    return (3 ** torch.arange(cells)).to(device)


@functools.lru_cache(maxsize=4)  # a few boards and devices at most in one process
def _tables(game: Game, device: str) -> rules.Tables:
    if game == TIC_TAC_TOE:
        return rules.tables(device)  # the 3^9-code tables every 3x3 run has always used
    if device != "cpu":
        cpu = _tables(game, "cpu")
        # Every field, the lazy ones made on the CPU first (indexed.LAZY: a device steps with them).
        return rules.Tables(**{f.name: getattr(cpu, f.name).to(device) for f in dataclasses.fields(cpu)})
    p = game.positions()
    _VALUES[game] = torch.from_numpy(p.value.copy())  # 9.7 MB on 4,4,4: kept for ``values``
    return indexed.build(game, p)


_VALUES: dict[Game, torch.Tensor] = {}  # by board, filled by ``_tables``
