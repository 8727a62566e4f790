"""The verdict on the metric shapes ML produces (issue 14): unequal spread with skew, one decision with one
interval, float noise and scale, 0/1 metrics, the P(T>C) interval.

Simulations are vectorised through the code that writes the verdict (:func:`ablate.stats.decide_batch`,
the interval functions of :mod:`ablate.stats.pi_interval`), with fixed seeds. Monte-Carlo tolerance: with R
replications the standard error of a rate p is √(p(1-p)/R): 0.0034 at p = 0.05 and 0.0034 at a coverage of
0.95, R = 4000. A cell passes at <= alpha + 3 SE (one cell in ~700 would fail by chance at a true rate of
exactly alpha; seeded, so never flaky); pooled rates (R x cells replications) are held to the issue's
0.056 directly, which is > 6 pooled SE above 0.05.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablate.stats import VERDICTS, adjust_comparisons, compare, decide_batch, summarize
from ablate.stats.compare import p_is
from ablate.stats.multiplicity import holm, stage_levels
from ablate.stats.pi_interval import clopper_pearson_interval, newcombe_interval
from ablate.stats.shape import skew_spread

ALPHA = 0.05
R = 4000
SE = math.sqrt(ALPHA * (1 - ALPHA) / R)
BETTER, WORSE = VERDICTS.index("better"), VERDICTS.index("worse")
NS = (3, 5, 10, 20, 50, 100)


def shape(rng: np.random.Generator, dist: str, size: tuple[int, ...]) -> np.ndarray:
    """Mean 0, SD 1 draws. lognormal: σ = 1 (skewness 6.2); bimodal: 20% of seeds in a failure mode 5 SD
    below the rest (RL-like returns); t3: Student t with 3 df (heavy tails)."""
    if dist == "lognormal":
        return (rng.lognormal(0.0, 1.0, size) - math.exp(0.5)) / math.sqrt((math.e - 1) * math.e)
    if dist == "bimodal":
        low = rng.random(size) < 0.2
        return (np.where(low, rng.normal(-5.0, 1.0, size), rng.normal(0.0, 1.0, size)) + 1.0) / math.sqrt(5.0)
    if dist == "t3":
        return rng.standard_t(3, size) / math.sqrt(3.0)
    return rng.normal(size=size)


def aa(dist: str, ratio: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """An A/A pair of arms with equal means (0.7) and SDs in ratio 1:``ratio`` (treatment the wider)."""
    rng = np.random.default_rng(seed)
    return 0.7 + 0.01 * ratio * shape(rng, dist, (R, n)), 0.7 + 0.01 * shape(rng, dist, (R, n))


def fp_rate(t: np.ndarray, c: np.ndarray) -> float:
    return float(np.isin(decide_batch(t, c, alpha=ALPHA).verdict, (BETTER, WORSE)).mean())


# -- 1. unequal spread -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dist", ["normal", "t3"])
def test_aa_unequal_spread_symmetric_shapes(dist: str) -> None:
    """SD ratio 1:2 and 1:3, N = 3..100: every cell <= alpha + 3 SE, the pooled rate <= 0.056."""
    rates = {(r, n): fp_rate(*aa(dist, r, n, seed=100 * n + r)) for r in (2, 3) for n in NS}
    assert max(rates.values()) <= ALPHA + 3 * SE, rates
    assert np.mean(list(rates.values())) <= 0.056, rates


SKEWED_GRID = [(d, r, n) for d in ("lognormal", "bimodal", "t3") for r in (2, 3) for n in NS]


def test_aa_unequal_spread_whole_grid_pooled() -> None:
    """Lognormal, bimodal and t3 arms, SD ratio 1:2 and 1:3, N = 3..100 (36 cells): the pooled verdict-level
    false-positive rate is <= 0.056 (measured 0.051; Welch alone 0.064, docs/verdict.md)."""
    rates = [fp_rate(*aa(d, r, n, seed=100 * n + r)) for d, r, n in SKEWED_GRID]
    assert np.mean(rates) <= 0.056, rates


@pytest.mark.parametrize("dist", ["lognormal", "bimodal"])
def test_aa_unequal_spread_skewed_from_n20(dist: str) -> None:
    """Skewed or bimodal arms, SD ratio 1:2 and 1:3, N = 20, 50, 100: the skew guard brings every cell to
    <= alpha + 3 SE (Welch alone: up to 0.102 for lognormal 1:3 at N = 20)."""
    rates = {(r, n): fp_rate(*aa(dist, r, n, seed=100 * n + r)) for r in (2, 3) for n in (20, 50, 100)}
    assert max(rates.values()) <= ALPHA + 3 * SE, rates
    welch = {(r, n): float((stats.ttest_ind(*aa(dist, r, n, seed=100 * n + r), axis=1, equal_var=False).pvalue
                            < ALPHA).mean()) for r, n in ((3, 20), (2, 50))}
    assert max(welch.values()) > ALPHA + 3 * SE, welch  # the guard is what keeps these cells in


@pytest.mark.xfail(strict=True, reason="known limit (those verdicts are marked indicative: test_stats_firm.py): "
                                       "at N = 5-10 seeds per arm the skew of lognormal/bimodal "
                                       "arms is not visible, and no rule measured keeps alpha there with 95% of "
                                       "Welch's power (docs/verdict.md); measured 0.066-0.136 at N = 5-10, 0.070 "
                                       "and 0.108 at N = 3 (ratio 1:3)")
def test_aa_unequal_spread_skewed_small_n_known_limit() -> None:
    rates = {(d, r, n): fp_rate(*aa(d, r, n, seed=100 * n + r))
             for d in ("lognormal", "bimodal") for r in (2, 3) for n in (3, 5, 10)}
    assert max(rates.values()) <= ALPHA + 3 * SE, rates


def test_skew_spread_flag_is_rare_on_normal_data() -> None:
    """The flag must mean something: on equal-spread normal arms it fires in under 5% of ablations at N = 10."""
    rng = np.random.default_rng(3)
    assert skew_spread(rng.normal(size=(R, 10)), rng.normal(size=(R, 10))).mean() < 0.05


@pytest.mark.parametrize("paired", [False, True])
def test_skew_guard_is_rare_on_normal_data(paired: bool) -> None:
    """On normal arms the guard fires at about its one-sided level (D'Agostino z >= 1.96: 2.5%), at most 3.5%;
    paired on arms that share nothing it looks twice (the differences and the arms' residuals, the larger z), at
    most 2 x 2.5% = 5%, and it measured 3.0-4.0% (docs/verdict.md)."""
    rng = np.random.default_rng(5)
    for n in (10, 20, 50):
        t, c = rng.normal(0.3, 1.0, (R, n)), rng.normal(0.0, 1.0, (R, n))
        fired = float((decide_batch(t, c, paired=paired).guard_factor > 1).mean())
        assert 0.005 <= fired <= (0.05 if paired else 0.035), (n, fired)


def test_paired_skew_guard_values() -> None:
    """Paired, the guard's z is the larger of the differences' z and the arms' (unpaired) z, both from
    ``scipy.stats.skewtest``, unless the arms evidently share variation (one-sided ``scipy.stats.pearsonr`` p < 0.05),
    where it is the differences' alone. SKEW_T / SKEW_C as 10 pairs: the differences hide the skew (z = 0.96), the
    arms show it (2.885), ρ̂ = -0.43: the guard fires on the arms' z."""
    t, c = np.asarray(SKEW_T), np.asarray(SKEW_C)
    d = t - c
    z_d = -np.sign(d.mean()) * stats.skewtest(d).statistic
    res = [(x - x.mean()) / x.std(ddof=1) for x in (t, c)]
    z_arms = stats.skewtest(np.concatenate(res)).statistic  # T (the wider arm) is below C: the tail is the other side
    assert z_d == pytest.approx(0.9625, abs=1e-4) and z_arms == pytest.approx(2.885, abs=1e-3)
    assert stats.pearsonr(t, c, alternative="greater").pvalue > 0.05
    r = compare(t, c, paired=True)
    assert r.paired and r.skew_z == pytest.approx(max(z_d, z_arms), rel=1e-9) and r.guard_factor == 10
    assert r.pvalue_adjusted == pytest.approx(10 * stats.ttest_rel(t, c).pvalue, rel=1e-9)
    # the same treatment against a control that shares its seeds' variation (the control = T less 0.01, plus noise):
    # the arms' skew is common to both and cancels in T - C, so only the differences' z counts
    shared = t - 0.01 + 0.004 * np.random.default_rng(4).standard_normal(10)
    d = t - shared
    assert stats.pearsonr(t, shared, alternative="greater").pvalue < 0.05
    s = compare(t, shared, paired=True)
    assert s.skew_z == pytest.approx(-np.sign(d.mean()) * stats.skewtest(d).statistic, rel=1e-9)
    assert s.guard_factor == 1 and s.pvalue_adjusted == pytest.approx(stats.ttest_rel(t, shared).pvalue, rel=1e-9)


def test_paired_guard_costs_nothing_when_a_skewed_seed_effect_is_shared() -> None:
    """A design that shares randomness with a skewed seed effect common to both arms (lognormal, ρ = 0.8; normal own
    noise), Δ = 0.5 SD of an arm, N = 20: T - C is symmetric, so the guard fires at about its normal rate (<= 5%)
    and the verdict keeps >= 97% of plain scipy paired t's power on the same draws (it measured 0.909 vs 0.917 at
    20,000 replications; the arms' z alone would fire in a third of them, docs/verdict.md)."""
    rng = np.random.default_rng(17)
    seed_effect = math.sqrt(0.8) * shape(rng, "lognormal", (R, 20))
    t = 0.5 + seed_effect + math.sqrt(0.2) * rng.standard_normal((R, 20))
    c = seed_effect + math.sqrt(0.2) * rng.standard_normal((R, 20))
    r = decide_batch(t, c, paired=True)
    ref = stats.ttest_rel(t, c, axis=1)
    plain = float(((ref.pvalue < ALPHA) & (ref.statistic > 0)).mean())
    assert float((r.guard_factor > 1).mean()) <= 0.05
    assert float((r.verdict == BETTER).mean()) >= 0.97 * plain and plain > 0.8, plain


def test_power_equals_welch_at_n10() -> None:
    """Normal data, N = 10, Δ = 1 SD: the verdict's power is Welch's (spec A10: 0.56), not below 95% of it."""
    rng = np.random.default_rng(11)
    t, c = rng.normal(1.0, 1.0, (R, 10)), rng.normal(0.0, 1.0, (R, 10))
    power = float((decide_batch(t, c, alpha=ALPHA).verdict == BETTER).mean())
    welch = stats.ttest_ind(t, c, axis=1, equal_var=False)
    ref = float(((welch.pvalue < ALPHA) & (welch.statistic > 0)).mean())
    assert power >= 0.95 * ref
    assert power == pytest.approx(0.56, abs=3 * math.sqrt(0.56 * 0.44 / R))


@pytest.mark.parametrize("rho", [0.0, 0.5])
def test_power_paired_at_n10(rho: float) -> None:
    """Paired normal data, N = 10, Δ = 1 SD, arms correlated rho: at least 95% of the paired t's power."""
    rng = np.random.default_rng(13)
    c = rng.normal(0.0, 1.0, (R, 10))
    t = 1.0 + rho * c + math.sqrt(1 - rho**2) * rng.normal(0.0, 1.0, (R, 10))
    power = float((decide_batch(t, c, paired=True, alpha=ALPHA).verdict == BETTER).mean())
    ref_t = stats.ttest_rel(t, c, axis=1)
    ref = float(((ref_t.pvalue < ALPHA) & (ref_t.statistic > 0)).mean())
    assert ref > 0.4 and power >= 0.95 * ref, (power, ref)


# A skewed ablation (N = 10): the treatment is 3x wider and right-skewed, its long tail missing, so it looks lower.
SKEW_T = [0.741, 0.693, 0.668, 0.659, 0.655, 0.681, 0.664, 0.663, 0.675, 0.679]
SKEW_C = [0.685, 0.709, 0.685, 0.748, 0.702, 0.690, 0.722, 0.694, 0.703, 0.695]


def test_skew_guard_values() -> None:
    """Welch p = 0.021 < 0.05, but the values are skewed against Δ (z = 2.89): the decision uses p x 10, the CI
    shown is scipy's 99.5% Welch interval (it includes 0) and the verdict is inconclusive, with its reason."""
    t, c = np.asarray(SKEW_T), np.asarray(SKEW_C)
    welch = stats.ttest_ind(t, c, equal_var=False)
    res = [(x - x.mean()) / x.std(ddof=1) for x in (t, c)]
    z = stats.skewtest(np.concatenate(res)).statistic  # the wider arm T is below C: its tail is on the other side
    assert welch.pvalue == pytest.approx(0.0208, abs=1e-4) and z == pytest.approx(2.885, abs=1e-3)
    r = compare(t, c)
    assert r.skew_z == pytest.approx(z, rel=1e-9) and r.guard_factor == 10
    assert r.pvalue == pytest.approx(welch.pvalue, rel=1e-9)
    assert r.pvalue_adjusted == pytest.approx(10 * welch.pvalue, rel=1e-9)
    ref = welch.confidence_interval(0.995)
    assert r.ci_level == pytest.approx(0.995) and r.ci == pytest.approx((ref.low, ref.high), rel=1e-9)
    assert r.verdict == "inconclusive" and r.ci[0] < 0 < r.ci[1]
    assert "p × 10 (skew guard) = 0.208" in r.reason and "99.5% CI" in r.reason
    assert "skew_guard" in {f.code for f in r.flags}
    # at alpha = 0.5, p x 10 = 0.208 < 0.5 decides "worse" and the 95% CI excludes 0
    w = compare(t, c, alpha=0.5)
    assert w.verdict == "worse" and w.ci_level == pytest.approx(0.95) and w.ci[1] < 0
    # the same metric to minimize, values negated: the same guard and p
    m = compare(-t, -c, goal="minimize")
    assert m.guard_factor == 10 and m.skew_z == pytest.approx(z, rel=1e-9) and m.verdict == "inconclusive"


def test_skew_guard_not_on_tail_side() -> None:
    """Shift the treatment up past the control: its long tail now lies on Δ's side, where the t-test is
    conservative: the same skewness z with the opposite sign, no guard, and Welch decides."""
    t = np.asarray(SKEW_T) + 0.06
    r = compare(t, SKEW_C)
    assert r.skew_z == pytest.approx(-2.885, abs=1e-3) and r.guard_factor == 1
    assert r.verdict == "better" and r.pvalue_adjusted == pytest.approx(
        stats.ttest_ind(t, SKEW_C, equal_var=False).pvalue, rel=1e-9)
    # the whole ablation mirrored (x -> -x) is the same ablation: the guard is symmetric
    m = compare(-np.asarray(SKEW_T), -np.asarray(SKEW_C))
    assert m.skew_z == pytest.approx(2.885, abs=1e-3) and m.guard_factor == 10 and m.verdict == "inconclusive"


def test_skew_guard_with_a_constant_arm() -> None:
    """A constant control: Δ's skew is the treatment's alone (its residuals pooled with the control's zeros)."""
    t = np.asarray(SKEW_T)
    c = np.full(10, 0.70)
    z = stats.skewtest(np.concatenate([(t - t.mean()) / t.std(ddof=1), np.zeros(10)])).statistic
    r = decide_batch(t, c)
    assert r.skew_z[0] == pytest.approx(z, rel=1e-9) and z > 1.96 and r.guard_factor[0] == 10
    with warnings.catch_warnings():  # scipy warns on the constant arm; Welch is still defined (the other's SD)
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = stats.ttest_ind(t, c, equal_var=False).pvalue
    assert r.p_decision[0] == pytest.approx(min(1.0, 10 * ref), rel=1e-9)


@pytest.mark.parametrize("paired", [False, True])
def test_skew_guard_decision_and_interval_agree(paired: bool) -> None:
    """Over skewed ablations with real effects (guard firing in a quarter to half of them), alone and in a family
    of 3: the CI excludes 0 exactly when the verdict is better/worse, and guarded rows have level 1 - level/10."""
    t, c = aa("lognormal", 3, 20, seed=21)
    t = t + 0.01 * rng_shift(R)
    for m in (1, 3):
        r = decide_batch(t, c, paired=paired, n_comparisons=m)
        assert 0.1 < (r.guard_factor > 1).mean() < 0.6
        excl = (r.ci_low > 0) | (r.ci_high < 0)
        assert np.array_equal(excl, np.isin(r.verdict, (BETTER, WORSE)))
        ref = (stats.ttest_rel(t, c, axis=1) if paired else stats.ttest_ind(t, c, axis=1, equal_var=False))
        i = int(np.flatnonzero(r.guard_factor > 1)[0])
        ci = ref.confidence_interval(1 - ALPHA / m / 10)
        assert (r.ci_low[i], r.ci_high[i]) == pytest.approx((ci.low[i], ci.high[i]), rel=1e-9)


def rng_shift(n: int) -> np.ndarray:
    """Per-row true effects from -2 to 2 SDs of the wider arm (fixed seed)."""
    return np.random.default_rng(8).uniform(-6.0, 6.0, (n, 1))


def test_skew_guard_in_a_holm_family() -> None:
    """The guarded p x 10 enters Holm; each CI stays at its decision's level, so it excludes 0 exactly when the
    verdict is better/worse."""
    t, c = np.asarray(SKEW_T), np.asarray(SKEW_C)
    strong = c + 0.05
    comps = [compare(x, c, n_comparisons=2, alpha=0.5) for x in (t, strong)]
    adj = adjust_comparisons(comps, "holm")
    guarded = adj[0]
    assert guarded.guard_factor == 10
    # Holm: the strong arm is rejected at step 1, the guarded one comes second (factor 1, level alpha = 0.5)
    assert adj[1].verdict == "better" and adj[1].guard_factor == 1
    assert guarded.pvalue_adjusted == pytest.approx(10 * guarded.pvalue, rel=1e-9)
    for a in adj:
        assert (a.ci[0] > 0 or a.ci[1] < 0) == (a.verdict in ("better", "worse"))
    ref = stats.ttest_ind(t, c, equal_var=False).confidence_interval(1 - 0.5 / 10)
    assert guarded.ci_level == pytest.approx(0.95) and guarded.verdict == "worse"
    assert guarded.ci == pytest.approx((ref.low, ref.high), rel=1e-9)


def test_skew_guard_with_dunnett() -> None:
    """Dunnett assumes normal errors, and its 99.5% interval does not converge in scipy: when a skew guard fired
    in the family, Holm (on p x 10) is used instead and flagged, as for paired arms or SDs differing > 2x."""
    t, c = np.asarray(SKEW_T), np.asarray(SKEW_C)
    s = c[::-1] + 0.03
    comps = [compare(x, c, n_comparisons=2) for x in (t, s)]
    adj = adjust_comparisons(comps, "dunnett", treatments=[t, s], control=c, rng=0)
    assert [a.multiplicity for a in adj] == ["holm", "holm"] and [a.guard_factor for a in adj] == [10, 1]
    assert any(f.code == "multiplicity" and "skew guard" in f.message for f in adj[0].flags)
    ref = holm(np.array([10 * comps[0].pvalue, comps[1].pvalue]))
    assert [a.pvalue_adjusted for a in adj] == pytest.approx(list(ref), rel=1e-9)
    assert [a.verdict for a in adj] == ["inconclusive", "better"]
    for a in adj:
        assert (a.ci[0] > 0 or a.ci[1] < 0) == (a.verdict in ("better", "worse"))


def test_skew_guard_in_verdict_md(tmp_path: Path) -> None:
    """The written verdict: the line says which p decided and the CI's level, the flag explains, the JSON keeps
    the z and the factor; the rank test is not multiplied by the guard's factor (it is not a t-test)."""
    from ablate.judge.verdict import write_verdict
    from ablate.record.sweepdir import SweepDir
    from tests.helpers import make_sweep

    root = make_sweep(tmp_path / "sw", {"control": SKEW_C, "lr=0.1": SKEW_T}, options={"pairing": "unpaired"})
    write_verdict(SweepDir.open(root))
    md = (root / "verdict.md").read_text()
    assert ("changed val_acc by -0.0255 (99.5% CI -0.0578 to +0.0068, widened: skewed values, see Flags): "
            "**inconclusive**") in md
    assert "Welch's t-test, p = 0.208 (from p × 10: the skew guard, Flags)" in md
    assert "D'Agostino z = 2.89 ≥ 1.96" in md and "(`skew_guard`)" in md
    c = json.loads((root / "verdict.json").read_text())["comparisons"][0]
    assert c["guard_factor"] == 10 and c["skew_z"] == pytest.approx(2.885, abs=1e-3) and c["ci_level"] == 0.995
    mwu = stats.mannwhitneyu(SKEW_T, SKEW_C).pvalue
    assert c["robust_pvalue"] == pytest.approx(mwu, rel=1e-9)
    assert f"Welch t p = 0.208, Mann-Whitney U p {p_is(mwu)}" in md  # MWU at its own p (0.0046), not x 10


# -- 5. P(T>C) interval ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [5, 10, 20])
@pytest.mark.parametrize("shift", [0.0, 1.0, 2.0])
def test_prob_improvement_coverage_unpaired(n: int, shift: float) -> None:
    """Newcombe's interval covers the true P(T>C) = Φ(shift/√2) at >= 0.93 (the percentile bootstrap: .905-.915)."""
    rng = np.random.default_rng(int(10 * shift) + n)
    t, c = rng.normal(shift, 1.0, (R, n)), rng.normal(0.0, 1.0, (R, n))
    est = (t[:, :, None] > c[:, None, :]).mean(axis=(1, 2))
    lo, hi = newcombe_interval(est, n, n)
    truth = stats.norm.cdf(shift / math.sqrt(2))
    assert ((lo <= truth) & (truth <= hi)).mean() >= 0.93


@pytest.mark.parametrize("n", [5, 10, 20])
def test_prob_improvement_coverage_paired(n: int) -> None:
    """Paired: the share of pairs with T > C is binomial; Clopper-Pearson covers at >= 0.93 (it is exact)."""
    rng = np.random.default_rng(n)
    d = rng.normal(0.5, 1.0, (R, n))
    lo, hi = clopper_pearson_interval((d > 0).sum(axis=1), n)
    truth = stats.norm.cdf(0.5)
    assert ((lo <= truth) & (truth <= hi)).mean() >= 0.93


def test_prob_improvement_interval_values() -> None:
    """Newcombe's interval equals its definition (the score equation's roots, test_stats_pi_interval.reference);
    Clopper-Pearson equals scipy's exact binomial interval."""
    from tests.unit.test_stats_pi_interval import reference

    lo, hi = newcombe_interval(0.88, 5, 5)
    assert (float(lo), float(hi)) == pytest.approx(reference(0.88, 5, 5), abs=1e-9)
    assert 0 < float(lo) < 0.88 < float(hi) < 1
    ref = stats.binomtest(4, 5).proportion_ci(0.95, method="exact")
    assert clopper_pearson_interval(4, 5) == pytest.approx((ref.low, ref.high), rel=1e-9)
    c = compare([0.728, 0.741, 0.716, 0.739, 0.733], [0.712, 0.695, 0.731, 0.704, 0.719])
    assert c.prob_improvement_ci == pytest.approx((float(lo), float(hi)), abs=1e-9)
    assert "indicative" not in {f.code for f in c.flags}  # covered from N = 5 on


# -- 2. one decision, one interval -------------------------------------------------------------------------
C = [0.712, 0.695, 0.731, 0.704, 0.719]
T = [0.728, 0.741, 0.716, 0.739, 0.733]  # Welch vs C: p = 0.0386886, 95% CI (0.00130780, 0.03709220) (spec C1)


def test_holm_second_step_shows_its_own_level() -> None:
    """Holm rejects T at its second step (p = 0.0387 < 0.05/1): the CI shown is the 95% one, which excludes 0,
    not the 97.5% Bonferroni one that touches it (issue 14 item 2)."""
    strong = [v + 0.05 for v in T]
    comps = [compare(x, C, n_comparisons=2) for x in (strong, T)]
    adj = adjust_comparisons(comps, "holm")
    assert adj[1].verdict == "better" and adj[1].ci_level == pytest.approx(0.95)
    assert adj[1].ci == pytest.approx((0.00130780, 0.03709220), rel=1e-6)
    assert adj[0].ci_level == pytest.approx(0.975)
    ref = stats.ttest_ind(strong, C, equal_var=False).confidence_interval(0.975)
    assert adj[0].ci == pytest.approx((ref.low, ref.high), rel=1e-9)
    for c in adj:
        assert (c.ci[0] > 0) == (c.verdict == "better")
        assert "holm_ci" not in {f.code for f in c.flags}


@pytest.mark.parametrize(("p", "method", "levels"), [
    ([0.01, 0.04], "holm", [0.025, 0.05]),
    ([0.03, 0.04], "holm", [0.025, 0.025]),  # stops at step 1: both keep its level, both CIs keep 0
    ([0.001, 0.02, 0.3], "holm", [0.05 / 3, 0.025, 0.05]),
    ([0.01, 0.04, 0.03], "bh", [0.05, 0.05, 0.05]),  # R = 3 rejected: level 3·0.05/3
    ([0.01, 0.2, 0.3], "bh", [0.05 / 3, 0.1 / 3, 0.1 / 3]),  # R = 1: rejected at 1·α/3, the rest at 2·α/3
    ([0.01, 0.2], "bonferroni", [0.025, 0.025]),
])
def test_stage_levels(p: list[float], method: str, levels: list[float]) -> None:
    """Hand-computed levels; a comparison is rejected exactly when its p is below its level."""
    got = stage_levels(p, method, 0.05)
    assert got == pytest.approx(levels)
    if method == "holm":
        assert list(np.asarray(p) < got) == list(holm(np.asarray(p)) < 0.05)
    if method == "bh":
        assert list(np.asarray(p) < got) == list(stats.false_discovery_control(p, method="bh") < 0.05)


@pytest.mark.parametrize("m", [2, 3, 5, 8])
def test_holm_equals_statsmodels(m: int) -> None:
    from statsmodels.stats.multitest import multipletests

    p = np.random.default_rng(m).uniform(0, 0.1, m)
    p[0] = p[1]  # a tie
    assert holm(p) == pytest.approx(multipletests(p, method="holm")[1], rel=1e-12)


def test_reason_states_the_ci_level() -> None:
    c = compare(T, C)
    assert "95% CI" in c.reason or "95.0% CI" in c.reason


# -- 3. float noise and scale --------------------------------------------------------------------------------
ULP = np.spacing(0.5)


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("noise", [[2, 2, 1, 2, 1], [1, 0, 1, 1, 1], [3, 1, 2, 2, 3]])
def test_ulp_differences_are_identical(paired: bool, noise: list[int]) -> None:
    """A few ulps above 0.5 is no effect: issue 14 item 3 saw Δ = 2.2e-16 called better (p = .013)."""
    c = np.full(5, 0.5)
    r = compare(c + np.asarray(noise) * ULP, c, paired=paired)
    assert r.verdict == "insufficient data" and r.diff == 0.0
    assert "floating-point resolution" in r.reason and "p " not in r.reason and "p_adj" not in r.reason


@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e-300, 1e150, 3.7])
def test_verdict_is_scale_free(scale: float) -> None:
    """A metric near 1e200 or 1e-200 gets the verdict of the same data at its own scale (item 4: sd overflowed)."""
    base = compare(T, C)
    r = compare(np.asarray(T) * scale, np.asarray(C) * scale)
    assert r.verdict == base.verdict == "better"
    assert r.pvalue == pytest.approx(base.pvalue, rel=1e-9)
    assert r.diff / scale == pytest.approx(base.diff, rel=1e-9)
    assert r.seeds is not None and r.seeds.n_needed == base.seeds.n_needed
    s = summarize(np.asarray(T) * scale)
    assert s.sd / scale == pytest.approx(float(np.std(T, ddof=1)), rel=1e-9)


