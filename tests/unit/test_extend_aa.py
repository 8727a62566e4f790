"""A/A simulation of ``ablate extend``: seeds added after a look at the verdict, judged by the two-stage
inverse-normal combination test (:func:`ablate.stats.adaptive.two_stage_batch`, the function the verdict calls:
:func:`test_verdict_equals_batch_row_by_row`), beside naive pooling of all the seeds.

The worst-case data-dependent rule of issue 39: look at N1 seeds per arm; when the stage-1 p (the verdict's own,
:func:`ablate.stats.decide_batch`) lies in (0.05, 0.5), the "promising" zone, extend to the N the seed advice
names (:func:`ablate.stats.recommend_seeds` on the observed |Δ|, as the verdict's Seed recommendation; capped at
50), else by the fewest seeds a stage may have (2). Every ablation ends with the test of all its seeds, so the
sample size is chosen from the data in the way that inflates naive pooling most (Proschan & Hunsberger 1995,
Biometrics 51): pooling rejects too often; the combination test, whose weights are fixed from N1 before the look,
keeps α. Also measured (docs/verdict.md, Extending an ablation): weights taken from the K chosen after the look
(which depend on the data), and the rule that extends only in the promising zone and keeps a stage-1 claim.

Monte-Carlo tolerance: a rate passes when it is <= α + 2 SE (SE = √(α(1-α)/R)); the CI subset uses R = 3000
(seconds); ``benchmarks/extend_aa.py`` runs 20,000 per cell. Every rng is seeded: deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ablate.stats import VERDICTS, decide_batch, recommend_seeds
from ablate.stats.adaptive import MIN_STAGE_SEEDS, two_stage_batch
from tests.unit.test_stats_aa import draw

ALPHA = 0.05
CAP = 50
BETTER, WORSE = VERDICTS.index("better"), VERDICTS.index("worse")


def advised_k(t: np.ndarray, c: np.ndarray, paired: bool, n1: int) -> np.ndarray:
    """Per row, the seeds per arm the verdict's seed advice names for the observed |Δ| (80% power at the SD's 90%
    upper limit, :func:`ablate.stats.recommend_seeds`), capped at :data:`CAP`; at least ``n1 + 2``.

    The advice is scale-free: at a given df it depends on d = |Δ| / SD alone and never grows with d, so each row's
    advice is :func:`recommend_seeds`' own, called only where the sorted d's advice changes (exact, ~50 calls per
    distinct advice instead of one per row: the CI budget)."""
    if paired:
        d = t - c
        sd, df, diff = np.std(d, ddof=1, axis=1), np.full(t.shape[0], n1 - 1), np.abs(d.mean(1))
    else:
        sd = np.sqrt((t.var(ddof=1, axis=1) + c.var(ddof=1, axis=1)) / 2)
        df, diff = np.full(t.shape[0], 2 * n1 - 2), np.abs(t.mean(1) - c.mean(1))
    eff = np.where(sd > 0, diff / np.where(sd > 0, sd, 1), 0.0)
    out = np.full(t.shape[0], CAP)

    def need(x: float, dfx: int) -> int:
        adv = recommend_seeds(n1, 1.0, dfx, alpha=ALPHA, paired=paired, target=x or None, target_kind="observed",
                              cap=CAP)
        return CAP if adv is None or adv.n_needed is None else int(adv.n_needed)

    for dfx in np.unique(df):
        idx = np.flatnonzero(df == dfx)
        order = idx[np.argsort(eff[idx])]
        xs = eff[order]
        memo: dict[int, int] = {}

        def f(i: int, xs: np.ndarray = xs, dfx: int = int(dfx), memo: dict[int, int] = memo) -> int:
            if i not in memo:
                memo[i] = need(float(xs[i]), dfx)
            return memo[i]

        stack = [(0, len(order) - 1)]
        while stack:
            lo, hi = stack.pop()
            a, b = f(lo), f(hi)
            if a == b:
                out[order[lo:hi + 1]] = a
            elif hi - lo <= 1:
                out[order[lo]], out[order[hi]] = a, b
            else:
                mid = (lo + hi) // 2
                stack += [(lo, mid), (mid, hi)]
    return np.minimum(CAP, np.maximum(n1 + MIN_STAGE_SEEDS, out))


def simulate(dist: str, n1: int, paired: bool, reps: int, seed: int) -> dict[str, float]:
    """The rates of one A/A cell (see the module docstring); keys: ``combination``, ``naive``,
    ``combination_k_weights``, ``promising_only_combination``, ``promising_only_naive``, ``extended``, ``mean_k``."""
    rng = np.random.default_rng(seed)
    t, c = draw(rng, dist, (reps, CAP), paired)
    first = decide_batch(t[:, :n1], c[:, :n1], paired=paired, alpha=ALPHA)
    p1 = first.pvalue
    claim1 = np.isin(first.verdict, (BETTER, WORSE))
    promising = (p1 > 0.05) & (p1 < 0.5)
    k = np.full(reps, n1 + MIN_STAGE_SEEDS)
    k[promising] = advised_k(t[promising, :n1], c[promising, :n1], paired, n1)
    comb = np.zeros(reps, bool)
    comb_kw = np.zeros(reps, bool)
    naive = np.zeros(reps, bool)
    for kk in np.unique(k):
        rows = k == kk
        res = two_stage_batch(t[rows, :n1], c[rows, :n1], t[rows, n1:kk], c[rows, n1:kk], n1=n1, paired=paired)
        comb[rows] = res.pvalue < ALPHA
        # weights from the K chosen at the look (√(n1/K), √(1 - n1/K)): they depend on the stage-1 data
        kw = two_stage_batch(t[rows, :n1], c[rows, :n1], t[rows, n1:kk], c[rows, n1:kk], n1=n1, paired=paired,
                             weights=(math.sqrt(n1 / kk), math.sqrt(1 - n1 / kk)))
        comb_kw[rows] = kw.pvalue < ALPHA
        pooled = decide_batch(t[rows, :kk], c[rows, :kk], paired=paired, alpha=ALPHA)
        naive[rows] = np.isin(pooled.verdict, (BETTER, WORSE))
    return {"combination": float(comb.mean()), "naive": float(naive.mean()),
            "combination_k_weights": float(comb_kw.mean()),
            "promising_only_combination": float((claim1 | (promising & comb)).mean()),
            "promising_only_naive": float((claim1 | (promising & naive)).mean()),
            "extended": float(promising.mean()), "mean_k": float(k[promising].mean()) if promising.any() else 0.0}


def se(reps: int) -> float:
    return math.sqrt(ALPHA * (1 - ALPHA) / reps)


@pytest.mark.parametrize(("dist", "n1", "paired"), [("normal", 3, False), ("normal", 5, True),
                                                     ("lognormal", 5, False)])
def test_combination_keeps_alpha_under_the_worst_case_rule(dist: str, n1: int, paired: bool) -> None:
    reps = 3000
    r = simulate(dist, n1, paired, reps, seed=39_000 + n1 + 7 * paired + 3 * len(dist))
    assert r["combination"] <= ALPHA + 2 * se(reps), r
    assert 0 <= r["naive"] <= 1 and r["extended"] > 0.3, r  # measured beside it (docs/verdict.md)


def test_naive_pooling_exceeds_alpha_under_the_worst_case_rule() -> None:
    """The inflation the combination test removes is real: naive pooling on the same paths runs above α."""
    reps = 3000
    r = simulate("normal", 3, False, reps, seed=390)
    assert r["naive"] > ALPHA + 2 * se(reps), r
    assert r["naive"] > r["combination"], r


def test_verdict_equals_batch_row_by_row() -> None:
    """The verdict of an extended ablation (:func:`ablate.judge.verdict.analyse`) gives, row by row, the
    combined p of :func:`two_stage_batch` the simulation uses."""
    from ablate.judge.options import resolve_options
    from ablate.judge.verdict import analyse

    rng = np.random.default_rng(5)
    t, c = draw(rng, "normal", (4, 9), False)
    s1, s2 = list(range(3)), list(range(3, 9))
    for i in range(4):
        plan = {"metric": "acc", "goal": "maximize", "seeds": s1 + s2,
                "task": {"command": "python train.py"}, "options": {"determinism": "seeded"},
                "arms": [{"name": "control", "label": "control", "value": 0},
                         {"name": "lr_1", "label": "lr=1", "value": 1}],
                "extension": {"stage1_seeds": s1, "stage2_seeds": s2, "decided_at": "2026-01-01T00:00:00+0000"}}
        rows = [{"arm": a, "seed": s, "status": "ok", "acc": float(x[i, s])}
                for a, x in (("control", c), ("lr_1", t)) for s in s1 + s2]
        v = analyse(plan, rows, resolve_options(plan))
        comp = v["comparisons"][0]
        res = two_stage_batch(t[i, :3], c[i, :3], t[i, 3:], c[i, 3:], n1=3, paired=False)
        assert comp["extension"]["pvalue"] == pytest.approx(float(res.pvalue[0]), rel=1e-12)
        assert comp["pvalue"] == pytest.approx(float(res.pvalue[0]), rel=1e-12)
        assert comp["extension"]["naive_pooled_p"] == pytest.approx(
            float(decide_batch(t[i:i + 1], c[i:i + 1], alpha=ALPHA).pvalue[0]), rel=1e-12)
        assert v["extension"]["line"].startswith("Extended after a look at 3 seeds per arm")


def test_advice_shortcut_equals_the_seed_advice_row_by_row() -> None:
    """:func:`advised_k` gives every row the seeds :func:`recommend_seeds` names for it, called row by row."""
    rng = np.random.default_rng(8)
    for paired in (False, True):
        t, c = draw(rng, "normal", (60, 4), paired)
        got = advised_k(t, c, paired, 4)
        for i in range(60):
            d = t[i] - c[i]
            pooled = math.sqrt((t[i].var(ddof=1) + c[i].var(ddof=1)) / 2)
            sd, df, diff = ((float(np.std(d, ddof=1)), 3, abs(float(d.mean()))) if paired else
                            (pooled, 6, abs(float(t[i].mean() - c[i].mean()))))
            adv = recommend_seeds(4, sd, df, alpha=ALPHA, paired=paired, target=diff, target_kind="observed", cap=CAP)
            assert got[i] == min(CAP, max(6, CAP if adv is None or adv.n_needed is None else adv.n_needed))
