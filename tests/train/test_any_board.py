"""Training on another m,n,k board (issue 59, item 5): PPO and REINFORCE on 3,4,3 (3 rows, 4
columns, 3 in a line wins) play legal games of that board and learn from them, alone and as a
population, and resume where a checkpoint left them (every opponent on the board:
``test_any_board_opponents.py``).

The rollouts are checked against an independent referee (``referee``: the board replayed
from the moves, its lines found here, not by ``env/``). 4,4,4 runs once, marked slow.
"""

from __future__ import annotations

import lightning as L
import numpy as np
import pytest
import torch

from tests.helpers.any_board import command_checks
from tests.helpers.configs import make_cfg
from tests.helpers.resume import Crash, crash_after_first_checkpoint
from tests.helpers.updates import first_update
from ttt_research.algos import ppo, reinforce
from ttt_research.algos.spec import specs
from ttt_research.env.board import Game
from ttt_research.train.callbacks import PeriodicCheckpoint
from ttt_research.train.run import build
from ttt_research.train.validate import validate

BOARD = ["game=mnk343"]
M, N, K = 3, 4, 3  # the 3,4,3 board: cells 0..11, row by row


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


def lines(m: int, n: int, k: int) -> list[list[int]]:
    """Every run of k cells along a row, a column or a diagonal of an m x n board."""
    out = []
    for r in range(m):
        for c in range(n):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                run = [(r + i * dr, c + i * dc) for i in range(k)]
                if all(0 <= a < m and 0 <= b < n for a, b in run):
                    out.append([a * n + b for a, b in run])
    return out


def referee(ep, m: int = M, n: int = N, k: int = K) -> None:
    """Replay every game of ``ep`` (a single run's (T, B) or a population's (T, N, B)) on its own
    board: each view is the mover's, each move is on an empty cell, and a game ends exactly at its
    first line of k or on the full board, with the result the episodes say."""
    cells = m * n
    view = ep.view.reshape(ep.view.shape[0], -1, cells).numpy()
    action, active = ep.action.reshape(view.shape[:2]).numpy(), ep.active.reshape(view.shape[:2]).numpy()
    seat, outcome = ep.seat.reshape(-1).numpy(), ep.outcome.reshape(-1).numpy()
    T, G = action.shape
    assert T == cells
    idx = np.array(lines(m, n, k))  # (L, k)
    board = np.zeros((G, cells), dtype=np.int64)
    live = np.ones(G, dtype=bool)
    winner = np.zeros(G, dtype=np.int64)
    plies = np.zeros(G, dtype=np.int64)
    for t in range(T):
        assert (active[t] == live).all(), f"ply {t}: a game is active after its end, or not before it"
        mover = 1 if t % 2 == 0 else -1
        g = np.nonzero(live)[0]
        assert (view[t, g] == board[g] * mover).all(), f"ply {t}: a view is not the mover's board"
        cell = action[t, g]
        assert ((0 <= cell) & (cell < cells)).all(), f"ply {t}: a move off the board"
        assert (board[g, cell] == 0).all(), f"ply {t}: a move on an occupied cell"
        board[g, cell] = mover
        plies[g] += 1
        won = (board[g][:, idx].sum(-1) == k * mover).any(-1)
        winner[g[won]] = mover
        live[g[won | (t + 1 == cells)]] = False
    assert not live.any()
    assert (ep.plies.reshape(-1).numpy() == plies).all()
    assert (outcome == winner * seat).all()
    assert not ep.forfeit.any()


def trained(monkeypatch, *overrides: str, games: int = 1024):
    """The module of ``overrides`` on 3,4,3 after ``games`` games of 512 an update (a bare
    Trainer, no run folder), and every batch of games its updates played."""
    played = []
    for module in (ppo, reinforce):
        real = module.play_batch

        def spy(*args, _real=real, **kwargs):
            played.append(ep := _real(*args, **kwargs))
            return ep

        monkeypatch.setattr(module, "play_batch", spy)
    return first_update(*BOARD, *overrides, games=games), played