# -- 4. bounded metrics ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("values", "k"), [([1] * 9 + [0], 9), ([1, 1, 1], 3), ([0, 0, 0, 1], 1)])
def test_binary_arm_interval_inside_bounds(values: list[int], k: int) -> None:
    """A 0/1 metric's arm CI is Wilson's (scipy), inside [0, 1]; the t interval gave [-0.07, 1.07]."""
    s = summarize(values)
    ref = stats.binomtest(k, len(values)).proportion_ci(0.95, method="wilson")
    assert s.ci == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert 0 <= s.ci[0] <= s.ci[1] <= 1 and s.ci_method.startswith("Wilson")


@pytest.mark.parametrize(("kt", "kc", "n"), [(9, 3, 10), (10, 0, 10), (4, 2, 5), (7, 7, 12), (3, 0, 3)])
def test_binary_metric_gets_newcombe_and_agrees(kt: int, kc: int, n: int) -> None:
    """0/1 arms: Newcombe's interval (= statsmodels' `newcomb`), inside [-1, 1], and a p-value dual to it:
    p < α exactly when the (1 - α) interval excludes 0 (item 4: the t-interval left the bounds)."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    t, c = [1] * kt + [0] * (n - kt), [1] * kc + [0] * (n - kc)
    r = compare(t, c)
    assert r.test == "Newcombe score (0/1 metric)" and r.verdict != "insufficient data"
    ref = confint_proportions_2indep(kt, n, kc, n, method="newcomb", compare="diff", alpha=0.05)
    assert r.ci == pytest.approx(ref, abs=1e-9) and -1 <= r.ci[0] <= r.ci[1] <= 1
    for a in (0.01, 0.05, 0.2):
        lo, hi = confint_proportions_2indep(kt, n, kc, n, method="newcomb", compare="diff", alpha=a)
        assert (r.pvalue < a) == (lo > 0 or hi < 0)
    assert (r.verdict == "better") == (r.ci[0] > 0)


@pytest.mark.parametrize(("t", "c"), [([1, 1, 1, 0, 1, 1, 1, 1, 1, 1], [0, 1, 0, 0, 1, 0, 0, 1, 0, 0]),
                                      ([1, 0, 1, 1, 0], [0, 0, 1, 0, 0]), ([0, 0, 1, 1], [1, 1, 1, 1])])
def test_binary_paired_is_exact_mcnemar(t: list[int], c: list[int]) -> None:
    """Paired 0/1 seeds: McNemar's exact test (= scipy's binomial test on the discordant pairs, symmetric at
    1/2) with the Clopper-Pearson interval it inverts, mapped to the difference of rates."""
    r = compare(t, c, paired=True)
    b = sum(1 for x, y in zip(t, c, strict=True) if x > y)
    d = sum(1 for x, y in zip(t, c, strict=True) if x != y)
    assert r.test == "exact McNemar (0/1 metric)"
    assert r.pvalue == pytest.approx(stats.binomtest(b, d, 0.5).pvalue, rel=1e-12)
    cp = stats.binomtest(b, d, 0.5).proportion_ci(0.95, method="exact")
    assert r.ci == pytest.approx((d * (2 * cp.low - 1) / len(t), d * (2 * cp.high - 1) / len(t)), abs=1e-9)
    assert (r.ci[0] > 0 or r.ci[1] < 0) == (r.pvalue < 0.05)


def test_binary_family_keeps_its_interval() -> None:
    """Under Holm, a 0/1 comparison's interval is recomputed at its step level with Newcombe, not t."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    c0 = [1] * 3 + [0] * 9
    comps = [compare([1] * 12, c0, n_comparisons=2), compare([1] * 8 + [0] * 4, c0, n_comparisons=2)]
    adj = adjust_comparisons(comps, "holm")
    for r, k in zip(adj, (12, 8), strict=True):
        ref = confint_proportions_2indep(k, 12, 3, 12, method="newcomb", compare="diff", alpha=1 - r.ci_level)
        assert r.ci == pytest.approx(ref, abs=1e-9)
        assert (r.verdict == "better") == (r.ci[0] > 0)


