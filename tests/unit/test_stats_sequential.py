"""Group-sequential boundaries against the spec's A9 table, and the looks' bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ablate.stats import StatsInputError, boundaries, group_sequential_batch, information_fraction, spending


@pytest.mark.parametrize(
    ("looks", "z", "p"),
    [
        pytest.param([5, 10, 20], [3.92, 2.77, 1.98], [9e-5, 0.0055, 0.0478], id="obf-5-10-20"),
        pytest.param([5, 10, 15, 20], [3.92, 2.77, 2.30, 2.04], [9e-5, 0.0055, 0.0216, 0.0411], id="obf-5-10-15-20"),
    ],
)
def test_obf_boundaries_match_a9(looks: list[int], z: list[float], p: list[float]) -> None:
    b = boundaries(np.array(looks) / looks[-1], alpha=0.05)
    assert b.z == pytest.approx(z, abs=0.005)  # the table gives 2 decimals
    assert b.nominal_p[0] == pytest.approx(p[0], abs=5e-6)  # "9e-5": one significant digit
    # z to 2 decimals is p to about 1e-4 at z = 2.3 (the table's 0.0216 is 2 sf(2.298) = 0.02155 rounded up)
    assert b.nominal_p[1:] == pytest.approx(p[1:], abs=1e-4)
    assert b.spent[-1] == pytest.approx(0.05, rel=1e-12)


def test_pocock_boundaries_match_a9() -> None:
    b = boundaries([0.25, 0.5, 1.0], alpha=0.05, kind="pocock")
    assert b.z == pytest.approx([2.37, 2.37, 2.23], abs=0.005)
    b4 = boundaries([0.25, 0.5, 0.75, 1.0], alpha=0.05, kind="pocock")
    assert b4.nominal_p == pytest.approx([0.018] * 4, abs=0.003)  # "≈ .018 each"


def test_boundaries_spend_exactly_alpha() -> None:
    """Under H0 the exit probability over all looks is alpha: check with an independent scipy integration."""
    f = [0.3, 0.55, 1.0]
    b = boundaries(f, alpha=0.05)
    tt = np.array(f)
    cov = np.sqrt(np.minimum.outer(tt, tt) / np.maximum.outer(tt, tt))
    up = np.array(b.z)
    stay = stats.multivariate_normal(mean=np.zeros(3), cov=cov).cdf(up, lower_limit=-up,
                                                                      rng=np.random.default_rng(1))
    assert 1 - stay == pytest.approx(0.05, abs=2e-4)


def test_spending_functions() -> None:
    assert spending([1.0], 0.05)[0] == pytest.approx(0.05)
    assert spending([0.25], 0.05)[0] == pytest.approx(2 - 2 * stats.norm.cdf(stats.norm.isf(0.025) / 0.5))
    assert spending([0.5], 0.05, "pocock")[0] == pytest.approx(0.05 * np.log(1 + (np.e - 1) * 0.5))


def test_actual_fractions_change_the_boundary() -> None:
    planned = boundaries([0.25, 0.5, 0.75, 1.0])
    crashed = boundaries([0.2, 0.5, 0.75, 1.0])  # seeds crashed before the first look
    assert crashed.z[0] > planned.z[0]
    assert crashed.spent[0] < planned.spent[0]


def test_information_fraction() -> None:
    assert information_fraction(10, 10, 20) == pytest.approx(0.5)
    assert information_fraction(5, 5, 20, paired=True) == pytest.approx(0.25)
    assert information_fraction(4, 6, 20) == pytest.approx((24 / 10) / 10)
    assert information_fraction(0, 6, 20) == 0.0
    assert information_fraction(30, 30, 20) == 1.0


def test_firm_aware_boundaries_spend_alpha_on_the_stops_made() -> None:
    """Issue 37 item 4: where a look stops only when p x 10 clears its boundary, the α it leaves goes to the later
    looks. Expected values by hand (Monte Carlo of the looks' joint normal Z, 400,000 paths, MC SE 0.00034): the
    probability of a stop is α = 0.05 at the firm-aware boundaries, but 0.040 if the plain O'Brien-Fleming ones are
    only passed over; the first look is unchanged (nothing was spent before it)."""
    from scipy.stats import norm

    from ablate.stats.sequential import stop_factors

    assert stop_factors([5, 10, 15, 20]) == (10.0, 10.0, 10.0, 1.0)
    assert stop_factors([10, 20, 30]) == (10.0, 1.0, 1.0)
    plain = boundaries([0.25, 0.5, 0.75, 1.0])
    firm = boundaries([0.25, 0.5, 0.75, 1.0], stop_factor=stop_factors([5, 10, 15, 20]))
    assert firm.nominal_p[0] == plain.nominal_p[0]
    assert firm.nominal_p[3] == pytest.approx(0.0498, abs=5e-4)
    assert plain.nominal_p[3] == pytest.approx(0.0411, abs=2e-4)
    rng = np.random.default_rng(0)
    z = np.cumsum(rng.normal(size=(400_000, 4)), axis=1) / np.sqrt(np.arange(1, 5))
    for b, want in ((firm, 0.05), (plain, 0.040)):
        stop_z = [norm.isf(norm.sf(x) / f) for x, f in zip(b.z, firm.stop_factor, strict=True)]
        assert (np.abs(z) >= np.array(stop_z)).any(axis=1).mean() == pytest.approx(want, abs=0.0015)


def test_repeated_fraction_spends_nothing() -> None:
    b = boundaries([0.5, 0.5, 1.0])
    assert b.z[1] == np.inf and b.nominal_p[1] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"fractions": [0.5, 0.3]}, "`fractions`: must be a non-empty, non-decreasing", id="decreasing"),
        pytest.param({"fractions": [0.0, 1.0]}, "`fractions`", id="zero"),
        pytest.param({"fractions": [0.5, 1.0], "alpha": 0.7}, r"`alpha`: must be a number in \(0, 0.5\]", id="alpha"),
        pytest.param({"fractions": [1.0], "kind": "haybittle"}, "`kind`: must be one of obf, pocock", id="kind"),
        pytest.param({"fractions": [0.5, 1.0], "stop_factor": [10]}, "`stop_factor`: must give one factor >= 1 per "
                     "look", id="stop-factor-length"),
        pytest.param({"fractions": [0.5, 1.0], "stop_factor": [0.5, 1]}, "`stop_factor`", id="stop-factor-below-1"),
    ],
)
def test_boundaries_iv(kwargs: dict, match: str) -> None:
    with pytest.raises(StatsInputError, match=match):
        boundaries(**kwargs)


def test_group_sequential_stops_early_on_a_large_effect() -> None:
    rng = np.random.default_rng(2)
    t, c = rng.normal(3.0, 1.0, (200, 20)), rng.normal(0.0, 1.0, (200, 20))
    r = group_sequential_batch(t, c, [5, 10, 15, 20])
    assert (r.verdict == 1).mean() > 0.99
    # the nominal p 9e-5 at look 1 needs t ≈ 7 on Welch's ~8 df: d = 3 (t ≈ 4.7) rarely crosses there, but the
    # second look (p < 0.0055, t ≈ 6.7 expected) almost always
    assert (r.stopped_at <= 1).mean() > 0.95
    assert r.n_used.mean() < 11


def test_group_sequential_equivalence_stop() -> None:
    rng = np.random.default_rng(3)
    t, c = rng.normal(0.0, 0.01, (300, 20)), rng.normal(0.0, 0.01, (300, 20))
    r = group_sequential_batch(t, c, [5, 10, 15, 20], margin=0.05)
    assert (r.verdict == 3).mean() > 0.9  # equivalent
    # the TOST uses the look's nominal level too (1 - 2 x 9e-5 at look 1: a wide interval), so the equivalence
    # stop comes at look 1 or 2
    assert (r.stopped_at <= 1).mean() > 0.95


def test_group_sequential_iv() -> None:
    with pytest.raises(StatsInputError, match="`looks`: must be increasing seed counts, the last <= 10"):
        group_sequential_batch(np.zeros((2, 10)), np.zeros((2, 10)), [5, 20])
