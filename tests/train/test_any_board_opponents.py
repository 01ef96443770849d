"""Every opponent on another m,n,k board (issue 61, item 2): ``rules``, ``pool``, ``mixed`` and
``curriculum`` train PPO and REINFORCE on 3,4,3 from legal games (the independent ``referee``
of ``test_any_board.py``); the general rule player takes every immediate win and blocks every
immediate loss (3,4,3: every position; 4,4,4: positions of random games), while tic-tac-toe's
rule player keeps its moves at all 4,520 decision positions; a tournament on 3,4,3 enters
``rules``; ``league=true``, a population and a restored pool play on 3,4,3; an opponent class
that plays tic-tac-toe only is refused in one line.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.updates import first_update
from tests.train.test_any_board import lines, referee, trained
from ttt_research import tournament as tournament_cli
from ttt_research.algos import ppo
from ttt_research.env import opponents
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.rule_player import forcing_cells, rule_cells
from ttt_research.errors import ConfigError
from ttt_research.evaluation.exact import decision_codes
from ttt_research.models.nets import MLP
from ttt_research.train import league
from ttt_research.train.run import train
from ttt_research.train.validate import validate

BOARD = ["game=mnk343"]
G343 = Game(3, 4, 3)
# sha256 of tic-tac-toe's rule player, rules_probs()[decision_codes()] as float64 bytes, taken
# from main (ad566b5) before the rule player took other boards: its moves may not change.
RULES_3X3_SHA256 = "50501214d9f86def0dde68bc7fd9a3c4b7e24255f9b0fe838833bcf831178635"

pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


def _stages(opponent) -> list:
    """The opponents a composite is made of, itself included, depth first."""
    if isinstance(opponent, opponents.Curriculum):
        return [opponent] + [s for _, o in opponent.stages for s in _stages(o)]
    if isinstance(opponent, opponents.MixedOpponent):
        return [opponent, *_stages(opponent.strong), *_stages(opponent.weak)]
    return [opponent]


@pytest.mark.parametrize("algo", ["ppo", "reinforce"])
@pytest.mark.parametrize("opponent", ["rules", "pool", "mixed", "curriculum"])
def test_an_opponent_trains_on_3_4_3_from_legal_games(monkeypatch, algo, opponent):
    extra = {"mixed": ["opponent.strong=rules"],  # four updates of 256 games: the curriculum
             "curriculum": ["algo.games_per_update=256"]}.get(opponent, [])  # reaches its pool at 0.75
    module, played = trained(monkeypatch, f"algo={algo}", f"opponent={opponent}", "seat=both", *extra)
    assert all(o.game == G343 for o in _stages(module.opponent))  # every part plays the board
    assert all(getattr(o, "probs", None) is None for o in _stages(module.opponent))  # no 3x3 table
    for ep in played:
        referee(ep)
    if opponent == "pool":
        assert [s.game for s in module.opponent.snapshots] == [G343]
    if opponent == "curriculum":
        assert module.opponent.index == 2 and module.opponent.current.weak.snapshots


def _one_move_wins(board: np.ndarray, player: np.ndarray, m: int, n: int, k: int) -> np.ndarray:
    """(P, cells) boards, (P,) players (+1 / -1) -> (P, cells) bool: the empty cells where
    ``player``'s stone makes a line of k (found here by replaying each cell, not by env/)."""
    idx = np.array(lines(m, n, k))
    out = np.zeros(board.shape, dtype=bool)
    for c in range(board.shape[1]):
        after = board.copy()
        after[:, c] = player
        out[:, c] = (board[:, c] == 0) & (after[:, idx].sum(-1) == k * player[:, None]).any(-1)
    return out


