"""0/1 metrics (a task that returns success True/False): a test and an interval meant for proportions.

Unpaired: the difference of two success rates with Newcombe's (1998) hybrid score interval (method 10, from
Wilson intervals), and the p-value that interval implies (the smallest alpha whose interval excludes 0), so
decision and interval agree by construction. Paired: McNemar's exact test on the discordant pairs (central
two-sided p) with the Clopper-Pearson interval it inverts, mapped to the difference of rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def is_binary(treatment: np.ndarray, control: np.ndarray) -> bool:
    """Whether every finite value of both arms is 0 or 1 (and each arm has one): a success/failure metric."""
    both = np.concatenate([treatment, control])
    both = both[np.isfinite(both)]
    return bool(treatment.size and control.size and both.size and np.isin(both, (0.0, 1.0)).all())


@dataclass(frozen=True)
class BinaryCounts:
    """What a 0/1 comparison rests on (in the metric's own direction, not sign-normalised).

    Attributes
    ----------
    paired : bool
    k_treatment, n_treatment, k_control, n_control : int
        Successes and completed seeds per arm (unpaired); for paired data, pairs in both.
    discordant_tc, discordant_ct : int
        Paired only: pairs with treatment 1 and control 0, and the reverse.
    """

    paired: bool
    k_treatment: int
    n_treatment: int
    k_control: int
    n_control: int
    discordant_tc: int = 0
    discordant_ct: int = 0

    @property
    def diff(self) -> float:
        """Success rate of the treatment minus the control's."""
        return self.k_treatment / self.n_treatment - self.k_control / self.n_control


def counts(treatment: np.ndarray, control: np.ndarray, *, paired: bool) -> BinaryCounts:
    """:class:`BinaryCounts` from finite 0/1 arrays (aligned by seed when ``paired``)."""
    t, c = np.asarray(treatment, float), np.asarray(control, float)
    if paired:
        return BinaryCounts(True, int(t.sum()), t.size, int(c.sum()), c.size,
                            int(((t == 1) & (c == 0)).sum()), int(((t == 0) & (c == 1)).sum()))
    return BinaryCounts(False, int(t.sum()), t.size, int(c.sum()), c.size)


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    """Wilson's (1927) score interval for k/n (the closed form behind ``binomtest(...).proportion_ci('wilson')``)."""
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def interval(b: BinaryCounts, alpha_level: float) -> tuple[float, float]:
    """CI of the difference of success rates at level ``1 - alpha_level``, inside [-1, 1].

    Notes
    -----
    Unpaired: Newcombe, R. G. (1998), "Interval estimation for the difference between independent
    proportions: comparison of eleven methods", Stat. Med. 17:873-890, method 10 (equal to statsmodels'
    ``confint_proportions_2indep(method='newcomb')``). Paired: conditional on the d = b + c discordant pairs,
    b ~ Binomial(d, π) and Δ = (b - c)/n = d(2π - 1)/n; the Clopper-Pearson interval of π (McNemar 1947;
    Clopper & Pearson 1934) gives Δ's.
    """
    from scipy.special import betaincinv, ndtri  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    if b.paired:
        d, n = b.discordant_tc + b.discordant_ct, b.n_treatment
        if d == 0:
            return 0.0, 0.0
        k = b.discordant_tc
        lo = float(betaincinv(k, d - k + 1, alpha_level / 2)) if k > 0 else 0.0
        hi = float(betaincinv(k + 1, d - k, 1 - alpha_level / 2)) if k < d else 1.0
        return d * (2 * lo - 1) / n, d * (2 * hi - 1) / n
    z = float(ndtri(1 - alpha_level / 2))
    p1, p2 = b.k_treatment / b.n_treatment, b.k_control / b.n_control
    l1, u1 = _wilson(b.k_treatment, b.n_treatment, z)
    l2, u2 = _wilson(b.k_control, b.n_control, z)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def pvalue(b: BinaryCounts) -> float:
    """Two-sided p-value dual to :func:`interval`: p < alpha exactly when the (1 - alpha) CI excludes 0.

    Paired: McNemar's exact test, central (twice the smaller one-sided binomial tail, ``scipy.stats.binom``).
    Unpaired: the smallest alpha whose Newcombe interval excludes 0, found by bisection (the interval narrows
    as alpha grows).
    """
    from scipy.stats import binom  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    if b.paired:
        d, k = b.discordant_tc + b.discordant_ct, b.discordant_tc
        if d == 0:
            return 1.0
        return float(min(1.0, 2 * min(binom.cdf(k, d, 0.5), binom.sf(k - 1, d, 0.5))))
    if b.diff == 0:
        return 1.0

    def excludes(a: float) -> bool:
        lo, hi = interval(b, a)
        return lo > 0 or hi < 0

    if not excludes(1 - 1e-12):
        return 1.0
    lo_a, hi_a = 1e-300, 1 - 1e-12  # excludes(hi_a) is True; find the boundary in log space
    if excludes(lo_a):
        return lo_a
    for _ in range(200):
        mid = math.sqrt(lo_a * hi_a) if lo_a > 0 and hi_a / lo_a > 10 else (lo_a + hi_a) / 2
        if excludes(mid):
            hi_a = mid
        else:
            lo_a = mid
        if hi_a - lo_a <= 1e-12 * hi_a:
            break
    return hi_a


def firm_pvalue(b: BinaryCounts) -> float:
    """The exact p a 0/1 better/worse must also clear to be firm (not indicative).

    Unpaired: Fisher's (1935) exact test, two-sided (``scipy.stats.fisher_exact``): conditional on the total of
    successes it is exact, so its false-positive rate is at most its level at every N and success rate. Newcombe's
    score test (:func:`pvalue`, the verdict's word) is not: enumerated exactly, it rejects up to 0.077 of A/A
    ablations at α = 0.05 (N = 8, p = 0.5; above 0.056 in 21 of 144 cells N = 3-50, p = 0.1, 0.3, 0.5;
    docs/verdict.md). Paired: McNemar's exact test, which is
    :func:`pvalue` itself (exact conditional on the discordant pairs).

    Parameters
    ----------
    b : BinaryCounts

    Returns
    -------
    float
        Two-sided p in [0, 1].
    """
    from scipy.stats import fisher_exact  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    if b.paired:
        return pvalue(b)
    table = [[b.k_treatment, b.k_control], [b.n_treatment - b.k_treatment, b.n_control - b.k_control]]
    return float(fisher_exact(table).pvalue)


def firm_from(b: BinaryCounts, level: float, cap: int) -> int | None:
    """Seeds per arm from which the same success rates would give a firm verdict: Fisher's exact p below ``level``.

    Parameters
    ----------
    b : BinaryCounts
        Unpaired counts (paired 0/1 verdicts are always firm: None).
    level : float
        The level Fisher's p must clear (the decision's level divided by the family's adjustment factor).
    cap : int
        The most seeds per arm considered.

    Returns
    -------
    int or None
        The smallest N in (current N, cap] whose rounded counts at the observed rates give ``firm_pvalue`` <
        ``level``; None when no N up to ``cap`` does (or the arms' rates are equal).
    """
    if b.paired or b.diff == 0:
        return None
    rt, rc = b.k_treatment / b.n_treatment, b.k_control / b.n_control
    for n in range(max(b.n_treatment, b.n_control) + 1, cap + 1):
        scaled = BinaryCounts(False, round(rt * n), n, round(rc * n), n)
        if scaled.diff != 0 and firm_pvalue(scaled) < level:
            return n
    return None
