"""The two-stage inverse-normal combination test (:mod:`ablate.stats.adaptive`), checked against scipy's t-tests
and the normal distribution (the combination written out by hand: z = w1 Φ⁻¹(1 - p1) + w2 Φ⁻¹(1 - p2))."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ablate.stats import StatsInputError
from ablate.stats.adaptive import stage_weights, two_stage_batch

T1, C1 = [0.81, 0.84, 0.80], [0.79, 0.80, 0.81]
T2, C2 = [0.83, 0.82, 0.85, 0.80, 0.84], [0.80, 0.81, 0.79, 0.82, 0.80]


def by_hand(p1: float, p2: float, w: tuple[float, float]) -> float:
    z = w[0] * stats.norm.isf(p1) + w[1] * stats.norm.isf(p2)
    return float(2 * stats.norm.sf(abs(z)))


def test_weights_are_fixed_from_the_stage1_count_alone() -> None:
    assert stage_weights(3) == pytest.approx((math.sqrt(3 / 20), math.sqrt(17 / 20)))
    assert stage_weights(10) == pytest.approx((math.sqrt(0.5), math.sqrt(0.5)))
    assert stage_weights(25) == pytest.approx((math.sqrt(0.5), math.sqrt(0.5)))
    w1, w2 = stage_weights(7)
    assert w1 * w1 + w2 * w2 == pytest.approx(1.0)


def test_welch_stages_combined_as_by_hand() -> None:
    res = two_stage_batch(T1, C1, T2, C2, n1=3)
    p1 = stats.ttest_ind(T1, C1, equal_var=False, alternative="greater").pvalue
    p2 = stats.ttest_ind(T2, C2, equal_var=False, alternative="greater").pvalue
    assert res.p1[0] == pytest.approx(p1, rel=1e-12) and res.p2[0] == pytest.approx(p2, rel=1e-12)
    assert res.pvalue[0] == pytest.approx(by_hand(p1, p2, stage_weights(3)), rel=1e-10)
    # the same number from scipy's own weighted Stouffer, one-sided, doubled
    one = stats.combine_pvalues([p1, p2], method="stouffer", weights=list(stage_weights(3))).pvalue
    assert res.pvalue[0] == pytest.approx(2 * min(one, 1 - one), rel=1e-10)
    assert res.tested1[0] and res.tested2[0]


def test_paired_stages_use_the_paired_t() -> None:
    t2, c2 = T2[:3], C2[:3]
    res = two_stage_batch(T1, C1, t2, c2, n1=3, paired=True)
    p1 = stats.ttest_rel(T1, C1, alternative="greater").pvalue
    p2 = stats.ttest_rel(t2, c2, alternative="greater").pvalue
    assert res.pvalue[0] == pytest.approx(by_hand(p1, p2, stage_weights(3)), rel=1e-10)


def test_minimize_tests_the_other_tail() -> None:
    up = two_stage_batch(T1, C1, T2, C2, n1=3)
    down = two_stage_batch(T1, C1, T2, C2, n1=3, goal="minimize")
    assert down.p1[0] == pytest.approx(1 - up.p1[0]) and down.z[0] == pytest.approx(-up.z[0])
    assert down.pvalue[0] == pytest.approx(up.pvalue[0])


def test_a_stage_without_a_test_enters_as_no_evidence() -> None:
    """One stage-2 seed per arm (or every stage-2 trial failed): p2 = 0.5, z = w1 Φ⁻¹(1 - p1): conservative."""
    res = two_stage_batch(T1, C1, [0.9], [0.7], n1=3)
    p1 = stats.ttest_ind(T1, C1, equal_var=False, alternative="greater").pvalue
    assert not res.tested2[0] and res.p2[0] == 0.5
    assert res.pvalue[0] == pytest.approx(by_hand(p1, 0.5, stage_weights(3)), rel=1e-10)
    assert res.pvalue[0] > 2 * min(p1, 1 - p1)


def test_failed_trials_are_left_out_of_their_stage() -> None:
    nan = math.nan
    with_nan = two_stage_batch(T1, C1, [*T2, nan], [*C2, 0.5], n1=3)
    without = two_stage_batch(T1, C1, T2, [*C2, 0.5], n1=3)
    assert with_nan.pvalue[0] == pytest.approx(without.pvalue[0], rel=1e-12)
    paired = two_stage_batch(T1, C1, [*T2, nan], [*C2, 0.5], n1=3, paired=True)
    assert paired.p2[0] == pytest.approx(stats.ttest_rel(T2, C2, alternative="greater").pvalue, rel=1e-12)


def test_batch_rows_match_single_rows() -> None:
    rng = np.random.default_rng(3)
    t1, c1, t2, c2 = (rng.normal(size=(6, n)) for n in (3, 3, 7, 7))
    batch = two_stage_batch(t1, c1, t2, c2, n1=3)
    for i in range(6):
        one = two_stage_batch(t1[i], c1[i], t2[i], c2[i], n1=3)
        assert batch.pvalue[i] == pytest.approx(one.pvalue[0], rel=1e-12)


@pytest.mark.parametrize(("kwargs", "param"), [({"n1": 0}, "n1"), ({"n1": 3, "goal": "up"}, "goal"),
                                               ({"n1": 3, "paired": "yes"}, "paired"),
                                               ({"n1": 3, "weights": (0.5, 0.5)}, "weights")])
def test_bad_input_names_the_parameter(kwargs: dict, param: str) -> None:
    with pytest.raises(StatsInputError, match=f"`{param}`"):
        two_stage_batch(T1, C1, T2, C2, **kwargs)