def _assert_wins_then_blocks(board: np.ndarray, mover: np.ndarray, chosen: np.ndarray,
                             m: int, n: int, k: int) -> tuple[int, int]:
    """Every position with a win: only winning cells; else with a loss to stop: only cells that
    stop one. Returns how many positions of each kind there were."""
    win = _one_move_wins(board, mover, m, n, k)
    loss = _one_move_wins(board, -mover, m, n, k)
    can_win, must_block = win.any(-1), ~win.any(-1) & loss.any(-1)
    assert chosen.any(-1).all()  # every position in play names a cell
    assert not (chosen & ~win)[can_win].any()
    assert not (chosen & ~loss)[must_block].any()
    return int(can_win.sum()), int(must_block.sum())


def test_the_rule_player_wins_then_blocks_on_every_3_4_3_position():
    t = G343.tables()
    rows = (~t.done).nonzero().squeeze(1)  # every position in play
    chosen = (opponents.rules_probs(G343)[rows] > 0).numpy()
    wins, blocks = _assert_wins_then_blocks(t.board[rows].long().numpy(), t.mover[rows].long().numpy(),
                                            chosen, 3, 4, 3)
    assert rows.numel() == 79_563 and wins > 10_000 and blocks > 10_000
    # the opponent draws among those cells, and nowhere else
    opp, gen = opponents.RulesOpponent(G343), torch.Generator().manual_seed(0)
    moves = opp.act(rows, gen)
    assert torch.from_numpy(chosen)[torch.arange(rows.numel()), moves].all()


def test_the_rule_player_wins_then_blocks_on_4_4_4_positions_of_random_games():
    """4,4,4's 9.7M positions are many: the boards of 4,000 random games, ply by ply (no tables)."""
    g, rng = Game(4, 4, 4), np.random.default_rng(0)
    games, cells = 4_000, 16
    board = np.zeros((games, cells), dtype=np.int64)
    live = np.ones(games, dtype=bool)
    seen, movers = [], []
    idx = np.array(lines(4, 4, 4))
    for ply in range(cells):
        mover = 1 if ply % 2 == 0 else -1
        seen.append(board[live].copy())
        movers.append(np.full(int(live.sum()), mover))
        keys = np.where(board == 0, rng.random(board.shape), -1.0)
        cell = keys.argmax(-1)  # a random empty cell
        g_live = np.nonzero(live)[0]
        board[g_live, cell[g_live]] = mover
        live &= ~(board[:, idx].sum(-1) == 4 * mover).any(-1)
    board, mover = np.concatenate(seen), np.concatenate(movers)
    chosen = rule_cells(torch.from_numpy(board), torch.from_numpy(mover), g).numpy()
    wins, blocks = _assert_wins_then_blocks(board, mover, chosen, 4, 4, 4)
    assert wins > 1_000 and blocks > 1_000


def test_tic_tac_toe_rule_player_keeps_its_moves_at_every_decision_position():
    codes = decision_codes()
    table = opponents.rules_probs()[codes]
    assert codes.numel() == 4_520
    assert hashlib.sha256(table.numpy().tobytes()).hexdigest() == RULES_3X3_SHA256
    # The general player's first four rules name the table's very cells wherever one applies
    # (4,288 positions); the rest is where centre-corner-side and "most open lines" differ.
    t = TIC_TAC_TOE.tables()
    chosen, decided = forcing_cells(t.board[codes], t.mover[codes], TIC_TAC_TOE)
    assert int(decided.sum()) == 4_288
    assert torch.equal(chosen[decided], table[decided] > 0)
    # On the empty board the open lines rank the seed's way: the centre.
    assert rule_cells(torch.zeros(1, 9), torch.ones(1), TIC_TAC_TOE).nonzero()[:, 1].tolist() == [4]


def test_a_tournament_on_3_4_3_enters_the_rule_player(capsys):
    assert tournament_cli.main(["--game", "3,4,3", "rules", "random", "perfect"]) == 0
    out = capsys.readouterr().out
    assert "board: 3,4,3" in out and "rules" in out


@pytest.mark.parametrize("opponent", ["random", "minimax", "rules", "self", "pool", "mixed", "curriculum"])
def test_every_opponent_of_conf_is_let_through_on_another_board(opponent):
    validate(make_cfg(*BOARD, "algo=ppo", f"opponent={opponent}"))


