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


@dataclass(frozen=True)
class Choice:
    """Each arm's chosen setting (:func:`choose`), over a batch of tuned ablations.

    Attributes
    ----------
    own : ndarray of int, shape (reps, arms)
        Each arm's best-mean setting on its own tuning seeds (-1 when no setting ran cleanly).
    index : ndarray of int, shape (reps, arms)
        The setting each arm is judged at: the common setting for the arms in ``common``, its own otherwise.
    common : ndarray of bool, shape (reps, arms)
        The arms judged at one common setting (the control and every treatment that does not clearly prefer a
        setting other than the control's); False everywhere when no treatment is.
    """

    own: np.ndarray
    index: np.ndarray
    common: np.ndarray


def choose(values: np.ndarray, *, goal: str = "maximize") -> Choice:
    """Each arm's setting to judge it at, from the tuning values: its own best, or one common setting unless the
    arms clearly prefer different settings.

    Two identical arms tuned on their own seeds often choose different settings when several lie within the
    tuning noise of the best (a shallow surface); their true values then differ, and fresh evaluation seeds find
    that real gap, a false "better/worse" under A/A (benchmarks/results/tuning_aa.md: up to 0.18 at alpha 0.05).
    So a treatment is judged at its own choice ``j`` and the control at its own ``i`` only when each arm prefers
    its own choice on its own tuning data: the control's mean at ``i`` at least ``bar_c`` above its mean at ``j``
    *and* the treatment's mean at ``j`` at least ``bar_t`` above its mean at ``i``, with ``bar = 2·√2·s/√n`` (2
    standard errors of a difference of two means of ``n`` tuning seeds, ``s`` the arm's SD within settings, pooled
    over its clean settings) -- an interaction the tuning data show. Otherwise the treatment and the control are
    judged at one common setting: the best mean of the pooled tuning data of the control and every such treatment
    (a setting clean for all of them), fixed by tuning data alone, before any evaluation trial. Under A/A that
    holds the false-positive rate at alpha + 2 MC SE on flat, peaked and shallow surfaces (the same benchmark).
    With one tuning seed per setting the noise cannot be estimated and the arms are judged at the common setting.
    Where a choice the other arm made did not run cleanly on this arm, the arms keep their own choices.

    Parameters
    ----------
    values : ndarray, shape (reps, arms, k, n)
        The metric of every tuning trial: (replication, arm, setting, tuning seed); arm 0 is the control. NaN
        marks a trial without a finite metric; a setting with one is never chosen.
    goal : {"maximize", "minimize"}

    Returns
    -------
    Choice
        Ties go to the setting listed first (the lowest index).

    Raises
    ------
    StatsInputError
        Not 4-dimensional, no setting or seed, or an unknown goal.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 4 or 0 in v.shape:
        raise StatsInputError(f"values: need shape (reps, arms, settings, seeds), non-empty, got {v.shape}")
    if goal not in ("maximize", "minimize"):
        raise StatsInputError(f"goal: must be maximize or minimize, got {goal!r}")
    sign = 1.0 if goal == "maximize" else -1.0
    reps, arms, _, n = v.shape
    clean = np.isfinite(v).all(axis=3)  # (reps, arms, k)
    m = np.where(clean, sign * np.where(clean[..., None], v, 0.0).mean(axis=3), -np.inf)  # signed: bigger is better
    has = clean.any(axis=2)
    own = np.where(has, m.argmax(axis=2), -1)
    if n >= 2:
        dev = np.where(clean[..., None], v - np.where(np.isfinite(m), sign * m, 0.0)[..., None], 0.0)
        ss = (dev**2).sum(axis=(2, 3))
        df = clean.sum(axis=2) * (n - 1)
        bar = 2 * np.sqrt(2) * np.sqrt(np.divide(ss, df, out=np.full(ss.shape, np.inf), where=df > 0)) / np.sqrt(n)
    else:
        bar = np.full((reps, arms), np.inf)  # no estimate of the noise: never told apart
    r = np.arange(reps)
    ic = np.maximum(own[:, 0], 0)
    common = np.zeros((reps, arms), dtype=bool)
    with np.errstate(invalid="ignore"):  # -inf - -inf where a setting is not clean: masked by `clean` below
        for a in range(1, arms):
            it = np.maximum(own[:, a], 0)
            apart = (m[r, 0, ic] - m[r, 0, it] >= bar[:, 0]) & (m[r, a, it] - m[r, a, ic] >= bar[:, a])
            common[:, a] = has[:, 0] & has[:, a] & clean[r, 0, it] & clean[r, a, ic] & ~apart
    common[:, 0] = common[:, 1:].any(axis=1)
    # the pooled tuning data of the arms in the group, over the settings clean for every one of them
    pooled = np.where(common[..., None], np.where(np.isfinite(m), m, 0.0), 0.0).sum(axis=1)
    ok = ~(common[..., None] & ~clean).any(axis=1)
    common &= ok.any(axis=1)[:, None]  # no setting clean for the whole group: each arm at its own
    pick = np.where(ok, pooled, -np.inf).argmax(axis=1)
    index = np.where(common, pick[:, None], own)
    return Choice(own=own, index=index, common=common)
