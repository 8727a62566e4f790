"""Curve verdicts: where along training a treatment differs from the control, with the error rate held over
every point of the curve (pure: arrays in, dataclasses out).

Three steps, each a function:

1. :func:`align_curves`: each seed's logged series (x, value) on one grid shared by every seed of both arms,
   with stated rules for restarts (repeated x), non-finite values, missing steps and unequal lengths
   (no extrapolation; interpolation only when the seeds were not logged at the same x).
2. :func:`curve_summaries`: per seed, the normalised area under the curve and the first x reaching a threshold.
3. :func:`curve_band`: the mean difference at every grid point (and of each summary) with a *simultaneous*
   confidence band: the max-|t| permutation method (sign flips of the paired per-seed differences, or
   relabelling of seeds between arms when unpaired), whose critical value holds family-wise over every grid
   point and summary at once; :func:`curve_regions` turns it into intervals of x.

References
----------
Blair, R. C. & Karniski, W. (1993). An alternative method for significance testing of waveform difference
potentials. *Psychophysiology* 30(5), 518-524 (the max-|t| sign-flip test over the points of paired curves).
Westfall, P. H. & Young, S. S. (1993). *Resampling-Based Multiple Testing*. Wiley (single-step maxT adjusted
p-values, strong family-wise control under subset pivotality).
Phipson, B. & Smyth, G. K. (2010). Permutation p-values should never be zero. *Statistical Applications in
Genetics and Molecular Biology* 9(1), article 39 (the observed labelling counted among random permutations).
Janssen, A. (1997). Studentized permutation tests for non-i.i.d. hypotheses and the generalized Behrens-Fisher
problem. *Statistics & Probability Letters* 36(1), 9-21 (Welch's statistic under relabelling).
The pointwise baselines reported beside it: Colas, Sigaud & Oudeyer (2019), arXiv:1904.06979 (a Welch test at
every step, uncorrected); Agarwal et al. (2021), NeurIPS (rliable: pointwise bootstrap bands).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ablate.stats import _iv

#: How :func:`align_curves` put the seeds on one grid.
GRID_SHARED = "shared"  # the x values every seed logged: exact logged values, no interpolation
GRID_INTERPOLATED = "interpolated"  # a regular grid, each seed linearly interpolated between its logged points
#: Permutations drawn per chunk (memory: chunk x columns floats).
_CHUNK = 512
#: Relative tolerance within which a permutation's max |t| ties the observed |t| (rounding between two ways of
#: computing the same t).
_TIES = 1e-9


def _numbers_1d(x: Any, param: str) -> np.ndarray:
    """``x`` as a 1-D float array (NaN and inf kept: :func:`clean_series` states what happens to them)."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise _iv.fail(param, "must be a 1-D sequence of numbers", x) from None
    if arr.ndim != 1:
        raise _iv.fail(param, "must be 1-D (one value per logged point)", f"array of shape {arr.shape}")
    return arr


# -- 1. one grid ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CleanSeries:
    """One seed's series after the stated rules (:func:`clean_series`).

    Attributes
    ----------
    x, y : ndarray
        Increasing x (no repeats) and the finite value at each.
    restarts : int
        Points logged again at an x already logged (a run resumed from a checkpoint): the value logged last
        at each x is kept, as the run that continued logged it.
    dropped : int
        Points whose x or value was NaN or inf (a step that could not be logged finitely): left out, so the
        grid bridges them by interpolation or skips that x.
    """

    x: np.ndarray
    y: np.ndarray
    restarts: int = 0
    dropped: int = 0


