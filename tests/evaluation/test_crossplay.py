"""Exact cross-play (evaluation/crossplay.py) and the ratings fitted to it (evaluation/ratings.py),
checked against the single-pair sum over the tree, a replayed game and the exact figures of
docs/facts.md."""

from __future__ import annotations

import math

import pytest
import torch

from ttt_research.env import game, opponents, solver
from ttt_research.evaluation.crossplay import both_seats, cross_play, expected_result, points
from ttt_research.evaluation.exact import decision_codes
from ttt_research.evaluation.ratings import PRIOR, fit_ratings, ratings_table

CODES = decision_codes()
LEGAL = game.tables().legal[CODES]  # (M, 9)


def stochastic(n: int, seed: int, sharp: float = 1.0) -> torch.Tensor:
    """(n, M, 9) random move probabilities over the empty cells (``sharp`` > 1: peakier)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, CODES.numel(), 9, generator=g, dtype=torch.float64) ** sharp * LEGAL
    return x / x.sum(-1, keepdim=True)


def deterministic(n: int, seed: int) -> torch.Tensor:
    """(n, M, 9) one-hot policies: a random empty cell at every position."""
    return torch.nn.functional.one_hot(stochastic(n, seed).argmax(-1), 9).double()


def full(probs: torch.Tensor) -> torch.Tensor:
    """(M, 9) at the decision codes -> (19683, 9) over all codes, for ``solver``."""
    out = torch.zeros(game.N_CODES, 9, dtype=torch.float64)
    out[CODES] = probs
    return out


def builtins() -> torch.Tensor:
    """(3, M, 9): random, rules, perfect."""
    return torch.stack([solver.random_probs()[CODES], opponents.rules_probs()[CODES],
                        solver.perfect_probs()[CODES]])


def test_two_deterministic_agents_get_the_one_game_they_play():
    probs = deterministic(2, seed=3)
    result = cross_play(probs)
    t = game.tables()
    row = {int(c): k for k, c in enumerate(CODES)}
    for x, o in ((0, 1), (1, 0), (0, 0)):
        code = game.EMPTY_CODE
        while not bool(t.done[code]):  # replay the game move by move
            mover = x if int(t.mover[code]) == game.X else o
            code = int(t.next2d[code, int(probs[mover, row[code]].argmax())])
        winner = int(t.winner[code])
        expected = [float(winner == game.X), float(winner == game.O), float(winner == 0)]
        assert result[x, o].tolist() == expected


def test_equals_the_single_pair_sum_for_random_stochastic_pairs():
    probs = stochastic(5, seed=0, sharp=3.0)
    result = cross_play(probs, block_bytes=2**20)  # small blocks: several per row of pairs
    for i in range(5):
        for j in range(5):
            ref = solver.outcome_probs(full(probs[i]), full(probs[j]))[game.EMPTY_CODE]
            assert torch.allclose(result[i, j], ref, rtol=0, atol=1e-12), (i, j)


def test_blocks_do_not_change_the_numbers():
    probs = stochastic(7, seed=1)
    whole = cross_play(probs)
    for block in (1, 200_000, 3 * 5478 * 16 * 7):  # one pair, part of a row, three rows
        assert torch.allclose(cross_play(probs, block_bytes=block), whole, rtol=0, atol=1e-14)


def test_a_single_policy_without_its_axis_is_refused():
    with pytest.raises(ValueError, match=r"wants \(n, 4520, 9\)"):
        cross_play(stochastic(1, seed=0)[0])


def test_both_seats_matrix_is_antisymmetric_with_a_zero_diagonal():
    results = cross_play(stochastic(6, seed=2))
    s = both_seats(results)
    assert torch.allclose(s + s.T, torch.zeros_like(s), atol=1e-15)
    assert s.diagonal().abs().max() < 1e-15
    # But a policy against itself is not even: X moves first.
    assert expected_result(results).diagonal().abs().min() > 0


def test_builtins_exact_figures():
    results = cross_play(builtins())  # random, rules, perfect
    # docs/facts.md: two random players, X wins 737/1260, O wins 121/420, a tie 8/63.
    assert torch.allclose(results[0, 0], torch.tensor([737 / 1260, 121 / 420, 8 / 63], dtype=torch.float64),
                          rtol=0, atol=1e-12)
    assert results[2, 2].tolist() == pytest.approx([0.0, 0.0, 1.0], abs=1e-12)  # perfect vs perfect
    # Nobody beats perfect from either seat; the rows sum to 1.
    assert results[:, 2, 0].max() < 1e-12 and results[2, :, 1].max() < 1e-12
    assert torch.allclose(results.sum(-1), torch.ones(3, 3, dtype=torch.float64), atol=1e-12)
    # A policy's expected points and its expected result say the same thing.
    assert torch.allclose(points(results), (expected_result(results) + 1) / 2, atol=1e-12)


def test_100_policies_in_a_few_seconds():
    import time

    probs = stochastic(100, seed=4)
    start = time.perf_counter()
    results = cross_play(probs)
    took = time.perf_counter() - start
    assert results.shape == (100, 100, 3)
    assert took < 20, took  # ~1.1-1.4 s on the 2-core host when idle; generous for a busy one


# --------------------------------------------------------------------------- ratings


def test_ratings_of_the_builtins_are_ordered_finite_and_anchored():
    r = fit_ratings(cross_play(builtins()), ["random", "rules", "perfect"])
    elo = dict(zip(r.names, r.elo, strict=True))
    assert elo["random"] == 0.0 and r.anchor == "random"
    assert elo["perfect"] > elo["rules"] > elo["random"]
    assert all(math.isfinite(v) for v in r.elo)
    assert r.x_advantage > 0 and r.tie > 0  # the first move helps; ties happen
    assert 0 <= r.fit_rms <= r.fit_max < 0.5
    assert r.separated == []  # perfect never loses but ties: finite without the prior
    text = ratings_table(r)
    assert text.splitlines()[1].split()[1] == "perfect" and "anchor random = 0" in text


def test_the_anchor_is_the_first_player_without_random():
    r = fit_ratings(cross_play(builtins()[1:]), ["rules", "perfect"])
    assert r.anchor == "rules" and r.elo[0] == 0.0 and r.elo[1] > 0


def test_a_player_that_wins_every_game_stays_finite_and_first():
    # Synthetic exact table: player 0 wins every game from both seats, 1 and 2 split evenly.
    results = torch.zeros(3, 3, 3, dtype=torch.float64)
    results[..., 2] = 1.0  # ties by default
    results[0, 1:] = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)  # 0 as X beats 1, 2
    results[1:, 0] = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)  # 0 as O beats 1, 2
    results[1, 2] = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    results[2, 1] = torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64)
    r = fit_ratings(results, ["a", "b", "c"])
    assert all(math.isfinite(v) for v in r.elo) and r.separated == ["a"]
    assert r.order() == [0, 1, 2] or r.order() == [0, 2, 1]
    assert r.elo[0] > max(r.elo[1:]) + 400  # far above, where the tiny prior stops it
    assert PRIOR <= 1e-2  # weak: it does not decide ordinary ratings


def test_the_model_fits_its_own_numbers_exactly():
    # Outcomes drawn from the model itself are fitted back (up to the tiny prior).
    from ttt_research.evaluation.ratings import ELO, _log_probs

    theta = torch.tensor([0.0, 1.0, -0.5, 2.0], dtype=torch.float64)
    params = torch.cat([theta, torch.tensor([0.3, math.log(0.8)], dtype=torch.float64)])
    results = _log_probs(params, 4).exp()
    r = fit_ratings(results, ["p", "q", "random", "s"])
    expected = (ELO * (theta - theta[2])).tolist()
    assert r.elo == pytest.approx(expected, abs=2.0)
    assert r.x_advantage == pytest.approx(ELO * 0.3, abs=1.0) and r.tie == pytest.approx(0.8, rel=1e-2)
    assert r.fit_max < 1e-3


def test_ratings_that_contradict_a_pairs_own_games_are_flagged():
    # Issue 58 item 14: "rules" rated above "perfect" (it beats a weak agent harder), though
    # perfect beats it head to head. Synthetic exact table: a beats b in 1 game of 10 as X and
    # ties it as O; b beats c from both seats, a only ties c: b is rated above a.
    win, loss, tie = ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0])
    results = torch.tensor([[tie, [0.1, 0.0, 0.9], tie],  # a as X against a, b, c
                            [tie, tie, win],  # b as X
                            [tie, loss, tie]], dtype=torch.float64)  # c as X: b as O wins
    r = fit_ratings(results, ["a", "b", "c"])
    assert r.elo[1] > r.elo[0] and r.upsets == [("b", "a", pytest.approx(0.1))]
    warning = ratings_table(r).splitlines()[-1]
    assert warning.startswith("warning: poor fit, read who can be beaten") and "b above a (+0.100)" in warning
    # The built-ins fit well: no upset, no pair missed by more than FIT_WARN, no warning.
    from ttt_research.evaluation.ratings import FIT_WARN, fit_warning

    good = fit_ratings(cross_play(builtins()), ["random", "rules", "perfect"])
    assert good.upsets == [] and good.fit_max <= FIT_WARN and fit_warning(good) == ""
    assert "warning" not in ratings_table(good)


def test_the_responder_row_and_column_hold_each_policys_games_against_its_best_response():
    from ttt_research.evaluation.crossplay import with_responder
    from ttt_research.evaluation.exploit import best_response_outcomes

    probs = builtins()
    results, against = cross_play(probs), best_response_outcomes(probs)
    table = with_responder(results, against, 1)  # random, best-response, rules, perfect
    keep = [0, 2, 3]
    assert table[keep][:, keep].equal(results)
    assert table[1, keep].equal(against[:, 1]) and table[keep, 1].equal(against[:, 0])
    assert table[1, 1].tolist() == [0.0, 0.0, 1.0]  # mutual best responses: the game's value, a draw
    score = expected_result(table)
    assert (score[1, keep] >= -1e-12).all() and (score[keep, 1] <= 1e-12).all()  # it never loses on average
    # No policy does better against a player than that player's best response does.
    assert (score[1, keep] >= score[keep][:, keep].max(0).values - 1e-12).all()


def test_bench_figure_times_cross_play_and_ratings():
    from ttt_research.bench.crossplay import bench_tournament

    said: list[str] = []
    res = bench_tournament(2, n=6, log=said.append)
    ph = res["tournament_phases_s"]
    assert res["tournament_6_s"] > 0 and ph["cross_play"] > 0 and ph["ratings"] > 0
    assert res["tournament_setting"]["agents"] == 6 and "6 agents" in said[0]


def test_standings_count_each_game_once_from_both_sides():
    from ttt_research.evaluation.crossplay import standings

    n = 5
    results = cross_play(stochastic(n, seed=6))
    table = standings(results)  # (n, 4): won, tied, lost, points
    games = 2 * (n - 1)
    assert torch.allclose(table[:, :3].sum(1), torch.full((n,), float(games), dtype=torch.float64))
    assert torch.allclose(table[:, 0].sum(), table[:, 2].sum())  # every win is someone's loss
    assert torch.allclose(table[:, 3].sum(), torch.tensor(n * (n - 1), dtype=torch.float64))  # a point a game
    # The both-seats matrix says the same: points - games / 2 = S's row sum / 2.
    assert torch.allclose(table[:, 3] - games / 2, both_seats(results).sum(1) / 2)
    # Built-ins: perfect loses nothing; random wins as X against random is left out.
    b = standings(cross_play(builtins()))
    assert b[2, 2] < 1e-12 and b[:, 3].argmax() == 2
