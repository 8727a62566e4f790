"""Issue 37, accuracy with seeds stuck at chance: candidate rules for "a seed far from the others", measured on
one treatment (unpaired) before one was chosen (docs/verdict.md, "A seed far from the others").
Usage: ``python benchmarks/stats37c_gap_candidates.py [--reps 20000]``.

For each shape (``benchmarks/stats37_firm.py``'s ``arms``) and N, the share of replications with a firm
better/worse from :func:`ablate.stats.decide_batch` with the seed-gap condition left out (``gap`` NaN), then the same
with each candidate holding the p x 10 route closed where either arm fires: ``gapQ``, the largest gap between
neighbouring sorted values at least Q of the arm's range (:func:`ablate.stats.core.seed_gap`); ``robK``, a seed more
than K robust SDs (1.4826 x MAD) from its arm's median. A/A on ``collapse`` 1:3 (d = 0: firm better or worse), firm
power (d = 1: firm better) on the others.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import stats37_firm as base

from ablate.stats import decide_batch
from ablate.stats.core import BETTER, is_firm, seed_gap

CASES = (("collapse", 3.0, 0.0), ("normal", 1.0, 1.0), ("normal", 3.0, 1.0), ("t3", 1.0, 1.0),
         ("lognormal", 2.0, 1.0))


def robust_far(x: np.ndarray) -> np.ndarray:
    """The largest |value - median| of each row in robust SDs (1.4826 x MAD); inf where the MAD is 0."""
    med = np.median(x, axis=1, keepdims=True)
    mad = 1.4826 * np.median(np.abs(x - med), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(x - med).max(axis=1) / mad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20000)
    args = ap.parse_args()
    qs, ks = (0.5, 0.6, 0.7, 0.8), (5, 8, 12)
    print("| shape | SD ratio | d | N | no gap rule | " + " | ".join(f"gap{q}" for q in qs) + " | "
          + " | ".join(f"rob{k}" for k in ks) + " |")
    print("|---|---|---|---|---|" + "---|" * (len(qs) + len(ks)))
    for shape, ratio, d in CASES:
        for n in (5, 6, 8, 10, 15):
            t, c = base.arms(np.random.default_rng(n), shape, 1, n, args.reps, ratio, d)
            r = decide_batch(t[0], c)
            firm = is_firm(r.verdict, r.p_decision, r.alpha_decision, r.guard_factor, n, False, r.skewed, 1, r.skew_z)
            if d > 0:
                firm &= r.verdict == BETTER
            gap = np.fmax(seed_gap(t[0]), seed_gap(c))
            far = np.maximum(robust_far(t[0]), robust_far(c))
            cells = [f"{(firm & ~(gap >= q)).mean():.3f}" for q in qs] + [f"{(firm & ~(far >= k)).mean():.3f}"
                                                                           for k in ks]
            print(f"| {shape} | 1:{ratio:g} | {d:g} | {n} | {firm.mean():.3f} | " + " | ".join(cells) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