def clean_series(x: Any, y: Any) -> CleanSeries:
    """Apply the rules for restarts and non-finite values to one seed's series, in logging order.

    Parameters
    ----------
    x, y : sequence of float
        The x-axis value (step, tokens, epoch, seconds ...) and the metric at each logged point, in the
        order they were logged.

    Returns
    -------
    CleanSeries

    Raises
    ------
    StatsInputError
        When ``x`` and ``y`` differ in length or are not 1-D numbers.
    """
    xa, ya = _numbers_1d(x, "x"), _numbers_1d(y, "y")
    if len(xa) != len(ya):
        raise _iv.fail("y", f"must have one value per x ({len(xa)})", f"{len(ya)} values")
    ok = np.isfinite(xa) & np.isfinite(ya)
    dropped = int((~ok).sum())
    xa, ya = xa[ok], ya[ok]
    # the last logged value at each x: reverse, keep each x's first occurrence, then sort by x
    rev_x = xa[::-1]
    _, first = np.unique(rev_x, return_index=True)
    restarts = len(xa) - len(first)
    keep = np.sort(len(xa) - 1 - first)  # indices in logging order
    order = np.argsort(xa[keep], kind="stable")
    return CleanSeries(xa[keep][order], ya[keep][order], restarts, dropped)


@dataclass(frozen=True)
class AlignedCurves:
    """Every seed's curve on one grid.

    Attributes
    ----------
    x : ndarray, shape (G,)
        The grid (x-axis units).
    y : ndarray, shape (n_seeds, G)
        Each seed's value at each grid point (metric units).
    rule : str
        ``"shared"`` (the x values every seed logged, subsampled to ``points``: the logged values themselves) or
        ``"interpolated"`` (``points`` evenly spaced x, each seed linearly interpolated between its two
        neighbouring logged points; never extrapolated).
    full_range : (float, float)
        The smallest first x and the largest last x over the seeds; the grid spans only the range every seed
        covers (``x[0]``, ``x[-1]``), so a seed that stops early shortens it (``ends_first`` names it).
    ends_first : int
        Index of the seed whose curve ends first (the grid's end).
    restarts, dropped : tuple of int
        Per seed, :class:`CleanSeries` counts.
    subsampled : bool
        The shared x values outnumbered ``points`` and were subsampled evenly by index (first and last kept).
    """

    x: np.ndarray
    y: np.ndarray
    rule: str
    full_range: tuple[float, float]
    ends_first: int
    restarts: tuple[int, ...]
    dropped: tuple[int, ...]
    subsampled: bool = False


def align_curves(curves: Sequence[tuple[Any, Any]], *, points: int = 200) -> AlignedCurves:
    """Put every seed's logged series on one grid (both arms together, so the arms are compared at the same x).

    Parameters
    ----------
    curves : sequence of (x, y)
        One series per seed, in logging order (:func:`clean_series` is applied to each).
    points : int
        The most grid points (>= 2).

    Returns
    -------
    AlignedCurves

    Raises
    ------
    StatsInputError
        Fewer than 2 curves, a curve with fewer than 2 finite points, or curves that share no range of x.

    Notes
    -----
    The grid spans ``[max_i first x_i, min_i last x_i]``: only where every seed has data (no extrapolation).
    When every seed logged the same x values there (the usual case for steps or epochs, missing steps
    excepted: an x one seed did not log is left out of the grid), the grid is those x and the values are the
    logged ones; otherwise (tokens or wall time per seed) it is ``points`` evenly spaced x with linear
    interpolation (``numpy.interp``).
    """
    n_pts = _iv.positive_int(points, "points", lo=2)
    if len(curves) < 2:
        raise _iv.fail("curves", "must hold at least 2 curves", len(curves))
    clean = [clean_series(x, y) for x, y in curves]
    for i, c in enumerate(clean):
        if len(c.x) < 2:
            raise _iv.fail("curves", f"curve {i} must have at least 2 finite points", len(c.x))
    lo = max(float(c.x[0]) for c in clean)
    ends = [float(c.x[-1]) for c in clean]
    hi = min(ends)
    if not hi > lo:
        raise _iv.fail("curves", "must share a range of x (every curve ends after every other starts)",
                       f"the latest start {lo:g} is not before the earliest end {hi:g}")
    shared = clean[0].x[(clean[0].x >= lo) & (clean[0].x <= hi)]
    for c in clean[1:]:
        shared = np.intersect1d(shared, c.x, assume_unique=True)
    union = np.unique(np.concatenate([c.x[(c.x >= lo) & (c.x <= hi)] for c in clean]))
    subsampled = False
    if len(shared) >= 2 and len(shared) >= 0.5 * len(union):
        rule, grid = GRID_SHARED, shared
        if len(grid) > n_pts:
            grid = grid[np.unique(np.round(np.linspace(0, len(grid) - 1, n_pts)).astype(int))]
            subsampled = True
    else:
        rule, grid = GRID_INTERPOLATED, np.linspace(lo, hi, n_pts)
    y = np.vstack([np.interp(grid, c.x, c.y) for c in clean])
    return AlignedCurves(grid, y, rule, (min(float(c.x[0]) for c in clean), max(ends)), int(np.argmin(ends)),
                         tuple(c.restarts for c in clean), tuple(c.dropped for c in clean), subsampled)


