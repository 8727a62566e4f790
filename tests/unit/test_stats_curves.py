"""ablate.stats.curves: the grid rules, the summaries, and the max-|t| simultaneous band against scipy's
permutation tests (one grid point) and hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ablate.stats import StatsInputError
from ablate.stats.curves import (
    GRID_INTERPOLATED,
    GRID_SHARED,
    align_curves,
    clean_series,
    curve_band,
    curve_regions,
    curve_summaries,
    seeds_for_width,
)


def _abs_paired_t(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    d = a - b
    return np.abs(d.mean(axis=axis) / (d.std(axis=axis, ddof=1) / np.sqrt(d.shape[axis])))


def _abs_welch_t(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    se = np.sqrt(a.var(axis=axis, ddof=1) / a.shape[axis] + b.var(axis=axis, ddof=1) / b.shape[axis])
    return np.abs((a.mean(axis=axis) - b.mean(axis=axis)) / se)


# -- one grid point: the band's test is scipy's permutation test of |t| -------------------------------------------
def test_one_point_paired_p_equals_scipy_exact_sign_flip() -> None:
    c = np.array([0.712, 0.695, 0.731, 0.704, 0.719, 0.722, 0.701])
    t = np.array([0.728, 0.741, 0.716, 0.739, 0.733, 0.730, 0.725])
    band = curve_band(t[:, None], c[:, None], paired=True, alpha=0.05)
    ref = stats.permutation_test((t, c), _abs_paired_t, permutation_type="samples", n_resamples=np.inf,
                                 alternative="greater", vectorized=True)
    assert band.exact and band.n_permutations == 2 ** 6
    assert band.p_null[0] == pytest.approx(ref.pvalue, rel=1e-12)
    assert band.p_adj[0] >= band.p_null[0]
    assert band.t[0] == pytest.approx(stats.ttest_rel(t, c).statistic, rel=1e-12)
    assert band.p_pointwise[0] == pytest.approx(stats.ttest_rel(t, c).pvalue, rel=1e-10)


def test_one_point_unpaired_p_equals_scipy_exact_relabelling_with_welch_t() -> None:
    c = np.array([0.712, 0.695, 0.731, 0.704, 0.719])
    t = np.array([0.728, 0.741, 0.716, 0.739, 0.733, 0.726])
    band = curve_band(t[:, None], c[:, None], paired=False, alpha=0.05)
    ref = stats.permutation_test((t, c), _abs_welch_t, permutation_type="independent", n_resamples=np.inf,
                                 alternative="greater", vectorized=True)
    assert band.exact and band.n_permutations == math.comb(11, 5)
    assert band.p_null[0] == pytest.approx(ref.pvalue, rel=1e-12)
    assert band.p_adj[0] >= band.p_null[0]
    welch = stats.ttest_ind(t, c, equal_var=False)
    assert band.t[0] == pytest.approx(welch.statistic, rel=1e-12)
    assert band.p_pointwise[0] == pytest.approx(welch.pvalue, rel=1e-10)


def test_minimize_flips_the_sign_only() -> None:
    rng = np.random.default_rng(1)
    t, c = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    up = curve_band(t, c, paired=True, goal="maximize")
    down = curve_band(t, c, paired=True, goal="minimize")
    np.testing.assert_allclose(down.diff, -up.diff)
    np.testing.assert_allclose(down.p_adj, up.p_adj)
    assert down.critical == up.critical


# -- many points: maxT by hand ---------------------------------------------------------------------------------
def test_three_points_paired_maxt_by_hand() -> None:
    """n = 4 paired seeds, 3 points: enumerate the 8 flips (first sign +) by hand, take max |t| over the points."""
    d = np.array([[1.0, 0.5, -0.2], [2.0, 0.1, 0.3], [1.5, 0.4, 0.1], [0.5, -0.3, 0.2]])
    band = curve_band(d, np.zeros_like(d), paired=True, alpha=0.25)
    maxima = []
    for s1 in (1, -1):
        for s2 in (1, -1):
            for s3 in (1, -1):
                e = np.array([1, s1, s2, s3])[:, None]
                maxima.append(_abs_paired_t(e * d, np.zeros_like(d), axis=0).max())
    maxima = np.array(maxima)
    t_obs = _abs_paired_t(d, np.zeros_like(d), axis=0)
    np.testing.assert_allclose(band.p_null, [(maxima >= v - 1e-12).mean() for v in t_obs])
    # alpha = 0.25 of 8 flips: the critical value is the 3rd largest maximum
    assert band.critical_null == pytest.approx(np.sort(maxima)[::-1][2])
    # the pivot's: the same flips of the differences centred at their mean
    centred = d - d.mean(axis=0)
    pivot = []
    for s1 in (1, -1):
        for s2 in (1, -1):
            for s3 in (1, -1):
                e = np.array([1, s1, s2, s3])[:, None]
                with np.errstate(invalid="ignore", divide="ignore"):
                    pivot.append(np.nanmax(_abs_paired_t(e * centred, np.zeros_like(d), axis=0)))
    assert band.critical_pivot == pytest.approx(np.sort(pivot)[::-1][2])
    assert band.critical == max(band.critical_null, band.critical_pivot)
    np.testing.assert_allclose(band.low, d.mean(0) - band.critical * d.std(0, ddof=1) / 2)
    assert ((band.low > 0) | (band.high < 0)).tolist() == (band.p_adj <= 0.25).tolist()


def test_band_excludes_zero_exactly_where_p_adj_is_at_most_alpha() -> None:
    rng = np.random.default_rng(3)
    x = np.linspace(0, 1, 60)
    effect = 3.0 * np.exp(-x / 0.2)  # a warmup-like early advantage
    t = effect + rng.normal(size=(12, 60))
    c = rng.normal(size=(12, 60))
    for paired in (True, False):
        band = curve_band(t, c, x=x, paired=paired, alpha=0.05, n_resamples=999, rng=0)
        outside = (band.low > 0) | (band.high < 0)
        assert outside.tolist() == (band.p_adj <= 0.05).tolist()
        regions = curve_regions(band)
        assert regions[0].word == "better" and regions[0].start == 0.0
        assert regions[-1].word == "indistinguishable" and regions[-1].end == 1.0
        assert sum(r.points for r in regions) == 60


def test_random_permutations_are_reproducible_and_count_the_observed() -> None:
    rng = np.random.default_rng(5)
    t, c = rng.normal(size=(30, 20)), rng.normal(size=(30, 20))
    a = curve_band(t, c, paired=False, n_resamples=199, rng=7)
    b = curve_band(t, c, paired=False, n_resamples=199, rng=7)
    assert not a.exact and a.n_permutations == 200 and a.min_p == 1 / 200
    np.testing.assert_array_equal(a.p_adj, b.p_adj)
    assert (a.p_adj >= 1 / 200).all()


def test_summaries_are_in_the_family() -> None:
    rng = np.random.default_rng(11)
    x = np.arange(50.0)
    t, c = rng.normal(size=(8, 50)) + 0.3, rng.normal(size=(8, 50))
    st, sc = curve_summaries(x, t), curve_summaries(x, c)
    with_auc = curve_band(t, c, x=x, paired=True, summaries={"auc": (st["auc"], sc["auc"], "maximize")})
    without = curve_band(t, c, x=x, paired=True)
    auc = with_auc.summaries["auc"]
    assert auc.diff == pytest.approx(st["auc"].mean() - sc["auc"].mean())
    assert with_auc.critical >= without.critical  # one more column can only raise the max
    se = (st["auc"] - sc["auc"]).std(ddof=1) / math.sqrt(8)
    assert auc.ci == pytest.approx((auc.diff - with_auc.critical * se, auc.diff + with_auc.critical * se))


def test_a_constant_difference_has_no_spread() -> None:
    c = np.zeros((4, 3))
    t = c + np.array([0.0, 1.0, 1.0])  # every seed the same: t = 0 where equal, infinite where not
    band = curve_band(t, c, paired=True)
    assert band.t[0] == 0 and math.isinf(band.t[1])
    assert band.low[1] == band.high[1] == 1.0


def test_input_validation_names_the_parameter() -> None:
    ok = np.zeros((3, 4))
    with pytest.raises(StatsInputError, match="`control`: must have the treatment's 4 grid points"):
        curve_band(ok, np.zeros((3, 5)), paired=True)
    with pytest.raises(StatsInputError, match="`treatment`: must be finite"):
        curve_band(np.full((3, 4), np.nan), ok, paired=True)
    with pytest.raises(StatsInputError, match="`control`: must have one row per treatment row when paired"):
        curve_band(ok, np.zeros((4, 4)), paired=True)
    with pytest.raises(StatsInputError, match="`alpha`"):
        curve_band(ok, ok, paired=True, alpha=0.9)
    with pytest.raises(StatsInputError, match="`summaries`: 'auc' must give one finite value per seed"):
        curve_band(ok, ok, paired=True, summaries={"auc": ([1.0], [1.0, 2.0, 3.0], "maximize")})


# -- the grid rules --------------------------------------------------------------------------------------------
def test_restart_keeps_the_value_logged_last_and_nonfinite_points_are_dropped() -> None:
    # logged steps 0..4, then resumed from a checkpoint at step 2 (steps 2, 3 logged again), then 5
    s = clean_series([0, 1, 2, 3, 4, 2, 3, 5, 6], [9, 8, 7, 6, 5, 7.5, 6.5, np.nan, 4])
    assert s.x.tolist() == [0, 1, 2, 3, 4, 6]
    assert s.y.tolist() == [9, 8, 7.5, 6.5, 5, 4]
    assert s.restarts == 2 and s.dropped == 1


def test_shared_steps_give_the_logged_values_and_the_shortest_curve_ends_the_grid() -> None:
    a = ([0, 10, 20, 30, 40], [1.0, 2, 3, 4, 5])
    b = ([0, 10, 20, 30], [1.5, 2.5, 3.5, 4.5])  # stopped early
    c = ([0, 10, 30, 40], [1.2, 2.2, 4.2, 5.2])  # missed step 20
    al = align_curves([a, b, c])
    assert al.rule == GRID_SHARED
    assert al.x.tolist() == [0, 10, 30]
    assert al.y.tolist() == [[1, 2, 4], [1.5, 2.5, 4.5], [1.2, 2.2, 4.2]]
    assert al.full_range == (0, 40) and al.ends_first == 1


def test_different_x_are_interpolated_never_extrapolated() -> None:
    a = ([0.0, 100.0, 200.0], [0.0, 1.0, 2.0])
    b = ([5.0, 90.0, 150.0, 210.0], [0.0, 0.85, 1.45, 2.05])
    al = align_curves([a, b], points=5)
    assert al.rule == GRID_INTERPOLATED
    np.testing.assert_allclose(al.x, np.linspace(5, 200, 5))
    np.testing.assert_allclose(al.y[0], np.linspace(5, 200, 5) / 100)
    assert al.x.min() >= 5 and al.x.max() <= 200


def test_shared_grid_is_subsampled_to_points_keeping_first_and_last() -> None:
    x = np.arange(1001.0)
    al = align_curves([(x, x * 2), (x, x * 3)], points=11)
    assert al.subsampled and al.x.tolist() == list(range(0, 1001, 100))
    assert al.y[1].tolist() == (al.x * 3).tolist()


def test_no_shared_range_is_refused() -> None:
    with pytest.raises(StatsInputError, match="must share a range of x"):
        align_curves([([0, 1], [0, 1]), ([2, 3], [0, 1])])


# -- the summaries by hand -------------------------------------------------------------------------------------
def test_auc_is_the_mean_value_over_the_range() -> None:
    x = np.array([0.0, 1.0, 3.0])
    y = np.array([[0.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    s = curve_summaries(x, y)
    # seed 0: area 0.5 + 2 = 2.5 over a range of 3
    np.testing.assert_allclose(s["auc"], [2.5 / 3, 2.0])


def test_time_to_threshold_interpolates_and_censors() -> None:
    x = np.array([0.0, 10.0, 20.0])
    y = np.array([[0.0, 0.5, 1.0], [0.8, 0.9, 0.95], [0.0, 0.1, 0.2]])
    s = curve_summaries(x, y, threshold=0.75)
    np.testing.assert_allclose(s["time_to"], [15.0, 0.0, 20.0])
    assert s["reached"].tolist() == [1, 1, 0]
    loss = curve_summaries(x, -y, goal="minimize", threshold=-0.75)
    np.testing.assert_allclose(loss["time_to"], [15.0, 0.0, 20.0])


def test_seeds_for_width() -> None:
    # half-width = critical * spread / sqrt(n): 3 * 2 / sqrt(n) <= 0.5 -> n >= 144
    assert seeds_for_width([1.0, 2.0], 3.0, 0.5) == 144
    assert seeds_for_width([0.01], 3.0, 1.0) == 3
    with pytest.raises(StatsInputError, match="`width`"):
        seeds_for_width([1.0], 3.0, 0.0)


def test_smallest_reachable_p_counts_the_mirror_labelling() -> None:
    """Unpaired with equal arms, swapping the arms gives the same |t|: at N = 3 the observed labelling ties with its
    mirror, so the smallest p is 2 / C(6, 3) = 0.1 and nothing is declared at alpha = 0.05 (the A/A rate is 0)."""
    t = np.array([[5.0], [5.1], [5.2]])
    c = np.array([[0.0], [0.1], [0.2]])
    band = curve_band(t, c, paired=False, alpha=0.05)
    assert band.exact and band.min_p == pytest.approx(0.1) and band.p_adj[0] == pytest.approx(0.1)
    assert not ((band.low > 0) | (band.high < 0)).any()
    paired = curve_band(t, c, paired=True, alpha=0.05)
    assert paired.min_p == pytest.approx(0.25) and paired.p_adj[0] == pytest.approx(0.25)
