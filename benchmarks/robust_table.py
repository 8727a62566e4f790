"""Print the verdict's false-positive, power and P(T>C) coverage tables of docs/verdict.md (markdown), from
the simulations of tests/unit/test_stats_robust.py. Usage: ``python benchmarks/robust_table.py [--reps 4000]``.

False-positive cells: "verdict / the t-test alone / how often the skew guard fired" on A/A arms with equal
means and SDs in ratio 1:r (the treatment the wider), unpaired (Welch) and paired by column (paired t, the
seeds sharing nothing: ρ = 0). The verdict is :func:`ablate.stats.decide_batch`, skew guard included
(:func:`ablate.stats.shape.skew_against`); the t-test alone is ``scipy.stats.ttest_ind(equal_var=False)`` /
``ttest_rel`` at alpha. Power: normal arms, Δ = 1 SD; then the guard's cost where it fires by design (a real
effect on skewed arms, in the direction opposite to their tail).
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


def t_alone(t: np.ndarray, c: np.ndarray, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """The t-test's rejections (p < 0.05) and the sign of its statistic."""
    res = stats.ttest_rel(t, c, axis=1) if paired else stats.ttest_ind(t, c, axis=1, equal_var=False)
    return res.pvalue < 0.05, np.sign(res.statistic)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    args = ap.parse_args()
    rb.R = args.reps
    se = math.sqrt(0.05 * 0.95 / args.reps)
    for paired in (False, True):
        name = "paired t (ρ = 0)" if paired else "Welch"
        print(f"\nA/A false-positive rate, alpha = 0.05, SD ratio 1:r, {args.reps} replications per cell "
              f"(MC SE {se:.4f}); verdict / {name} alone / guard fired\n")
        print("| shape | r | " + " | ".join(f"N={n}" for n in rb.NS) + " |")
        print("|---|---|" + "---|" * len(rb.NS))
        for dist in ("normal", "t3", "lognormal", "bimodal"):
            for r in (2, 3):
                cells = []
                for n in rb.NS:
                    t, c = rb.aa(dist, r, n, seed=100 * n + r)
                    res = decide_batch(t, c, paired=paired)
                    fp = np.isin(res.verdict, (rb.BETTER, rb.WORSE))
                    cells.append(f"{fp.mean():.3f} / {t_alone(t, c, paired)[0].mean():.3f} / "
                                 f"{(res.guard_factor > 1).mean():.3f}")
                print(f"| {dist} | {r} | " + " | ".join(cells) + " |")
    print("\nPower at Δ = 1 SD, normal arms with equal SDs (paired: ρ = 0.5): verdict / t-test alone "
          "(ratio; guard fired)\n")
    print("| N | unpaired | paired |\n|---|---|---|")
    rng = np.random.default_rng(11)
    for n in (5, 10, 20, 50):
        cells = []
        for paired in (False, True):
            c = rng.normal(0.0, 1.0, (args.reps, n))
            t = (1.0 + 0.5 * c + math.sqrt(0.75) * rng.normal(size=(args.reps, n)) if paired
                 else rng.normal(1.0, 1.0, (args.reps, n)))
            res = decide_batch(t, c, paired=paired)
            v = (res.verdict == rb.BETTER).mean()
            rej, sgn = t_alone(t, c, paired)
            w = (rej & (sgn > 0)).mean()
            cells.append(f"{v:.3f} / {w:.3f} ({v / w:.3f}; {(res.guard_factor > 1).mean():.3f})")
        print(f"| {n} | " + " | ".join(cells) + " |")
    print("\nPower where the guard is meant to fire: lognormal arms (SD ratio 1:r), the wider arm lower by the "
          "given share of its SD (unpaired): verdict / Welch\n")
    print("| r, shift | N=10 | N=20 | N=50 | N=100 |\n|---|---|---|---|---|")
    for r, shift in ((1, 0.5), (3, 0.3), (3, 0.6)):
        cells = []
        for n in (10, 20, 50, 100):
            t, c = rb.aa("lognormal", r, n, seed=5 * n + r)
            t = t - shift * 0.01 * r
            res = decide_batch(t, c)
            rej, sgn = t_alone(t, c, False)
            cells.append(f"{(res.verdict == rb.WORSE).mean():.3f} / {(rej & (sgn < 0)).mean():.3f}")
        print(f"| {r}, {shift} | " + " | ".join(cells) + " |")
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
