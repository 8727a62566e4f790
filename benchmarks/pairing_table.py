"""Print the pairing tables of docs/verdict.md (markdown) from the simulations of tests/unit/test_stats_pairing.py.

Usage: ``python benchmarks/pairing_table.py [--reps 4000]``. Rules compared on arms that ran the same seed list
(one treatment, α = 0.05): ``old`` = always paired (the rule before issue 14), ``new`` = ``pairing=auto`` today
(paired from :func:`ablate.stats.auto_pair_from` seeds per arm, 19 at α = 0.05), ``Welch`` = never paired.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

import tests.unit.test_stats_pairing as tp
from ablate.stats import auto_pair_from, look_pairing, power_loss

RULES = ("old", "new", "welch")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    args = ap.parse_args()
    tp.R = args.reps
    se = math.sqrt(0.05 * 0.95 / args.reps)
    print("N0 (auto pairs from) by level: " + ", ".join(f"{lv:.3g}: {auto_pair_from(lv)}"
                                                      for lv in (0.05, 0.025, 0.05 / 3, 0.01)))
    print("worst-case power loss of pairing at rho = 0, alpha = 0.05: "
          + ", ".join(f"N={n}: {power_loss(n):.3f}" for n in (3, 5, 10, 15, 18, 19, 20, 30, 50)) + "\n")
    print(f"Power, {args.reps} replications per cell: cells old / new / Welch\n")
    print("| N | d | ρ = 0 | ρ = 0.5 |")
    print("|---|---|---|---|")
    for n in tp.NS:
        for d in (1.0, tp.welch_d50(n)):
            cells = []
            for rho in (0.0, 0.5):
                seed = 1000 * n + int(100 * d) + int(10 * rho)
                cells.append(" / ".join(f"{tp.power(r, n, rho, d, seed):.3f}" for r in RULES))
            print(f"| {n} | {d:.2f} | {cells[0]} | {cells[1]} |")
    print(f"\nA/A false-positive rate (MC SE {se:.4f}): cells old / new / Welch\n")
    print("| ρ | " + " | ".join(f"N={n}" for n in tp.NS) + " | pooled new |")
    print("|---|" + "---|" * (len(tp.NS) + 1))
    for rho in (0.0, 0.5):
        cells, new = [], []
        for n in tp.NS:
            rates = [tp.aa_rate(r, n, rho, seed=7 + 1000 * n + int(10 * rho)) for r in RULES]
            new.append(rates[1])
            cells.append(" / ".join(f"{x:.3f}" for x in rates))
        print(f"| {rho} | " + " | ".join(cells) + f" | {np.mean(new):.3f} |")
    print("\nGroup-sequential looks, O'Brien-Fleming: cells old / new / Welch\n")
    print("| looks (new pairs at) | | ρ = 0 | ρ = 0.5 |")
    print("|---|---|---|---|")
    for looks, d1 in ((tp.LOOKS, 1.0), ([10, 20, 30, 40], 0.6)):
        at = [n for n, p in zip(looks, look_pairing(looks), strict=True) if p]
        for d, what in ((d1, f"power, {d1:g} SD"), (0.0, "A/A rate")):
            seed = {rho: 99 + int(10 * rho) + int(10 * d) + looks[0] for rho in (0.0, 0.5)}
            cells = [" / ".join(f"{tp.sequential(r, rho, d, seed=seed[rho], looks=looks):.3f}" for r in RULES)
                     for rho in (0.0, 0.5)]
            print(f"| {', '.join(map(str, looks))} ({', '.join(map(str, at)) or 'none'}) | {what} | {cells[0]} | "
                  f"{cells[1]} |")
    cap = tp.advice_capped(min(args.reps, 1000))
    print("\nSeed advice after a 5-seed pilot, rho = 0, margin 1 SD: share capped at '> 50 seeds' (upper end), "
          "median upper end otherwise")
    for name, (share, med) in cap.items():
        print(f"  {name}: {share:.3f} capped, median {med:.0f}")


if __name__ == "__main__":
    main()