# -- 2. summaries ---------------------------------------------------------------------------------------------
def curve_summaries(x: Any, y: Any, *, goal: str = "maximize", threshold: float | None = None
                    ) -> dict[str, np.ndarray]:
    """Per-seed summaries of curves on one grid.

    Parameters
    ----------
    x : array, shape (G,)
        The grid.
    y : array, shape (n_seeds, G)
        The curves.
    goal : {"maximize", "minimize"}
        Which way the threshold is reached (``>=`` or ``<=``).
    threshold : float, optional
        The value whose first reaching is timed.

    Returns
    -------
    dict
        ``auc``: the normalised area under each curve, ``trapezoid(y, x) / (x[-1] - x[0])`` (metric units: the
        curve's mean value over the grid's range); with ``threshold``, ``time_to``: the first x at which each
        curve reaches it (linear interpolation between the grid points around the crossing), ``x[-1]`` for a
        curve that never does (censored at the last common x: a lower bound), and ``reached``: 1.0 / 0.0.
    """
    xa = np.asarray(x, dtype=float)
    ya = np.atleast_2d(np.asarray(y, dtype=float))
    sign = _iv.goal(goal)
    out = {"auc": np.trapezoid(ya, xa, axis=1) / (xa[-1] - xa[0])}
    if threshold is None:
        return out
    thr = float(threshold)
    hit = sign * ya >= sign * thr
    reached = hit.any(axis=1)
    first = np.argmax(hit, axis=1)
    time = np.full(len(ya), xa[-1])
    for i in np.flatnonzero(reached):
        j = first[i]
        if j == 0:
            time[i] = xa[0]
            continue
        y0, y1 = ya[i, j - 1], ya[i, j]
        frac = (thr - y0) / (y1 - y0) if y1 != y0 else 1.0
        time[i] = xa[j - 1] + min(max(frac, 0.0), 1.0) * (xa[j] - xa[j - 1])
    out["time_to"] = time
    out["reached"] = reached.astype(float)
    return out


# -- 3. the simultaneous band ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SummaryTest:
    """One summary of the curves (area, time to threshold, final value) compared inside the curve's family.

    Attributes
    ----------
    name : str
    diff : float
        Mean difference treatment − control, sign-normalised: positive = better (a higher area when the goal is
        to maximize, an earlier time to threshold).
    ci : (float, float)
        Its simultaneous confidence interval (same critical value as the band), sign-normalised.
    p_adj : float
        Its family-wise adjusted p-value (maxT over every grid point and summary).
    t : float
    mean_treatment, mean_control : float
        Per-arm means in the summary's own units (metric units; x units for ``time_to``).
    sign : float
        +1 when a higher value is better, -1 when lower is (``raw Δ = sign * diff``).
    """

    name: str
    diff: float
    ci: tuple[float, float]
    p_adj: float
    t: float
    mean_treatment: float
    mean_control: float
    sign: float


