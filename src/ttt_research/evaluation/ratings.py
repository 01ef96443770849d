"""Ratings from exact cross-play: Davidson's Bradley-Terry model with ties and a first-move
advantage, fitted by maximum likelihood, reported on the Elo scale.

The model (Davidson 1970, with the multiplicative order effect of Davidson & Beaver 1977).
Player i has a strength pi_i = exp(theta_i); gamma > 0 multiplies the strength of the player
who moves first (X); nu > 0 sets how often players tie. When i plays X against j as O:

    P(i wins) = gamma pi_i / D,   P(j wins) = pi_j / D,   P(tie) = nu sqrt(pi_i pi_j) / D,
    D = gamma pi_i + pi_j + nu sqrt(pi_i pi_j).

* R. R. Davidson (1970), "On extending the Bradley-Terry model to accommodate ties in paired
  comparison experiments", Journal of the American Statistical Association 65(329), 317-328.
* R. R. Davidson and R. J. Beaver (1977), "On extending the Bradley-Terry model to incorporate
  within-pair order effects", Biometrics 33(4), 693-702.

Fitting. Every ordered pair (i as X, j as O; i = j included: a policy against itself says
nothing about strengths but something about gamma and nu) counts as one game whose outcome is
observed fractionally: its exact probabilities (P(X wins), P(O wins), P(tie)) are the counts.
The negative log-likelihood is convex in (theta, log gamma, log nu) (a log-sum-exp of linear
functions minus linear ones), so Newton's method with a backtracking step finds its minimum.

A tiny Gaussian prior (``PRIOR``: a precision of 1e-6 on every parameter, in natural-log units;
it moves the built-in players' ratings by 0.02 Elo) keeps the fit finite where plain maximum
likelihood has none: a player that wins every game it plays (or loses every one), with no tie,
has infinite strength in Bradley-Terry, as has nu with no tie anywhere. There the number shown
is where the prior stops it: read it as "at least" ("at most"); ``separated`` names those
players. A player that never loses but ties is finite without it: each tie pulls it back.

No confidence intervals: the results are exact, there is no sampling error to put an interval
on. The only uncertainty is how well a one-number-per-player model describes the exact table
(non-transitive results, seat effects that differ by player). That is reported instead: the
largest and the root-mean-square absolute difference between the model's expected points and
the exact ones over all ordered pairs (``fit``), and every pair the ratings put in the order
its own games contradict (``upsets``). ``fit_warning`` turns these into one line when the fit is
poor: a pair missed by more than ``FIT_WARN`` expected points, or any upset.

Elo scale: rating_i = 400 log10(pi_i) = 400 / ln(10) * theta_i, shifted so that the anchor (the
player named ``random`` when present, else the first) is 0. The X advantage is reported the same
way, 400 log10(gamma): the rating points the first move is worth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ttt_research.evaluation.crossplay import both_seats, one_thread

PRIOR = 1e-6  # precision of the Gaussian prior on theta, log gamma, log nu (natural-log units)
ELO = 400.0 / math.log(10.0)  # natural-log strength -> Elo points
ANCHOR = "random"
# Expected points (0 to 1 a game) by which the model may miss one ordered pair before the fit
# counts as poor. The built-ins alone miss by at most 0.086; a tenth of a game is more than a
# one-number-per-player model should be forgiven on exact results.
FIT_WARN = 0.1
# A head-to-head result (expected result over both seats, -2 to 2) further from 0 than this
# is a win for one side: the sums are exact, float64 adds noise far below it.
HEAD_TO_HEAD = 1e-9


@dataclass(frozen=True)
class Ratings:
    names: list[str]
    elo: list[float]  # (n,) Elo ratings, the anchor at 0
    anchor: str  # the player rated 0
    x_advantage: float  # 400 log10(gamma): the first move's worth in Elo points
    tie: float  # nu, Davidson's tie parameter
    fit_max: float  # largest |model points - exact points| over the ordered pairs
    fit_rms: float  # root mean square of the same differences
    separated: list[str]  # players that won (or lost) every game: ratings bounded by the prior only
    iterations: int  # Newton steps taken
    # (higher, lower, margin): rated higher, yet the lower one beats it head to head by margin
    # (expected result over the two games, one from each seat), largest margin first
    upsets: list[tuple[str, str, float]] = field(default_factory=list)

    def order(self) -> list[int]:
        """Player indices from the highest rating down."""
        return sorted(range(len(self.names)), key=lambda k: -self.elo[k])


def _log_probs(params: torch.Tensor, n: int) -> torch.Tensor:
    """(n + 2,) (theta (n,), log gamma, log nu) -> (n, n, 3) log P(X wins), log P(O wins),
    log P(tie) of i as X against j as O."""
    theta, eta, lnu = params[:n], params[n], params[n + 1]
    lw = (eta + theta)[:, None].expand(n, n)  # log(gamma pi_i)
    ll = theta[None, :].expand(n, n)  # log(pi_j)
    lt = lnu + (theta[:, None] + theta[None, :]) / 2  # log(nu sqrt(pi_i pi_j))
    logs = torch.stack([lw, ll, lt], -1)  # (n, n, 3)
    return logs - torch.logsumexp(logs, -1, keepdim=True)


def _objective(params: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of the fractional counts (n, n, 3), plus the prior."""
    n = counts.shape[0]
    return -(counts * _log_probs(params, n)).sum() + 0.5 * PRIOR * (params * params).sum()


