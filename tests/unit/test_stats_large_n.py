"""The verdict at scale (issue 35, item 13): 2,000 and 10,000 seeds per arm, paired and unpaired, give a verdict
instead of an OverflowError. The rank test's floor (the smallest p it can reach) was ``2.0 / 2.0**nz`` and
``2.0 / math.comb(...)``, which overflow above 1,023 pairs and about 515 seeds per arm; both are now in log space
(0.0 where they underflow), and the p-values are scipy's own (``wilcoxon`` / ``mannwhitneyu``, ``method='auto'``,
which switch to the normal approximation at these sizes)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ablate.stats import compare, robust_test
from ablate.stats.effect import _pi_unpaired, mann_whitney_floor
from tests.unit.verdict_inline import analyse_values


def test_mann_whitney_floor_in_log_space() -> None:
    assert mann_whitney_floor(5, 5) == 2 / math.comb(10, 5)  # the exact value, bit for bit, where it fits a float
    for n in (515, 516, 600, 2000):
        want = math.exp(math.log(2) - math.log(math.comb(2 * n, n)))  # math.log takes the big integer itself
        assert mann_whitney_floor(n, n) == pytest.approx(want, rel=1e-9, abs=1e-320)
    with pytest.raises(OverflowError):
        _ = 2.0 / math.comb(2 * 600, 600)  # what the verdict used to compute


@pytest.mark.parametrize("n", [2000, 10_000])
@pytest.mark.parametrize("paired", [False, True])
def test_robust_test_at_scale_equals_scipy(n: int, paired: bool) -> None:
    rng = np.random.default_rng(n + paired)
    c = rng.normal(size=n)
    t = c + rng.normal(0.05, 1.0, n) if paired else rng.normal(0.05, 1.0, n)
    rt = robust_test(t, c, paired=paired)
    want = stats.wilcoxon(t, c, method="auto") if paired else stats.mannwhitneyu(t, c, method="auto")
    assert rt.pvalue == pytest.approx(float(want.pvalue), rel=1e-12)
    assert rt.min_pvalue == 0.0  # 2 / 2^n and 2 / C(2n, n) underflow: no p is out of reach


def test_probability_of_improvement_from_ranks_equals_pairwise() -> None:
    """Above 10^6 pairs P(T>C) comes from mid-ranks; the same number as the pairwise count (ties ½)."""
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 50, 1500).astype(float), rng.integers(0, 50, 1200).astype(float)  # many ties
    gt = sum(int((xi > y).sum()) for xi in x)
    eq = sum(int((xi == y).sum()) for xi in x)
    assert float(_pi_unpaired(x, y)) == pytest.approx((gt + eq / 2) / (x.size * y.size), rel=1e-12)
    assert float(_pi_unpaired(x, y)) == pytest.approx(stats.mannwhitneyu(x, y).statistic / (x.size * y.size),
                                                      rel=1e-12)


@pytest.mark.parametrize("n", [2000, 10_000])
@pytest.mark.parametrize("paired", [False, True])
def test_verdict_at_scale(n: int, paired: bool) -> None:
    """``analyse()`` (what ``ablate verdict`` computes) on two treatments with ``n`` seeds per arm."""
    rng = np.random.default_rng(7 * n + paired)
    shared = rng.normal(size=n) if paired else 0.0
    c = 0.7 + 0.01 * (shared + rng.normal(size=n))
    better = 0.7 + 0.001 + 0.01 * (shared + rng.normal(size=n))
    same = 0.7 + 0.01 * (shared + rng.normal(size=n))
    v = analyse_values(c, [better, same], paired=paired)
    comps = v["comparisons"]
    assert [x["n_treatment"] for x in comps] == [n, n] and all(x["paired"] is paired for x in comps)
    assert comps[0]["verdict"] in ("better", "inconclusive") and comps[1]["verdict"] in ("inconclusive", "better",
                                                                                        "worse")
    assert all(x["robust_min_pvalue"] is not None and x["robust_min_pvalue"] < 1e-300 for x in comps)
    direct = compare(better, c, paired=paired, n_comparisons=2)
    assert comps[0]["pvalue"] == pytest.approx(direct.pvalue, rel=1e-12)
