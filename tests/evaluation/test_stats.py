"""The statistics across seeds (stats.py), on cases worked out by hand."""

import math

import numpy as np
import pytest

from ttt_research.evaluation import stats

Z = 1.959963984540054  # the normal quantile of 0.975


def wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    """Wilson's interval written out: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return centre - half, centre + half


def test_iqm_is_the_mean_of_the_middle_half():
    assert stats.iqm([1, 2, 3, 4, 5, 6, 7, 8]) == 4.5          # (3 + 4 + 5 + 6) / 4
    assert stats.iqm([0, 0, 0, 100]) == 0.0                    # one runaway seed cut off
    assert stats.iqm([8, 1, 100, 2, 7, 3, -50, 4]) == 4.0      # order does not matter: 2, 3, 4, 7
    assert stats.iqm([1, 2, 6]) == 3.0                         # fewer than 4: nothing cut, the mean


def test_wilson_matches_the_formula_by_hand():
    # 97 of 100: p = 0.97, centre 0.98921 / 1.03841 = 0.95261, half-width 0.03713.
    low, high = stats.wilson(97, 100)
    assert (low, high) == pytest.approx((0.91548, 0.98975), abs=5e-6)
    assert (low, high) == pytest.approx(wilson_by_hand(97, 100), abs=1e-12)
    # 0 of 10: the lower end is 0 and the upper z²/(n + z²) = 3.8415 / 13.8415.
    assert stats.wilson(0, 10) == pytest.approx((0.0, 3.841459 / 13.841459), abs=1e-6)
    assert stats.wilson(10, 10)[1] == pytest.approx(1.0) and stats.wilson(10, 10)[0] < 1
    assert stats.wilson(50, 64) == pytest.approx(wilson_by_hand(50, 64), abs=1e-12)
    with pytest.raises(ValueError):
        stats.wilson(0, 0)


def test_probability_of_improvement_counts_pairs_and_halves_ties():
    # 3 vs (1, 2, 3): 1 + 1 + 1/2; 4 vs (1, 2, 3): 1 + 1 + 1 -> 5.5 of 6 pairs.
    assert stats.probability_of_improvement([3, 4], [1, 2, 3]) == pytest.approx(5.5 / 6)
    assert stats.probability_of_improvement([1, 2, 3], [3, 4]) == pytest.approx(0.5 / 6)
    assert stats.probability_of_improvement([2, 2], [2, 2, 2]) == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    a, b = rng.random(30), rng.random(40)
    assert stats.probability_of_improvement(a, b) + stats.probability_of_improvement(b, a) == pytest.approx(1)
    by_pairs = np.mean([(x > y) + 0.5 * (x == y) for x in a for y in b])
    assert stats.probability_of_improvement(a, b) == pytest.approx(by_pairs)


def test_probability_of_improvement_interval_separates_clearly_different_configurations():
    rng = np.random.default_rng(1)
    better, worse = rng.normal(1.0, 0.1, 100), rng.normal(0.0, 0.1, 100)
    p, low, high = stats.probability_of_improvement_ci(better, worse, reps=500)
    assert p == 1.0 and low == high == 1.0                     # every pair: no resample differs
    same_a, same_b = rng.normal(0, 1, 100), rng.normal(0, 1, 100)
    p, low, high = stats.probability_of_improvement_ci(same_a, same_b, reps=1000)
    assert low < 0.5 < high and low < p < high and high - low < 0.35


def test_iqm_interval_holds_the_iqm_is_seeded_and_shrinks_with_more_seeds():
    rng = np.random.default_rng(2)
    few, many = rng.normal(0.9, 0.01, 10), rng.normal(0.9, 0.01, 400)
    mid, low, high = stats.iqm_ci(few, reps=1000, seed=3)
    assert low < mid < high and mid == pytest.approx(stats.iqm(few))
    assert stats.iqm_ci(few, reps=1000, seed=3) == (mid, low, high)          # seeded: reproducible
    assert stats.iqm_ci(few, reps=1000, seed=4) != (mid, low, high)
    _, low_many, high_many = stats.iqm_ci(many, reps=1000, seed=3)
    assert high_many - low_many < 0.5 * (high - low)                         # ~1/sqrt(40) as wide
    assert stats.iqm_ci([0.5] * 7) == (0.5, 0.5, 0.5)                         # nothing to resample
    assert stats.iqm_ci([0.7]) == (0.7, 0.7, 0.7)


def test_the_bootstrap_is_stratified_each_stratum_resampled_on_its_own():
    # Two strata, each constant: every stratified resample holds 50 zeros and 50 ones, so the
    # mean is 0.5 in every one; pooled into one stratum the count of ones varies.
    strata = [[0.0] * 50, [1.0] * 50]
    assert stats.bootstrap_ci(strata, np.mean, reps=500) == pytest.approx((0.5, 0.5))
    low, high = stats.bootstrap_ci([0.0] * 50 + [1.0] * 50, np.mean, reps=500)
    assert low < 0.45 and high > 0.55
    # A stratum of one seed is in every resample, unchanged.
    assert stats.iqm_ci([[1, 2, 3, 4], [5]])[0] == 3.0                     # IQM of 1..5: 2, 3, 4


def test_performance_profile_is_the_share_above_each_threshold():
    scores = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    share, low, high = stats.performance_profile(scores, [0.0, 0.55, 0.95, 1.0], reps=500)
    assert share.tolist() == [1.0, 0.5, 0.1, 0.0]              # strictly above: 1.0 > 1.0 is not
    assert (low <= share).all() and (share <= high).all()
    assert low[0] == high[0] == 1.0 and low[-1] == high[-1] == 0.0
    assert low[1] < 0.5 < high[1]