@dataclass(frozen=True)
class CurveBand:
    """The difference of two arms' curves with a simultaneous confidence band (:func:`curve_band`).

    Every array has shape (G,), one value per grid point; differences are sign-normalised (positive = better).

    Attributes
    ----------
    x : ndarray
        The grid.
    diff, se, t : ndarray
        Mean difference (treatment − control, sign-normalised), its standard error and t statistic (paired t,
        or Welch's t).
    low, high : ndarray
        The simultaneous band ``diff ± critical * se``: it covers the whole true difference curve (and the
        summaries) with probability about ``1 - alpha``.
    p_adj : ndarray
        Family-wise adjusted p-values (single-step maxT, Westfall & Young 1993).
    p_pointwise : ndarray
        Unadjusted two-sided t-test p-value at each point (the pointwise baseline of Colas et al. 2019; a
        Bonferroni over points rejects where ``p_pointwise * G <= alpha``).
    critical : float
        The band's multiplier: the ``1 - alpha`` quantile of the permutation distribution of max |t|.
    alpha : float
    paired : bool
    n_treatment, n_control : int
    n_permutations : int
        Permutations used, the observed labelling included.
    exact : bool
        True when every permutation was enumerated.
    mean_treatment, mean_control : ndarray
        Each arm's mean curve, metric units (not sign-normalised).
    spread : ndarray
        The per-seed spread the band's width scales with: SD of the paired differences, or
        ``sqrt(s_T² + s_C²)`` unpaired (half-width ≈ ``critical * spread / sqrt(n)`` with n seeds per arm).
    sign : float
        +1 (maximize) or -1 (minimize): ``raw Δ = sign * diff``.
    summaries : dict
        Name -> :class:`SummaryTest`.
    min_p : float
        The smallest adjusted p-value the permutations can give (``1 / n_permutations`` random; exact: ``2 / 2^n``
        paired, ``2 / C(2n, n)`` unpaired with n seeds per arm, the swap of the arms giving the same |t|): nothing
        is declared when it exceeds ``alpha``.
    critical_null, critical_pivot : float
        The two critical values ``critical`` is the larger of: from the permutations of the data as they are
        (exact under no difference anywhere), and of the data centred at their mean difference (the
        distribution of the studentised pivot, which keeps the band's coverage under a difference).
    p_null : ndarray
        The adjusted p-values from the data as they are alone (``p_adj`` is the larger of the two).
    """

    x: np.ndarray
    diff: np.ndarray
    se: np.ndarray
    t: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_adj: np.ndarray
    p_pointwise: np.ndarray
    critical: float
    alpha: float
    paired: bool
    n_treatment: int
    n_control: int
    n_permutations: int
    exact: bool
    mean_treatment: np.ndarray
    mean_control: np.ndarray
    spread: np.ndarray
    sign: float
    summaries: dict[str, SummaryTest] = field(default_factory=dict)
    min_p: float = 0.0
    critical_null: float = math.nan
    critical_pivot: float = math.nan
    p_null: np.ndarray | None = None


