"""Print the tables of issue 37 in docs/verdict.md (markdown). Usage: ``python benchmarks/stats37_tables.py
[--reps 20000] [--pilots 1000] [--only ci|binary|advice]``.

1. ``ci``: coverage of the 95% CI of Δ on A/A arms (normal, lognormal, bimodal; SD 1:1-1:3; N = 3-20) through
   :func:`ablate.stats.decide_batch` (the code behind ``compare()``), and the share of ablations whose verdict is an
   indicative better/worse: the CI printed beside such a verdict is labelled ``indicative`` (item 6).
2. ``binary``: exact A/A false-positive rates of a 0/1 metric (two arms of N seeds, success probability p; every
   N from 3 to 50, p = 0.1, 0.3, 0.5), by enumerating every pair of success counts: Newcombe's score test alone (the
   verdict's word) and the firm verdict (the score test and Fisher's exact test both reject, :func:`ablate.stats.
   binary.firm_pvalue`); then the power of both at a few alternatives (item 5).
3. ``advice``: seed advice from 5-seed pilots through :func:`ablate.stats.recommend_seeds`: of all pilots, the share
   that get a correct answer (a number whose true power is >= 80%, or "> cap" only where the true N exceeds the cap),
   with the shares of each kind of answer (item 3).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from ablate.stats import decide_batch
from ablate.stats.core import BETTER, WORSE
from tests.unit.test_stats_robust import shape


def ci_coverage(reps: int) -> None:
    """Item 6: the 95% CI of Δ (from the decision's SE and df) on A/A arms, and how often a verdict is indicative."""
    from scipy.special import stdtrit

    print(f"### Coverage of the 95% CI of Δ on A/A arms ({reps} replications per cell, MC SE "
          f"{math.sqrt(0.05 * 0.95 / reps):.4f}; wider arm the treatment): the 95% CI's coverage / the CI as shown "
          "(at the decision's level, wider where the skew guard fired) / share of ablations with an "
          "indicative better/worse (whose CI is labelled indicative)\n")
    ns = (3, 5, 10, 20)
    print("| shape | SD ratio | " + " | ".join(f"N={n}" for n in ns) + " |")
    print("|---|---|" + "---|" * len(ns))
    for dist in ("normal", "lognormal", "bimodal"):
        for r in (1, 2, 3):
            cells = []
            for n in ns:
                rng = np.random.default_rng(1000 * n + 10 * r + len(dist))
                t, c = r * shape(rng, dist, (reps, n)), shape(rng, dist, (reps, n))
                b = decide_batch(t, c)
                half = stdtrit(b.df, 0.975) * b.se
                cover = float(np.mean(np.abs(b.diff) <= half))
                shown = float(np.mean((b.ci_low <= 0) & (b.ci_high >= 0)))
                ind = float(np.mean(np.isin(b.verdict, (BETTER, WORSE)) & ~b.firm))
                cells.append(f"{cover:.3f} / {shown:.3f} / {ind:.3f}")
            print(f"| {dist} | 1:{r} | " + " | ".join(cells) + " |")
    print()


def binary_rejections(n: int, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Which (k_T, k_C) tables of two arms of ``n`` seeds the 0/1 path rejects at ``alpha``: the score test (the
    verdict's word: Newcombe's interval excludes 0, :func:`ablate.stats.binary.interval`, dual to its p) and the
    firm verdict (also :func:`ablate.stats.binary.firm_pvalue` < alpha); boolean arrays of shape (n + 1, n + 1)."""
    from ablate.stats import binary

    score = np.zeros((n + 1, n + 1), bool)
    firm = score.copy()
    for kt in range(n + 1):
        for kc in range(n + 1):
            if kt == kc:
                continue
            b = binary.BinaryCounts(False, kt, n, kc, n)
            lo, hi = binary.interval(b, alpha)
            score[kt, kc] = lo > 0 or hi < 0
            firm[kt, kc] = score[kt, kc] and binary.firm_pvalue(b) < alpha
    return score, firm


def binary_rate(reject: np.ndarray, p_t: float, p_c: float) -> float:
    """Exact probability of a rejection when the arms succeed with probabilities ``p_t`` and ``p_c`` (binomial)."""
    from scipy.stats import binom

    k = np.arange(reject.shape[0])
    n = reject.shape[0] - 1
    return float(np.outer(binom.pmf(k, n, p_t), binom.pmf(k, n, p_c))[reject].sum())


def binary_table() -> None:
    """Item 5: exact A/A rates of the 0/1 path at every N from 3 to 50, and what firmness costs in power."""
    ps = (0.1, 0.3, 0.5)
    print("### 0/1 metric, exact A/A false-positive rate at α = 0.05 (enumeration of every pair of success counts; "
          "two arms of N seeds, success probability p): score test (the verdict's word) / firm verdict (score and "
          "Fisher's exact test)\n")
    print("| N | " + " | ".join(f"p = {p}" for p in ps) + " |")
    print("|---|" + "---|" * len(ps))
    worst = {"score": (-1.0, (0, 0.0)), "firm": (-1.0, (0, 0.0))}
    over = []
    rejections = {}
    for n in range(3, 51):
        score, firm = binary_rejections(n)
        rejections[n] = (score, firm)
        cells = []
        for p in ps:
            rs, rf = binary_rate(score, p, p), binary_rate(firm, p, p)
            cells.append(f"{rs:.4f} / {rf:.4f}")
            worst["score"] = max(worst["score"], (rs, (n, p)))
            worst["firm"] = max(worst["firm"], (rf, (n, p)))
            if rs > 0.056:
                over.append((n, p))
        print(f"| {n} | " + " | ".join(cells) + " |")
    print(f"\nworst score-test cell: {worst['score'][0]:.4f} at (N, p) = {worst['score'][1]}; cells above 0.056: "
          f"{len(over)} of {48 * len(ps)}; worst firm cell: {worst['firm'][0]:.4f} at {worst['firm'][1]}\n")
    print("Power (exact): score test / firm verdict\n")
    alts = ((0.3, 0.7), (0.5, 0.8), (0.1, 0.4), (0.6, 0.9))
    ns = (5, 10, 20, 30, 50)
    print("| p_C → p_T | " + " | ".join(f"N={n}" for n in ns) + " |")
    print("|---|" + "---|" * len(ns))
    for pc, pt in alts:
        cells = [f"{binary_rate(rejections[n][0], pt, pc):.3f} / {binary_rate(rejections[n][1], pt, pc):.3f}"
                 for n in ns]
        print(f"| {pc} → {pt} | " + " | ".join(cells) + " |")
    print()


def _sm_power(pw: object, kw: str, es: np.ndarray, n: np.ndarray) -> np.ndarray:
    """statsmodels' power; where it is NaN (scipy's ``nct.cdf`` far in the lower tail, at power near 1), its upper
    tail alone, ``scipy.stats.nct.sf``, which is then the power to 1e-12."""
    from scipy import stats

    out = np.asarray(pw.power(es, alpha=0.05, **{kw: n}), float)  # type: ignore[attr-defined]
    df = n - 1.0 if kw == "nobs" else 2.0 * n - 2.0
    nc = es * (np.sqrt(n) if kw == "nobs" else np.sqrt(n / 2.0))
    upper = stats.nct.sf(stats.t.isf(0.025, df), df, nc)
    return np.where(np.isnan(out), upper, out)


def pilot_answers(d: float, paired: bool, target: str, pilots: int, seed: int, cap: int = 50) -> dict[str, np.ndarray]:
    """Seed advice from ``pilots`` 5-seed pilots (normal arms, SD 1, the treatment ``d`` SD higher; paired: seeds
    sharing nothing, ρ = 0) through :func:`ablate.stats.recommend_seeds`, with the truth from statsmodels' power.

    Returns
    -------
    dict of arrays
        ``n``: the advised N (0 for "> cap"); ``kind``: 0 = a number planned on the planning SD, 1 = a range answer
        (the planning SD's N advised, above the cap; RANGE_CAP + 1 where beyond it), 2 = "> cap";
        ``true_power``: statsmodels' power of the advised N at the true SD (of the cap for "> cap"); ``printed``: the
        power printed beside it (at the planning SD); ``correct``: a number whose true power is >= 0.8, or "> cap"
        where the true N exceeds the cap.
    """
    from statsmodels.stats.power import TTestIndPower, TTestPower

    from ablate.stats import recommend_seeds
    from ablate.stats.power import RANGE_CAP

    rng = np.random.default_rng(seed)
    t, c = rng.normal(d, 1.0, (pilots, 5)), rng.normal(0.0, 1.0, (pilots, 5))
    sigma = math.sqrt(2.0) if paired else 1.0
    n_adv, kind, es, printed = [], [], [], []
    for ti, ci in zip(t, c, strict=True):
        if paired:
            sd, df = float(np.std(ti - ci, ddof=1)), 4
        else:
            sd, df = math.sqrt((np.var(ti, ddof=1) + np.var(ci, ddof=1)) / 2), 8
        tgt = d * sigma if target == "margin" else abs(float(np.mean(ti) - np.mean(ci)))
        a = recommend_seeds(5, sd, df, paired=paired, target=tgt, target_kind=target, cap=cap)
        assert a is not None
        n_adv.append(a.n_needed or (RANGE_CAP + 1 if a.is_range else 0))
        kind.append(1 if a.is_range else 2 if a.n_needed is None else 0)
        printed.append(math.nan if a.power is None else a.power)
        es.append(tgt / sigma)
    n, k, e = np.asarray(n_adv), np.asarray(kind), np.asarray(es)
    pw = TTestPower() if paired else TTestIndPower()
    kw = "nobs" if paired else "nobs1"
    true_power = _sm_power(pw, kw, e, np.where(k == 2, cap, n))
    beyond = _sm_power(pw, kw, e, np.full(e.shape, cap)) < 0.8
    correct = np.where(k == 2, beyond, true_power >= 0.8)
    return {"n": n, "kind": k, "true_power": true_power, "printed": np.asarray(printed), "correct": correct}


def advice_table(pilots: int) -> None:
    """Item 3: of all 5-seed pilots, the share getting a correct answer, and what the answers were."""
    from statsmodels.stats.power import TTestIndPower, TTestPower

    cap = 50
    print(f"### Seed advice from 5-seed pilots ({pilots} pilots per row, MC SE {math.sqrt(0.2 * 0.8 / pilots):.3f} "
          f"at 0.8; cap {cap}): correct = a number whose true power is >= 0.8, or \"> cap\" where the true N exceeds "
          "the cap; answers: a number planned on the SD's 90% upper limit / a range (its upper end, the planning SD's "
          "number, "
          "advised above the cap) / \"> cap\" (even the SD's 90% lower limit needs more than the cap); "
          "the power printed beside the advised N (at the planning SD) and its true power, means over the pilots "
          "given a number\n")
    print("| design | target | d (SD) | true N | correct | number / range / > cap | printed / true power |")
    print("|---|---|---|---|---|---|---|")
    for paired in (False, True):
        pw = TTestPower() if paired else TTestIndPower()
        for target in ("margin", "observed"):
            for d in (0.5, 0.75, 1.0, 1.5):
                r = pilot_answers(d, paired, target, pilots, seed=int(100 * d) + 7 * paired + (target == "margin"),
                                  cap=cap)
                named = r["kind"] < 2
                shares = " / ".join(f"{np.mean(r['kind'] == k):.3f}" for k in (0, 1, 2))
                powers = (f"{np.nanmean(r['printed'][named]):.2f} / {np.mean(r['true_power'][named]):.2f}"
                          if named.any() else "–")
                true_n = math.ceil(pw.solve_power(d, alpha=0.05, power=0.8)) if target == "margin" else "–"
                print(f"| {'paired (ρ = 0)' if paired else 'unpaired'} | {target} | {d} | {true_n} | "
                      f"{np.mean(r['correct']):.3f} | {shares} | {powers} |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20_000)
    ap.add_argument("--pilots", type=int, default=1000)
    ap.add_argument("--only", choices=["ci", "binary", "advice"])
    args = ap.parse_args()
    if args.only in (None, "ci"):
        ci_coverage(args.reps)
    if args.only in (None, "binary"):
        binary_table()
    if args.only in (None, "advice"):
        advice_table(args.pilots)


if __name__ == "__main__":
    main()
