"""algo=alphazero: its loss terms on hand numbers, the positions and targets it learns from,
a tiny run with its test-time search in eval.json, a population whose members are their
seeds' single runs, and a killed run that resumes to the uninterrupted one."""

import json
import math
import re

import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.resume import metric_rows, train_killed
from tests.helpers.updates import first_update, rates
from ttt_research.algos.alphazero import AlphaZero, policy_loss, value_loss
from ttt_research.algos.alphazero_spec import SPEC
from ttt_research.env import game, solver
from ttt_research.env.game import turned
from ttt_research.errors import ConfigError
from ttt_research.evaluation.exact import evaluate_actions
from ttt_research.evaluation.text import eval_table
from ttt_research.models.nets import MASKED, MLP
from ttt_research.train.run import train
from ttt_research.train.validate import validate

TINY = ["algo=alphazero", "net=mlp25", "algo.games_per_update=16", "algo.simulations=4",
        "algo.gradient_steps=2", "algo.batch_size=32", "budget.games=64"]


def test_the_policy_loss_is_the_cross_entropy_to_the_search_target():
    logits = torch.tensor([[[0.0, math.log(3.0), MASKED, 0, 0, 0, 0, 0, 0]]])  # cell 2 occupied
    target = torch.tensor([[[0.5, 0.5, 0, 0, 0, 0, 0, 0, 0]]])
    # softmax over the 8 legal cells: 1/10 each but 3/10 for cell 1.
    expected = -(0.5 * math.log(0.1) + 0.5 * math.log(0.3))
    assert policy_loss(logits, target).item() == pytest.approx(expected)
    assert value_loss(torch.tensor([[0.5, -1.0]]), torch.tensor([[1.0, -1.0]])).item() == pytest.approx(0.125)


def test_action_values_are_the_childrens_values_negated_exact_at_the_end():
    az = AlphaZero(MLP([8], "signed9"), **SPEC.defaults())
    view = game.tables().view[game.step(game.step(game.step(game.step(
        torch.zeros(1, dtype=torch.long), torch.tensor([0])).code, torch.tensor([3])).code,
        torch.tensor([1])).code, torch.tensor([4])).code].float()  # X to move, wins at 2
    q = az.action_values(view)[0]
    assert q[2] == 1.0  # the win, exact
    after = view[0].clone()
    after[5] = 1.0
    assert q[5].item() == pytest.approx(-az.value(-after[None]).item(), abs=1e-6)


def test_every_searched_move_is_learned_from_with_its_movers_result():
    module = first_update(*TINY, "budget.games=16")
    ring = module.algo.replay
    moves = int(module.last_update.moves.sum())
    assert int(ring.size[0]) == moves  # one position per move of the 16 self-play games
    policy = ring.policy[0, :moves]
    assert torch.allclose(policy.sum(-1), torch.ones(moves))
    occupied = ring.view[0, :moves] != 0
    assert policy[occupied].abs().sum() == 0  # never a target on an occupied cell
    assert set(ring.result[0, :moves].tolist()) <= {-1.0, 0.0, 1.0}


@pytest.mark.slow  # about 4 s on the 2-core host
def test_a_tiny_run_reports_its_search_exactly(tmp_path):
    report = train(make_cfg(*TINY), tmp_path)
    assert report["search"]["simulations"] == 4
    # says which setting it is (training searches with algo.simulations, 16 by default)
    line = "search (the test-time search, 4 simulations: algo.test_simulations): optimal moves "
    assert line in eval_table(report)  # the console's summary
    assert {"as_x", "as_o", "optimal_move_rate"} <= set(report["search"])
    head = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    for name in ("train/policy_loss", "train/value_loss", "search/depth", "search/improvement"):
        assert name in head
    # algo.test_simulations=0: no search evaluated, nothing else changed (the same raw net)
    bare = train(make_cfg(*TINY, "algo.test_simulations=0"), tmp_path / "bare")
    assert "search" not in bare and "search_as_trained" not in bare
    assert bare["as_x"] == report["as_x"] and bare["as_o"] == report["as_o"]
    assert "search (the test-time search" not in eval_table(bare)


