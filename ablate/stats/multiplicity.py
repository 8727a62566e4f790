"""One control, several treatments: adjusting p-values across the family (verdict spec B5)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ablate.stats import _iv

MULTIPLICITY_METHODS = ("holm", "dunnett", "bh", "none")
#: Human labels for the report.
LABELS = {"holm": "Holm (family-wise)", "dunnett": "Dunnett (family-wise, many-to-one)",
          "bh": "Benjamini-Hochberg (false discovery rate, exploratory)", "none": "none (unadjusted)"}


def _adjust_iv(pvalues: Any, method: Any) -> tuple[np.ndarray, str]:
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise _iv.fail("pvalues", "must be 1-D (one p-value per treatment)", p.shape)
    if np.any((p[~np.isnan(p)] < 0) | (p[~np.isnan(p)] > 1)):
        raise _iv.fail("pvalues", "must lie in [0, 1] (NaN for an untested comparison)", pvalues)
    m = _iv.choice(method, "method", ("holm", "bh", "none"))
    return p, m


def adjust_pvalues(pvalues: Any, method: str = "holm") -> np.ndarray:
    """Adjust the treatments' raw p-values for multiplicity.

    Parameters
    ----------
    pvalues : array_like, shape (m,)
        Raw two-sided p-values, one per treatment; NaN for a comparison that was not tested
        (insufficient data): it stays NaN and is left out of the family.
    method : {"holm", "bh", "none"}
        Holm step-down (family-wise error <= alpha under any dependence), Benjamini-Hochberg (false
        discovery rate), or none. Dunnett needs the data: see :func:`dunnett_pvalues`.

    Returns
    -------
    numpy.ndarray, shape (m,)
        Adjusted p-values.

    Raises
    ------
    StatsInputError
        For p-values outside [0, 1] or an unknown method.

    Notes
    -----
    Holm (1979), Scand. J. Stat. 6: :func:`holm` (equal to ``statsmodels.stats.multitest.multipletests(p,
    method='holm')``, which runs ``gc.collect()`` on every call, so it is not used here);
    Benjamini & Hochberg (1995), JRSS-B 57: ``scipy.stats.false_discovery_control(p, method='bh')``.
    """
    p, m = _adjust_iv(pvalues, method)
    out = p.copy()
    ok = ~np.isnan(p)
    if m == "none" or ok.sum() <= 1:
        return out
    if m == "holm":
        out[ok] = holm(p[ok])
    else:
        from scipy.stats import false_discovery_control  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

        out[ok] = false_discovery_control(p[ok], method="bh")
    return out


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values: p_adj(i) = max over k <= i of min(1, (m - k + 1) p(k)), p sorted.

    Parameters
    ----------
    pvalues : numpy.ndarray, shape (m,)
        Raw p-values in [0, 1], no NaN.

    Returns
    -------
    numpy.ndarray, shape (m,)
        Adjusted p-values in the input order; reject H_i at level alpha iff p_adj(i) < alpha.

    Notes
    -----
    Holm, S. (1979), "A simple sequentially rejective multiple test procedure", Scand. J. Stat. 6:65-70,
    written from its definition because scipy has no Holm (``false_discovery_control`` is BH/BY only) and
    statsmodels' ``multipletests`` calls ``gc.collect()`` each time. Tested equal to ``multipletests``.
    """
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = stepped
    return out