# Each pair's predictors in its local coordinates (theta_i, theta_j, log gamma, log nu): the rows
# are X wins, O wins, tie (lw = eta + theta_i, ll = theta_j, lt = lnu + (theta_i + theta_j) / 2).
_DESIGN = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.5, 0.5, 0.0, 1.0]],
                       dtype=torch.float64)  # (3, 4)


def _grad_hess(params: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient (n + 2,) and Hessian (n + 2, n + 2) of ``_objective``, in closed form: per pair,
    the gradient is (w p - c) through the design and the Hessian w times the covariance of the
    design rows under the model's p (a multinomial logit's), scattered to the pair's players."""
    n = counts.shape[0]
    p = _log_probs(params, n).exp()  # (n, n, 3)
    w = counts.sum(-1, keepdim=True)  # (n, n, 1): 1 per pair, kept general
    g_local = (w * p - counts) @ _DESIGN  # (n, n, 4)
    m = p @ _DESIGN  # (n, n, 4): the design's mean under p
    second = torch.einsum("ijk,kd,ke->ijde", p, _DESIGN, _DESIGN)  # (n, n, 4, 4)
    h_local = w[..., None] * (second - m[..., :, None] * m[..., None, :])
    # Scatter to the players: pair (i, j) touches theta_i (local 0), theta_j (local 1) and
    # the two shared parameters (local 2, 3). Sums over rows and columns, no scatter needed.
    grad = torch.cat([g_local[..., 0].sum(1) + g_local[..., 1].sum(0), g_local[..., 2:].sum((0, 1))])
    hess = torch.zeros(n + 2, n + 2, dtype=torch.float64)
    hess[:n, :n] = h_local[..., 0, 1] + h_local[..., 1, 0].T  # theta_i with theta_j (i as X, j as O)
    hess[:n, :n] += torch.diag(h_local[..., 0, 0].sum(1) + h_local[..., 1, 1].sum(0))
    side = h_local[..., 0, 2:].sum(1) + h_local[..., 1, 2:].sum(0)  # (n, 2) theta with the shared ones
    hess[:n, n:], hess[n:, :n] = side, side.T
    hess[n:, n:] = h_local[..., 2:, 2:].sum((0, 1))
    return grad + PRIOR * params, hess + PRIOR * torch.eye(n + 2, dtype=torch.float64)


def _newton(counts: torch.Tensor, steps: int = 100, tol: float = 1e-10) -> tuple[torch.Tensor, int]:
    """The minimum of ``_objective`` by Newton's method with backtracking; (params, steps)."""
    n = counts.shape[0]
    params = torch.zeros(n + 2, dtype=torch.float64)
    for k in range(steps):
        grad, hess = _grad_hess(params, counts)
        if float(grad.abs().max()) < tol:
            return params, k
        step = torch.linalg.solve(hess, grad)  # the prior makes hess positive definite
        now, slope, t = float(_objective(params, counts)), float(grad @ step), 1.0
        while t > 1e-12 and float(_objective(params - t * step, counts)) > now - 1e-4 * t * slope:
            t /= 2  # Armijo: a full Newton step may overshoot far from the minimum
        params = params - t * step
    return params, steps