def test_the_test_time_search_is_evaluated_over_the_whole_tree():
    # The search policy is evaluated like any policy. With minimax values and a prior that
    # leans towards the optimal moves (by e^2, not certainty), the searched agent is
    # unbeatable; the raw prior's own greedy moves are too, so the check is the search's
    # plumbing (tables -> every decision position searched -> the exact evaluation).
    az = AlphaZero(MLP([8], "signed9"), **(SPEC.defaults() | {"test_simulations": 9}))
    sol, t = solver.solve(), game.tables()
    exact = (sol.value * t.mover).float()
    lean = torch.where(sol.optimal, 2.0, 0.0)
    az.tables = lambda: (torch.where(t.legal, lean, MASKED), exact)
    actions = az.search_actions()[0]
    points = t.reachable & ~t.done
    assert bool(sol.optimal[points.nonzero().squeeze(1), actions[points]].all())
    report = evaluate_actions(actions)
    assert report["as_x"]["worst_case"] == "draw" and report["as_o"]["worst_case"] == "draw"
    # A flat prior with 9 simulations is not minimax: below the root an unvisited reply is
    # chosen by the prior, so extra visits average in replies that are not the best.
    az.tables = lambda: (torch.where(t.legal, 0.0, MASKED), exact)
    flat = az.search_actions()[0]
    assert not bool(sol.optimal[points.nonzero().squeeze(1), flat[points]].all())


@pytest.mark.slow  # a few seconds on the 2-core host
def test_each_members_first_update_is_its_single_run():
    pop = first_update(*TINY, "budget.games=16", "population.size=2")
    for k in range(2):
        one = first_update(*TINY, "budget.games=16", f"seed={k}")
        assert rates(pop.last_update, k) == rates(one.last_update), f"member {k}"
        assert torch.equal(pop.replay.view[k], one.replay.view[0])
        torch.testing.assert_close(pop.replay.policy[k], one.replay.policy[0], atol=1e-5, rtol=1e-4)


@pytest.mark.slow  # a few seconds on the 2-core host
def test_a_killed_run_resumes_to_the_uninterrupted_one(tmp_path, monkeypatch):
    overrides = [*TINY, "checkpoint_every=2"]
    whole = train(make_cfg(*overrides), tmp_path / "whole")
    train_killed(make_cfg(*overrides), tmp_path / "killed", monkeypatch)
    assert train(make_cfg(*overrides, "resume=true"), tmp_path / "killed") == whole
    assert json.loads((tmp_path / "killed" / "eval.json").read_text()) == whole
    assert metric_rows(tmp_path / "killed") == metric_rows(tmp_path / "whole")


