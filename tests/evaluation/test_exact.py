"""The solver and the exact evaluator, against the reference figures (docs/facts.md) and
the plain recursive reference (tests/helpers/reference.py)."""

from fractions import Fraction

import pytest
import torch

from tests.helpers import reference as ref
from ttt_research.contract import WORST_NAME
from ttt_research.env import game
from ttt_research.env.solver import best_response, one_hot, outcome_probs, random_probs, solve
from ttt_research.evaluation import exact as ev

T = game.tables()
SOL = solve()


def lowest_optimal():
    return SOL.optimal.to(torch.int8).argmax(-1)


def test_empty_board_is_a_draw_and_values_match_reference_minimax():
    assert int(SOL.value[game.EMPTY_CODE]) == 0
    codes = T.reachable.nonzero().squeeze(-1)[::7]
    for c in codes.tolist():
        assert int(SOL.value[c]) == ref.minimax(tuple(T.board[c].tolist()))


def test_random_vs_random_exact_odds():
    x, o, tie = outcome_probs(random_probs(), random_probs())[game.EMPTY_CODE].tolist()
    assert x == pytest.approx(737 / 1260, abs=1e-12)
    assert o == pytest.approx(121 / 420, abs=1e-12)
    assert tie == pytest.approx(8 / 63, abs=1e-12)


def test_minimax_policy_never_loses_from_either_seat():
    r = ev.evaluate_actions(lowest_optimal())
    for seat in ("as_x", "as_o"):
        assert r[seat]["worst_case"] == "draw"
        assert r[seat]["vs_random"]["loss"] == 0.0
        assert r[seat]["vs_perfect"] == {"win": 0.0, "loss": 0.0, "tie": 1.0}
    assert r["optimal_move_rate"] == 1.0


def best_unbeatable():
    acts = lowest_optimal().clone()
    for seat in (game.X, game.O):
        a, _ = best_response(random_probs(), seat, (1.0, 0.0, -1.0), allowed=SOL.optimal)
        acts[T.mover == seat] = a[T.mover == seat]
    return acts


def test_best_unbeatable_player_scores_the_best_possible_rows():
    r = ev.evaluate_actions(best_unbeatable())
    assert r["as_x"]["vs_random"]["win"] == pytest.approx(0.9948, abs=5e-5)
    assert r["as_x"]["vs_random"]["tie"] == pytest.approx(0.0052, abs=5e-5)
    assert r["as_o"]["vs_random"]["win"] == pytest.approx(0.9164, abs=5e-5)
    assert r["as_o"]["vs_random"]["tie"] == pytest.approx(0.0836, abs=5e-5)
    assert r["as_x"]["worst_case"] == r["as_o"]["worst_case"] == "draw"


@pytest.mark.parametrize("reward,as_x,as_o", [
    ((1.0, 0.3, -2.0), (0.9948, 0.0, 0.0052), (0.9164, 0.0, 0.0836)),  # antirez
    ((1.0, 0.2, -1.0), (0.9948, 0.0, 0.0052), (0.9291, 0.0042, 0.0667)),  # antirez_readme
    ((1.0, 0.0, -1.0), (0.9948, 0.0, 0.0052), (0.9323, 0.0074, 0.0603)),  # zero_sum
    ((1.0, 0.3, -5.0), (0.9948, 0.0, 0.0052), (0.9164, 0.0, 0.0836)),  # cautious (PPO's default)
])
def test_reward_optimal_agents_vs_random_match_facts(reward, as_x, as_o):
    for seat, want in ((game.X, as_x), (game.O, as_o)):
        a, _ = best_response(random_probs(), seat, reward)
        agent, rnd = one_hot(a), random_probs()
        p = outcome_probs(agent, rnd) if seat == game.X else outcome_probs(rnd, agent)
        x, o, tie = p[game.EMPTY_CODE].tolist()
        win, loss = (x, o) if seat == game.X else (o, x)
        assert (win, loss, tie) == pytest.approx(want, abs=5e-5)


def test_seed_ppo_reward_ties_unbeatable_and_risky_agents_as_o():
    _, v = best_response(random_probs(), game.O, (1.0, 0.5, -1.0))
    assert float(v[game.EMPTY_CODE]) == pytest.approx(1811 / 1890, abs=1e-12)
    _, v_safe = best_response(random_probs(), game.O, (1.0, 0.5, -1.0), allowed=SOL.optimal)
    assert float(v_safe[game.EMPTY_CODE]) == pytest.approx(1811 / 1890, abs=1e-12)


def test_highest_win_rate_as_o_when_losses_are_allowed():
    a, v = best_response(random_probs(), game.O, (1.0, 0.0, 0.0))
    assert float(v[game.EMPTY_CODE]) == pytest.approx(0.9386, abs=5e-5)


