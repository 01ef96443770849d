"""Q-learning and AlphaZero on another m,n,k board (issue 61, item 1), on 3,4,3 (3 rows, 4
columns, 3 in a line wins): legal games (``test_any_board.referee``), a population of three, the
command's exact evaluation, export and resume after a kill; Q-learning's table over the board's
reachable positions and its refusal where the tables would pass 2 GB; AlphaZero's symmetries
(4 on a rectangle). 4,4,4 runs once each, marked slow.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.any_board import command_checks
from tests.helpers.configs import make_cfg
from tests.helpers.updates import first_update
from tests.train.test_any_board import referee
from ttt_research.algos import alphazero, qlearning, qlearning_spec
from ttt_research.env.board import Game
from ttt_research.errors import ConfigError
from ttt_research.models.qtable import QTable
from ttt_research.train.validate import validate

BOARD = ["game=mnk343"]
G343 = Game(3, 4, 3)
ROWS_343 = 111_973  # 3,4,3's reachable positions (FACTS.md), the table's rows


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


def spied(monkeypatch, module) -> list:
    """Every batch of games ``module``'s updates play from now on."""
    played, real = [], module.play_batch
    monkeypatch.setattr(module, "play_batch", lambda *a, **kw: played.append(real(*a, **kw)) or played[-1])
    return played


# ----------------------------------------------------------------------------- Q-learning


@pytest.mark.parametrize("opponent", ["random", "self"])
def test_qlearning_trains_on_3_4_3_from_legal_games(monkeypatch, opponent):
    played = spied(monkeypatch, qlearning)
    module = first_update(*BOARD, "algo=qlearning", f"opponent={opponent}", games=2048)
    assert module.game == G343 and module.net.q.shape == (ROWS_343, 12)
    assert module.games_played == 2048 == sum(ep.batch for ep in played)
    for ep in played:
        referee(ep)
    # a value moved only where a move was learned from: rows of decision positions
    t = G343.tables()
    learned = (module.net.visits > 0).any(-1)
    assert int(learned.sum()) > 100 and not bool(t.done[learned].any())
    assert bool(((module.net.q != 0) <= (module.net.visits > 0)).all())


def test_qlearning_reads_the_row_of_every_view():
    """Each reachable position's view finds its own row (``view_rows``), codes exact in int64."""
    table = qlearning.QLearning(QTable(cells=12), games_per_update=8, lr=0.1, lr_final=None, epsilon=0.1,
                                epsilon_final=None, gamma=1.0, running_mean=True, rollouts=1, game=G343).net
    t = G343.tables()
    assert torch.equal(table.rows(t.view.float()), torch.arange(t.states))


def test_a_population_of_three_qtables_on_3_4_3(monkeypatch):
    played = spied(monkeypatch, qlearning)
    module = first_update(*BOARD, "algo=qlearning", "population.size=3", games=1024)
    assert module.n == 3 and module.net.q.shape == (3, ROWS_343, 12)
    assert module.member_games.tolist() == [1024] * 3
    for ep in played:
        assert ep.view.shape[:2] == (12, 3)
        referee(ep)
    assert not torch.equal(module.net.q[0], module.net.q[1])  # each member its own games
    member = module.net.member(2)
    assert torch.equal(member.q, module.net.q[2]) and member.spec()["cells"] == 12


def test_qlearning_command_on_3_4_3(tmp_path, monkeypatch):
    """... and its checkpoint is a policy file of the board as its policy.onnx is (export,
    evaluate, play and tournament read it): the same logits at every decision position."""
    command_checks(tmp_path, monkeypatch, "algo=qlearning", "budget.games=4096", checkpoint_every=1)
    from ttt_research.evaluation.exact import decision_logits
    from ttt_research.evaluation.policy_file import load_policy
    run = tmp_path / "whole"
    ckpt, onnx = (load_policy(run / name) for name in ("checkpoints/last.ckpt", "policy.onnx"))
    assert ckpt[1].get("game") == "3,4,3"
    assert torch.equal(decision_logits(ckpt[0], G343), decision_logits(onnx[0], G343))


def test_a_table_past_2_gb_is_refused_in_one_line_with_its_size(monkeypatch):
    need = 3 * 2 * ROWS_343 * 12 * 4 + 4 * 3**12  # three members: values and counts, and the map
    assert qlearning_spec.table_bytes(G343, 3, ROWS_343) == need
    validate(make_cfg(*BOARD, "algo=qlearning", "population.size=3"))  # 32 MB: fits
    monkeypatch.setattr(qlearning_spec, "TABLE_LIMIT", need - 1)
    with pytest.raises(ConfigError) as e:
        validate(make_cfg(*BOARD, "algo=qlearning", "population.size=3"))
    assert "\n" not in str(e.value)
    assert str(e.value).startswith(f"algo=qlearning on the 3,4,3 board needs {need / 2**30:.2f} GB for 3 "
                                   f"tables ({ROWS_343:,} positions x 12 cells")


