"""Print the A/A false-positive rates of ``ablate extend`` (markdown for docs/verdict.md, Extending an ablation),
from the simulation of tests/unit/test_extend_aa.py. Usage: ``python benchmarks/extend_aa.py [--reps 20000]``."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.unit.test_extend_aa as ext


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20000)
    args = ap.parse_args()
    se = math.sqrt(ext.ALPHA * (1 - ext.ALPHA) / args.reps)
    print(f"A/A, α = {ext.ALPHA}, {args.reps} replications per row (MC SE {se:.4f}; α + 2 SE = "
          f"{ext.ALPHA + 2 * se:.4f})\n")
    print("| distribution | N1 | pairing | rule | extended | mean K | combination | naive pooling | weights from K | "
          "Next followed: combination | Next followed: naive | promising only: combination | promising only: naive |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.time()
    cells = [(d, n1, p, "advice") for d in ("normal", "lognormal") for n1 in (3, 5, 10) for p in (False, True)]
    cells += [("normal", n1, p, "double") for n1 in (3, 5, 10) for p in (False, True)]
    for dist, n1, paired, rule in cells:
        r = ext.simulate(dist, n1, paired, args.reps, seed=3900 + 100 * n1 + 7 * paired + len(dist) + len(rule),
                         rule=rule)
        pairing = "paired" if paired else "Welch"
        print(f"| {dist} | {n1} | {pairing} | {rule} | {r['extended']:.3f} | {r['mean_k']:.1f} | "
              f"{r['combination']:.4f} | {r['naive']:.4f} | {r['combination_k_weights']:.4f} | "
              f"{r['follow_combination']:.4f} | {r['follow_naive']:.4f} | "
              f"{r['promising_only_combination']:.4f} | {r['promising_only_naive']:.4f} |", flush=True)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
