"""Confidence intervals for the probability of improvement P(T > C), analytic and vectorised.

Unpaired: Newcombe's (2006) score-type interval ("method 5") around U/(n_T n_C), with the Hanley & McNeil
(1982) variance and Newcombe's n* = (n_T + n_C)/2. Paired: the share of seed pairs with T > C is a binomial
proportion; its interval is Clopper & Pearson's (1934), from ``scipy.stats.beta``. Both take microseconds,
where the percentile bootstrap they replace took 0.2-0.5 s and under-covered at N = 10-20 (0.905-0.915).
Coverage (tests/unit/test_stats_robust.py, docs/verdict.md): at least 0.93 at N >= 5 per arm.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Below this many seeds per arm the unpaired interval may under-cover (0.90 at N = 3): flagged indicative.
MIN_N_COVERED = 5


def _hanley_mcneil_var(theta: np.ndarray, n_t: float, n_c: float) -> np.ndarray:
    """Var(θ̂) at θ: Hanley & McNeil (1982) with Newcombe's (2006) n* = (n_T + n_C)/2 in both terms."""
    ns = (n_t + n_c) / 2.0
    return theta * (1 - theta) * (1 + (ns - 1) * (1 - theta) / (2 - theta) + (ns - 1) * theta / (1 + theta)) / (
        n_t * n_c)


def newcombe_interval(estimate: Any, n_t: int, n_c: int, confidence_level: float = 0.95, *,
                      iterations: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Score-type CI for P(T > C) from unpaired arms (Newcombe 2006, method 5), vectorised.

    Parameters
    ----------
    estimate : array_like, shape (batch,) or scalar
        θ̂ = U / (n_T n_C), ties counted ½, in [0, 1].
    n_t, n_c : int
        Values per arm (>= 1).
    confidence_level : float
        In (0, 1).
    iterations : int
        Bisection steps (60 reaches double precision on [0, 1]).

    Returns
    -------
    (low, high) : numpy.ndarray
        Shaped like ``estimate`` (0-d for a scalar): the θ solving (θ̂ - θ)² = z² V(θ) below and above θ̂;
        always inside [0, 1].

    Notes
    -----
    Newcombe, R. G. (2006), "Confidence intervals for an effect size measure based on the Mann-Whitney
    statistic. Part 2: asymptotic methods and evaluation", Stat. Med. 25:559-573; Hanley, J. A. & McNeil,
    B. J. (1982), Radiology 143:29-36. z from ``scipy.special.ndtri`` (the normal quantile). A scalar and a
    batch run the same bisection (a scalar is a 0-d batch), so :func:`ablate.stats.prob_improvement`, which
    passes one estimate, gets the interval the coverage tests measure; at θ̂ = 0 the interval is [0, θ_U]
    with θ_U > 0, and at θ̂ = 1 it is [θ_L, 1] with θ_L < 1 (V(θ) > 0 inside (0, 1), so the score equation
    has a root away from the edge), never [0, 0] or [1, 1].
    """
    from scipy.special import ndtri  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    est = np.asarray(estimate, dtype=float)
    z2 = float(ndtri(0.5 + confidence_level / 2)) ** 2

    def f(theta: np.ndarray) -> np.ndarray:
        return (est - theta) ** 2 - z2 * _hanley_mcneil_var(theta, n_t, n_c)

    # f(0) = est² >= 0, f(1) = (1 - est)² >= 0 and f(est) <= 0: one root on each side of est.
    lo_a, lo_b = np.zeros_like(est), est.copy()
    hi_a, hi_b = est.copy(), np.ones_like(est)
    for _ in range(iterations):
        mid = (lo_a + lo_b) / 2
        pos = f(mid) > 0
        lo_a, lo_b = np.where(pos, mid, lo_a), np.where(pos, lo_b, mid)
        mid = (hi_a + hi_b) / 2
        pos = f(mid) > 0
        hi_a, hi_b = np.where(pos, hi_a, mid), np.where(pos, mid, hi_b)
    return (lo_a + lo_b) / 2, (hi_a + hi_b) / 2


def clopper_pearson_interval(successes: Any, n: int, confidence_level: float = 0.95
                             ) -> tuple[np.ndarray, np.ndarray]:
    """Exact binomial CI for a share of seed pairs (Clopper & Pearson 1934), vectorised.

    Parameters
    ----------
    successes : array_like, shape (batch,) or scalar
        Pairs with T > C, ties counted ½ (so it may be a half-integer), in [0, n].
    n : int
        Pairs (>= 1).
    confidence_level : float

    Returns
    -------
    (low, high) : numpy.ndarray
        Proportions in [0, 1].

    Notes
    -----
    Clopper, C. J. & Pearson, E. S. (1934), Biometrika 26:404-413, via the beta quantiles
    ``scipy.special.betaincinv`` (= ``scipy.stats.beta.ppf``, which accepts a half-integer count).
    """
    from scipy.special import betaincinv  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    k = np.asarray(successes, dtype=float)
    a = 1 - confidence_level
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, betaincinv(np.maximum(k, 1e-300), n - k + 1, a / 2), 0.0)
        hi = np.where(k < n, betaincinv(k + 1, np.maximum(n - k, 1e-300), 1 - a / 2), 1.0)
    return lo, hi
