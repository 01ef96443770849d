"""Statistics across seeds: what a configuration's runs say once luck is allowed for.

The recipe is rliable's (Agarwal et al., NeurIPS 2021, "Deep RL at the Edge of the
Statistical Precipice"): summarise many seeds by the **interquartile mean** (IQM: the mean
of the middle half, robust to a few runaway seeds yet using half the data, unlike the
median), give every aggregate a **stratified bootstrap** confidence interval, compare two
configurations by the **probability of improvement** P(X > Y), and show whole
distributions as **performance profiles** (the share of seeds above each threshold). For
a yes/no outcome per seed (unbeatable or not) the interval is **Wilson's score interval**,
which stays inside [0, 1] and is honest at 97 of 100, where the normal approximation is not.

Each function is a thin wrapper over ``scipy.stats`` (``trim_mean``, ``bootstrap``,
``binomtest``, ``mannwhitneyu``): rliable itself does not import with current pandas (its
``arch`` dependency fails), and scipy holds every piece. *Stratified* means each stratum
(a task, in rliable's terms: here a seat or an opponent when several are pooled) is
resampled on its own and the statistic is taken over the union; with one stratum it is
the ordinary percentile bootstrap. Bootstraps are seeded (``seed``), so a report is
reproducible to the last digit.

All functions take plain sequences or NumPy arrays of per-seed scores ``(seeds,)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# numpy and scipy are imported inside each function: objectives.py imports this module, and
# the config check imports objectives.py before anything heavy loads (a bad value is refused
# in about a second), so importing this module costs nothing.

CONFIDENCE = 0.95   # every interval here, unless told otherwise
REPS = 2000         # bootstrap resamples (rliable's examples use 2,000 to 50,000)


def _strata(scores) -> list[np.ndarray]:
    """One array per stratum: a flat sequence of numbers is one stratum."""
    import numpy as np

    if len(scores) and np.ndim(scores[0]) == 0:
        scores = [scores]
    out = [np.asarray(s, dtype=float).ravel() for s in scores]
    if not out or any(s.size == 0 for s in out):
        raise ValueError("no scores: every stratum needs at least one seed")
    return out


def iqm(scores, axis=None) -> float | np.ndarray:
    """Interquartile mean: the mean after cutting the lowest and highest 25% (as rliable,
    ``scipy.stats.trim_mean(x, 0.25)``; fewer than 4 scores cut nothing)."""
    from scipy.stats import trim_mean

    return trim_mean(scores, 0.25, axis=axis)


def bootstrap_ci(scores, statistic=iqm, reps: int = REPS, confidence: float = CONFIDENCE,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over ``scores`` (a sequence of numbers,
    or a sequence of strata, each resampled on its own: the stratified bootstrap).

    ``statistic(x, axis=...)`` must reduce along ``axis`` (``iqm``, ``np.median``,
    ``np.mean``). One score in all: the interval is that score (nothing to resample)."""
    import numpy as np
    from scipy.stats import bootstrap

    strata = _strata(scores)
    every = np.concatenate(strata)
    if np.ptp(every) == 0 or all(s.size == 1 for s in strata):
        value = float(statistic(every))
        return value, value  # every resample is the same number
    # A stratum of one seed resamples to itself: it joins every resample unchanged.
    fixed = np.concatenate([s for s in strata if s.size == 1] or [np.empty(0)])
    samples = [s for s in strata if s.size > 1]

    def pooled(*parts, axis=-1):
        parts = [np.moveaxis(p, axis, -1) for p in parts]
        held = np.broadcast_to(fixed, (*parts[0].shape[:-1], fixed.size))
        return statistic(np.concatenate([*parts, held], axis=-1), axis=-1)

    res = bootstrap(samples, pooled, n_resamples=reps, confidence_level=confidence,
                    method="percentile", vectorized=True, paired=False,
                    rng=np.random.default_rng(seed))
    ci = res.confidence_interval
    return float(ci.low), float(ci.high)


def iqm_ci(scores, reps: int = REPS, confidence: float = CONFIDENCE, seed: int = 0
           ) -> tuple[float, float, float]:
    """(IQM, CI low, CI high) of ``scores`` (numbers, or strata: see ``bootstrap_ci``)."""
    import numpy as np

    strata = _strata(scores)
    low, high = bootstrap_ci(strata, iqm, reps, confidence, seed)
    return float(iqm(np.concatenate(strata))), low, high


def wilson(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion (``successes`` of ``trials``)."""
    from scipy.stats import binomtest

    if trials <= 0:
        raise ValueError("a proportion needs at least one trial")
    ci = binomtest(int(successes), int(trials)).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def probability_of_improvement(x, y, axis=-1) -> float | np.ndarray:
    """P(X > Y) + P(X = Y) / 2 for a seed X of one configuration and a seed Y of the other:
    the Mann-Whitney U statistic of ``x`` over ``len(x) * len(y)`` (rliable's
    ``probability_of_improvement`` with one task). 0.5: neither is better."""
    import numpy as np
    from scipy.stats import mannwhitneyu

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    u = mannwhitneyu(x, y, axis=axis, method="asymptotic", use_continuity=False).statistic
    return u / (x.shape[axis] * y.shape[axis])


def probability_of_improvement_ci(x, y, reps: int = REPS, confidence: float = CONFIDENCE,
                                  seed: int = 0) -> tuple[float, float, float]:
    """(P(X > Y), CI low, CI high): the two configurations' seeds are resampled separately
    (each configuration a stratum, as rliable)."""
    import numpy as np
    from scipy.stats import bootstrap

    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.size == 0 or y.size == 0:
        raise ValueError("each configuration needs at least one seed")
    point = float(probability_of_improvement(x, y))
    if x.size < 2 or y.size < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0):
        return point, point, point  # nothing to resample
    res = bootstrap((x, y), probability_of_improvement, n_resamples=reps,
                    confidence_level=confidence, method="percentile", vectorized=True,
                    paired=False, rng=np.random.default_rng(seed))
    ci = res.confidence_interval
    return point, float(ci.low), float(ci.high)


def performance_profile(scores, thresholds: Sequence[float], reps: int = REPS,
                        confidence: float = CONFIDENCE, seed: int = 0
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The share of seeds scoring above each threshold, ``(T,)``, with bootstrap CI bands
    ``(T,)`` low and high (rliable's run-score distribution)."""
    import numpy as np
    from scipy.stats import bootstrap

    x = np.concatenate(_strata(scores))
    tau = np.asarray(thresholds, dtype=float)

    def above(a, axis=-1):  # (..., seeds) -> (..., T); bootstrap wants the T axis first
        return np.moveaxis((np.expand_dims(a, -1) > tau).mean(axis=axis - 1 if axis < 0 else axis), -1, 0)

    share = (x[:, None] > tau).mean(0)  # (T,)
    if x.size < 2 or np.ptp(x) == 0:
        return share, share.copy(), share.copy()
    res = bootstrap((x,), above, n_resamples=reps, confidence_level=confidence,
                    method="percentile", vectorized=True, rng=np.random.default_rng(seed))
    return share, np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)