@pytest.mark.slow
def test_qlearning_on_4_4_4_fits_alone_and_refuses_two(monkeypatch):
    """4,4,4's table (9.7M rows) fits in 2 GB for one agent (1.32 GB); two (2.48 GB) do not. One update."""
    g = Game(4, 4, 4)
    rows = 9_722_011  # its reachable positions (FACTS.md)
    one, two = (qlearning_spec.table_bytes(g, n, rows) for n in (1, 2))
    assert one < qlearning_spec.TABLE_LIMIT < two
    with pytest.raises(ConfigError, match=r"^algo=qlearning on the 4,4,4 board needs 2.48 GB for 2 tables "
                                          r"\(9,722,011 "):
        validate(make_cfg("game=mnk444", "algo=qlearning", "population.size=2"))
    played = spied(monkeypatch, qlearning)
    module = first_update("game=mnk444", "algo=qlearning", "algo.games_per_update=512", games=512)
    assert module.net.q.shape == (rows, 16)
    for ep in played:
        referee(ep, 4, 4, 4)
    assert np.isfinite(module.net.q.numpy()).all()


# ----------------------------------------------------------------------------- AlphaZero

# A tiny search and learner: a test of a few seconds, not of strength.
TINY_AZ = ["algo=alphazero", "algo.simulations=4", "algo.test_simulations=2", "algo.gradient_steps=2",
           "algo.batch_size=32", "algo.games_per_update=32"]


@pytest.mark.parametrize("opponent, extra", [("self", []), ("random", []),
                                             ("self", ["algo.max_considered=12"])])  # every cell at the root
def test_alphazero_trains_on_3_4_3_from_legal_games(monkeypatch, opponent, extra):
    played = spied(monkeypatch, alphazero)
    module = first_update(*BOARD, *TINY_AZ, f"opponent={opponent}", "seat=both", *extra, games=32)
    assert module.game == G343 and module.net.cells == 12 and module.algo.turns.shape == (4, 12)
    assert module.games_played == 32 == sum(ep.batch for ep in played)
    (ep,) = played
    assert ep.view.shape[:2] == (12, 1)
    referee(ep)
    # the replay holds the searched positions: the learner's moves, each with a policy over its
    # empty cells (the search's improved policy) summing to one
    ring = module.algo.replay
    moves = int(ep.learner.sum())
    assert int(ring.size.sum()) == moves
    view, policy = ring.view[0, :moves], ring.policy[0, :moves]
    assert view.shape == (moves, 12) and bool((policy[view != 0] == 0).all())
    assert torch.allclose(policy.sum(-1), torch.ones(moves), atol=1e-5)
    assert all(torch.isfinite(v).all() for v in module.net.state_dict().values())


def test_the_search_on_3_4_3_plays_a_win_in_one_and_its_policy_sums_to_one():
    """X to move with two in a row open at both ends: with a flat prior and values 0 the
    deterministic search finds a winning cell (its value, exact, is the only non-zero q)."""
    from ttt_research.search.gumbel import gumbel_search

    t = G343.tables()
    row = 0
    for cell in (5, 0, 6, 1):  # X 5, O 0, X 6, O 1: X threatens 4 and 7 (row 1 of cells 4..7)
        row = int(t.next2d[row, cell])
    logits = torch.where(t.legal, 0.0, -1e9).float()
    s = gumbel_search(torch.tensor([row]), logits, torch.zeros(t.states), 16, game=G343)
    assert int(s.action) in (4, 7)
    assert abs(float(s.policy.sum()) - 1) < 1e-6 and bool((s.policy[0][~t.legal[row]] == 0).all())


def test_alphazero_turns_its_positions_by_the_board_symmetries():
    """On a rectangle the four symmetries (identity, two mirrors, half turn) map the board's
    lines onto lines: a position and its target turn alike."""
    turns = torch.as_tensor(G343.symmetries)
    assert turns.shape == (4, 12) and torch.equal(turns[0], torch.arange(12))
    lines = {tuple(sorted(line)) for line in G343.lines}
    for perm in turns:
        assert {tuple(sorted(perm.argsort()[list(line)].tolist())) for line in lines} == lines
    square = torch.as_tensor(Game(4, 4, 4).symmetries)
    assert square.shape == (8, 16) and len({tuple(p.tolist()) for p in square}) == 8