def _matrix(a: Any, param: str) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=float)
    except (TypeError, ValueError):
        raise _iv.fail(param, "must be an array of numbers of shape (n_seeds, n_points)", a) from None
    if arr.ndim != 2:
        raise _iv.fail(param, "must have shape (n_seeds, n_points)", f"array of shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise _iv.fail(param, "must be finite (align_curves drops NaN/inf points by its stated rule)", "NaN or inf")
    return arr


def _curve_band_iv(treatment: Any, control: Any, x: Any, paired: Any, n_resamples: Any,
                   summaries: Mapping[str, Any] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Any]]:
    t_arr, c_arr = _matrix(treatment, "treatment"), _matrix(control, "control")
    if t_arr.shape[1] != c_arr.shape[1]:
        raise _iv.fail("control", f"must have the treatment's {t_arr.shape[1]} grid points", c_arr.shape[1])
    if len(t_arr) < 2 or len(c_arr) < 2:
        raise _iv.fail("treatment", "each arm needs at least 2 seeds", (len(t_arr), len(c_arr)))
    if paired and len(t_arr) != len(c_arr):
        raise _iv.fail("control", "must have one row per treatment row when paired (rows matched by seed)",
                       (len(t_arr), len(c_arr)))
    xa = np.arange(t_arr.shape[1], dtype=float) if x is None else np.asarray(x, dtype=float)
    if xa.shape != (t_arr.shape[1],):
        raise _iv.fail("x", f"must have one value per grid point ({t_arr.shape[1]})", xa.shape)
    _iv.positive_int(n_resamples, "n_resamples", lo=1)
    extra = []
    for name, spec in (summaries or {}).items():
        tv, cv, direction = spec
        tv, cv = np.asarray(tv, dtype=float), np.asarray(cv, dtype=float)
        if tv.shape != (len(t_arr),) or cv.shape != (len(c_arr),) or not (np.isfinite(tv).all()
                                                                         and np.isfinite(cv).all()):
            raise _iv.fail("summaries", f"{name!r} must give one finite value per seed of each arm",
                           (tv.shape, cv.shape))
        extra.append((str(name), tv, cv, _iv.goal(direction)))
    return t_arr, c_arr, xa, extra


