"""Two-stage adaptive seeds: the inverse-normal combination test behind ``ablate extend`` (issue 39).

An ablation that looked at its first N seeds per arm and then chose to run more (K in all) has chosen its
sample size from the data; pooling the K seeds and testing them as a fixed-N sample is optional stopping and
lets the false-positive rate exceed α (docs/verdict.md, Extending an ablation). The inverse-normal combination
test keeps α whatever rule chose K: each stage is tested on its own seeds only, and the stages' one-sided
p-values are combined with weights fixed before the stage-1 data were seen,

    Z = w1 Φ⁻¹(1 - p1) + w2 Φ⁻¹(1 - p2),  w1² + w2² = 1,

which is standard normal under "no effect" because p2 is uniform given stage 1 (its seeds are new), however K
was chosen (Bauer & Köhne 1994, Biometrics 50; Lehmacher & Wassmer 1999, Biometrics 55; Cui, Hung & Wang 1999,
Biometrics 55).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ablate.stats import _iv

#: The seeds per arm the stage weights plan for: ablate's firm threshold (:data:`ablate.stats.core.FIRM_FROM`),
#: the N the seed advice asks an indicative verdict to reach. Fixed before any data: it decides the weights.
REFERENCE_SEEDS = 20
#: Fewest seeds per arm a stage needs for its own t-test (two values per arm: one degree of freedom).
MIN_STAGE_SEEDS = 2
#: The design's name as the verdict states it.
METHOD = "two-stage inverse-normal combination (Lehmacher & Wassmer 1999)"


def stage_weights(n1: int, *, reference: int = REFERENCE_SEEDS) -> tuple[float, float]:
    """The inverse-normal weights of the two stages, from the stage-1 seed count alone.

    Parameters
    ----------
    n1 : int
        Seeds per arm in stage 1 (the ablation's planned N, fixed before any trial ran).
    reference : int
        The total seeds per arm the weights plan for; stage 2 is weighted as if it had
        ``max(n1, reference - n1)`` seeds.

    Returns
    -------
    (float, float)
        ``w1 = √(n1 / max(2 n1, reference))`` and ``w2 = √(1 - w1²)``: for N = 3, (0.387, 0.922); for N = 10,
        (0.707, 0.707); for N = 20 and more, (0.707, 0.707).

    Raises
    ------
    StatsInputError
        When ``n1`` or ``reference`` is not a positive integer.

    Notes
    -----
    The combination test keeps α only when the weights do not depend on the stage-1 data (Lehmacher & Wassmer
    1999, sec. 2). Weights from the K the user chose after the look would: measured in docs/verdict.md
    (Extending an ablation) beside these. A stage 2 whose size differs from the planned one loses a little power
    (the weights are not proportional to the information), never α.
    """
    n = _iv.positive_int(n1, "n1", lo=1)
    ref = _iv.positive_int(reference, "reference", lo=1)
    w1 = math.sqrt(n / max(2 * n, ref))
    return w1, math.sqrt(1.0 - w1 * w1)


@dataclass(frozen=True)
class TwoStage:
    """Outcome of :func:`two_stage_batch`, arrays of shape (batch,).

    Attributes
    ----------
    p1, p2 : float arrays
        One-sided p-value of each stage for "the treatment is better" (goal-normalised): Welch's or the paired
        t-test's on that stage's seeds alone; 0.5 (no evidence) where a stage has fewer than
        :data:`MIN_STAGE_SEEDS` seeds per arm (or pairs) or no spread.
    tested1, tested2 : bool arrays
        Whether each stage had a test (False: its p is the 0.5 stand-in).
    z : float array
        The combined statistic w1 Φ⁻¹(1 - p1) + w2 Φ⁻¹(1 - p2).
    pvalue : float array
        Two-sided p-value of the combination test, 2 min(Φ(-z), Φ(z)).
    weights : (float, float)
    """

    p1: np.ndarray
    p2: np.ndarray
    tested1: np.ndarray
    tested2: np.ndarray
    z: np.ndarray
    pvalue: np.ndarray
    weights: tuple[float, float]


def _stage_p(t: np.ndarray, c: np.ndarray, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """One-sided p ("treatment greater") of one stage per row; 0.5 and False where it cannot be tested."""
    from scipy import stats  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    b = t.shape[0]
    p = np.full(b, 0.5)
    tested = np.zeros(b, bool)
    if paired:
        ok = ~np.isnan(t) & ~np.isnan(c)
        n_t = n_c = ok.sum(1)
    else:
        n_t, n_c = (~np.isnan(t)).sum(1), (~np.isnan(c)).sum(1)
    enough = (n_t >= MIN_STAGE_SEEDS) & (n_c >= MIN_STAGE_SEEDS)
    clean = enough & ~np.isnan(t).any(1) & ~np.isnan(c).any(1)
    with warnings.catch_warnings():  # a constant stage: t is NaN, left at the 0.5 stand-in below
        warnings.simplefilter("ignore", RuntimeWarning)
        if clean.any():  # the vectorised path (every simulation row)
            res = (stats.ttest_rel(t[clean], c[clean], axis=1, alternative="greater") if paired
                   else stats.ttest_ind(t[clean], c[clean], axis=1, equal_var=False, alternative="greater"))
            p[clean] = res.pvalue
        for i in np.flatnonzero(enough & ~clean):  # failed trials: each row with its own finite values
            if paired:
                keep = ~np.isnan(t[i]) & ~np.isnan(c[i])
                p[i] = stats.ttest_rel(t[i][keep], c[i][keep], alternative="greater").pvalue
            else:
                p[i] = stats.ttest_ind(t[i][~np.isnan(t[i])], c[i][~np.isnan(c[i])], equal_var=False,
                                       alternative="greater").pvalue
    tested = enough & np.isfinite(p)
    p[~tested] = 0.5
    return p, tested


def two_stage_batch(t1: Any, c1: Any, t2: Any, c2: Any, *, n1: int, paired: bool = False,
                    goal: str = "maximize", reference: int = REFERENCE_SEEDS,
                    weights: tuple[float, float] | None = None) -> TwoStage:
    """The two-stage combination test over a batch of ablations (the verdict calls it with one row).

    Parameters
    ----------
    t1, c1 : array_like, shape (batch, n_stage1) or (n_stage1,)
        Treatment and control values of the stage-1 seeds, in metric units; NaN = failed trial. Paired: column
        j is the same seed in both.
    t2, c2 : array_like, shape (batch, n_stage2) or (n_stage2,)
        The same for the stage-2 seeds (those the extension ran).
    n1 : int
        The planned stage-1 seeds per arm, which fixes the weights (:func:`stage_weights`).
    paired : bool
        Paired t-test (``scipy.stats.ttest_rel``) in each stage, or Welch (``ttest_ind(equal_var=False)``), as
        the design says (:func:`ablate.stats.pair_by_seed`): the same choice for both stages.
    goal : {"maximize", "minimize"}
        The metric's direction: each stage's one-sided p is for "the treatment is better".
    reference : int
        See :func:`stage_weights`.
    weights : (float, float), optional
        Other weights (w1² + w2² = 1), for measuring them: the verdict never passes any (docs/verdict.md measures
        weights taken from the K chosen after the look, which break α).

    Returns
    -------
    TwoStage

    Raises
    ------
    StatsInputError
        When an argument breaks its rule.

    Notes
    -----
    The stage p-values are combined with ``scipy.stats.combine_pvalues(method="stouffer", weights=...)``,
    the weighted inverse-normal method, one-sided; the two-sided p doubles the smaller tail, which keeps α
    two-sided because z is N(0, 1) under "no effect" (Lehmacher & Wassmer 1999; Wassmer & Brannath 2016,
    *Group Sequential and Confirmatory Adaptive Designs in Clinical Trials*, ch. 6). A stage without a test
    enters as p = 0.5 (z = 0): conservative, never anti-conservative.
    """
    from scipy import stats  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    sign = _iv.goal(goal)
    arrays = [_iv.values_2d(x, name) for x, name in ((t1, "t1"), (c1, "c1"), (t2, "t2"), (c2, "c2"))]
    rows = {a.shape[0] for a in arrays}
    if len(rows) != 1:
        raise _iv.fail("t2", "must have as many rows as t1, c1 and c2", sorted(rows))
    if not isinstance(paired, bool | np.bool_):
        raise _iv.fail("paired", "must be True or False", paired)
    if paired and (arrays[0].shape != arrays[1].shape or arrays[2].shape != arrays[3].shape):
        raise _iv.fail("c1", "must be aligned with t1 (and c2 with t2) by seed when paired", arrays[1].shape)
    w = stage_weights(n1, reference=reference)
    if weights is not None:
        w1, w2 = (float(x) for x in weights)
        if not (w1 > 0 and w2 > 0 and abs(w1 * w1 + w2 * w2 - 1) < 1e-9):
            raise _iv.fail("weights", "must be two positive numbers whose squares add up to 1", weights)
        w = (w1, w2)
    s1t, s1c, s2t, s2c = (sign * a for a in arrays)
    p1, ok1 = _stage_p(s1t, s1c, bool(paired))
    p2, ok2 = _stage_p(s2t, s2c, bool(paired))
    combined = stats.combine_pvalues(np.stack([p1, p2], axis=1), method="stouffer", weights=np.array(w), axis=1)
    z = np.asarray(combined.statistic, float).reshape(-1)
    pvalue = np.minimum(1.0, 2 * np.minimum(stats.norm.sf(z), stats.norm.cdf(z)))
    return TwoStage(p1=p1, p2=p2, tested1=ok1, tested2=ok2, z=z, pvalue=pvalue, weights=w)
