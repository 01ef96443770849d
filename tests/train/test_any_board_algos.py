"""A2C, DQN and antirez's loop (``reinforce_faithful``) on another m,n,k board (issue 61, item 1):
on 3,4,3 (3 rows, 4 columns, 3 in a line wins) each plays legal games of that board and learns
from them, alone and (A2C, DQN) as a population, and the command evaluates it exactly, exports
it and resumes after a kill to the run never killed. DQN's symmetries are the board's own: 4 on
this rectangle. The games are checked by ``test_any_board``'s independent referee; 4,4,4 runs
once per algorithm, marked slow.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.helpers.any_board import command_checks
from tests.helpers.configs import make_cfg
from tests.helpers.updates import first_update
from tests.train.test_any_board import lines, referee
from ttt_research.algos import a2c, dqn, reinforce_faithful
from ttt_research.env import game
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.reward import Reward
from ttt_research.errors import ConfigError
from ttt_research.evaluation import values as accuracy
from ttt_research.train.run import build, train
from ttt_research.train.validate import validate

BOARD = ["game=mnk343"]
MODULES = {"a2c": a2c, "dqn": dqn, "reinforce_faithful": reinforce_faithful}
# Each algorithm's settings that keep a test to seconds and still learn in it: DQN's first
# gradient steps come after its warm-up, and antirez's loop plays (and steps) one game at a time.
QUICK = {"a2c": ["algo.games_per_update=128"],
         "dqn": ["algo.games_per_update=128", "algo.warmup_games=0", "algo.batch_size=64"],
         "reinforce_faithful": ["algo.games_per_update=64"]}
GAMES = {"a2c": 256, "dqn": 256, "reinforce_faithful": 128}  # two updates


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


def trained(monkeypatch, algo: str, *overrides: str):
    """The module of ``algo`` on 3,4,3 after two updates (a bare Trainer, no run folder), and
    every batch of games its updates played."""
    played = []
    module = MODULES[algo]
    real = module.play_batch

    def spy(*args, **kwargs):
        played.append(ep := real(*args, **kwargs))
        return ep

    monkeypatch.setattr(module, "play_batch", spy)
    return first_update(*BOARD, f"algo={algo}", *QUICK[algo], *overrides, games=GAMES[algo]), played


@pytest.mark.parametrize("algo", ["a2c", "dqn", "reinforce_faithful"])
@pytest.mark.parametrize("opponent", ["random", "minimax", "self"])
def test_an_algorithm_trains_on_3_4_3_from_legal_games(monkeypatch, algo, opponent):
    # DQN's self-play targets negate the opponent's value: a zero-sum reward table
    zero_sum = ["reward=zero_sum"] if algo == "dqn" and opponent == "self" else []
    module, played = trained(monkeypatch, algo, f"opponent={opponent}", "seat=both", *zero_sum)
    before = {k: v.clone() for k, v in build(make_cfg(*BOARD, f"algo={algo}")).net.state_dict().items()}
    assert module.game == Game(3, 4, 3) and module.algo.game == Game(3, 4, 3) and module.net.cells == 12
    assert module.games_played == GAMES[algo] == sum(ep.batch for ep in played)
    for ep in played:
        assert ep.view.shape[0] == 12 and ep.view.shape[-1] == 12  # (T, ..., cells): 12 plies of 12 cells
        referee(ep)
    if opponent == "minimax":  # X wins 3,4,3: the perfect player as X wins every game
        assert all(bool((ep.outcome[ep.seat == -1] == -1).all()) for ep in played)
    after = module.net.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # it learned something
    assert all(torch.isfinite(v).all() for v in after.values())


def test_antirez_inputs_are_two_bits_a_cell_on_3_4_3(monkeypatch):
    """planes18 on 3,4,3: 2 x 12 = 24 inputs, the own bit then the opponent's, cell by cell."""
    module, _ = trained(monkeypatch, "reinforce_faithful", "seat=o")
    assert module.net.body[0].in_features == 24 and module.net.body[-1].out_features == 12
    view = torch.zeros(1, 12)
    view[0, 0], view[0, 11] = 1, -1  # own piece in the top-left corner, the opponent's bottom-right
    bits = module.net.encode(view)[0].tolist()
    assert bits == [1, 0] + [0] * 20 + [0, 1]


def test_dqn_replays_views_of_the_board(monkeypatch):
    module, _ = trained(monkeypatch, "dqn", "seat=both")
    replay = module.algo.replay
    assert replay.view.shape[-1] == replay.next_view.shape[-1] == 12
    filled = replay.view[0, : int(replay.size[0])]
    assert int(replay.size[0]) > 0 and bool((filled.abs() <= 1).all())
    assert bool((replay.action[0, : int(replay.size[0])] < 12).all())


@pytest.mark.parametrize("algo", ["a2c", "dqn"])
def test_a_population_of_three_trains_on_3_4_3(monkeypatch, algo):
    sym = ["algo.symmetries=true"] if algo == "dqn" else []
    module, played = trained(monkeypatch, algo, "population.size=3", *sym)
    assert module.n == 3 and module.net.cells == 12
    assert module.member_games.tolist() == [GAMES[algo]] * 3
    for ep in played:
        assert ep.view.shape == (12, 3, ep.batch, 12)  # (T, N, B, cells)
        referee(ep)
    first = [module.net.member(k).state_dict()["body.0.weight"] for k in range(3)]
    assert not torch.equal(first[0], first[1])  # each member its own network