def curve_band(treatment: Any, control: Any, *, x: Any = None, paired: bool, alpha: float = 0.05,
               goal: str = "maximize", summaries: Mapping[str, tuple[Any, Any, str]] | None = None,
               n_resamples: int = 4999, rng: Any = None) -> CurveBand:
    """The mean difference of two arms' curves at every grid point, with a simultaneous confidence band.

    Parameters
    ----------
    treatment, control : array, shape (n_seeds, G)
        Curves on one grid (:func:`align_curves`), metric units; when ``paired``, row i of each is seed i.
    x : array, shape (G,), optional
        The grid (default 0..G-1).
    paired : bool
        Paired by seed (sign flips of the per-seed differences) or not (relabelling seeds between arms,
        Welch's t).
    alpha : float
        Family-wise level over every grid point and summary (pass ``alpha / m`` for m treatments).
    goal : {"maximize", "minimize"}
        Differences are sign-normalised so that positive = better.
    summaries : mapping, optional
        Name -> (treatment values (n_T,), control values (n_C,), "maximize" | "minimize"): per-seed summaries
        (:func:`curve_summaries`, the final metric) tested in the same family as the grid points.
    n_resamples : int
        Random permutations when there are more than ``n_resamples + 1`` in all (else all are enumerated).
    rng : None, int or numpy.random.Generator

    Returns
    -------
    CurveBand

    Raises
    ------
    StatsInputError
        Shapes that do not match, non-finite values, fewer than 2 seeds per arm, a bad ``alpha``.

    Notes
    -----
    The max-|t| permutation method (Blair & Karniski 1993; Westfall & Young 1993): t is computed at every grid
    point and for every summary (columns); under each permutation of the seeds (sign flips of the paired
    differences, or a relabelling of seeds between arms) the largest |t| over the columns is recorded; a
    critical value is the ``1 - alpha`` quantile of those maxima, the observed labelling counted among them
    (Phipson & Smyth 2010). Under no difference anywhere that distribution is exact (paired: differences
    symmetric about 0; unpaired: seeds exchangeable), so the chance of declaring a difference anywhere is at
    most ``alpha`` whatever the correlation along the curve. Under a difference, permuting the data as they are
    mixes the effect into the noise (flipped differences ±Δ + e are bimodal, their studentised max lighter-tailed),
    and the band under-covered (0.930 at N = 50 on a 1-SD effect); the same permutations of the data centred at
    their mean difference (per arm when unpaired: the Rademacher wild bootstrap of the max-t statistic,
    Chernozhukov, Chetverikov & Kato 2013, *Ann. Statist.* 41(6), 2786-2819) give the studentised pivot's
    distribution. The band uses the larger of the two critical values, and ``p_adj`` the larger of the two
    adjusted p-values, so ``|t| > critical`` exactly where ``p_adj <= alpha``, the no-difference guarantee is
    kept, and coverage holds (benchmarks/curve_aa.py, docs/verdict.md#curves).
    """
    a = _iv.alpha(alpha)
    sign = _iv.goal(goal)
    t_arr, c_arr, xa, extra = _curve_band_iv(treatment, control, x, paired, n_resamples, summaries)
    g = t_arr.shape[1]
    signs = np.concatenate([np.full(g, sign), [s for *_, s in extra]])
    tt = np.hstack([t_arr, *[tv[:, None] for _, tv, _, _ in extra]]) * signs
    cc = np.hstack([c_arr, *[cv[:, None] for _, _, cv, _ in extra]]) * signs
    gen = _iv.rng(rng)
    stats = _paired_stats(tt - cc) if paired else _welch_stats(tt, cc)
    diff, se, t, df, spread = stats
    if paired:  # the data as they are (exact under no difference) and centred at the mean difference (the pivot)
        d = tt - cc
        maxima, exact = _sign_flip_maxima([d, d - d.mean(axis=0)], n_resamples, gen)
    else:
        maxima, exact = _relabel_maxima([(tt, cc), (tt - tt.mean(axis=0), cc - cc.mean(axis=0))], n_resamples, gen)
    abs_t = np.abs(t)
    c_null, p_null = _critical_and_p(maxima[0], abs_t, a)
    c_pivot, p_pivot = _critical_and_p(maxima[1], abs_t, a)
    critical, p_adj = max(c_null, c_pivot), np.maximum(p_null, p_pivot)
    b = maxima.shape[1]
    from scipy.special import stdtr  # noqa: PLC0415  # lazy: scipy.special, only for the pointwise baseline

    p_point = np.where(np.isfinite(abs_t), 2 * stdtr(df, -abs_t), 0.0)
    with np.errstate(invalid="ignore"):  # a column without spread has a band of width 0, even at an infinite critical
        half = np.where(se > 0, critical * se, 0.0)
    low, high = diff - half, diff + half
    summ = {name: SummaryTest(name, float(diff[g + j]), (float(low[g + j]), float(high[g + j])),
                              float(p_adj[g + j]), float(t[g + j]), float(tv.mean()), float(cv.mean()), s)
            for j, (name, tv, cv, s) in enumerate(extra)}
    n_t, n_c = len(t_arr), len(c_arr)
    # exact: paired, the flip of every sign gives the same |t|; unpaired with equal arms, so does swapping the arms
    ties = 2.0 if paired or n_t == n_c else 1.0
    min_p = (2.0 / 2 ** n_t if paired else ties / math.comb(n_t + n_c, n_t)) if exact else 1.0 / b
    return CurveBand(xa, diff[:g], se[:g], t[:g], low[:g], high[:g], p_adj[:g], p_point[:g], critical, a,
                     bool(paired), n_t, n_c, b, exact, t_arr.mean(axis=0), c_arr.mean(axis=0), spread[:g], sign,
                     summ, min_p, c_null, c_pivot, p_null[:g])


def _safe_t(diff: np.ndarray, se: np.ndarray) -> np.ndarray:
    """diff / se, with 0 where both are 0 and ±inf where only se is (a difference without spread)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, diff / se, np.where(diff == 0, 0.0, np.copysign(np.inf, diff)))


def _max_abs_t(diff: np.ndarray, se: np.ndarray) -> np.ndarray:
    """Per row, max |diff / se| over the columns: a column without spread counts as 0 when its difference is 0
    (``fmax`` skips the NaN of 0/0) and as infinite when it is not."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmax.reduce(np.abs(diff / se), axis=1)