@pytest.mark.parametrize("override, needle", [
    ("algo.simulations=0", "algo.simulations must be an integer in [1, 1024]"),
    ("algo.test_simulations=2000", "algo.test_simulations must be an integer in [0, 1024]"),
    ("algo.search=tree", "algo.search must be auto or whole or reached, got 'tree'"),
    ("algo.max_considered=17", "algo.max_considered must be an integer in [1, 16]"),
    ("algo.weight_decay=-1", "algo.weight_decay must be a number in [0,"),
    ("reward=cautious", "reward must be a zero-sum table with algo=alphazero"),
    ("algo.capacity=0", "algo.capacity must be a positive integer"),
])
def test_bad_values_are_refused_naming_the_key(override, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        validate(make_cfg("algo=alphazero", override))
    validate(make_cfg("algo=alphazero"))


@pytest.mark.slow  # a few seconds on the 2-core host
def test_a_populations_members_carry_their_search_evaluations(tmp_path):
    train(make_cfg(*TINY, "population.size=2"), tmp_path)
    members = json.loads((tmp_path / "population.json").read_text())["members"]
    for m in members:
        one = train(make_cfg(*TINY, f"seed={m['seed']}"), tmp_path / f"single{m['seed']}")
        assert m["eval"]["search"]["simulations"] == 4
        first = m["eval"]["search"]["first_unbeatable_games"]  # the search's own, beside the raw net's
        searched_safe = all(m["eval"]["search"][s]["worst_case"] != "loss" for s in ("as_x", "as_o"))
        assert (first is not None and 0 < first <= m["games"]) if searched_safe else True
        mine, alone = m["eval"]["search"]["as_o"]["vs_random"], one["search"]["as_o"]["vs_random"]
        assert mine == pytest.approx(alone, abs=1e-4)


def test_value_mix_one_learns_the_searchs_values_instead_of_the_results():
    ring = first_update(*TINY, "budget.games=16", "algo.value_mix=1").algo.replay
    result = ring.result[0, :int(ring.size[0])]
    assert result.abs().max() <= 1 and not bool((result == result.round()).all())


def test_a_turned_position_keeps_its_targets_legal_and_its_optimal_moves_optimal():
    # The symmetry augmentation turns a position and its policy target alike: on every
    # decision position and each of the 8 symmetries, the turned target is 0 on the turned
    # board's occupied cells, and the solver's optimal moves turn into optimal moves.
    sol, t = solver.solve(), game.tables()
    codes = (t.reachable & ~t.done).nonzero().squeeze(1)  # (P,)
    boards = t.board[codes].long()  # (P, 9)
    target = sol.optimal[codes].float()  # (P, 9) 1 on the optimal moves
    for k in range(8):
        ks = torch.full((codes.numel(),), k)
        board, policy = turned(boards, ks), turned(target, ks)
        code = game.encode(board)
        assert bool(t.reachable[code].all())
        assert policy[board != 0].abs().sum() == 0
        assert torch.equal(policy.bool(), sol.optimal[code])


def test_symmetries_change_what_is_learned_and_can_be_turned_off():
    on = first_update(*TINY, "budget.games=16", "algo.gradient_steps=1")
    off = first_update(*TINY, "budget.games=16", "algo.gradient_steps=1", "algo.symmetries=false")
    assert torch.equal(on.algo.replay.view, off.algo.replay.view)  # the same games were played ...
    w_on, w_off = (next(m.algo.net.parameters()) for m in (on, off))
    assert not torch.equal(w_on, w_off)  # ... and learned from as different positions


@pytest.mark.slow
@pytest.mark.parametrize("board", [[], ["game=mnk343", "population.size=2"]])
def test_self_play_over_the_reached_positions_plays_the_whole_trees_games(monkeypatch, board):
    """``algo.search=reached`` (the literal trees, the net asked at each node) against the
    shared subtrees over every position: two updates of the same seed play the same games;
    the weights after them differ by float rounding only (the targets' values are the same
    leaves summed in another order)."""
    from ttt_research.algos import alphazero
    runs = {}
    for mode in ("whole", "reached"):
        played, real = [], alphazero.play_batch
        monkeypatch.setattr(alphazero, "play_batch", lambda *a, real=real, played=played, **kw:
                            played.append(real(*a, **kw)) or played[-1])
        module = first_update(*board, "algo=alphazero", "algo.games_per_update=64", "algo.gradient_steps=2",
                              "algo.batch_size=32", f"algo.search={mode}", games=128)
        monkeypatch.setattr(alphazero, "play_batch", real)
        runs[mode] = played, module
    (whole, a), (reached, b) = runs["whole"], runs["reached"]
    assert len(whole) == len(reached) == 2 and not a.algo.reached and b.algo.reached
    for x, y in zip(whole, reached, strict=True):
        assert torch.equal(x.action, y.action)
    for p, q in zip(a.algo.net.parameters(), b.algo.net.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)