def stage_levels(pvalues: Any, method: str, alpha: float) -> np.ndarray:
    """The level each comparison's decision was taken at, so its CI can be shown at that level.

    Parameters
    ----------
    pvalues : array_like, shape (m,)
        Raw p-values (NaN for an untested comparison: NaN out).
    method : {"holm", "bh", "bonferroni", "none"}
    alpha : float
        Family-wise (or FDR) level.

    Returns
    -------
    numpy.ndarray, shape (m,)
        α_i such that the t-based (1 - α_i) CI excludes 0 exactly when comparison i is rejected:

        - Holm: a rejected comparison at step j was tested at α/(m - j + 1); one not rejected gets the level
          of the step where Holm stopped (its p is at least that step's p, so its CI keeps 0).
        - BH: rejected comparisons get R α/m (R = number rejected), the others (R + 1) α/m: the false
          coverage-statement rate intervals of Benjamini & Yekutieli (2005), JASA 100:71-81.
        - Bonferroni: α/m for all; none: α.
    """
    p = np.asarray(pvalues, dtype=float)
    ok = ~np.isnan(p)
    out = np.full(p.shape, np.nan)
    m = int(ok.sum())
    if m == 0:
        return out
    q = p[ok]
    if method == "none" or m == 1:
        out[ok] = alpha
        return out
    if method == "bonferroni":
        out[ok] = alpha / m
        return out
    order = np.argsort(q, kind="stable")
    lv = np.empty(m)
    if method == "holm":
        steps = alpha / (m - np.arange(m))
        passed = q[order] < steps
        stop = m if passed.all() else int(np.argmin(passed))
        lv[order] = np.where(np.arange(m) < stop, steps, steps[min(stop, m - 1)])
    elif method == "bh":
        thr = alpha * np.arange(1, m + 1) / m
        below = np.flatnonzero(q[order] < thr)
        r = int(below[-1]) + 1 if below.size else 0
        rejected = np.zeros(m, bool)
        rejected[order[:r]] = True
        lv = np.where(rejected, r * alpha / m, min(1.0, (r + 1) * alpha / m))
    else:
        raise _iv.fail("method", "must be one of holm, bh, bonferroni, none", method)
    out[ok] = lv
    return out


def dunnett_pvalues(treatments: Sequence[Any], control: Any, *, rng: Any = None) -> np.ndarray:
    """Dunnett's many-to-one p-values (two-sided), one per treatment (see :func:`dunnett`)."""
    return dunnett(treatments, control, rng=rng)[0]


def dunnett(treatments: Sequence[Any], control: Any, *, alpha: float = 0.05, rng: Any = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dunnett's many-to-one test: two-sided p-values and simultaneous CIs of mean_T - mean_C.

    Parameters
    ----------
    treatments : sequence of array_like, each shape (n_i,)
        Finite values of each treatment (failed trials removed), at least 2 each.
    control : array_like, shape (n_c,)
        Finite control values, at least 2.
    alpha : float
        The CIs have simultaneous level 1 - alpha (they exclude 0 exactly when p < alpha).
    rng : None, int or numpy.random.Generator
        For the quasi-Monte-Carlo integration inside scipy (reproducible when given).

    Returns
    -------
    (pvalues, low, high) : numpy.ndarray, each shape (len(treatments),)
        Family-wise adjusted p-values, and the CI bounds in metric units (not sign-normalised).

    Raises
    ------
    StatsInputError
        When an arm has fewer than 2 values or holds NaN/inf.

    Notes
    -----
    Dunnett (1955), JASA 50: ``scipy.stats.dunnett(*treatments, control=control, rng=rng)`` and its
    ``confidence_interval(1 - alpha)``. Single step, uses the shared-control correlation, assumes normal
    errors and one pooled variance: use it when the arms' SDs are within about 2x (spec B5).
    """
    from scipy import stats  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    ts = [_iv.values_1d(t, f"treatments[{i}]", allow_nan=False) for i, t in enumerate(treatments)]
    c = _iv.values_1d(control, "control", allow_nan=False)
    for i, t in enumerate(ts):
        if t.size < 2:
            raise _iv.fail(f"treatments[{i}]", "must hold at least 2 values", t.size)
    if c.size < 2:
        raise _iv.fail("control", "must hold at least 2 values", c.size)
    a = _iv.alpha(alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.dunnett(*ts, control=c, rng=_iv.rng(rng))
        ci = res.confidence_interval(1 - a)
    return (np.minimum(1.0, np.asarray(res.pvalue, dtype=float)), np.asarray(ci.low, dtype=float),
            np.asarray(ci.high, dtype=float))
