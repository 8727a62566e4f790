"""compare(): input validation, edge cases (never NaN in the verdict, never a crash) and properties."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ablate.stats import (
    StatsInputError,
    compare,
    failure_finding,
    pair_by_seed,
    summarize,
)

C = [0.712, 0.695, 0.731, 0.704, 0.719]
T = [0.728, 0.741, 0.716, 0.739, 0.733]


def no_nan_text(c: object) -> None:
    text = c.reason + " ".join(f.message for f in c.flags)  # type: ignore[attr-defined]
    assert not re.search(r"\b(nan|inf|none)\b", text.lower()), text


class TestValidation:
    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            pytest.param({"treatment": [[1.0, 2.0]]}, r"`treatment`: must be 1-D", id="2d"),
            pytest.param({"treatment": ["a", "b"]}, r"`treatment`: must be a 1-D sequence of numbers", id="text"),
            pytest.param({"control": [1.0, math.inf, 2.0]}, r"`control`: must not contain inf", id="inf"),
            pytest.param({"alpha": 0.7}, r"`alpha`: must be a number in \(0, 0.5\], got 0.7", id="alpha"),
            pytest.param({"goal": "max"}, r"`goal`: must be one of maximize, minimize, got 'max'", id="goal"),
            pytest.param({"margin": -1}, r"`margin`: must be a positive number or a percentage", id="margin"),
            pytest.param({"margin": "2 pts"}, r"`margin`: must be a positive number or a percentage", id="margin-str"),
            pytest.param({"n_comparisons": 0}, r"`n_comparisons`: must be an integer >= 1", id="m"),
            pytest.param({"rng": "x"}, r"`rng`: must be None, an integer seed or a numpy.random.Generator", id="rng"),
            pytest.param({"paired": True, "treatment": [1.0, 2.0, 3.0]}, r"`control`: must have as many values",
                         id="paired-length"),
            pytest.param({"paired": "yes"}, r"`paired`: must be True or False", id="paired-type"),
        ],
    )
    def test_messages(self, kwargs: dict, match: str) -> None:
        args = {"treatment": T, "control": C, **kwargs}
        with pytest.raises(StatsInputError, match=match):
            compare(args.pop("treatment"), args.pop("control"), **args)

    def test_is_a_value_error(self) -> None:
        with pytest.raises(ValueError):
            compare(T, C, alpha=0)


class TestEdgeCases:
    def test_fewer_than_three_seeds(self) -> None:
        c = compare([0.7, 0.8], C)
        assert c.verdict == "insufficient data"
        assert c.reason.startswith("Insufficient data: fewer than 3 completed seeds in an arm (2 treatment")
        assert c.pvalue is None and c.ci is None
        no_nan_text(c)

    def test_one_seed_and_empty_arm(self) -> None:
        for t in ([0.7], []):
            c = compare(t, C, n_resamples=0)
            assert c.verdict == "insufficient data"
            no_nan_text(c)

    def test_both_arms_constant(self) -> None:
        c = compare([0.9] * 5, [0.8] * 5)
        assert c.verdict == "insufficient data"
        assert "both arms are constant" in c.reason and "Δ = +0.1" in c.reason
        assert c.diff == pytest.approx(0.1)
        no_nan_text(c)

    def test_all_values_identical(self) -> None:
        for paired in (False, True):
            c = compare([0.5] * 5, [0.5] * 5, paired=paired)
            assert c.verdict == "insufficient data"
            assert "every value is identical" in c.reason
            assert c.prob_improvement == 0.5 and c.robust_pvalue == 1.0
            no_nan_text(c)

    def test_constant_paired_differences(self) -> None:
        c = compare(np.add(C, 0.01), C, paired=True)
        assert c.verdict == "insufficient data" and "paired differences are constant" in c.reason
        no_nan_text(c)

    def test_one_arm_constant(self) -> None:
        c = compare([0.75] * 5, C, n_resamples=0)
        with warnings.catch_warnings():  # scipy warns about the constant arm
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = stats.ttest_ind([0.75] * 5, C, equal_var=False)
        assert c.pvalue == pytest.approx(ref.pvalue, rel=1e-12)
        assert c.verdict == "better"
        assert "one_arm_constant" in {f.code for f in c.flags}
        no_nan_text(c)

    def test_ties(self) -> None:
        t, c_ = [0.70, 0.70, 0.72, 0.72, 0.74], [0.70, 0.70, 0.70, 0.71, 0.71]
        c = compare(t, c_, n_resamples=0)
        assert c.robust_pvalue == pytest.approx(stats.mannwhitneyu(t, c_).pvalue, rel=1e-12)
        u = stats.mannwhitneyu(t, c_).statistic
        assert c.prob_improvement == pytest.approx(u / 25)
        no_nan_text(c)

    def test_nan_is_a_counted_failure(self) -> None:
        t = [*T, math.nan]
        c = compare(t, C, n_resamples=0)
        assert c.failed_treatment == 1 and c.n_treatment == 5
        assert c.pvalue == pytest.approx(compare(T, C, n_resamples=0).pvalue, rel=1e-12)
        assert c.failures is not None and c.failures.pvalue == pytest.approx(
            stats.fisher_exact([[1, 5], [0, 5]]).pvalue)
        no_nan_text(c)

    def test_paired_nan_drops_the_pair(self) -> None:
        t = [0.721, 0.709, math.nan, 0.715, 0.727]
        c = compare(t, C, paired=True, n_resamples=0)
        keep = [0, 1, 3, 4]
        ref = stats.ttest_rel(np.take(t, keep), np.take(C, keep))
        assert c.paired and c.n_treatment == 4 and c.failed_treatment == 1
        assert c.pvalue == pytest.approx(ref.pvalue, rel=1e-12)

    def test_too_few_pairs_falls_back_to_unpaired(self) -> None:
        t = [0.72, math.nan, math.nan, 0.73, 0.74]
        c_ = [math.nan, 0.70, 0.71, 0.70, 0.71]
        c = compare(t, c_, paired=True, n_resamples=0)
        assert not c.paired and c.test == "Welch t"
        assert c.n_treatment == 3 and c.n_control == 4
        assert "paired_fallback" in {f.code for f in c.flags}

    def test_more_than_half_failed(self) -> None:
        t = [0.7, 0.71, 0.72, math.nan, math.nan, math.nan, math.nan]
        c = compare(t, [*C, 0.7, 0.71], n_resamples=0)
        assert c.verdict == "insufficient data" and "more than half" in c.reason

    def test_minimize(self) -> None:
        lo = compare(C, T, goal="minimize", n_resamples=0)  # lower loss in the "treatment" C
        assert lo.verdict == "better" and lo.diff == pytest.approx(0.0192)
        assert lo.diff_raw == pytest.approx(-0.0192)
        assert lo.effect_size == pytest.approx(1.436861, rel=1e-6)
        assert lo.prob_improvement == pytest.approx(0.88)

    def test_equivalence_with_margin(self) -> None:
        rng = np.random.default_rng(0)
        t, c_ = rng.normal(0.8, 0.001, 20), rng.normal(0.8, 0.001, 20)
        c = compare(t, c_, margin=0.01, n_resamples=0)
        assert c.verdict == "equivalent"
        assert c.tost_ci is not None and -0.01 < c.tost_ci[0] < c.tost_ci[1] < 0.01
        ref = stats.ttest_ind(t, c_, equal_var=False).confidence_interval(0.90)
        assert c.tost_ci == pytest.approx((ref.low, ref.high), rel=1e-12)
        assert c.reason.startswith("No meaningful difference: the 90% CI")
        assert compare(t, c_, n_resamples=0).verdict == "inconclusive"  # no margin -> never equivalent

    def test_margin_percent_of_control_mean(self) -> None:
        c = compare(T, C, margin="2%", n_resamples=0)
        assert c.margin == pytest.approx(0.02 * 0.7122)

    def test_size_suffix(self) -> None:
        rng = np.random.default_rng(1)
        t, c_ = rng.normal(1.0, 0.01, 10), rng.normal(0.0, 0.01, 10)
        assert compare(t, c_, margin=0.5, n_resamples=0).size == "≥ δ"
        assert compare(t, c_, margin=5.0, n_resamples=0).size == "< δ"

    def test_prob_improvement_ci_is_deterministic(self) -> None:
        a = compare(T, C, rng=1).prob_improvement_ci
        b = compare(T, C, rng=1).prob_improvement_ci
        assert a == b and a is not None and a[0] <= 0.88 <= a[1]


vals = st.lists(st.integers(0, 40).map(lambda v: 0.5 + v / 200), min_size=3, max_size=10)


def _same_numbers(a: object, b: object, *, scale: float = 1.0) -> None:
    for f in ("pvalue", "statistic", "effect_size", "prob_improvement", "robust_pvalue"):
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            assert x == pytest.approx(y, rel=1e-6, abs=1e-9), f
    if a.diff is not None:  # type: ignore[attr-defined]
        assert a.diff * scale == pytest.approx(b.diff, rel=1e-6, abs=1e-12)  # type: ignore[attr-defined]
    assert a.verdict == b.verdict  # type: ignore[attr-defined]


class TestProperties:
    @settings(max_examples=60, deadline=None)
    @given(t=vals, c=vals)
    def test_arm_swap(self, t: list[float], c: list[float]) -> None:
        a, b = compare(t, c, n_resamples=0), compare(c, t, n_resamples=0)
        swap = {"better": "worse", "worse": "better"}
        assert b.verdict == swap.get(a.verdict, a.verdict)
        if a.pvalue is not None:
            assert a.pvalue == pytest.approx(b.pvalue, rel=1e-9)
            assert a.diff == pytest.approx(-b.diff, abs=1e-12)
            assert a.effect_size == pytest.approx(-b.effect_size, rel=1e-9)
            assert a.prob_improvement == pytest.approx(1 - b.prob_improvement, abs=1e-12)
            assert a.robust_pvalue == pytest.approx(b.robust_pvalue, rel=1e-9)

    @settings(max_examples=60, deadline=None)
    @given(t=vals, c=vals)
    def test_goal_direction(self, t: list[float], c: list[float]) -> None:
        up = compare(t, c, n_resamples=0)
        down = compare(-np.asarray(t), -np.asarray(c), goal="minimize", n_resamples=0)
        _same_numbers(up, down)

    @settings(max_examples=60, deadline=None)
    @given(t=vals, c=vals, a=st.sampled_from([0.01, 3.0, 250.0]), b=st.sampled_from([-5.0, 0.0, 17.0]))
    def test_affine_rescaling(self, t: list[float], c: list[float], a: float, b: float) -> None:
        base = compare(t, c, n_resamples=0)
        moved = compare(a * np.asarray(t) + b, a * np.asarray(c) + b, n_resamples=0)
        _same_numbers(base, moved, scale=a)

    @settings(max_examples=40, deadline=None)
    @given(t=vals, c=vals)
    def test_paired_swap(self, t: list[float], c: list[float]) -> None:
        n = min(len(t), len(c))
        a, b = compare(t[:n], c[:n], paired=True, n_resamples=0), compare(c[:n], t[:n], paired=True, n_resamples=0)
        if a.pvalue is not None:
            assert a.pvalue == pytest.approx(b.pvalue, rel=1e-9)
        no_nan_text(a)


class TestPairingAndFailures:
    def test_paired_aligns_by_seed(self) -> None:
        p = pair_by_seed({0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}, {1: 1.5, 0: 0.5, 2: 2.5}, pairing="paired")
        assert p.paired and p.seeds == (0, 1, 2) and p.unmatched == 1
        assert list(p.treatment) == [1.0, 2.0, 3.0] and list(p.control) == [0.5, 1.5, 2.5]
        assert p.reason == "paired by seed: declared (pairing=paired); 1 trial(s) without a partner seed left out"

    @pytest.mark.parametrize("pairing", ["auto", "paired"])
    def test_pairing_needs_three_shared_seeds(self, pairing: str) -> None:
        p = pair_by_seed({0: 1.0, 1: 2.0, 5: 3.0}, {0: 1.0, 1: 2.0, 7: 3.0}, pairing=pairing, n_design=30)
        assert not p.paired and p.treatment.size == 3
        assert p.reason == "unpaired (Welch): the arms share 2 seed ids (< 3): every run of each arm is compared"

    def test_unpaired_and_failed_values(self) -> None:
        p = pair_by_seed({0: None, 1: 2.0, 2: 3.0}, {0: 1.0, 1: 2.0, 2: 3.0}, pairing="unpaired")
        assert not p.paired and math.isnan(p.treatment[0])

    def test_pairing_iv(self) -> None:
        with pytest.raises(StatsInputError, match="`pairing`: must be one of auto, paired, unpaired"):
            pair_by_seed({}, {}, pairing="maybe")
        with pytest.raises(StatsInputError, match="`treatment`: must map seed id -> value"):
            pair_by_seed([1.0], {})  # type: ignore[arg-type]

    def test_failure_finding(self) -> None:
        f = failure_finding(4, 10, 0, 10)
        assert f.pvalue == pytest.approx(stats.fisher_exact([[4, 6], [0, 10]]).pvalue)
        assert f.differs and "Fisher exact p" in f.message()
        same = failure_finding(1, 10, 1, 10)
        assert same.pvalue is None and not same.differs
        with pytest.raises(StatsInputError, match="`failed_control`: must be <= `total_control`"):
            failure_finding(0, 5, 6, 5)

    def test_summary_edge_cases(self) -> None:
        s = summarize([math.nan, math.nan])
        assert s.n == 0 and s.n_failed == 2 and s.mean is None
        one = summarize([0.5])
        assert one.mean == 0.5 and one.sd is None and one.ci is None
        s3 = summarize([0.1, 0.2, 0.4], seeds=[3, 4, 5])
        ref = stats.t.interval(0.95, 2, loc=np.mean([0.1, 0.2, 0.4]), scale=stats.sem([0.1, 0.2, 0.4]))
        assert s3.ci == pytest.approx(ref, rel=1e-12)
        with pytest.raises(StatsInputError, match="`seeds`: must have one seed id per value"):
            summarize([0.1, 0.2], seeds=[1])
