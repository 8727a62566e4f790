"""A/A simulation of the curve verdict (issue 38) through its public path, :func:`ablate.stats.curve_band`:
the rate of "better or worse anywhere on the curve" must stay at most alpha (+ 2 MC SE) in every cell, while
the pointwise approach (an uncorrected t-test at every point, Colas et al. 2019) is measured beside it; under a
difference, the band's coverage of the whole true difference curve (>= 1 - alpha) and its power against a
Bonferroni correction over points.

Curves: ``y_i(x) = mu_arm(x) + e_i(x)``, with ``e`` AR(1) along the steps (correlation ``rho`` between
neighbouring points, unit variance) and three shapes of seed noise:

- ``normal``: Gaussian innovations;
- ``heavy``: Student-t innovations with 3 df (scaled to unit variance): heavy tails;
- ``seed_skew``: Gaussian innovations plus a per-seed level drawn from a centred lognormal (sigma 1, scaled
  to unit SD): a few seeds far off, on one side.

Paired designs add a per-seed AR(1) curve shared by both arms (the same seed's initialisation and data
order), so half the variance is shared. Every rng is seeded: the test is deterministic. The full grid
(lengths 50-500, rho 0-0.95, N = 3..50) is benchmarks/curve_aa.py, which imports these functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from ablate.stats import curve_band

ALPHA = 0.05
SHAPES = ("normal", "heavy", "seed_skew")


def ar1(rng: np.random.Generator, shape: tuple[int, ...], length: int, rho: float, kind: str) -> np.ndarray:
    """AR(1) noise along the last axis, unit stationary variance; innovations by ``kind``."""
    size = (*shape, length)
    innov = rng.standard_t(3, size) / math.sqrt(3.0) if kind == "heavy" else rng.standard_normal(size)
    out = np.empty(size)
    out[..., 0] = innov[..., 0]
    scale = math.sqrt(1.0 - rho ** 2)
    for k in range(1, length):
        out[..., k] = rho * out[..., k - 1] + scale * innov[..., k]
    if kind == "seed_skew":
        s = 1.0
        level = (rng.lognormal(0.0, s, shape) - math.exp(s ** 2 / 2)) / math.sqrt((math.exp(s ** 2) - 1)
                                                                              * math.exp(s ** 2))
        out += level[..., None]
    return out


def draw(rng: np.random.Generator, reps: int, n: int, length: int, rho: float, kind: str, paired: bool,
         effect: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` simulated ablations: treatment and control curves, each (reps, n, length)."""
    t = ar1(rng, (reps, n), length, rho, kind)
    c = ar1(rng, (reps, n), length, rho, kind)
    if paired:
        shared = ar1(rng, (reps, n), length, rho, "normal")
        t, c = t + shared, c + shared
    if effect is not None:
        t = t + effect
    return t, c


@dataclass(frozen=True)
class Cell:
    """Rates over the replications of one cell."""

    reps: int
    anywhere: float  # the band excludes 0 somewhere (better or worse anywhere)
    pointwise: float  # an uncorrected t-test at alpha marks some point
    bonferroni: float  # a t-test at alpha / G marks some point
    coverage: float  # the band holds the true difference at every point
    better: float  # the band is above 0 somewhere (power, under an effect)
    bonferroni_better: float

    @property
    def se(self) -> float:
        """Monte-Carlo SE of a rate near alpha."""
        return math.sqrt(ALPHA * (1 - ALPHA) / self.reps)


def run_cell(n: int, length: int, rho: float, kind: str, paired: bool, *, reps: int, seed: int,
             effect: np.ndarray | None = None, n_resamples: int = 199) -> Cell:
    """One cell: ``reps`` ablations drawn, each judged by :func:`ablate.stats.curve_band` (the verdict's own
    call, with ``n_resamples`` random permutations: the test is exact for any number of them)."""
    rng = np.random.default_rng(seed)
    t, c = draw(rng, reps, n, length, rho, kind, paired, effect)
    truth = np.zeros(length) if effect is None else effect
    counts = np.zeros(6)
    for r in range(reps):
        b = curve_band(t[r], c[r], paired=paired, alpha=ALPHA, n_resamples=n_resamples, rng=rng)
        bonf = b.p_pointwise * length <= ALPHA
        counts += [((b.low > 0) | (b.high < 0)).any(), (b.p_pointwise <= ALPHA).any(), bonf.any(),
                   ((b.low <= truth) & (truth <= b.high)).all(), (b.low > 0).any(), (bonf & (b.diff > 0)).any()]
    return Cell(reps, *(counts / reps))


def warmup_effect(length: int, size: float) -> np.ndarray:
    """A warmup-like difference: ``size`` (in noise SDs) at the start, decaying to 0 over the first fifth."""
    return size * np.exp(-np.arange(length) / (length / 10))


# -- the seeded subset of benchmarks/curve_aa.py's grid ------------------------------------------------------------
AA_CELLS = [  # (n, length, rho, kind, paired)
    (3, 50, 0.0, "normal", True),
    (3, 200, 0.5, "heavy", False),
    (5, 500, 0.95, "seed_skew", False),
    (6, 100, 0.0, "normal", True),
    (10, 50, 0.9, "heavy", True),
    (10, 200, 0.0, "seed_skew", True),
    (20, 100, 0.5, "normal", False),
]


@pytest.mark.parametrize(("n", "length", "rho", "kind", "paired"), AA_CELLS)
def test_aa_anywhere_rate_at_most_alpha(n: int, length: int, rho: float, kind: str, paired: bool) -> None:
    cell = run_cell(n, length, rho, kind, paired, reps=300 if n * length <= 2000 else 150,
                    seed=n * 1000 + length + int(rho * 100) + paired)
    assert cell.anywhere <= ALPHA + 2 * cell.se, cell
    assert cell.coverage >= 1 - ALPHA - 2 * cell.se  # under no difference, coverage is 1 - the rate
    if n >= 10 and rho < 0.9:  # many nearly independent points: the pointwise approach marks some almost surely
        assert cell.pointwise > 0.5, cell


def test_coverage_and_power_against_bonferroni_under_a_warmup_difference() -> None:
    length = 100
    effect = warmup_effect(length, 1.5)
    cell = run_cell(15, length, 0.9, "normal", True, reps=300, seed=77, effect=effect)
    assert cell.coverage >= 1 - ALPHA - 2 * cell.se, cell
    # correlated points: the permutation band's critical value is below Bonferroni's, so it finds the region
    # more often
    assert cell.better > cell.bonferroni_better + 0.05, cell
