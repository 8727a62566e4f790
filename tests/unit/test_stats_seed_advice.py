"""Seed advice that keeps its promise (issue 27, item 3): from 5-seed pilots, the one advised number reaches
80% power for its target in at least 75% of pilots, and "> cap" is said when the target needs more than the cap.

Through :func:`ablate.stats.recommend_seeds` (what :func:`ablate.stats.compare` calls); the true power of the
advised N is statsmodels' (``TTestIndPower`` / ``TTestPower``) at the true SD. The target is the margin δ, or the
pilot's observed |Δ| (the promise is then 80% power for an effect of that size). 120 pilots per cell (Monte-Carlo
SE 0.037 at an assurance of 0.8); ``python benchmarks/stats27_tables.py --only advice`` prints the full table
(4000 pilots, with the point-SD advice beside it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.power import TTestIndPower, TTestPower

from ablate.stats import recommend_seeds

PILOTS = 120
N_PILOT = 5


def pilot_advice(d: float, paired: bool, target: str, seed: int, cap: int, reps: int = PILOTS
                 ) -> tuple[list[int | None], list[float]]:
    """Advised N per pilot (None = "> cap") and the target in units of the true SD of the test."""
    rng = np.random.default_rng(seed)
    t, c = rng.normal(d, 1.0, (reps, N_PILOT)), rng.normal(0.0, 1.0, (reps, N_PILOT))
    out, targets = [], []
    for ti, ci in zip(t, c, strict=True):
        if paired:  # seeds sharing nothing (ρ = 0): the differences have SD √2
            sd, df, sigma = float(np.std(ti - ci, ddof=1)), N_PILOT - 1, math.sqrt(2.0)
        else:
            sd, df, sigma = math.sqrt((np.var(ti, ddof=1) + np.var(ci, ddof=1)) / 2), 2 * N_PILOT - 2, 1.0
        tgt = d * (sigma if paired else 1.0) if target == "margin" else abs(float(np.mean(ti) - np.mean(ci)))
        a = recommend_seeds(N_PILOT, sd, df, paired=paired, target=tgt, target_kind=target, cap=cap)
        assert a is not None
        out.append(a.n_needed)
        targets.append(tgt / sigma)
    return out, targets


def true_power(es: np.ndarray, n: np.ndarray, paired: bool) -> np.ndarray:
    """statsmodels' power (vectorised over effects and N)."""
    if paired:
        return np.asarray(TTestPower().power(es, nobs=n, alpha=0.05))
    return np.asarray(TTestIndPower().power(es, nobs1=n, alpha=0.05))


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("target", ["margin", "observed"])
def test_advised_number_reaches_the_power_in_three_of_four_pilots(paired: bool, target: str) -> None:
    """Cap 300, effects 0.5, 1 and 1.5 SD: among the pilots that get a number, the share whose advised N gives
    >= 80% power at the true SD (a "> cap" answer promises no power; how often it is wrong is held below)."""
    cap = 300
    shares = {}
    for d in (0.5, 1.0, 1.5):
        ns, es = pilot_advice(d, paired, target, seed=int(10 * d) + 2 * paired, cap=cap)
        e = np.asarray(es)
        n = np.asarray([cap if x is None else x for x in ns])
        named = np.asarray([x is not None for x in ns])
        power = true_power(e, n, paired)
        beyond = true_power(e, np.full(e.shape, cap), paired) < 0.8  # the truth needs more than the cap
        kept = power[named] >= 0.8
        assert kept.size >= 0.5 * PILOTS
        shares[d] = float(kept.mean())
        if target == "margin" and d >= 1.0:  # the truth needs <= 17 seeds: "> cap" (300) would be wrong
            assert not beyond.any() and named.all()
    assert len(shares) == 3 and min(shares.values()) >= 0.75, shares


