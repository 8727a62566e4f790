"""Expected best validation performance as the tuning budget grows (Dodge et al. 2019, "Show Your Work").

Given the validation values of ``n`` hyperparameter settings tried, the expected best of ``k`` settings drawn
(with replacement) from them is, with :math:`v_{(1)} \\le \\dots \\le v_{(n)}` sorted,

.. math:: E[\\max_k] = \\sum_{i=1}^{n} v_{(i)} \\left[ (i/n)^k - ((i-1)/n)^k \\right],

Dodge, Gururangan, Card, Schwartz & Smith (2019), "Show Your Work: Improved Reporting of Experimental Results",
EMNLP, eq. 1-2 (the empirical CDF :math:`\\hat F(v)^k` of the max). The band is one standard deviation of that max
under the same distribution, clipped to the observed range, as the paper's figures show it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ablate.stats._iv import StatsInputError


@dataclass(frozen=True)
class ExpectedMax:
    """The expected best of ``k`` = 1..n settings.

    Attributes
    ----------
    budgets : list of int
        k = 1 .. n.
    mean : list of float
        E[best of k], in the metric's units (best: the max when ``goal`` is maximize, the min otherwise).
    low, high : list of float
        mean ∓ one standard deviation of the best of k, clipped to [min, max] of the values.
    """

    budgets: list[int]
    mean: list[float]
    low: list[float]
    high: list[float]


def expected_max(values: Sequence[float], *, goal: str = "maximize", budgets: Sequence[int] | None = None
                 ) -> ExpectedMax:
    """Dodge et al. (2019)'s expected best validation value of ``k`` settings, with its ±1 s.d. band.

    Parameters
    ----------
    values : sequence of float
        One validation value per setting tried (finite; NaN values are refused, leave failed settings out).
    goal : {"maximize", "minimize"}
        Which end is best: the expected max, or the expected min.
    budgets : sequence of int, optional
        The k to evaluate (default 1..n); any k >= 1 (a draw is with replacement).

    Returns
    -------
    ExpectedMax

    Raises
    ------
    StatsInputError
        No values, a non-finite value, an unknown goal or a budget below 1.
    """
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        raise StatsInputError("values: need at least one setting's value")
    if not np.all(np.isfinite(v)):
        raise StatsInputError("values: must be finite (leave out settings whose trials failed)")
    if goal not in ("maximize", "minimize"):
        raise StatsInputError(f"goal: must be maximize or minimize, got {goal!r}")
    sign = 1.0 if goal == "maximize" else -1.0
    x = np.sort(sign * v)
    n = x.size
    ks = list(budgets) if budgets is not None else list(range(1, n + 1))
    if any(int(k) != k or k < 1 for k in ks):
        raise StatsInputError(f"budgets: must be whole numbers >= 1, got {ks!r}")
    i = np.arange(1, n + 1)
    mean, low, high = [], [], []
    for k in ks:
        p = (i / n) ** k - ((i - 1) / n) ** k  # P(the best of k draws is the i-th smallest)
        m = float(np.sum(p * x))
        sd = float(np.sqrt(max(np.sum(p * x**2) - m**2, 0.0)))
        lo, hi = max(m - sd, x[0]), min(m + sd, x[-1])
        if sign > 0:
            mean.append(m)
            low.append(float(lo))
            high.append(float(hi))
        else:
            mean.append(-m)
            low.append(float(-hi))
            high.append(float(-lo))
    return ExpectedMax(budgets=[int(k) for k in ks], mean=mean, low=low, high=high)
