"""Futility stops in sequential mode (issue 39 item 2): a suite of 5 treatments against one control.

Measured through :func:`ablate.stats.group_sequential_batch` with ``effect=`` (the function
tests/unit/test_stats_sequential_twin.py proves equal row by row to :func:`ablate.judge.verdict.sequential_state`,
what ``ablate verdict`` replays, futility stops included), fixed N through :func:`ablate.stats.decide_batch` on the
same data. The full table is benchmarks/sequential_futility.py (docs/verdict.md, Sequential seeds: futility).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from ablate.errors import ConfigError
from ablate.judge.options import VerdictOptions, parse_effect, parse_futility
from ablate.judge.verdict import ArmData, sequential_state, stop_reason
from ablate.stats import decide_batch, group_sequential_batch
from ablate.stats.core import BETTER, WORSE
from ablate.stats.futility import conditional_power, planned_drift

ALPHA = 0.05
#: The issue's suite: true effects of the 5 treatments, in SDs of one seed's metric.
EFFECTS = (0.0, 0.0, 0.0, 0.5, 1.0)


def draw(rng: np.random.Generator, reps: int, n: int, shape: str) -> np.ndarray:
    """Seeds of SD 1 (mean 0 before the effect): normal, or lognormal (σ_log 0.5) standardised. Shape (reps, n)."""
    if shape == "normal":
        return rng.normal(size=(reps, n))
    s = 0.5
    x = rng.lognormal(0.0, s, size=(reps, n))
    mean, sd = math.exp(s * s / 2), math.sqrt((math.exp(s * s) - 1) * math.exp(s * s))
    return (x - mean) / sd


def simulate_suite(looks: list[int], effect: float | None, shape: str, reps: int, seed: int,
                   effects: tuple[float, ...] = EFFECTS, futility: float | None = None) -> dict[str, object]:
    """One control and ``len(effects)`` treatments (each tested at α/m, the control shared), sequential with
    futility under the planned ``effect`` beside fixed N = ``looks[-1]`` (Bonferroni α/m, as the looks) on the same
    data. Returns per treatment P(better) (firm or indicative: on lognormal seeds the skew rule makes most verdicts
    indicative), sequential and fixed, P(futility stop) and E[N]; the family-wise error over the null treatments
    (any better/worse verdict, firm or not); expected trials (the treatments' seeds plus the control's, which runs to
    the last treatment's stop) and fixed N's."""
    rng = np.random.default_rng(seed)
    n, m = looks[-1], len(effects)
    c = draw(rng, reps, n, shape)
    kw = {} if futility is None else {"futility": futility}
    seq_better, fix_better, fut, en, used = [], [], [], [], []
    fw_seq, fw_fix = np.zeros(reps, bool), np.zeros(reps, bool)
    for d in effects:
        t = draw(rng, reps, n, shape) + d
        s = group_sequential_batch(t, c, looks, alpha=ALPHA, n_comparisons=m, effect=effect, **kw)
        f = decide_batch(t, c, alpha=ALPHA, n_comparisons=m)
        seq_better.append(float((s.verdict == BETTER).mean()))
        fix_better.append(float((f.verdict == BETTER).mean()))
        fut.append(float(s.futile.mean()) if s.futile is not None else 0.0)
        en.append(float(s.n_used.mean()))
        used.append(s.n_used)
        if d == 0:
            fw_seq |= np.isin(s.verdict, (BETTER, WORSE))
            fw_fix |= np.isin(f.verdict, (BETTER, WORSE))
    u = np.stack(used, 1)
    trials = u.sum(1) + u.max(1)
    return {"seq_better": seq_better, "fixed_better": fix_better, "futile": fut, "en": en,
            "fwer": float(fw_seq.mean()), "fwer_fixed": float(fw_fix.mean()), "trials": float(trials.mean()),
            "fixed_trials": (m + 1) * n, "control_n": float(u.max(1).mean())}


@pytest.mark.parametrize("paired", [False, True])
def test_futility_twin_equals_sequential_state(paired: bool) -> None:
    """On the same data the simulation's futility stops are the verdict's: same look, same N, same flag, and the
    verdict names the reason ``futility`` (metric SD 0.01, planned effect 0.5 SD; a third of rows 1.2 SD better)."""
    rng = np.random.default_rng(39 + paired)
    rows, looks = 40, [5, 10, 15, 20]
    shared = rng.normal(size=(rows, 20))
    c = 0.7 + 0.01 * (0.6 * shared + 0.8 * rng.normal(size=(rows, 20)))
    shift = np.where(np.arange(rows) % 3 == 0, 0.012, 0.0)[:, None]
    t = 0.7 + shift + 0.01 * (0.6 * shared + 0.8 * rng.normal(size=(rows, 20)))
    t[rng.random((rows, 20)) < 0.03] = np.nan  # a few failed trials
    batch = group_sequential_batch(t, c, looks, paired=paired, effect=0.5, futility=0.2)
    plan = {"seeds": list(range(20)), "goal": "maximize", "task": {},
            "arms": [{"name": "control"}, {"name": "lr=0.1"}]}
    opts = VerdictOptions(sequential="group", looks=looks, pairing="paired" if paired else "unpaired", effect=0.5,
                          futility=0.2)
    seen: Counter[str] = Counter()
    for i in range(rows):
        data = {"control": ArmData("control", "control", 0.05, dict(enumerate(c[i])), Counter(), 0, {}),
                "lr=0.1": ArmData("lr=0.1", "0.1", 0.1, dict(enumerate(t[i])), Counter(), 0, {})}
        st = sequential_state(plan, data, opts)["lr=0.1"]
        assert st["look"] == int(batch.stopped_at[i]) and st["n"] == int(batch.n_used[i]), i
        assert bool(st.get("futile")) == bool(batch.futile[i]), i
        reason = stop_reason("inconclusive", st, opts)
        if batch.futile[i]:
            assert reason == "futility" and st["conditional_power"] < 0.2 and st["look"] < len(looks) - 1
        seen[reason or "running"] += 1
    assert seen["futility"] >= 5 and seen["budget"] + seen["efficacy"] >= 5, seen


def test_planned_drift_of_an_overflowing_effect_is_nan_not_a_warning() -> None:
    """effect x SD / SE past the float range (an effect of 1e308 SDs; the CLI refuses effects over 100) is NaN, no
    futility stop, without numpy's overflow RuntimeWarning (an error under the test settings); a finite row keeps
    its value, 1e308 x 1 / (1e300 x √0.25) = 2e8."""
    out = planned_drift(1e308, [1.0, 1.0], [1e-10, 1e300], [0.25, 0.25])
    assert math.isnan(out[0]) and out[1] == pytest.approx(2e8)


def test_futility_written_as_a_string_is_read_as_effect_is() -> None:
    """``futility='0.2'`` was refused ("must be a number ..., got '0.2'") while ``effect='0.5'`` was read; both are
    read now, and a string that is no number in (0, 1) is still refused in one line."""
    assert parse_effect("0.5", "group", [4, 8]) == 0.5 and parse_futility("0.2", 0.5) == 0.2
    for bad in ("abc", "nan", "1", "0"):
        with pytest.raises(ConfigError, match="futility"):
            parse_futility(bad, 0.5)


def test_conditional_power_against_a_direct_normal_computation() -> None:
    """The B-value formula equals P(B(1) >= c | B(t) = z √t) from scipy's normal law of the increment,
    B(1) - B(t) ~ N(θ(1 - t), 1 - t) (Lan & Wittes 1988), for either sign of z."""
    from scipy.stats import norm

    z, t, theta, c = 1.1, 0.4, 2.5, 2.3
    b = z * math.sqrt(t)
    direct = norm(loc=b + theta * (1 - t), scale=math.sqrt(1 - t)).sf(c)
    assert float(conditional_power(z, t, theta, c)) == pytest.approx(direct, rel=1e-12)
    assert float(conditional_power(-z, t, theta, c)) == pytest.approx(direct, rel=1e-12)  # both directions count
    assert float(conditional_power(0.0, 0.25, 0.0, 1.96)) == pytest.approx(norm.sf(1.96 / math.sqrt(0.75)))


@pytest.mark.parametrize("shape", ["normal", "lognormal"])
def test_suite_keeps_fwer_and_power_and_saves_trials(shape: str) -> None:
    """The issue-39 suite (effects 0, 0, 0, 0.5, 1 SD; normal and lognormal seeds) in a design powered for the
    planned effect (looks 20, 40, ..., 120; ``effect=0.5 futility=0.3``): family-wise error within α + 2 MC SE, power
    per treatment at least 0.95x fixed N's on the same data, and at least 30% fewer expected trials than fixed N = 120
    (1,000 reps, normal: FWER 0.023, power 0.869 vs 0.883 at 0.5 SD, 480 expected trials of 720, 33% fewer;
    lognormal: FWER 0.021, power 0.755 vs 0.747, 484 of 720, 32.7% fewer, where it was 18% before a crossing that
    only evident skew keeps indicative stopped its arm; the 4,000-rep table of benchmarks/sequential_futility.py is
    in docs/verdict.md, Futility stops)."""
    reps = 1000
    r = simulate_suite([20, 40, 60, 80, 100, 120], 0.5, shape, reps, seed=5, futility=0.3)
    assert r["fwer"] <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / reps), r
    for k in (3, 4):  # the 0.5 and 1 SD treatments
        assert r["seq_better"][k] >= 0.95 * r["fixed_better"][k], r
    assert r["trials"] <= 0.70 * r["fixed_trials"], r
    assert min(r["futile"][:3]) >= 0.9 and r["futile"][4] == 0.0, r  # null arms stop for futility, 1 SD never
    assert r["control_n"] < 120 and max(r["en"][:3]) < 85, r  # the control stops with the last treatment


def test_expected_trials_with_futility_matches_the_replay() -> None:
    """The dry run's simulation (:func:`ablate.stats.sequential.expected_trials` with ``planned_effect``) stops
    treatments for futility where :func:`ablate.stats.group_sequential_batch` does: E[N] of one treatment under no
    effect and under the planned effect agree within MC error (looks 10, 20, 30, 40; effect 0.5; γ 0.1), and futility
    lowers E[N] under no effect from 39.7 seeds (no futility stop) to 32.8."""
    from ablate.stats.sequential import expected_trials

    looks = [10, 20, 30, 40]
    plans = expected_trials(looks, (0.0, 0.5), paths=3000, planned_effect=0.5, futility=0.1)
    rng = np.random.default_rng(3939)
    for plan in plans:
        c = rng.normal(size=(3000, 40))
        t = rng.normal(size=(3000, 40)) + plan.effect
        s = group_sequential_batch(t, c, looks, effect=0.5, futility=0.1)
        assert abs(plan.seeds_per_treatment - float(s.n_used.mean())) < 0.6, (plan, s.n_used.mean())
        assert plan.trials == 2 * plan.seeds_per_treatment
    assert plans[0].seeds_per_treatment < 34  # 32.8 (39.7 without futility: expected_trials without the effect)
    assert plans[0].seeds_per_treatment < expected_trials(looks, (0.0,), paths=3000)[0].seeds_per_treatment - 5


def test_verdict_names_the_futility_stop(tmp_path) -> None:
    """On recorded trials (looks 5-20, ``effect=0.5 futility=0.3``): a null arm stops at look 1 for futility, with
    the conditional power recomputed here from scipy's Welch p and the B-value formula; the bottom line and the
    sequential row say so, and no more seeds are asked for it; the real arm stops for efficacy."""
    from scipy import stats

    from ablate.judge.verdict import write_verdict
    from ablate.record.sweepdir import SweepDir
    from ablate.stats.sequential import futility_bound
    from tests.helpers import make_sweep

    rng = np.random.default_rng(1)
    c, null, real = (list(mu + 0.01 * rng.normal(size=20)) for mu in (0.7, 0.7, 0.73))
    root = make_sweep(tmp_path / "sw", {"control": c, "lr=0.1": null, "lr=0.2": real},
                      options={"sequential": "group", "looks": [5, 10, 15, 20], "effect": 0.5, "futility": 0.3})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    fut, eff = v["comparisons"]
    s = fut["sequential"]
    assert (s["stop_reason"], s["look"], s["n"], s["crossed"]) == ("futility", 1, 5, False)
    w = stats.ttest_ind(null[:5], c[:5], equal_var=False)
    se = abs(np.mean(null[:5]) - np.mean(c[:5])) / abs(w.statistic)
    sd = math.sqrt((np.var(null[:5], ddof=1) + np.var(c[:5], ddof=1)) / 2)
    t = 0.25
    z = stats.norm.isf(w.pvalue / 2)
    drift = 0.5 * sd / (se * math.sqrt(t))
    c_k = futility_bound([5, 10, 15, 20], 0.025)  # the last look's planned boundary at α/m
    want = stats.norm.sf((c_k - z * math.sqrt(t) - drift * (1 - t)) / math.sqrt(1 - t))
    assert s["conditional_power"] == pytest.approx(want, rel=1e-9) and want < 0.3
    assert eff["sequential"]["stop_reason"] == "efficacy" and eff["verdict"] == "better"
    md = (root / "verdict.md").read_text()
    bottom = md[md.index("## Bottom line"):md.index("## For the paper")]
    assert f"**inconclusive**, stopped for futility at look 1 (N = 5): conditional power {want:.3f} under the " \
           "planned 0.5 SD, below 0.3" in bottom
    assert f"stopped for futility (conditional power {want:.3f} < 0.3)" in md
    assert "seeds=" not in bottom  # a futility stop asks for no more seeds


def test_skewed_crossing_stops_in_the_twin_and_the_verdict_alike() -> None:
    """Lognormal seeds (σ_log 0.5: evidently skewed from 20 seeds), looks 20, 40, 60, a 1 SD effect in half the
    rows: a crossing that only evident skew keeps indicative stops its arm before the last look (more seeds cannot
    make it firm, issue 39), in :func:`group_sequential_batch` and in the verdict's replay at the same look, and the
    verdict names it (``skewed_stop``; stop reason ``efficacy``, the verdict ``better``, indicative)."""
    rng = np.random.default_rng(3941)
    rows, looks = 40, [20, 40, 60]
    c = 0.7 + 0.01 * draw(rng, rows, 60, "lognormal")
    shift = np.where(np.arange(rows) % 2 == 0, 0.01, 0.0)[:, None]
    t = 0.7 + shift + 0.01 * draw(rng, rows, 60, "lognormal")
    batch = group_sequential_batch(t, c, looks, effect=0.5, futility=0.3)
    plan = {"seeds": list(range(60)), "goal": "maximize", "task": {},
            "arms": [{"name": "control"}, {"name": "lr=0.1"}]}
    opts = VerdictOptions(sequential="group", looks=looks, pairing="unpaired", effect=0.5, futility=0.3)
    seen: Counter[str] = Counter()
    for i in range(rows):
        data = {"control": ArmData("control", "control", 0.05, dict(enumerate(c[i])), Counter(), 0, {}),
                "lr=0.1": ArmData("lr=0.1", "0.1", 0.1, dict(enumerate(t[i])), Counter(), 0, {})}
        st = sequential_state(plan, data, opts)["lr=0.1"]
        assert (st["look"], st["n"]) == (int(batch.stopped_at[i]), int(batch.n_used[i])), i
        assert bool(st.get("futile")) == bool(batch.futile[i]), i
        if st.get("skewed_stop"):
            assert batch.verdict[i] == BETTER and not batch.firm[i] and st["look"] < len(looks) - 1, i
            assert stop_reason("better", st, opts) == "efficacy"
            seen["skew_stop"] += 1
        seen[int(batch.stopped_at[i])] += 1
    assert seen["skew_stop"] >= 10, seen  # 14 of the 20 1-SD rows (before issue 39's rule: none, all ran to 60)


def test_verdict_names_a_skewed_stop_and_asks_no_seeds(tmp_path) -> None:
    """On recorded trials (looks 20, 40; lognormal seeds, σ_log 1, a 2 SD effect): the treatment crosses at look 1 on
    evidently skewed values, so its better verdict is indicative and stops it there (issue 39); verdict.json says
    ``skewed_stop``, the advice says why, and the bottom line asks no more seeds (none would make it firm)."""
    from ablate.judge.verdict import write_verdict
    from ablate.record.sweepdir import SweepDir
    from tests.helpers import make_sweep

    rng = np.random.default_rng(7)
    c = list(0.7 + 0.01 * rng.lognormal(0.0, 1.0, 40))
    t = list(0.7 + 0.01 * (rng.lognormal(0.0, 1.0, 40) + 4.0))
    root = make_sweep(tmp_path / "sw", {"control": c, "lr=0.1": t},
                      options={"sequential": "group", "looks": [20, 40]})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    (comp,) = v["comparisons"]
    s = comp["sequential"]
    assert (s["look"], s["n"], s["skewed_stop"], s["stop_reason"]) == (1, 20, True, "efficacy"), s
    assert comp["verdict"] == "better" and comp["firm"] is False and comp["skew_evident"]
    assert "evidently skewed values" in comp["seed_advice_sequential"]
    md = (root / "verdict.md").read_text()
    bottom = md[md.index("## Bottom line"):md.index("## For the paper")]
    assert "seeds=" not in bottom