def test_a_population_of_three_alphazeros_on_3_4_3(monkeypatch):
    played = spied(monkeypatch, alphazero)
    module = first_update(*BOARD, *TINY_AZ, "population.size=3", games=32)
    assert module.n == 3 and module.member_games.tolist() == [32] * 3
    for ep in played:
        assert ep.view.shape[:2] == (12, 3)
        referee(ep)
    first = [module.net.member(k).state_dict()["body.0.weight"] for k in range(3)]
    assert not torch.equal(first[0], first[1])


@pytest.mark.parametrize("members", [1, 2])
def test_alphazero_self_play_over_the_reached_positions_on_3_4_3(monkeypatch, members):
    """``algo.search=reached``: self-play searches the positions it reaches, the net asked at
    each node, and never builds the tables (they would be 4,4,4's 9M rows); legal games, every
    searched position's target a distribution over its empty cells; a population's members
    search with their own nets (their moves differ)."""
    played = spied(monkeypatch, alphazero)

    def no_tables(self, logits=True):
        raise AssertionError("self-play over the reached positions built the tables")

    monkeypatch.setattr(alphazero.AlphaZero, "tables", no_tables)
    seen = []
    real = alphazero.reached_search
    monkeypatch.setattr(alphazero, "reached_search", lambda *a, **kw: seen.append(real(*a, **kw)) or seen[-1])
    module = first_update(*BOARD, *TINY_AZ, "algo.search=reached", "seat=both", f"population.size={members}",
                          games=32)
    assert module.algo.reached and seen and len(played) == 1
    referee(played[0])
    for s in seen:
        assert torch.allclose(s.policy.sum(-1), torch.ones(s.policy.shape[0]))
        assert int(s.visits.sum()) == 4 * s.visits.shape[0]  # algo.simulations=4 a search
    ring = module.algo.replay
    views = ring.view[:, :int(ring.size.min())]  # (N, K, cells)
    targets = ring.policy[:, :views.shape[1]]
    assert bool((targets[views != 0] == 0).all())  # nothing on an occupied cell
    if members == 2:
        first = played[0].action[:, 0][played[0].active[:, 0]]
        second = played[0].action[:, 1][played[0].active[:, 1]]
        assert not torch.equal(first, second)


def test_alphazero_search_auto_is_reached_on_4x4_only():
    from ttt_research.algos.alphazero_spec import reached_self_play
    assert [reached_self_play("auto", Game(*b)) for b in ((3, 3, 3), (3, 4, 3), (4, 4, 3), (4, 4, 4))] == \
        [False, False, True, True]
    assert reached_self_play("reached", Game(3, 3, 3)) and not reached_self_play("whole", Game(4, 4, 4))


def test_alphazero_4_4_4_population_fits_without_a_whole_tree_search(monkeypatch):
    """30 members on 4,4,4 with the defaults: each would hold a whole-tree search (206 GB,
    refused); self-play over the reached positions and ``test_simulations=0`` leave a value
    table a member, and the run fits a 16 GB machine (11.8 GB)."""
    from ttt_research.train import validate as checks
    monkeypatch.setattr(checks, "available_memory", lambda: 16 * 2**30)  # not the test host's, shared
    with pytest.raises(ConfigError, match=r"^a population of 30 members needs about 206.4 GB of memory \(30 x 6.8 GB "
                                          r".*: algo.test_simulations=0 \(no whole-tree search, most of each "
                                          r"member's memory here\), or at most 1 members fit here "):
        validate(make_cfg("game=mnk444", "algo=alphazero", "population.size=30"))
    with pytest.raises(ConfigError, match=r": algo.search=reached and algo.test_simulations=0 \(no whole-tree"):
        validate(make_cfg("game=mnk444", "algo=alphazero", "population.size=30", "algo.search=whole"))
    validate(make_cfg("game=mnk444", "algo=alphazero", "population.size=30", "algo.test_simulations=0"))


def test_alphazero_command_on_3_4_3(tmp_path, monkeypatch):
    report = command_checks(tmp_path, monkeypatch, *TINY_AZ, "budget.games=64", checkpoint_every=1)
    search = report["search"]  # the test-time search, evaluated exactly on the board
    assert search["simulations"] == 2 and 0 < search["decision_points"] < 79_563
    assert search["as_o"]["vs_perfect"]["loss"] == 1.0


@pytest.mark.slow
@pytest.mark.alone  # ~10 GB: beside another worker's 4,4,4 run the memory check refused it (CI)
def test_alphazero_trains_on_4_4_4(monkeypatch):
    """4,4,4 (9.1M decision positions): one update of 32 games searched with 2 simulations,
    legal; the exact evaluation of the network and of the search."""
    played = spied(monkeypatch, alphazero)
    module = first_update("game=mnk444", *TINY_AZ, "algo.simulations=2", games=32)
    (ep,) = played
    referee(ep, 4, 4, 4)
    assert module.algo.turns.shape == (8, 16)
