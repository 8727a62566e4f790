"""The transfer check's statistics on synthetic tasks: a known interaction is found (and flagged in the
right words), and without one the false-positive rate stays at or below α (vectorised simulations)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ablate.judge.transfer import (
    CONSISTENT,
    DIFFERS,
    DOES_NOT_TRANSFER,
    SHRINKS,
    ScaleEffect,
    check_transfer,
    classify,
    finish,
    interaction_pvalue_paired,
    interaction_pvalue_unpaired,
)

ALPHA = 0.05


def _scale(rng: np.random.Generator, scale: int, delta: float, sd: float, n: int = 10,
           noise_c: float = 1.0) -> dict:
    c = rng.normal(0.0, noise_c, n)
    t = c + delta + rng.normal(0.0, sd, n)  # paired by seed: the seed's shared part cancels in T - C
    d = t - c
    ci = stats.ttest_1samp(d, 0).confidence_interval(0.95)
    word = "better" if ci.low > 0 else "worse" if ci.high < 0 else "inconclusive"
    return {"scale": scale, "treatment": dict(enumerate(t)), "control": dict(enumerate(c)),
            "effect": ScaleEffect(scale, float(d.mean()), (ci.low, ci.high), 0.95, word)}


def test_paired_interaction_is_welch_t_on_differences() -> None:
    rng = np.random.default_rng(1)
    d1, d2, d3 = rng.normal(0.3, 0.2, 8), rng.normal(0.0, 0.6, 8), rng.normal(0.1, 0.4, 6)
    assert interaction_pvalue_paired([d1, d2]) == pytest.approx(stats.ttest_ind(d1, d2, equal_var=False).pvalue,
                                                                rel=1e-12)
    # three scales: the smallest pairwise Welch p times the 3 pairs
    pw = [stats.ttest_ind(a, b, equal_var=False).pvalue for a, b in ((d1, d2), (d1, d3), (d2, d3))]
    assert interaction_pvalue_paired([d1, d2, d3]) == pytest.approx(min(1.0, 3 * min(pw)), rel=1e-12)


def test_unpaired_interaction_is_the_hc3_wald_test_by_hand() -> None:
    """Balanced 2x2 design: the model is saturated, every leverage is h = 1/n, so HC3 (MacKinnon & White 1985)
    estimates each cell mean's variance as Σ e² / (1 - h)² / n² = s² / (n - 1); the Wald F of the contrast
    (T1 - C1) - (T2 - C2) is its square over Σ s²_cell / (n - 1), on (1, 4n - 4) df. Unequal noise by cell."""
    rng = np.random.default_rng(2)
    n = 6
    t1, c1, t2, c2 = (rng.normal(m, sd, n) for m, sd in ((1.0, 1.0), (0.0, 1.0), (0.2, 3.0), (0.0, 3.0)))
    contrast = (t1.mean() - c1.mean()) - (t2.mean() - c2.mean())
    var = sum(np.var(x, ddof=1) for x in (t1, c1, t2, c2)) / (n - 1)
    p = stats.f.sf(contrast ** 2 / var, 1, 4 * n - 4)
    assert interaction_pvalue_unpaired([t1, t2], [c1, c2]) == pytest.approx(p, rel=1e-9)


def test_unpaired_interaction_equals_statsmodels_formula_route() -> None:
    """Three scales, unbalanced: the same p as statsmodels' formula API (``y ~ C(arm) * C(scale)``, HC3,
    ``wald_test_terms``), an independent route through the library."""
    import pandas as pd
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(3)
    ts = [rng.normal(0.0, sd, n) for sd, n in ((1.0, 5), (2.0, 4), (3.0, 6))]
    cs = [rng.normal(0.0, sd, n) for sd, n in ((1.0, 6), (2.0, 5), (3.0, 4))]
    rows = [(v, arm, s) for s in range(3) for arm, vals in ((1, ts[s]), (0, cs[s])) for v in vals]
    df = pd.DataFrame(rows, columns=["y", "arm", "scale"])
    fit = smf.ols("y ~ C(arm) * C(scale)", data=df).fit(cov_type="HC3", use_t=True)  # use_t: the F form
    terms = fit.wald_test_terms(scalar=True).table
    want = float(terms.loc["C(arm):C(scale)", "pvalue"])
    assert interaction_pvalue_unpaired(ts, cs) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("deltas, flag", [
    ((1.0, -1.0), DOES_NOT_TRANSFER),            # sign flip between two scales
    ((1.5, 0.2, -0.8), DOES_NOT_TRANSFER),       # flips by the largest of three
    ((2.0, 1.0, 0.1), SHRINKS),                  # same sign, falls at every step
    ((-2.0, -0.8), SHRINKS),                     # a harmful effect that fades
    ((0.2, 1.5, 0.4), DIFFERS),                  # significant but not monotone
])
def test_known_interaction_is_found_and_worded(deltas: tuple[float, ...], flag: str) -> None:
    rng = np.random.default_rng(3)
    per_scale = [_scale(rng, s, d, sd=0.3) for s, d in zip((32, 128, 512), deltas, strict=False)]
    (r,) = finish([check_transfer("lr=0.1", per_scale, paired=True)], ALPHA, "task.hidden")
    assert r.pvalue is not None and r.pvalue < 1e-3
    assert r.flag == flag
    assert flag in r.message and "task.hidden=32" in r.message


def test_unpaired_interaction_is_found() -> None:
    rng = np.random.default_rng(4)
    per_scale = [_scale(rng, s, d, sd=0.3, noise_c=0.3) for s, d in ((32, 1.0), (128, -1.0))]
    (r,) = finish([check_transfer("lr=0.1", per_scale, paired=False)], ALPHA, "task.hidden")
    assert "HC3" in r.test and r.pvalue < 1e-3 and r.flag == DOES_NOT_TRANSFER


def test_no_interaction_is_consistent() -> None:
    rng = np.random.default_rng(5)
    per_scale = [_scale(rng, s, 0.5, sd=0.3) for s in (32, 128)]
    (r,) = finish([check_transfer("lr=0.1", per_scale, paired=True)], ALPHA, "task.hidden")
    assert r.flag == CONSISTENT and r.pvalue_adjusted >= ALPHA


@pytest.mark.parametrize("n, sds", [(3, (1.0, 1.0)), (5, (0.5, 2.0)), (10, (1.0, 1.0, 1.0)), (4, (0.1, 0.5, 2.0)),
                                    (3, (1.0, 1.0, 1.0, 1.0))])
def test_paired_aa_false_positive_rate_at_most_alpha(n: int, sds: tuple[float, ...]) -> None:
    # A/A: the same effect (0.7) at every scale, noise growing with scale; 20000 data sets in one call
    rng = np.random.default_rng(6)
    n_sim = 20000
    diffs = [0.7 + rng.normal(0.0, sd, (n_sim, n)) for sd in sds]
    p = interaction_pvalue_paired(diffs)
    rate = float(np.mean(p < ALPHA))
    se = np.sqrt(ALPHA * (1 - ALPHA) / n_sim)
    assert rate <= ALPHA + 3 * se, rate
    assert rate > ALPHA / 3  # a valid test, not one that never rejects


@pytest.mark.parametrize(("k", "n"), [(2, 3), (3, 5)])
def test_unpaired_aa_false_positive_rate_at_most_alpha(k: int, n: int) -> None:
    """A/A across scales whose noise grows 1:1, 1:2, 1:3 (both arms): the HC3 test stays at or below α, where the
    classic OLS F-test (one noise level) runs above it on the same data sets at 1:3 (issue 27: 0.065-0.076)."""
    import statsmodels.api as sm

    n_sim = 250
    se = np.sqrt(ALPHA * (1 - ALPHA) / n_sim)
    rates, ols_rates = {}, {}
    for ratio in (1, 2, 3):
        rng = np.random.default_rng(100 * k + 10 * n + ratio)
        sds = np.linspace(1.0, ratio, k)
        hits = ols_hits = 0
        for _ in range(n_sim):
            ts = [rng.normal(0.5, sd, n) for sd in sds]
            cs = [rng.normal(0.0, sd, n) for sd in sds]
            hits += interaction_pvalue_unpaired(ts, cs) < ALPHA
            y = np.concatenate([x for t, c in zip(ts, cs, strict=True) for x in (t, c)])
            arm = np.concatenate([np.r_[np.ones(n), np.zeros(n)] for _ in range(k)])
            sc = np.repeat(np.arange(k), 2 * n)
            dm = np.column_stack([(sc == s).astype(float) for s in range(1, k)])
            add = np.column_stack([np.ones_like(arm), arm, dm])
            full = np.column_stack([add, dm * arm[:, None]])
            ols_hits += sm.OLS(y, full).fit().compare_f_test(sm.OLS(y, add).fit())[1] < ALPHA
        rates[ratio], ols_rates[ratio] = hits / n_sim, ols_hits / n_sim
    assert len(rates) == 3
    assert max(rates.values()) <= ALPHA + 3 * se, rates
    assert min(rates.values()) > 0.005, rates  # a test that rejects, not one that never can
    assert ols_rates[3] >= rates[3], (ols_rates, rates)


def test_power_with_a_real_interaction() -> None:
    # a flip of 1 SD of the differences at n = 10 per scale: found in most data sets
    rng = np.random.default_rng(8)
    diffs = [rng.normal(0.5, 1.0, (5000, 10)), rng.normal(-0.5, 1.0, (5000, 10))]
    assert float(np.mean(interaction_pvalue_paired(diffs) < ALPHA)) > 0.5


def test_holm_over_treatments_and_opposite_verdicts() -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(9)
    a = check_transfer("a", [_scale(rng, s, d, 0.3) for s, d in ((1, 1.0), (2, 0.2))], paired=True)
    b = check_transfer("b", [_scale(rng, s, d, 0.3) for s, d in ((1, 0.5), (2, 0.45))], paired=True)
    raw = [a.pvalue, b.pvalue]
    finish([a, b], ALPHA, "k")
    assert [a.pvalue_adjusted, b.pvalue_adjusted] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    # significantly better at one scale and significantly worse at another: does not transfer, whatever p says
    effects = [ScaleEffect(1, 1.0, (0.5, 1.5), 0.95, "better"), ScaleEffect(2, -1.0, (-1.5, -0.5), 0.95, "worse")]
    assert classify(effects, 0.2, ALPHA) == DOES_NOT_TRANSFER


def test_too_few_seeds_is_not_tested() -> None:
    per_scale = [{"scale": s, "treatment": {0: 1.0}, "control": {0: 0.0},
                  "effect": ScaleEffect(s, 1.0, None, None, "insufficient data")} for s in (1, 2)]
    (r,) = finish([check_transfer("a", per_scale, paired=True)], ALPHA, "k")
    assert r.pvalue is None and r.flag == "not tested" and "at least 2" in r.message


def _constant(diff_by_scale: tuple[float, ...]) -> list[dict]:
    """A deterministic task: every seed gives the same treatment - control difference at a scale."""
    return [{"scale": s, "treatment": {k: 1.0 + d for k in range(3)}, "control": {k: 1.0 for k in range(3)},
             "effect": ScaleEffect(s, d, (d, d), 0.95, "better")} for s, d in enumerate(diff_by_scale, 1)]


def test_a_deterministic_task_is_judged_without_a_warning_and_says_why_when_untested() -> None:
    """The paired differences of a task with no seed noise have no spread: scipy's Welch t is NaN where they are
    equal at every scale (0/0) and p = 0 where they differ (t = ±inf), and scipy warns of precision loss in both;
    the warning reached the user's terminal from `ablate -m ... scale.key=...` (filterwarnings=error here)."""
    same = check_transfer("a", _constant((2.0, 2.0)), paired=True)
    apart = check_transfer("b", _constant((2.0, 3.0)), paired=True)
    assert same.pvalue is None and apart.pvalue == 0.0  # scipy's own values: NaN (not tested) and 0
    (r,) = finish([same], ALPHA, "k")
    assert r.flag == "not tested" and "every seed gave the same difference at every scale" in r.message, r.message
    # three scales: the pair that is equal has no test, the pairs that differ still decide (p = 3 x 0)
    assert check_transfer("c", _constant((2.0, 2.0, 2.0)), paired=True).pvalue is None
    assert check_transfer("d", _constant((2.0, 2.0, 3.0)), paired=True).pvalue == 0.0
    # one scale with spread: Welch's t is defined (the other scale's variance is 0), and no warning either
    noisy = _constant((2.0, 2.0))
    noisy[1]["treatment"] = {0: 3.5, 1: 3.6, 2: 3.4}  # differences 2.5, 2.6, 2.4 against 2, 2, 2
    got = check_transfer("e", noisy, paired=True).pvalue
    t = 0.5 / (0.1 / np.sqrt(3))  # by hand: Welch's SE is the noisy scale's alone, its df n - 1 = 2
    assert got == pytest.approx(2 * stats.t.sf(t, 2), rel=1e-9)
