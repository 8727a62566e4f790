"""Firm-aware looks (issue 37 item 4): a sequential treatment stops for efficacy only with a firm verdict.

Measured through :func:`ablate.stats.group_sequential_batch`, which tests/unit/test_stats_sequential_twin.py proves
equal row by row to :func:`ablate.judge.verdict.sequential_state` (what ``ablate verdict`` replays), and through
:func:`ablate.stats.decide_batch` for fixed N (what ``compare()`` runs). The expected values are the simulation's
own (benchmarks/sequential_firm.py, 20,000 replications, docs/verdict.md "Sequential seeds"); the fast subset here
uses 1,500 replications (MC SE of a rate near 0.86: 0.009; near 0.05: 0.0056).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ablate.stats import decide_batch, group_sequential_batch
from ablate.stats.core import BETTER, FIRM_FROM, WORSE

ALPHA = 0.05
LOOKS = [5, 10, 15, 20]


def draw(rng: np.random.Generator, reps: int, n: int, effect: float, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """Treatment and control, SD 1 per seed, the treatment shifted by ``effect`` SDs. Paired: a shared seed
    component (ρ = 0.5, each arm's SD still 1)."""
    shared = rng.normal(0.0, math.sqrt(0.5), (reps, n)) if paired else np.zeros((reps, n))
    e = math.sqrt(0.5) if paired else 1.0
    return effect + shared + rng.normal(0.0, e, (reps, n)), shared + rng.normal(0.0, e, (reps, n))


def simulate(looks: list[int], effect: float, paired: bool, reps: int, seed: int,
             fixed: tuple[int, ...] = ()) -> dict[str, float]:
    """P(firm better), P(firm better or worse), E[N] of the sequential design; P(firm better) of fixed N designs
    on the same data (the first ``n`` seeds of each row)."""
    rng = np.random.default_rng(seed)
    t, c = draw(rng, reps, max([looks[-1], *fixed]), effect, paired)
    s = group_sequential_batch(t[:, :looks[-1]], c[:, :looks[-1]], looks, paired=paired, alpha=ALPHA)
    out = {"firm_better": float(((s.verdict == BETTER) & s.firm).mean()),
           "firm_any": float((np.isin(s.verdict, (BETTER, WORSE)) & s.firm).mean()),
           "any": float(np.isin(s.verdict, (BETTER, WORSE)).mean()),
           "en": float(s.n_used.mean()), "early_indicative": float(
               (np.isin(s.verdict, (BETTER, WORSE)) & ~s.firm & (s.stopped_at < len(looks) - 1)).mean())}
    for n in fixed:
        r = decide_batch(t[:, :n], c[:, :n], paired=paired, alpha=ALPHA)
        out[f"fixed{n}"] = float(((r.verdict == BETTER) & r.firm).mean())
    return out


def test_no_stop_with_an_indicative_verdict() -> None:
    """Every stop before the last look is a firm better/worse (or equivalent): an indicative crossing runs on."""
    r = simulate(LOOKS, 1.0, False, 1500, seed=3701, fixed=(19, 20))
    assert r["early_indicative"] == 0.0
    # at N = 20 only evidently skewed values are indicative (issue 37 items 1-2: the skew test fires on about 5% of
    # normal samples; benchmarks/stats37_firm.py measured 0.850 firm of 0.870 at N = 20, 1 SD, unpaired)
    assert 0 <= r["any"] - r["firm_any"] < 0.04


def test_firm_power_at_1sd_against_fixed_n() -> None:
    """At a 1 SD effect the default looks give a firm `better` as often as a fixed 20 seeds (0.863 vs 0.862 at
    20,000 reps; the issue measured 0.397 for the old rule, which stopped at an indicative crossing) at E[N] 18.3
    seeds per arm, and far more often than the fixed design of about the same E[N] (19 seeds: 0.54, firm only when
    p x 10 clears α below FIRM_FROM). Looks past 20 beat fixed N outright at lower E[N] (0.958 at E[N] 21.0 vs
    0.895 for 22 fixed)."""
    assert FIRM_FROM[False] == 20  # the figures below assume the firm-from-20 rule
    r = simulate(LOOKS, 1.0, False, 1500, seed=3702, fixed=(19, 20))
    assert 0.83 <= r["firm_better"] <= 0.90, r
    assert 17.7 <= r["en"] <= 18.8, r
    assert r["firm_better"] > r["fixed19"] + 0.2, r
    assert r["firm_better"] >= r["fixed20"] - 0.012, r  # same data: the two differ on few rows
    w = simulate([5, 10, 15, 20, 25, 30], 1.0, False, 1500, seed=3703, fixed=(22,))
    assert w["en"] <= 22 and w["firm_better"] > w["fixed22"] + 0.03, w


def test_firm_aa_rate_within_alpha() -> None:
    """A/A: the firm better/worse rate stays within α + 2 MC SE (0.048 unpaired, 0.051 paired at 20,000 reps; the
    boundaries spend α only on the stops made, :func:`ablate.stats.sequential.stop_factors`)."""
    tol = 2 * math.sqrt(ALPHA * (1 - ALPHA) / 1500)
    for paired in (False, True):
        r = simulate(LOOKS, 0.0, paired, 1500, seed=3704 + paired)
        assert r["firm_any"] <= ALPHA + tol, (paired, r)


def test_expected_trials_matches_the_replay() -> None:
    """The planning simulation (:func:`ablate.stats.sequential.expected_trials`, what ``dry_run=true`` prints) stops
    treatments where :func:`ablate.stats.group_sequential_batch` does: E[N] 18.26 at 1 SD and 19.98 at no effect for
    looks 5, 10, 15, 20 (benchmarks/sequential_firm.py, 20,000 reps); trials count the control, which runs while any
    treatment does (one treatment: 2 E[N]); fixed N = (m + 1) x 20."""
    from ablate.stats.sequential import expected_trials

    none, half, one = expected_trials(LOOKS, (0.0, 0.5, 1.0), paths=4000)
    assert one.seeds_per_treatment == pytest.approx(18.26, abs=0.25) and one.trials == 2 * one.seeds_per_treatment
    assert none.seeds_per_treatment == pytest.approx(19.98, abs=0.05) and none.fixed_trials == 40
    assert none.p_stop == pytest.approx(0.05, abs=0.012) and one.p_stop == pytest.approx(0.863, abs=0.02)
    assert none.seeds_per_treatment > half.seeds_per_treatment > one.seeds_per_treatment
    five = expected_trials(LOOKS, (1.0,), n_treatments=5, paths=2000)[0]
    assert five.fixed_trials == 120 and five.trials <= 120
    # the control runs to the last treatment's stop: more than the mean treatment's seeds
    assert five.trials > 6 * five.seeds_per_treatment


def test_expected_trials_of_far_looks_in_stretches() -> None:
    """Seed-by-seed draws of ``looks=[5, 100000]`` would take 48 GB (a dry run died with MemoryError); above
    SEEDWISE_LIMIT each stretch between looks is drawn whole (its sum and chi-square squared deviations). The two
    draws give the same plan within Monte Carlo error: p_stop's SE at 20,000 paths is about 0.003."""
    from ablate.stats import sequential as sq

    seedwise = sq.expected_trials([5, 10, 20], [0.0, 0.5], n_treatments=2)
    old, sq.SEEDWISE_LIMIT = sq.SEEDWISE_LIMIT, 0
    try:
        whole = sq.expected_trials([5, 10, 20], [0.0, 0.5], n_treatments=2)
    finally:
        sq.SEEDWISE_LIMIT = old
    for a, b in zip(seedwise, whole, strict=True):
        assert abs(a.p_stop - b.p_stop) < 4 * math.sqrt(2 * 0.25 * 0.25 / 20_000), (a, b)
        assert abs(a.trials - b.trials) < 0.5 and a.fixed_trials == b.fixed_trials == 60
    (far,) = sq.expected_trials([5, 100_000], [0.0], n_treatments=2)
    assert far.fixed_trials == 300_000 and 0.015 < far.p_stop < 0.035  # alpha 0.05 over 2 treatments, both looks