def _paired_stats(d: np.ndarray) -> tuple[np.ndarray, ...]:
    n = len(d)
    diff = d.mean(axis=0)
    sd = d.std(axis=0, ddof=1)
    se = sd / math.sqrt(n)
    return diff, se, _safe_t(diff, se), np.full(d.shape[1], n - 1.0), sd


def _welch_stats(tt: np.ndarray, cc: np.ndarray) -> tuple[np.ndarray, ...]:
    n_t, n_c = len(tt), len(cc)
    vt, vc = tt.var(axis=0, ddof=1), cc.var(axis=0, ddof=1)
    diff = tt.mean(axis=0) - cc.mean(axis=0)
    a, b = vt / n_t, vc / n_c
    se = np.sqrt(a + b)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (a + b) ** 2 / (a ** 2 / (n_t - 1) + b ** 2 / (n_c - 1))
    df = np.where(np.isfinite(df), df, n_t + n_c - 2.0)
    return diff, se, _safe_t(diff, se), df, np.sqrt(vt + vc)


def _scaled(y: np.ndarray, center: bool) -> np.ndarray:
    """Columns centred (unpaired) and scaled to unit RMS: t is unchanged, and sums of squares keep precision."""
    z = y - y.mean(axis=0) if center else y
    rms = np.sqrt((z ** 2).mean(axis=0))
    return z / np.where(rms > 0, rms, 1.0)


def _sign_flip_maxima(ds: list[np.ndarray], n_resamples: int, gen: np.random.Generator
                      ) -> tuple[np.ndarray, bool]:
    """For each matrix of ``ds`` (same shape), max over its columns of |paired t| under each sign flip of the rows
    (the observed flip first; the same flips for every matrix). Returns (len(ds), flips) maxima and exactness."""
    n, p = ds[0].shape
    z = np.hstack([_scaled(d, center=False) for d in ds])
    s2 = (z ** 2).sum(axis=0)
    exact = 2 ** (n - 1) <= n_resamples + 1
    if exact:  # every flip with the first sign +: |t| is the same under the flip of all signs
        flips = np.array([(1, *q) for q in itertools.product((1, -1), repeat=n - 1)], dtype=float)
    else:
        flips = np.vstack([np.ones(n), gen.choice(np.array([-1.0, 1.0]), size=(n_resamples, n))])
    out = np.empty((len(ds), len(flips)))
    for i in range(0, len(flips), _CHUNK):
        e = flips[i:i + _CHUNK]
        m = e @ z / n
        var = np.maximum(s2 - n * m ** 2, 0.0) / (n - 1)
        for j in range(len(ds)):
            cols = slice(j * p, (j + 1) * p)
            out[j, i:i + _CHUNK] = _max_abs_t(m[:, cols], np.sqrt(var[:, cols] / n))
    return out, exact