def test_zero_difference_never_quotes_a_deciding_p() -> None:
    """If Δ is exactly 0 while p < α (float rounding between two computations of the mean), the verdict is not
    better/worse and the reason says why instead of quoting "p ≥ α" for a p below it (issue 14 item 3)."""
    import dataclasses

    from ablate.stats.compare import finish

    base = compare(T, C)
    r = finish(dataclasses.replace(base, diff=0.0, ci=(-0.001, 0.001)))
    assert r.verdict == "inconclusive"
    assert "p = 0.0387 < α = 0.05" in r.reason and "no direction: not better, not worse" in r.reason


def test_paired_diff_is_the_tested_mean() -> None:
    """Paired Δ is mean(T - C), the number ttest_rel tests, so its sign and the test cannot part on rounding."""
    t, c = [0.1 + 1e-9, 0.2, 0.3 - 1e-9, 0.4], [0.1, 0.2, 0.3, 0.4 - 3e-9]
    r = compare(t, c, paired=True)
    assert r.diff == pytest.approx(float(np.mean(np.subtract(t, c))), rel=1e-6)


@pytest.mark.parametrize("threshold", [9e-5, 0.0055, 0.0411])
def test_sequential_ci_is_at_the_boundary_level(threshold: float) -> None:
    """At a group-sequential look the decision is p < the boundary's nominal p, so the CI is at 1 - that p
    (scipy's own interval) and excludes 0 exactly when the verdict is better/worse."""
    strong = [v + 0.01 for v in T]
    r = compare(strong, C, p_threshold=threshold)
    ref = stats.ttest_ind(strong, C, equal_var=False).confidence_interval(1 - threshold)
    assert r.ci_level == pytest.approx(1 - threshold)
    assert r.ci == pytest.approx((ref.low, ref.high), rel=1e-9)
    assert (r.ci[0] > 0) == (r.verdict == "better") == (r.pvalue < threshold)


