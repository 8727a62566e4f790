"""Stop 48: the 8-seed floor on continuous metrics (``ablate.stats.core.FIRM_MIN_CONTINUOUS``): what it holds and
what it costs. Usage: ``python benchmarks/stats48_min_seeds.py [--reps 20000] [--power-reps 10000] [--only aa|power]``
(results: ``benchmarks/results/stats48_min_seeds.md``, docs/verdict.md "Below 8 seeds: no firm verdict on a
continuous metric").

A/A: accuracy with seeds stuck at chance (``stats37_firm.arms``' ``collapse``: each seed the share correct of 1000
items at 0.9, or with probability 0.2 at chance, 0.1), SD ratio 1:3, m = 1, 2, 5, 10 null treatments, N = 3-8 seeds per
arm, unpaired and paired: the share of replications with a firm better/worse among the m (family-wise, Holm), "after
/ before" (before: the rule as it ships less the floor, ``is_firm(..., min_n=0)``). Power: one treatment d = 1 and
3 control SDs better, normal and t3 (3 df) arms of equal spread, N = 3, 5, 8: the share with a firm better. Every
cell runs through ``stats37_firm.family`` (``decide_batch``, the guarded p into Holm, ``is_firm``), which checks its
first 10 replications equal through ``compare()`` + ``adjust_comparisons``, the functions the verdict calls.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import stats37_firm as base

AA_NS = (3, 4, 5, 6, 7, 8)
MS = (1, 2, 5, 10)
POWER_NS = (3, 5, 8)


def aa(reps: int, ns: tuple[int, ...] = AA_NS) -> None:
    """The A/A table: collapse 1:3, firm family-wise error after / before the floor."""
    print(f"### A/A firm family-wise error, collapse 1:3: after / before the 8-seed floor ({reps} replications per "
          f"cell, MC SE {math.sqrt(0.05 * 0.95 / reps):.4f} at 0.05)\n")
    print("| design | m | " + " | ".join(f"N={n}" for n in ns) + " |")
    print("|---|---|" + "---|" * len(ns))
    worst = (0.0, "")
    for paired in (False, True):
        for m in MS:
            cells = []
            for n in ns:
                seed = 4_800_000 + 100_000 * paired + 100 * m + n
                a, b = base.family("collapse", m, n, reps, 3.0, paired, seed, baseline="floor")
                cells.append(f"{a:.4f} / {b:.4f}")
                if a > worst[0]:
                    worst = (a, f"{'paired' if paired else 'unpaired'} m={m} N={n}")
            print(f"| {'paired' if paired else 'unpaired'} | {m} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nworst firm cell after: {worst[0]:.4f} ({worst[1] or 'none'})\n")


def power(reps: int, ns: tuple[int, ...] = POWER_NS) -> None:
    """The power table: one treatment d SDs better, firm better after / before the floor."""
    print(f"### Power: a firm better, one treatment d control SDs better, SD ratio 1:1: after / before the 8-seed "
          f"floor ({reps} replications per cell, MC SE <= {0.5 / math.sqrt(reps):.4f})\n")
    print("| design | shape | d | " + " | ".join(f"N={n}" for n in ns) + " |")
    print("|---|---|---|" + "---|" * len(ns))
    for paired in (False, True):
        for shape in ("normal", "t3"):
            for d in (1.0, 3.0):
                cells = []
                for n in ns:
                    seed = 4_900_000 + 100_000 * paired + 1000 * base.SHAPES.index(shape) + 100 * int(d) + n
                    a, b = base.family(shape, 1, n, reps, 1.0, paired, seed, d=d, baseline="floor")
                    cells.append(f"{a:.3f} / {b:.3f}")
                print(f"| {'paired' if paired else 'unpaired'} | {shape} | {d:g} | " + " | ".join(cells) + " |",
                      flush=True)
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20_000)
    ap.add_argument("--power-reps", type=int, default=10_000)
    ap.add_argument("--only", choices=("aa", "power"))
    ap.add_argument("--ns", help="A/A seeds per arm, comma-separated (default 3-8)")
    args = ap.parse_args()
    if args.only in (None, "aa"):
        aa(args.reps, tuple(int(x) for x in args.ns.split(",")) if args.ns else AA_NS)
    if args.only in (None, "power"):
        power(args.power_reps)


if __name__ == "__main__":
    main()