@pytest.mark.parametrize("where", ["opponent._target_", "opponent.stages.0.opponent._target_"])
def test_a_tic_tac_toe_only_opponent_class_is_refused_in_one_line(where):
    over = [] if where == "opponent._target_" else ["opponent=curriculum"]
    with pytest.raises(ConfigError) as e:
        validate(make_cfg(*BOARD, "algo=ppo", *over, f"{where}=ttt_research.env.opponents.TableOpponent"))
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("opponent TableOpponent plays tic-tac-toe only (game=ttt), not the 3,4,3 "
                                   "board of game=mnk; choose opponent=random, minimax, rules,")


def test_the_league_plays_on_3_4_3(tmp_path):
    report = train(make_cfg(*BOARD, "algo=reinforce", "league=true", "eval_every=1", "budget.games=512",
                            "algo.games_per_update=256", "opponent=pool"), tmp_path / "run")
    rows = (tmp_path / "run" / "league.csv").read_text().splitlines()
    assert rows[0].startswith("games,final_as_x_win") and len(rows) == 2  # the one earlier self
    assert report["as_o"]["vs_perfect"]["loss"] == 1.0  # X wins 3,4,3: a perfect X beats any O


def test_a_population_trains_on_3_4_3_against_the_rule_player_mixed_in(monkeypatch):
    module, played = trained(monkeypatch, "algo=ppo", "opponent=mixed", "opponent.strong=rules",
                             "population.size=2")
    assert module.n == 2 and module.opponent.strong.game == G343
    for ep in played:
        assert ep.view.shape[1] == 2  # (T, N, B, cells): each member's games
        referee(ep)


def test_a_pool_on_3_4_3_restored_from_its_state_plays_as_it_did():
    """A resumed run meets the pool it would have met: the snapshots' weights, on the board."""
    net = make_net()
    pool = opponents.PoolOpponent(every=1, size=2, game=G343)
    for update in range(3):
        torch.nn.init.normal_(net.body[0].weight, generator=torch.Generator().manual_seed(update))
        pool.on_update(net, update / 3, update)
    again = opponents.PoolOpponent(every=1, size=2).on_board(G343)
    again.restore(pool.state(), make_net())
    rows = (~G343.tables().done).nonzero().squeeze(1)[:5_000]
    moves = [p.act(rows, torch.Generator().manual_seed(5)) for p in (pool, again)]
    assert [s.name for s in again.snapshots] == ["snapshot@1", "snapshot@2"]
    assert torch.equal(moves[0], moves[1]) and G343.tables().legal[rows, moves[0]].all()


def make_net() -> MLP:
    return MLP([32], "signed9", cells=G343.cells)


@pytest.mark.slow
def test_ppo_trains_on_4_4_4_against_the_rule_player(monkeypatch):
    """4,4,4 (9.7M positions, no table of the rule player): one update of 512 games, legal."""
    played = []
    real = ppo.play_batch
    monkeypatch.setattr(ppo, "play_batch", lambda *a, **kw: played.append(real(*a, **kw)) or played[-1])
    module = first_update("game=mnk444", "algo=ppo", "opponent=rules", "seat=both", games=512)
    assert module.opponent.game == Game(4, 4, 4) and module.opponent.probs is None
    (ep,) = played
    referee(ep, 4, 4, 4)


def test_a_league_too_big_for_its_board_is_refused_before_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(league, "MAX_BYTES", 10**6)  # 3,4,3's cross-play of 2 policies: ~93 MB
    with pytest.raises(ConfigError) as e:
        train(make_cfg(*BOARD, "algo=reinforce", "league=true", "eval_every=1", "budget.games=512",
                       "algo.games_per_update=256"), tmp_path / "run")
    assert str(e.value).startswith("league=true on the 3,4,3 board: cross-play of its 2 evaluations' "
                                   "policies would hold about 0.")
    assert "\n" not in str(e.value)
    assert list((tmp_path / "run").iterdir()) == []  # nothing written