def test_above_the_cap_only_when_the_lower_limit_is() -> None:
    """Issue 37, item 3: "> cap" (not resolvable within budget) only where even the SD's 90% lower confidence limit
    (scipy's chi-square quantile) needs more than the cap; where only the planning SD (its 90% upper limit) does, the
    answer is a range whose advised N is the planning SD's, above the cap (statsmodels' N at the upper limit). An
    unpaired 0.5 SD margin needs 64 seeds per arm (statsmodels), above the cap of 50: measured 0.705 range, 0.243
    "> cap", 0.051 a number (2000 pilots, docs/verdict.md)."""
    from scipy.stats import chi2

    assert math.ceil(TTestIndPower().solve_power(0.5, alpha=0.05, power=0.8)) == 64
    rng = np.random.default_rng(5)
    kinds = {"number": 0, "range": 0, "> cap": 0}
    for ti, ci in zip(rng.normal(0.5, 1, (PILOTS, N_PILOT)), rng.normal(0, 1, (PILOTS, N_PILOT)), strict=True):
        sd = math.sqrt((np.var(ti, ddof=1) + np.var(ci, ddof=1)) / 2)
        a = recommend_seeds(N_PILOT, sd, 8, target=0.5, target_kind="margin", cap=50)
        assert a is not None
        low, up = sd * math.sqrt(8 / chi2.ppf(0.9, 8)), sd * math.sqrt(8 / chi2.ppf(0.1, 8))
        n_low, n_up = (math.ceil(TTestIndPower().solve_power(0.5 / s, alpha=0.05, power=0.8)) for s in (low, up))
        assert (a.n_needed is None) == (n_low > 50) == ("not resolvable within budget" in a.message())
        assert a.is_range == (n_low <= 50 < n_up) and (a.n_needed is None or a.n_needed == max(3, n_up))
        if a.is_range:
            assert a.n_needed_point is not None and a.n_needed_point <= n_up and f"advised: {n_up} (" in a.message()
            assert f"between {a.n_needed_point} and {n_up} seeds per arm" in a.message()
        kinds["> cap" if a.n_needed is None else "range" if a.is_range else "number"] += 1
    assert kinds["range"] >= 0.55 * PILOTS and 0.15 * PILOTS <= kinds["> cap"] <= 0.42 * PILOTS, kinds


def _correct_share(d: float, paired: bool, seed: int, pilots: int = 200, cap: int = 50) -> float:
    """Of all 5-seed pilots, the share whose advice is correct: a number (above the cap for a range) whose true power
    at the true SD is >= 0.8 (statsmodels), or "> cap" where statsmodels' N exceeds the cap."""
    rng = np.random.default_rng(seed)
    t, c = rng.normal(d, 1.0, (pilots, N_PILOT)), rng.normal(0.0, 1.0, (pilots, N_PILOT))
    sigma = math.sqrt(2.0) if paired else 1.0
    true_n = math.ceil((TTestPower() if paired else TTestIndPower()).solve_power(d, alpha=0.05, power=0.8))
    advised = []
    for ti, ci in zip(t, c, strict=True):
        sd = float(np.std(ti - ci, ddof=1)) if paired else math.sqrt((np.var(ti, ddof=1) + np.var(ci, ddof=1)) / 2)
        a = recommend_seeds(N_PILOT, sd, N_PILOT - 1 if paired else 2 * N_PILOT - 2, paired=paired, target=d * sigma,
                            target_kind="margin", cap=cap)
        assert a is not None
        advised.append(0 if a.n_needed is None else a.n_needed)
    n = np.asarray(advised)
    reach = true_power(np.full(n.shape, d), np.where(n > 0, n, cap), paired) >= 0.8
    return float(np.mean(np.where(n > 0, reach, true_n > cap)))


def test_pilots_get_a_correct_answer_where_the_issue_found_few() -> None:
    """The issue's rows: an unpaired 0.75 SD margin (true N 29) got a correct answer from 29% of 5-seed pilots, 62%
    being told "> 50"; the paired d_z = 0.5 one (true 34) from 9%; and the unpaired 0.5 SD margin (true 64, above the
    cap) from 0.600 when a range advised the cap. Now every one >= 0.75 (2000 pilots: docs/verdict.md), held here with
    200 pilots (MC SE 0.028 at 0.8; measured 0.908 / 0.891 / 0.905 with 2000, so 0.75 is over 4 SE below)."""
    assert _correct_share(0.75, False, seed=75) >= 0.75
    assert _correct_share(0.5, True, seed=57) >= 0.75
    assert _correct_share(0.5, False, seed=50) >= 0.75


def test_the_power_at_the_planning_sd_is_printed() -> None:
    """The power beside the advised N is statsmodels' power of that N at the planning SD (the SD's 90% upper limit,
    scipy's chi-square quantile), not at the pilot's SD (which printed 1.00 where the truth was 0.60-0.93)."""
    from scipy.stats import chi2

    a = recommend_seeds(5, 1.0, 8, target=1.0, target_kind="margin")
    assert a is not None and a.n_needed is not None
    up = math.sqrt(8 / chi2.ppf(0.1, 8))
    assert a.power == pytest.approx(TTestIndPower().power(1.0 / up, nobs1=a.n_needed, alpha=0.05), abs=1e-9)
    assert 0.8 <= a.power < TTestIndPower().power(1.0, nobs1=a.n_needed, alpha=0.05)
    assert f"at the planning SD it has power {a.power:.2f}" in a.message()
    assert f"needs {a.n_needed} seeds per arm" in a.message()