@pytest.mark.parametrize("algo", ["ppo", "reinforce"])
@pytest.mark.parametrize("opponent", ["random", "minimax", "self"])
def test_an_algorithm_trains_on_3_4_3_from_legal_games(monkeypatch, algo, opponent):
    module, played = trained(monkeypatch, f"algo={algo}", f"opponent={opponent}", "seat=both")
    before = {k: v.clone() for k, v in build(make_cfg(*BOARD, f"algo={algo}")).net.state_dict().items()}
    assert module.game == Game(3, 4, 3) and module.net.cells == 12
    assert module.games_played == 1024 == sum(ep.batch for ep in played)  # two updates of 512 games
    for ep in played:
        assert ep.view.shape == (12, 1, ep.batch, 12)  # (T, N, B, cells): a run is a population of one
        referee(ep)
    if opponent == "minimax":  # X wins 3,4,3: the perfect player as X wins every game
        assert all(bool((ep.outcome[ep.seat == -1] == -1).all()) for ep in played)
        assert all(bool((ep.seat == -1).any()) for ep in played)
    after = module.net.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # it learned something
    assert all(torch.isfinite(v).all() for v in after.values())


def test_reinforce_per_move_trains_on_3_4_3(monkeypatch):
    """The path without the position table: the moves' own rows, (M, 12)."""
    module, played = trained(monkeypatch, "algo=reinforce", "algo.position_table=false", "seat=o")
    for ep in played:
        referee(ep)
    assert module.games_played == 1024


def test_a_population_of_three_trains_on_3_4_3(monkeypatch):
    module, played = trained(monkeypatch, "algo=ppo", "population.size=3")
    assert module.n == 3 and module.net.cells == 12
    assert module.member_games.tolist() == [1024] * 3
    for ep in played:
        assert ep.view.shape == (12, 3, ep.batch, 12)
        referee(ep)
    first = [module.net.member(k).state_dict()["body.0.weight"] for k in range(3)]
    assert not torch.equal(first[0], first[1])  # each member its own network


def test_a_run_on_3_4_3_resumes_where_its_checkpoint_left_it(monkeypatch, tmp_path):
    """Killed after the checkpoint of update 2 of 4 and resumed from it, a run ends with the
    weights of the run never killed."""
    def fit(ckpt: str | None = None, crash: bool = False):
        cfg = make_cfg(*BOARD, "algo=reinforce", "budget.games=2048", "seat=o")
        L.seed_everything(cfg.seed, verbose=False)
        module = build(cfg)
        trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False,
                            callbacks=[PeriodicCheckpoint(str(tmp_path), every=2)])
        trainer.fit(module, ckpt_path=ckpt)
        return module

    whole = fit()
    with monkeypatch.context() as mp:
        crash_after_first_checkpoint(mp)
        with pytest.raises(Crash):
            fit()
    resumed = fit(str(tmp_path / "last.ckpt"))
    assert resumed.games_played == whole.games_played == 2048
    for k, v in whole.net.state_dict().items():
        assert torch.equal(v, resumed.net.state_dict()[k]), k
    # the checkpoint names its board: evaluate and export rebuild its network on 3,4,3 (checkpoint_file)
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["game"] == "3,4,3"


def test_the_command_on_3_4_3_evaluates_exactly_exports_and_resumes(tmp_path, monkeypatch):
    """``python -m ttt_research algo=reinforce game=mnk343 debug=tiny``, whole and killed after
    its first checkpoint then resumed: the same exact evaluation and metrics, over the board's
    decision points, and a policy.onnx of the board."""
    command_checks(tmp_path, monkeypatch, "algo=reinforce")


@pytest.mark.parametrize("algo", sorted(s.name for s in specs().values()))
def test_every_algorithm_takes_another_board(algo):
    """Issue 61: no algorithm refuses a board any more; each composes and validates on 3,4,3."""
    assert next(s for s in specs().values() if s.name == algo).any_board
    validate(make_cfg(*BOARD, f"algo={algo}"))


@pytest.mark.slow
def test_ppo_trains_on_4_4_4(monkeypatch):
    """4,4,4 (9.7M positions): one update of 512 games against the perfect player, legal."""
    played = []
    real = ppo.play_batch
    monkeypatch.setattr(ppo, "play_batch", lambda *a, **kw: played.append(real(*a, **kw)) or played[-1])
    cfg = make_cfg("game=mnk444", "algo=ppo", "budget.games=512", "opponent=minimax")
    module = build(cfg)
    L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False).fit(module)
    (ep,) = played
    referee(ep, 4, 4, 4)
    assert bool((ep.outcome <= 0).all())  # 4,4,4 is a draw: the perfect player never loses
