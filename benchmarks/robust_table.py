"""Print the verdict's false-positive, power and P(T>C) coverage tables of docs/verdict.md (markdown), from
the simulations of tests/unit/test_stats_robust.py. Usage: ``python benchmarks/robust_table.py [--reps 4000]``.

Columns: the verdict (Welch or paired t through :func:`ablate.stats.decide_batch`), the same false positives
left without the ``skew_spread`` flag, and, for comparison, the candidates that were measured and not taken:
a decision needing Welch and Yuen's trimmed Welch (``scipy.stats.ttest_ind(trim=0.2)``) to agree, and
Welch agreeing with Hall's (1992) skewness-corrected statistic.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from scipy import stats

import tests.unit.test_stats_robust as rb
from ablate.stats import decide_batch
from ablate.stats.pi_interval import newcombe_interval
from ablate.stats.shape import skew_spread


def hall_agrees(t: np.ndarray, c: np.ndarray, p_welch: np.ndarray, t_welch: np.ndarray,
                df: np.ndarray) -> np.ndarray:
    """Welch rejects and Hall's (1992) transformation of it, with the pooled-shape skewness, agrees."""
    n_t, n_c = t.shape[1], c.shape[1]
    st, sc = t.std(1, ddof=1), c.std(1, ddof=1)
    v = st**2 / n_t + sc**2 / n_c
    z = np.concatenate([(t - t.mean(1, keepdims=True)) / st[:, None], (c - c.mean(1, keepdims=True)) / sc[:, None]], 1)
    g = (z**3).mean(1) * (st**3 / n_t**2 - sc**3 / n_c**2) / v**1.5
    a = g / 6
    th = t_welch + a * (1 + 2 * t_welch**2) + 4 / 3 * a**2 * t_welch**3
    return (p_welch < 0.05) & (2 * stats.t.sf(np.abs(th), df) < 0.05) & (np.sign(th) == np.sign(t_welch))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    args = ap.parse_args()
    rb.R = args.reps
    se = math.sqrt(0.05 * 0.95 / args.reps)
    print(f"A/A false-positive rate, alpha = 0.05, SD ratio 1:r, {args.reps} replications per cell (MC SE {se:.4f})")
    print("verdict / unflagged / Welch∧Yuen / Welch∧Hall\n")
    print("| shape | r | " + " | ".join(f"N={n}" for n in rb.NS) + " |")
    print("|---|---|" + "---|" * len(rb.NS))
    for dist in ("normal", "t3", "lognormal", "bimodal"):
        for r in (2, 3):
            cells = []
            for n in rb.NS:
                t, c = rb.aa(dist, r, n, seed=100 * n + r)
                fp = np.isin(decide_batch(t, c).verdict, (rb.BETTER, rb.WORSE))
                w = stats.ttest_ind(t, c, axis=1, equal_var=False)
                y = stats.ttest_ind(t, c, axis=1, equal_var=False, trim=0.2).pvalue < 0.05
                h = hall_agrees(t, c, w.pvalue, w.statistic, w.df)
                cells.append(f"{fp.mean():.3f} / {(fp & ~skew_spread(t, c)).mean():.3f} / "
                             f"{((w.pvalue < 0.05) & y).mean():.3f} / {h.mean():.3f}")
            print(f"| {dist} | {r} | " + " | ".join(cells) + " |")
    print("\nPower at Δ = 1 SD, normal, equal SDs: verdict / Welch / Welch∧Yuen / Welch∧Hall\n")
    print("| N | verdict | Welch | Welch∧Yuen | Welch∧Hall |\n|---|---|---|---|---|")
    rng = np.random.default_rng(11)
    for n in (5, 10, 20):
        t, c = rng.normal(1.0, 1.0, (args.reps, n)), rng.normal(0.0, 1.0, (args.reps, n))
        v = (decide_batch(t, c).verdict == rb.BETTER).mean()
        w = stats.ttest_ind(t, c, axis=1, equal_var=False)
        wr = (w.pvalue < 0.05) & (w.statistic > 0)
        y = stats.ttest_ind(t, c, axis=1, equal_var=False, trim=0.2).pvalue < 0.05
        h = hall_agrees(t, c, w.pvalue, w.statistic, w.df) & (w.statistic > 0)
        print(f"| {n} | {v:.3f} | {wr.mean():.3f} | {(wr & y).mean():.3f} | {h.mean():.3f} |")
    print("\nCoverage of the 95% P(T>C) interval (Newcombe's score interval), normal arms, shift in SDs\n")
    ns = (3, 4, 5, 10, 20, 50)
    print("| shift (true P) | " + " | ".join(f"N={n}" for n in ns) + " |\n|---|" + "---|" * len(ns))
    for shift in (0.0, 0.5, 1.0, 2.0):
        truth = stats.norm.cdf(shift / math.sqrt(2))
        cells = []
        for n in ns:
            t, c = rng.normal(shift, 1.0, (args.reps, n)), rng.normal(0.0, 1.0, (args.reps, n))
            est = (t[:, :, None] > c[:, None, :]).mean(axis=(1, 2))
            lo, hi = newcombe_interval(est, n, n)
            cells.append(f"{((lo <= truth) & (truth <= hi)).mean():.3f}")
        print(f"| {shift} ({truth:.3f}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
