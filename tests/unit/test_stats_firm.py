"""Firm and indicative verdicts (issue 27, item 2): on the default path, the rate of *firm* better/worse verdicts
on identical arms stays at or below α in every cell of the unequal-spread grid (normal, lognormal, bimodal, t3;
SD 1:1, 1:2, 1:3; N = 3, 5, 10, 20, 50), unpaired and paired, where the raw rate does not below 20 seeds.

Vectorised through :func:`ablate.stats.decide_batch` (the code behind :func:`ablate.stats.compare`), whose
``firm`` field a test below proves equal to ``compare()``'s on the same data. R = 1000 replications per cell with
fixed generator seeds (Monte-Carlo SE 0.0069 at a rate of 0.05); a cell passes at <= α + 3 SE, the pooled rate
(60,000 replications, SE 0.0009) at <= 0.056. Where every verdict is firm (N >= 20 seeds per arm or pairs) the
tightest cells are held at <= 0.056 with 40,000 replications each (SE 0.0011), and the paired path's raw rate at
N = 20 and 50 in every cell at <= 0.056 + 3 SE with 4000 replications each (SE 0.0034; pooled over the 24 cells,
SE 0.0007, at <= 0.056). ``python benchmarks/stats27_tables.py
--only grid`` prints the full table, ``--only settle`` those cells at 200,000 replications, beside plain scipy Welch /
paired t on the same replications.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ablate.stats import compare, decide_batch
from ablate.stats.core import BETTER, FIRM_FROM, WORSE, firm_factor
from tests.unit.test_stats_robust import shape

R = 1000
ALPHA = 0.05
SE = math.sqrt(ALPHA * (1 - ALPHA) / R)
GRID = [(d, r, n) for d in ("normal", "lognormal", "bimodal", "t3") for r in (1, 2, 3) for n in (3, 5, 10, 20, 50)]


def arms(dist: str, ratio: float, n: int, seed: int, reps: int = R) -> tuple[np.ndarray, np.ndarray]:
    """A/A arms, equal means, SDs 1:``ratio`` (the treatment the wider)."""
    rng = np.random.default_rng(seed)
    return 0.7 + 0.01 * ratio * shape(rng, dist, (reps, n)), 0.7 + 0.01 * shape(rng, dist, (reps, n))


def test_firm_factor_and_limits() -> None:
    assert FIRM_FROM == {False: 20, True: 20}
    assert list(firm_factor([3, 19, 20, 49, 50], False)) == [10, 10, 1, 1, 1]
    assert list(firm_factor([3, 19, 20, 49, 50], True)) == [10, 10, 1, 1, 1]


@pytest.mark.parametrize("paired", [False, True])
def test_firm_rate_holds_alpha_in_every_cell(paired: bool) -> None:
    firm, raw, welch = {}, {}, {}
    for i, (d, r, n) in enumerate(GRID):
        t, c = arms(d, r, n, seed=7000 + 31 * i + int(paired))
        res = decide_batch(t, c, paired=paired)
        sig = np.isin(res.verdict, (BETTER, WORSE))
        firm[(d, r, n)] = float((sig & res.firm).mean())
        raw[(d, r, n)] = float(sig.mean())
        p = (stats.ttest_rel(t, c, axis=1) if paired else stats.ttest_ind(t, c, axis=1, equal_var=False)).pvalue
        welch[(d, r, n)] = float((p < ALPHA).mean())
    assert len(firm) == len(GRID) == 60
    assert max(firm.values()) <= ALPHA + 3 * SE, max(firm.items(), key=lambda kv: kv[1])
    assert float(np.mean(list(firm.values()))) <= 0.056
    # what the label is for: plain scipy runs above α in the skewed cells below 20 seeds (lognormal 1:3, N = 5)
    assert welch[("lognormal", 3, 5)] > 0.09 and raw[("lognormal", 3, 5)] > 0.09
    # firm never claims more than the decision: the firm verdicts are a subset of the better/worse ones
    assert all(firm[k] <= raw[k] for k in GRID)


@pytest.mark.parametrize(("paired", "dist", "ratio", "n", "scipy_above"), [
    (False, "lognormal", 2, 20, True),   # 0.0541 ± 0.0005 at 200,000 replications (scipy Welch 0.0757)
    (False, "normal", 3, 20, False),     # 0.0483 ± 0.0005 (scipy 0.0490); 0.057 at 4000 was noise
    (True, "lognormal", 2, 20, True),    # 0.054 (scipy paired t 0.072); 0.067 when the guard saw only T - C
    (True, "lognormal", 3, 20, True),    # 0.050 (scipy paired t 0.098); 0.081 when the guard saw only T - C
    (True, "lognormal", 2, 50, True),    # 0.039 (scipy paired t 0.065)
])
def test_firm_from_cells_hold_at_large_reps(paired: bool, dist: str, ratio: int, n: int, scipy_above: bool) -> None:
    """The tightest cells from FIRM_FROM seeds, at 40,000 replications: firm <= raw <= 0.056."""
    firm = raw = plain = 0
    for k in range(2):
        t, c = arms(dist, ratio, n, seed=2700 + 10 * k + int(paired), reps=20_000)
        res = decide_batch(t, c, paired=paired)
        sig = np.isin(res.verdict, (BETTER, WORSE))
        firm, raw = firm + int((sig & res.firm).sum()), raw + int(sig.sum())
        # from FIRM_FROM seeds a better/worse verdict is firm unless its values are evidently skewed (issue 37)
        assert np.array_equal(res.firm, sig & ~res.skewed)
        p = (stats.ttest_rel(t, c, axis=1) if paired else stats.ttest_ind(t, c, axis=1, equal_var=False)).pvalue
        plain += int((p < ALPHA).sum())
    assert firm / 40_000 <= 0.056 and raw / 40_000 <= 0.056, (firm / 40_000, raw / 40_000)
    # the skew guard is what holds the skewed cells: plain scipy on the same replications is above 0.06 there
    assert (plain / 40_000 > 0.06) is scipy_above, plain / 40_000


def test_batch_firm_equals_compare_on_the_same_data() -> None:
    """The batch twin and the function the verdict calls give the same firm/indicative label, row by row."""
    count, labels = 0, set()
    for paired, (d, r, n) in ((False, ("lognormal", 3, 5)), (False, ("normal", 1, 20)), (True, ("bimodal", 2, 10))):
        t, c = arms(d, r, n, seed=99, reps=120)
        t[:, 0] += 0.03  # some real effects, so both labels occur
        res = decide_batch(t, c, paired=paired)
        for i in range(t.shape[0]):
            comp = compare(t[i], c[i], paired=paired, pi_interval=False)
            assert VERDICT_CODES[comp.verdict] == int(res.verdict[i])
            want = bool(res.firm[i]) if comp.verdict in ("better", "worse") else None
            assert comp.firm is want
            labels.add(want)
            if want is False:
                assert comp.firm_from == (None if comp.skew_evident else FIRM_FROM[paired])
                assert comp.skew_evident is bool(res.skewed[i])
                assert any(f.code == "indicative_verdict" for f in comp.flags)
            count += 1
    assert count == 360 and labels == {None, True, False}


VERDICT_CODES = {"insufficient data": 0, "better": 1, "worse": 2, "equivalent": 3, "inconclusive": 4}


def test_paired_raw_rate_holds_alpha_from_20_pairs() -> None:
    """The default paired path (a design that shares randomness, here arms that share nothing: ρ = 0), every
    better/worse verdict counted: at N = 20 and 50 pairs every cell of the grid is within 3 SE of the target
    (<= 0.056 + 3 SE, 4000 replications each, SE 0.0034; the tightest cells are held at <= 0.056 itself with 40,000
    replications above) and the 24 cells pooled (96,000, SE 0.0007) at <= 0.056. Before the paired skew guard looked
    at the arms' residuals too, lognormal 1:2 and 1:3 gave 0.067 and 0.081 at 20 pairs (20,000 replications,
    docs/verdict.md); plain scipy's paired t on the same replications is above 0.06 there."""
    raw, plain = {}, {}
    for i, (d, r) in enumerate((d, r) for d in ("normal", "lognormal", "bimodal", "t3") for r in (1, 2, 3)):
        for n in (20, 50):
            t, c = arms(d, r, n, seed=4100 + 7 * i + n, reps=4000)
            res = decide_batch(t, c, paired=True)
            raw[(d, r, n)] = float(np.isin(res.verdict, (BETTER, WORSE)).mean())
            plain[(d, r, n)] = float((stats.ttest_rel(t, c, axis=1).pvalue < ALPHA).mean())
            # from 20 pairs every verdict is firm except on evidently skewed values (issue 37)
            assert np.array_equal(res.firm, np.isin(res.verdict, (BETTER, WORSE)) & ~res.skewed)
    assert len(raw) == 24
    worst = max(raw.items(), key=lambda kv: kv[1])
    assert worst[1] <= 0.056 + 3 * math.sqrt(ALPHA * (1 - ALPHA) / 4000), worst
    assert float(np.mean(list(raw.values()))) <= 0.056
    assert plain[("lognormal", 3, 20)] > 0.08 and plain[("lognormal", 2, 20)] > 0.06