def _separated(results: torch.Tensor, names: list[str]) -> list[str]:
    """Players whose games against the others (both seats) are all wins or all losses: no
    tie and no result the other way, so only the prior holds their rating."""
    n = results.shape[0]
    other = ~torch.eye(n, dtype=torch.bool)
    # From i's side: as X (row i) wins are [..., 0]; as O (column i) wins are [..., 1].
    win = torch.where(other, results[..., 0], 0).sum(1) + torch.where(other, results[..., 1], 0).sum(0)
    games = 2 * (n - 1)
    loss = torch.where(other, results[..., 1], 0).sum(1) + torch.where(other, results[..., 0], 0).sum(0)
    out = [names[k] for k in range(n) if n > 1 and (win[k] >= games - 1e-12 or loss[k] >= games - 1e-12)]
    return out


def fit_ratings(results: torch.Tensor, names: list[str]) -> Ratings:
    """Fit the model to an exact cross-play table.

    Args:
        results: (n, n, 3) float64 ``cross_play`` output: [i, j] = (P(X wins), P(O wins),
            P(tie)) of i as X against j as O.
        names: the n players' names (``random``, when present, is the anchor).
    """
    counts = results.detach().to("cpu", torch.float64)
    n = counts.shape[0]
    with one_thread():  # small tensors: a second thread only waits (crossplay's "Threads")
        params, iterations = _newton(counts)
    theta = params[:n]
    anchor = names.index(ANCHOR) if ANCHOR in names else 0
    elo = (ELO * (theta - theta[anchor])).tolist()
    with torch.no_grad():
        model = _log_probs(params, n).exp()  # (n, n, 3)
    diff = (model[..., 0] + 0.5 * model[..., 2]) - (counts[..., 0] + 0.5 * counts[..., 2])
    return Ratings(names=list(names), elo=elo, anchor=names[anchor],
                   x_advantage=float(ELO * params[n]), tie=float(params[n + 1].exp()),
                   fit_max=float(diff.abs().max()), fit_rms=float(diff.pow(2).mean().sqrt()),
                   separated=_separated(counts, names), iterations=iterations,
                   upsets=_upsets(counts, names, elo))


def _upsets(results: torch.Tensor, names: list[str], elo: list[float]) -> list[tuple[str, str, float]]:
    """The pairs whose ratings contradict their own games: (higher, lower, margin) where the
    lower-rated player's expected result against the higher over both seats is margin > 0."""
    s = both_seats(results)  # [i, j]: i's result against j, one game from each seat
    found = [(names[hi], names[lo], float(s[lo, hi])) for hi in range(len(names)) for lo in range(len(names))
             if elo[hi] > elo[lo] and float(s[lo, hi]) > HEAD_TO_HEAD]
    return sorted(found, key=lambda u: -u[2])


def fit_warning(r: Ratings, show: int = 3) -> str:
    """One line saying why the ratings describe the results poorly, or '' when they do not:
    some pair missed by more than ``FIT_WARN`` expected points, or ratings whose order a pair's
    own games contradict (the first ``show`` such pairs named, with how many more)."""
    why = [f"a pair missed by {r.fit_max:.4f} expected points (> {FIT_WARN})"] if r.fit_max > FIT_WARN else []
    if r.upsets:
        pairs = ", ".join(f"{hi} above {lo} ({m:+.3f})" for hi, lo, m in r.upsets[:show])
        more = f" and {len(r.upsets) - show} more" if len(r.upsets) > show else ""
        why.append(f"rated above a player that beats it head to head over both seats: {pairs}{more}")
    if not why:
        return ""
    return "warning: poor fit, read who can be beaten and the matrix, not the ratings: " + "; ".join(why)


def ratings_table(r: Ratings) -> str:
    """The ratings as text, highest first, with the model's parameters and its fit."""
    width = max(len("player"), *(len(s) for s in r.names))
    rows = [f"{'rank':>4}  {'player':<{width}}  {'elo':>8}"]
    for rank, k in enumerate(r.order(), 1):
        mark = "  (won or lost every game: bounded only by the prior)" if r.names[k] in r.separated else ""
        rows.append(f"{rank:>4}  {r.names[k]:<{width}}  {r.elo[k]:>8.1f}{mark}")
    rows.append(f"anchor {r.anchor} = 0; first move (X) worth {r.x_advantage:+.1f} Elo; tie parameter "
                f"nu {r.tie:.4g}")
    rows.append(f"model fit (Davidson-Beaver vs exact expected points per ordered pair): max |diff| "
                f"{r.fit_max:.4f}, RMS {r.fit_rms:.4f}")
    warning = fit_warning(r)
    return "\n".join(rows + ([warning] if warning else []))