# -- issue 26: what the verdict gets before the first result, or when everything failed ---------------------------

@pytest.mark.parametrize(("treatment", "control"), [
    (np.empty((2, 0)), np.empty((2, 0))),  # no trial finished yet: zero-size arms
    (np.full((2, 3), np.nan), np.full((2, 3), np.nan)),  # every trial failed
    (np.array([[0.9, 0.91, 0.92]] * 2), np.empty((2, 0))),  # one arm only
])
def test_decide_batch_on_empty_or_failed_arms_is_insufficient_data_without_warnings(
        treatment: np.ndarray, control: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = decide_batch(treatment, control, margin=0.01)
    assert [VERDICTS[v] for v in res.verdict] == ["insufficient data"] * 2
    assert np.isnan(res.pvalue).all() and np.isnan(res.diff).all()
    assert res.n_treatment.tolist() == [int(np.isfinite(treatment[0]).sum())] * 2
    assert res.n_control.tolist() == [0, 0]


def test_dunnett_family_without_any_p_value_adjusts_nothing_without_warnings() -> None:
    comps = [compare([], [], alpha=0.05), compare([1.0], [], alpha=0.05)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = adjust_comparisons(comps, "dunnett", treatments=[[], [1.0]], control=[])
    assert [c.verdict for c in out] == ["insufficient data", "insufficient data"]
    assert all(c.pvalue_adjusted is None for c in out)
