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
    upper limit), capped at :data:`CAP`; at least ``n1 + 2``."""
    out = np.empty(t.shape[0], int)
    for i in range(t.shape[0]):
        ti, ci = t[i][~np.isnan(t[i])], c[i][~np.isnan(c[i])]
        if paired:
            d = t[i] - c[i]
            d = d[~np.isnan(d)]
            sd, df, diff = float(np.std(d, ddof=1)), d.size - 1, abs(float(d.mean()))
        else:
            sd = math.sqrt(((ti.size - 1) * ti.var(ddof=1) + (ci.size - 1) * ci.var(ddof=1)) / (ti.size + ci.size - 2))
            df, diff = ti.size + ci.size - 2, abs(float(ti.mean() - ci.mean()))
        adv = recommend_seeds(n1, sd, df, alpha=ALPHA, paired=paired, target=diff or None, target_kind="observed",
                              cap=CAP) if sd > 0 else None
        need = adv.n_needed if adv is not None and adv.n_needed is not None else CAP
        out[i] = min(CAP, max(n1 + MIN_STAGE_SEEDS, need))
    return out


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
