"""Per-arm descriptive statistics (verdict spec B2)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ablate.stats import _iv


@dataclass(frozen=True)
class ArmSummary:
    """Descriptive statistics of one arm, in metric units (not sign-normalised).

    Attributes
    ----------
    n : int
        Completed seeds (finite values).
    n_failed : int
        Failed trials (NaN values): counted, never dropped silently.
    mean, sd, sem : float or None
        Mean, standard deviation (ddof = 1) and standard error of the mean; None when undefined
        (no values; SD and SEM need 2).
    ci : (float, float) or None
        Confidence interval of the mean at ``confidence_level``: t-based, or, for a 0/1 metric (every value
        0 or 1), Wilson's score interval of the success rate, which stays inside [0, 1].
    ci_method : str
        ``"t"`` or ``"Wilson score (0/1 metric)"``.
    median, iqm, min, max : float or None
        Median, interquartile mean (``scipy.stats.trim_mean(x, 0.25)``; Agarwal et al. 2021), range.
    iqm_note : str or None
        Set when the IQM is not informative: it equals the mean at n = 3 and the median at n = 4.
    values : tuple of float
        Every value in input order, NaN for a failed trial.
    seeds : tuple of int or None
        Seed ids matching ``values`` when given.
    """

    n: int
    n_failed: int
    mean: float | None
    sd: float | None
    sem: float | None
    ci: tuple[float, float] | None
    median: float | None
    iqm: float | None
    iqm_note: str | None
    min: float | None
    max: float | None
    confidence_level: float
    values: tuple[float, ...] = field(repr=False)
    seeds: tuple[int, ...] | None = field(default=None, repr=False)
    ci_method: str = "t"


def _summarize_iv(values: Any, seeds: Any, confidence_level: Any) -> tuple[np.ndarray, tuple[int, ...] | None, float]:
    x = _iv.values_1d(values, "values")
    s = None
    if seeds is not None:
        s = tuple(int(v) for v in seeds)
        if len(s) != len(x):
            raise _iv.fail("seeds", f"must have one seed id per value ({len(x)})", len(s))
    if isinstance(confidence_level, bool) or not isinstance(confidence_level, int | float) \
            or not 0 < confidence_level < 1:
        raise _iv.fail("confidence_level", "must be a number in (0, 1)", confidence_level)
    return x, s, float(confidence_level)


def summarize(values: Any, *, seeds: Any = None, confidence_level: float = 0.95) -> ArmSummary:
    """Summarise one arm's per-seed metric values.

    Parameters
    ----------
    values : array_like, shape (n_seeds,)
        Metric values in metric units; NaN marks a failed trial.
    seeds : array_like of int, shape (n_seeds,), optional
        Seed ids, kept with the values for the report.
    confidence_level : float
        Level of the t-interval of the mean (default 0.95).

    Returns
    -------
    ArmSummary

    Raises
    ------
    StatsInputError
        When ``values`` is not 1-D numbers without inf, or ``seeds`` does not match it.

    Notes
    -----
    SD with ``ddof=1`` (computed on values standardised by their median and largest deviation, so 1e200
    neither overflows nor 1e-200 underflows); CI ``scipy.stats.t.interval(level, n - 1, mean, sem)``, or for
    a 0/1 metric ``scipy.stats.binomtest(k, n).proportion_ci(method='wilson')`` (Wilson 1927, JASA 22); IQM
    ``scipy.stats.trim_mean(x, 0.25)`` as in rliable's ``aggregate_iqm`` (Agarwal et al. 2021, NeurIPS):
    it trims floor(n/4) values per side, so at n = 3 it is the mean and at n = 4 the median.
    """
    from scipy import stats  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    x, s, level = _summarize_iv(values, seeds, confidence_level)
    ok = x[~np.isnan(x)]
    n = int(ok.size)
    if n == 0:
        return ArmSummary(0, int(x.size), None, None, None, None, None, None, None, None, None, level,
                          tuple(float(v) for v in x), s)
    center = float(np.median(ok))
    scale = float(np.max(np.abs(ok - center)))
    scale = scale if scale > 0 and math.isfinite(scale) else 1.0
    z = (ok - center) / scale  # standardised: no overflow of squares at 1e200, no underflow at 1e-200
    mean = center + scale * float(z.mean())
    sd = scale * float(z.std(ddof=1)) if n > 1 else None
    sem = sd / math.sqrt(n) if sd is not None else None
    ci = None
    binary = bool(np.isin(ok, (0.0, 1.0)).all())
    if binary:  # a 0/1 metric (success rate): an interval inside [0, 1] (Wilson 1927)
        w = stats.binomtest(int(ok.sum()), n).proportion_ci(confidence_level=level, method="wilson")
        ci = (float(w.low), float(w.high))
    elif sem is not None:
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sem
        ci = (mean - half, mean + half)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        iqm = float(stats.trim_mean(ok, 0.25))
    note = {3: "IQM = mean at n = 3 (nothing trimmed)", 4: "IQM = median at n = 4"}.get(n)
    if n < 3:
        note = "IQM = mean at n < 3 (nothing trimmed)"
    return ArmSummary(n=n, n_failed=int(x.size - n), mean=mean, sd=sd, sem=sem, ci=ci, median=float(np.median(ok)),
                      iqm=iqm, iqm_note=note, min=float(ok.min()), max=float(ok.max()), confidence_level=level,
                      values=tuple(float(v) for v in x), seeds=s,
                      ci_method="Wilson score (0/1 metric)" if binary else "t")