def test_antirez_loop_refuses_a_population_on_3_4_3_in_one_line():
    """As on tic-tac-toe: it plays one game at a time (a population is algo=reinforce's)."""
    with pytest.raises(ConfigError, match="^[^\n]*use algo=reinforce$"):
        validate(make_cfg(*BOARD, "algo=reinforce_faithful", "population.size=3"))


@pytest.mark.parametrize(("board", "count"), [((3, 4, 3), 4), ((4, 4, 4), 8), ((3, 3, 3), 8)])
def test_dqn_turns_by_the_board_own_symmetries(board, count):
    """4 on a rectangle (a quarter turn would swap rows and columns), 8 on a square: each maps
    the board's lines onto its lines (a turned position is one of the same game), a turned move
    lands where its board's piece does, and tic-tac-toe's are those it always used."""
    g = Game(*board)
    sym = dqn.symmetries(g, torch.device("cpu"))
    assert sym.shape == (count, g.cells) and torch.equal(sym[0], torch.arange(g.cells))
    every = {tuple(sorted(line)) for line in lines(*board)}
    for s in sym.tolist():
        assert {tuple(sorted(s[c] for c in line)) for line in every} == every
    boards = torch.from_numpy(np.random.default_rng(0).integers(-1, 2, (64, g.cells))).to(torch.int8)
    k = torch.arange(64) % count
    cell = torch.arange(64) % g.cells
    turned, moved = dqn.turned(boards, k, sym), dqn.turned_cell(cell, k, sym)
    assert torch.equal(turned.gather(1, moved[:, None]), boards.gather(1, cell[:, None]))
    if g == TIC_TAC_TOE:
        assert torch.equal(turned, game.turned(boards, k)) and torch.equal(moved, game.turned_cell(cell, k))


@pytest.mark.parametrize("algo", ["a2c", "dqn", "reinforce_faithful"])
def test_the_command_on_3_4_3_evaluates_exactly_exports_and_resumes(tmp_path, monkeypatch, algo):
    """``python -m ttt_research algo=ALGO game=mnk343 debug=tiny``, whole and killed after its
    first checkpoint then resumed: the same exact evaluation and metrics, and a policy.onnx of the board."""
    short = ["algo.games_per_update=64", "budget.games=256"] if algo == "reinforce_faithful" else []
    command_checks(tmp_path, monkeypatch, f"algo={algo}", *short)


def test_a_dqn_population_on_3_4_3_evaluates_each_member_exactly(tmp_path):
    """The command with population.size=3: an exact evaluation and a policy of the board per member."""
    train(make_cfg(*BOARD, "algo=dqn", "population.size=3", "population.export=all", "budget.games=1024"),
          tmp_path)
    members = json.loads((tmp_path / "population.json").read_text())["members"]
    assert [m["games"] for m in members] == [1024] * 3
    for m in members:  # scored against the exact game: the perfect X beats any O on 3,4,3
        assert m["eval"]["as_o"]["vs_perfect"]["loss"] == 1.0 and 0 < m["eval"]["decision_points"] < 79_563
    onnx = pytest.importorskip("onnx")
    models = sorted(tmp_path.glob("members/*/policy.onnx"))
    assert len(models) == 3
    for path in models:
        model = onnx.load(path)
        assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:] == [12]
        assert {p.key: p.value for p in model.metadata_props}.get("game") == "3,4,3"


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["a2c", "dqn", "reinforce_faithful",
                                  # ~10 GB: beside another worker's 4,4,4 run it met the memory check
                                  pytest.param("alphazero", marks=pytest.mark.alone)])
def test_an_algorithm_runs_tiny_on_4_4_4(tmp_path, algo):
    """``python -m ttt_research algo=ALGO game=mnk444 debug=tiny`` (9.7M positions): trains,
    evaluates exactly and exports. 4,4,4 is a draw: the perfect player never loses to it.
    AlphaZero (~8 min, 10 GB: a whole-tree search each update and two at the end) also reports
    its test-time search and its learned values over all 9,062,619 decision points."""
    report = train(make_cfg("game=mnk444", f"algo={algo}"), tmp_path)
    for seat in ("as_x", "as_o"):
        assert report[seat]["vs_perfect"]["win"] == 0.0
    if algo == "alphazero":
        assert report["value_accuracy"]["decision_points"] == 9_062_619
        assert 0 < report["search"]["optimal_move_rate"] <= 1 and report["search"]["simulations"] == 4
    onnx = pytest.importorskip("onnx")
    model = onnx.load(tmp_path / "policy.onnx")
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:] == [16]
    assert {p.key: p.value for p in model.metadata_props}.get("game") == "4,4,4"


def test_value_accuracy_read_in_parts_is_the_whole(monkeypatch):
    """``value_accuracy`` reads the decision positions ``ROWS`` at a time (4,4,4's 9M at once
    held 13.6 GB): in parts of 1,000 the figures of tic-tac-toe's 4,520 in one."""
    q = torch.randn(3, 4520, 9, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    reward = Reward(win=1.0, tie=0.0, loss=-1.0)
    whole = accuracy.value_accuracy(q, reward, ("x", "o"))
    monkeypatch.setattr(accuracy, "ROWS", 1000)
    parts = accuracy.value_accuracy(q, reward, ("x", "o"))
    for a, b in zip(whole, parts, strict=True):
        assert a["decision_points"] == b["decision_points"] == 4520
        assert a["sign_agreement"] == b["sign_agreement"] and a["mae"] == pytest.approx(b["mae"], rel=1e-12)
    assert accuracy.value_accuracy(lambda view: None, reward, ("x", "o")) is None
