"""The pairing rule of ``pairing=auto`` (issue 27, item 2): pairing by seed follows the design (the same seed
gives every arm the same randomness), never the equality of the seed lists nor the outcomes.

Simulations are vectorised through the verdict's own core (:func:`ablate.stats.decide_batch`), R = 4000
replications per cell with fixed generator seeds (Monte-Carlo SE of a rate near 0.05: 0.0034; of a power near
0.5: 0.008). Arms are normal with SD 1; a seed's shared part (weight of ρ) enters both arms, so ρ is the arms'
correlation across seeds. Reference powers come from statsmodels' power functions (the noncentral t), never
from ablate's earlier output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import TTestIndPower, TTestPower

from ablate.judge.verdict import shared_randomness
from ablate.stats import auto_pair_from, decide_batch, pair_by_seed, power_loss
from ablate.stats.core import BETTER, WORSE

R = 4000
ALPHA = 0.05
SE_RATE = math.sqrt(ALPHA * (1 - ALPHA) / R)
NS = (3, 5, 10, 20, 50)


def draw(seed: int, n: int, rho: float, d: float, reps: int = R) -> tuple[np.ndarray, np.ndarray]:
    """(treatment, control), shape (reps, n): SD 1 per arm, correlation ``rho`` across seeds, shift ``d`` SD."""
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal((reps, n))
    own = rng.standard_normal((2, reps, n))
    control = math.sqrt(rho) * shared + math.sqrt(1 - rho) * own[0]
    treatment = math.sqrt(rho) * shared + math.sqrt(1 - rho) * own[1] + d
    return treatment, control


def plan(form: str = "fn", determinism: str = "seeded", varied: str | None = None) -> dict:
    """A plan record in the shape of ``ablation.yaml`` (task form, determinism, arms)."""
    arms = [{"name": "control", "changes": {}, "config": {}}]
    if varied is not None:
        arms.append({"name": f"determinism={varied}", "changes": {"determinism": varied},
                     "config": {"determinism": varied}})
    else:
        arms.append({"name": "lr=0.1", "changes": {"task.lr": 0.1}, "config": {}})
    task = {"fn": "examples.digits.task:train"} if form == "fn" else {form: "train.py"}
    return {"task": task, "options": {"determinism": determinism}, "arms": arms}


# -- the rule: what it depends on ------------------------------------------------------------------------------
def test_design_shares_randomness_only_for_a_seeded_fn_task() -> None:
    """ablate seeds python, numpy and torch from the trial seed for a fn task (determinism seeded/strict): that
    design shares randomness across arms. A command/app task gets the seed but ablate cannot see what it seeds;
    determinism=off seeds nothing (also when it is one arm's value)."""
    assert shared_randomness(plan())[0] and shared_randomness(plan(determinism="strict"))[0]
    assert "ablate seeds python, numpy and torch" in shared_randomness(plan())[1]
    for p in (plan("command"), plan("app"), plan(determinism="off"), plan(varied="off")):
        shared, why = shared_randomness(p)
        assert not shared and why
    assert shared_randomness(plan(varied="strict"))[0]


def test_equal_seed_lists_alone_do_not_pair() -> None:
    """The same 25 seeds in both arms: auto pairs only when the design shares randomness; declared pairing
    pairs at any N; unpaired never pairs."""
    t = {s: float(s) for s in range(25)}
    c = {s: float(s * s % 7) for s in range(25)}
    plain = pair_by_seed(t, c)
    assert not plain.paired and plain.pair_from is None
    assert plain.reason.startswith("unpaired (Welch): pairing=auto pairs by seed only when the design shares "
                                   "randomness across arms")
    shared = pair_by_seed(t, c, shared_randomness=True, design="a fn task")
    assert shared.paired and shared.reason == ("paired by seed: pairing=auto: the design shares randomness across "
                                               "arms (a fn task)")
    assert shared.rho == pytest.approx(float(np.corrcoef(list(t.values()), list(c.values()))[0, 1]))
    three = {s: t[s] for s in range(3)}, {s: c[s] for s in range(3)}
    assert pair_by_seed(*three, shared_randomness=True).paired  # 3 shared seeds suffice, whatever N0 says
    assert pair_by_seed(*three, pairing="paired").paired
    assert not pair_by_seed(t, c, pairing="unpaired", shared_randomness=True).paired
    two = {0: 1.0, 1: 2.0}, {0: 0.0, 1: 3.0}
    assert not pair_by_seed(*two, shared_randomness=True).paired  # < 3 shared seeds: unpaired on all runs


def test_rule_never_looks_at_the_outcomes() -> None:
    """The same design gives the same choice whatever the values (correlated, anti-correlated, constant)."""
    seeds = range(10)
    choices = set()
    count = 0
    for values in ([0.0] * 10, list(range(10)), [(-1.0) ** s for s in seeds]):
        for c in ([1.0] * 10, list(range(10)), [-(v) for v in range(10)]):
            for shared in (False, True):
                p = pair_by_seed(dict(zip(seeds, values, strict=True)), dict(zip(seeds, c, strict=True)),
                                 shared_randomness=shared)
                choices.add((shared, p.paired))
                count += 1
    assert count == 18 and choices == {(False, False), (True, True)}


def test_power_loss_of_pairing_at_rho_zero_by_hand() -> None:
    """What pairing costs when seeds share nothing (why equal seed lists alone do not pair): N = 10, 1 SD,
    Welch (df 18) vs paired t (df 9), same noncentrality √5 (scipy's noncentral t)."""
    ncp, cw, cp = math.sqrt(5), stats.t.isf(0.025, 18), stats.t.isf(0.025, 9)
    welch = stats.nct.sf(cw, 18, ncp) + stats.nct.cdf(-cw, 18, ncp)
    paired = stats.nct.sf(cp, 9, ncp) + stats.nct.cdf(-cp, 9, ncp)
    assert round(welch, 2) == 0.56 and round(paired, 2) == 0.51
    assert power_loss(10) >= welch - paired
    assert [auto_pair_from(a) for a in (0.05, 0.025)] == [19, 27]  # the planning figure, kept


# -- power against statsmodels' formulas --------------------------------------------------------------------------
@pytest.mark.parametrize("n", [5, 10])
def test_unpaired_power_at_rho_zero_matches_statsmodels(n: int) -> None:
    """A design that shares nothing runs Welch: at 1 SD its power is plain scipy Welch's on the same draws (less
    the skew guard's 0-3%), and below the pooled two-sample t's (statsmodels), which has the full 2N - 2 df."""
    t, c = draw(11 + n, n, 0.0, 1.0)
    got = float((decide_batch(t, c, paired=False).verdict == BETTER).mean())
    res = stats.ttest_ind(t, c, axis=1, equal_var=False)
    scipy_welch = float(((res.pvalue < ALPHA) & (res.statistic > 0)).mean())
    assert 0.97 * scipy_welch <= got <= scipy_welch
    pooled = float(TTestIndPower().power(1.0, nobs1=n, alpha=ALPHA))
    assert pooled - 0.05 <= got <= pooled + 3 * math.sqrt(pooled * (1 - pooled) / R), (got, pooled)


def test_shared_randomness_pairs_and_keeps_the_gain_at_rho_half() -> None:
    """ρ = 0.5, N = 10, 1 SD: the paired t's power is TTestPower at d_z = 1 / √(2 (1 - ρ)) = 1 (0.80), Welch's
    about the two-sample t's at d = 1 (0.56): the design that shares randomness gets the gain by default."""
    t, c = draw(31, 10, 0.5, 1.0)
    seeds = range(10)
    pr = pair_by_seed(dict(zip(seeds, t[0], strict=True)), dict(zip(seeds, c[0], strict=True)),
                      shared_randomness=True)
    assert pr.paired
    paired = float((decide_batch(t, c, paired=pr.paired).verdict == BETTER).mean())
    welch = float((decide_batch(t, c, paired=False).verdict == BETTER).mean())
    want_p = float(TTestPower().power(1.0, nobs=10, alpha=ALPHA))
    want_w = float(TTestIndPower().power(1.0, nobs1=10, alpha=ALPHA))
    assert paired == pytest.approx(want_p, abs=0.025) and welch == pytest.approx(want_w, abs=0.03)


# -- false positives: a rule fixed before the data keeps α -----------------------------------------------------------
@pytest.mark.parametrize("rho", [0.0, 0.5])
def test_aa_false_positive_rate(rho: float) -> None:
    """Identical arms, both analyses (paired, as a design that shares randomness runs; Welch otherwise)."""
    rates = []
    for paired in (False, True):
        for n in NS:
            t, c = draw(61 + n + int(10 * rho), n, rho, 0.0)
            rates.append(float(np.isin(decide_batch(t, c, paired=paired).verdict, (BETTER, WORSE)).mean()))
    assert len(rates) == 2 * len(NS)
    assert all(r <= ALPHA + 3 * SE_RATE for r in rates), rates
    assert float(np.mean(rates)) <= 0.056, rates