def _relabel_maxima(pairs: list[tuple[np.ndarray, np.ndarray]], n_resamples: int, gen: np.random.Generator
                    ) -> tuple[np.ndarray, bool]:
    """For each (treatment, control) of ``pairs`` (same shapes), max over the columns of |Welch t| under each
    relabelling of the seeds between arms (the observed first; the same relabellings for every pair)."""
    n_t, n_c = len(pairs[0][0]), len(pairs[0][1])
    n, p = n_t + n_c, pairs[0][0].shape[1]
    z = np.hstack([_scaled(np.vstack([tt, cc]), center=True) for tt, cc in pairs])
    zz = np.hstack([z, z ** 2])  # one product gives each group's sums and sums of squares
    q = z.shape[1]
    tot, tot2 = zz[:, :q].sum(axis=0), zz[:, q:].sum(axis=0)
    exact = math.comb(n, n_t) <= n_resamples + 1
    if exact:
        labels = np.zeros((math.comb(n, n_t), n))
        for r, idx in enumerate(itertools.combinations(range(n), n_t)):
            labels[r, list(idx)] = 1.0
    else:
        labels = np.zeros((n_resamples + 1, n))
        labels[0, :n_t] = 1.0
        pick = np.argsort(gen.random((n_resamples, n)), axis=1)[:, :n_t]
        labels[np.arange(1, n_resamples + 1)[:, None], pick] = 1.0
    out = np.empty((len(pairs), len(labels)))
    for i in range(0, len(labels), _CHUNK):
        a = labels[i:i + _CHUNK]
        prod = a @ zz
        st, s2t = prod[:, :q], prod[:, q:]
        mt, mc = st / n_t, (tot - st) / n_c
        vt = np.maximum(s2t - n_t * mt ** 2, 0.0) / (n_t - 1)
        vc = np.maximum(tot2 - s2t - n_c * mc ** 2, 0.0) / (n_c - 1)
        se = np.sqrt(vt / n_t + vc / n_c)
        for j in range(len(pairs)):
            cols = slice(j * p, (j + 1) * p)
            out[j, i:i + _CHUNK] = _max_abs_t((mt - mc)[:, cols], se[:, cols])
    return out, exact


def _critical_and_p(maxima: np.ndarray, abs_t: np.ndarray, a: float) -> tuple[float, np.ndarray]:
    """The (1 - a) quantile of the permutation maxima (the observed labelling among them) and each column's
    adjusted p (Westfall & Young's single-step maxT): ``|t| > critical`` exactly where ``p <= a``."""
    b = len(maxima)
    desc = np.sort(maxima)[::-1]
    k = math.floor(a * b + 1e-9)
    # maxima equal to |t| up to rounding (the observed labelling's own, computed another way) count as ties
    critical = float(desc[min(k, b - 1)]) * (1 + _TIES)
    return critical, (maxima[None, :] >= abs_t[:, None] * (1 - _TIES)).sum(axis=1) / b


# -- 4. reading it --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Region:
    """A run of consecutive grid points with one reading: ``better``, ``worse`` or ``indistinguishable``."""

    word: str
    start: float
    end: float
    points: int


def curve_regions(band: CurveBand) -> list[Region]:
    """The grid split into runs where the band is above 0 (``better``), below 0 (``worse``) or holds 0
    (``indistinguishable``), in x order; each run from its first to its last grid point."""
    word = np.where(band.low > 0, 1, np.where(band.high < 0, -1, 0))
    names = {1: "better", -1: "worse", 0: "indistinguishable"}
    out: list[Region] = []
    start = 0
    for i in range(1, len(word) + 1):
        if i == len(word) or word[i] != word[start]:
            out.append(Region(names[int(word[start])], float(band.x[start]), float(band.x[i - 1]), i - start))
            start = i
    return out


def seeds_for_width(spread: Any, critical: float, width: float) -> int:
    """Seeds per arm at which the band's half-width is expected to be at most ``width`` at every grid point.

    ``n = ceil((critical * max(spread) / width)^2)`` from the pilot's pointwise spread
    (:attr:`CurveBand.spread`: the paired differences' SD, or ``sqrt(s_T² + s_C²)``), at least 3. ``critical``
    is the current band's: it shrinks as seeds are added (toward the Gaussian max-|z| of the curve's
    correlation), so the figure errs on the side of more seeds.
    The pilot's SD is itself noisy (Colas, Sigaud & Oudeyer 2018): treat the figure as a planning guess.

    Raises
    ------
    StatsInputError
        ``width`` not positive, ``critical`` not finite and positive.
    """
    w = float(width)
    if not (math.isfinite(w) and w > 0):
        raise _iv.fail("width", "must be a positive number (metric units)", width)
    if not (math.isfinite(critical) and critical > 0):
        raise _iv.fail("critical", "must be a positive finite number", critical)
    s = float(np.max(np.asarray(spread, dtype=float)))
    return max(3, math.ceil((critical * s / w) ** 2))