def _preference_actions(pref):
    """(N,) action table: the most preferred legal cell (the ONNX test model's policy)."""
    order = torch.tensor(pref).argsort(descending=True, stable=True)
    legal_in_order = T.legal[:, order]
    return order[legal_in_order.to(torch.int8).argmax(-1)]


def _ref_greedy(pref):
    def choose(b):
        cell = max(ref.legal(b), key=lambda c: (pref[c], -c))
        return {cell: Fraction(1)}
    return choose


def _ref_worst(b, agent, seat):
    if ref.done(b):
        return ref.winner(b) * seat
    if ref.mover(b) == seat:
        return _ref_worst(ref.play(b, next(iter(agent(b)))), agent, seat)
    return min(_ref_worst(ref.play(b, c), agent, seat) for c in ref.legal(b))


def _ref_decisions(b, agent, seat, out):
    if ref.done(b):
        return
    if ref.mover(b) == seat:
        out.add(b)
        _ref_decisions(ref.play(b, next(iter(agent(b)))), agent, seat, out)
    else:
        for c in ref.legal(b):
            _ref_decisions(ref.play(b, c), agent, seat, out)


@pytest.mark.parametrize("pref", [
    [0, 1, 2, 3, 4, 5, 6, 7, 8],  # the highest empty cell
    [3, 1, 3, 1, 5, 1, 3, 1, 3],  # centre, then corners, then sides (ties: lowest)
    [8, 7, 6, 5, 4, 3, 2, 1, 0],  # the lowest empty cell
])
def test_evaluator_matches_plain_recursion_for_hand_built_policies(pref):
    report = ev.evaluate_actions(_preference_actions(pref))
    agent = _ref_greedy(pref)
    for key, seat in (("as_x", 1), ("as_o", -1)):
        for opp_name, opp in (("vs_random", ref.uniform_random), ("vs_perfect", ref.uniform_perfect)):
            x, o, tie = ref.outcome(ref.EMPTY_BOARD, *((agent, opp) if seat == 1 else (opp, agent)))
            win, loss = (x, o) if seat == 1 else (o, x)
            got = report[key][opp_name]
            assert got["win"] == pytest.approx(float(win), abs=1e-12)
            assert got["loss"] == pytest.approx(float(loss), abs=1e-12)
            assert got["tie"] == pytest.approx(float(tie), abs=1e-12)
        assert report[key]["worst_case"] == WORST_NAME[_ref_worst(ref.EMPTY_BOARD, agent, seat)]
    points = set()
    for key, seat in (("as_x", 1), ("as_o", -1)):
        mine = set()
        _ref_decisions(ref.EMPTY_BOARD, agent, seat, mine)
        kept = [ref.minimax(ref.play(b, next(iter(agent(b))))) == ref.minimax(b) for b in mine]
        # Tic-tac-toe is a draw: each seat's value is the draw, and holding it is being unbeatable.
        assert report[key]["game_value"] == "draw"
        assert report[key]["holds_value"] == (report[key]["worst_case"] != "loss")
        assert report[key]["decision_points"] == len(mine)
        assert report[key]["optimal_move_rate"] == pytest.approx(sum(kept) / len(kept), abs=1e-12)
        points |= mine
    kept = [ref.minimax(ref.play(b, next(iter(agent(b))))) == ref.minimax(b) for b in points]
    assert report["decision_points"] == len(points)
    assert report["optimal_move_rate"] == pytest.approx(sum(kept) / len(kept), abs=1e-12)


def test_highest_cell_player_is_beatable():
    r = ev.evaluate_actions(_preference_actions([0, 1, 2, 3, 4, 5, 6, 7, 8]))
    assert r["as_x"]["worst_case"] == "loss" and r["as_o"]["worst_case"] == "loss"
    assert r["as_o"]["vs_random"]["loss"] > 0


def test_evaluate_policy_takes_a_network_and_uses_one_forward_pass():
    calls = []
    pref = torch.tensor([3.0, 1, 3, 1, 5, 1, 3, 1, 3])

    def policy(view):
        calls.append(view.shape)
        return pref.expand(view.shape[0], 9) - 1e9 * view.abs()

    r = ev.evaluate_policy(policy)
    assert calls == [(4520, 9)]
    assert r == ev.evaluate_actions(_preference_actions(pref.tolist()))


def test_raw_illegal_choices_are_reported():
    def always_cell_zero(view):
        return torch.nn.functional.one_hot(torch.zeros(view.shape[0], dtype=torch.long), 9).float()

    actions, raw_illegal = ev.greedy_actions(always_cell_zero)
    codes = ev.decision_codes()
    assert torch.equal(raw_illegal[codes], T.board[codes, 0] != 0)
    assert T.legal[codes, actions[codes]].all()  # the masked choice is always legal
