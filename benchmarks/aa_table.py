"""Print the A/A false-positive rates of the verdict (markdown), from the simulations of
tests/unit/test_stats_aa.py. Usage: ``python benchmarks/aa_table.py [--reps 4000]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.unit.test_stats_aa as aa


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    args = ap.parse_args()
    aa.R = args.reps
    ns = [3, 4, 5, 6, 8, 10, 12, 15, 20]
    print(f"Fixed N, alpha = 0.05, {args.reps} A/A replications per cell (MC SE {aa.tol(args.reps) / 3:.4f})\n")
    print("| distribution | pairing | " + " | ".join(f"N={n}" for n in ns) + " | mean N=3..20 |")
    print("|---|---|" + "---|" * (len(ns) + 1))
    for dist in aa.DISTS:
        for paired in (False, True):
            rates = {n: aa.fixed_rate(dist, n, paired, seed=1000 * n + aa.DISTS.index(dist) + 17 * paired)
                     for n in aa.NS}
            mean = sum(rates.values()) / len(rates)
            print(f"| {dist} | {'paired' if paired else 'unpaired'} | "
                  + " | ".join(f"{rates[n]:.3f}" for n in ns) + f" | {mean:.3f} |")
    print(f"\nGroup sequential (O'Brien-Fleming), {args.reps} replications (nan: 1000, looks 5,10,20)\n")
    print("| distribution | pairing | looks 5,10,15,20 | looks 3,6,9,12 |")
    print("|---|---|---|---|")
    for dist in ("normal", "lognormal", "collapse"):
        for paired in (False, True):
            r = [aa.sequential_rate(dist, lk, paired, seed=7 + aa.DISTS.index(dist) + 31 * paired + lk[0])
                 for lk in ([5, 10, 15, 20], [3, 6, 9, 12])]
            print(f"| {dist} | {'paired' if paired else 'unpaired'} | {r[0]:.3f} | {r[1]:.3f} |")
    for paired in (False, True):
        r = aa.sequential_rate("nan", [5, 10, 20], paired, seed=99 + paired, reps=1000)
        print(f"| nan (looks 5,10,20) | {'paired' if paired else 'unpaired'} | {r:.3f} | – |")


if __name__ == "__main__":
    main()
