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
    Holm (1979), Scand. J. Stat. 6: ``statsmodels.stats.multitest.multipletests(p, method='holm')``;
    Benjamini & Hochberg (1995), JRSS-B 57: ``scipy.stats.false_discovery_control(p, method='bh')``.
    """
    p, m = _adjust_iv(pvalues, method)
    out = p.copy()
    ok = ~np.isnan(p)
    if m == "none" or ok.sum() <= 1:
        return out
    if m == "holm":
        from statsmodels.stats.multitest import multipletests

        out[ok] = multipletests(p[ok], method="holm")[1]
    else:
        from scipy.stats import false_discovery_control

        out[ok] = false_discovery_control(p[ok], method="bh")
    return out


def dunnett_pvalues(treatments: Sequence[Any], control: Any, *, rng: Any = None) -> np.ndarray:
    """Dunnett's many-to-one p-values (two-sided), one per treatment.

    Parameters
    ----------
    treatments : sequence of array_like, each shape (n_i,)
        Finite values of each treatment (failed trials removed), at least 2 each.
    control : array_like, shape (n_c,)
        Finite control values, at least 2.
    rng : None, int or numpy.random.Generator
        For the quasi-Monte-Carlo integration inside scipy (reproducible when given).

    Returns
    -------
    numpy.ndarray, shape (len(treatments),)
        Family-wise adjusted p-values.

    Raises
    ------
    StatsInputError
        When an arm has fewer than 2 values or holds NaN/inf.

    Notes
    -----
    Dunnett (1955), JASA 50: ``scipy.stats.dunnett(*treatments, control=control, rng=rng)``. Single step,
    uses the shared-control correlation, assumes normal errors and one pooled variance: use it when the
    arms' SDs are within about 2x (spec B5).
    """
    from scipy import stats

    ts = [_iv.values_1d(t, f"treatments[{i}]", allow_nan=False) for i, t in enumerate(treatments)]
    c = _iv.values_1d(control, "control", allow_nan=False)
    for i, t in enumerate(ts):
        if t.size < 2:
            raise _iv.fail(f"treatments[{i}]", "must hold at least 2 values", t.size)
    if c.size < 2:
        raise _iv.fail("control", "must hold at least 2 values", c.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.dunnett(*ts, control=c, rng=_iv.rng(rng))
    return np.minimum(1.0, np.asarray(res.pvalue, dtype=float))
