"""Firm-aware looks (issue 37 item 4): P(firm better) at a 1 SD effect, E[N] and the A/A firm rate of sequential
designs beside fixed N on the same data, from the simulation of tests/unit/test_sequential_firm.py (through
``group_sequential_batch``, proven equal to the verdict's ``sequential_state`` by test_stats_sequential_twin.py).
Markdown for docs/verdict.md, Sequential seeds. Usage: ``python benchmarks/sequential_firm.py [--reps 20000]``."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.unit.test_sequential_firm as sf


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20000)
    args = ap.parse_args()
    se = math.sqrt(sf.ALPHA * (1 - sf.ALPHA) / args.reps)
    print(f"normal seeds, α = {sf.ALPHA}, {args.reps} replications per row (MC SE of a rate near α {se:.4f}, "
          f"α + 2 SE = {sf.ALPHA + 2 * se:.4f}; near 0.86: {math.sqrt(0.86 * 0.14 / args.reps):.4f})\n")
    print("| looks | pairing | P(firm better), 1 SD | E[N], 1 SD | fixed N: P(firm better) | A/A firm rate | "
          "E[N], A/A |")
    print("|---|---|---|---|---|---|---|")
    t0 = time.time()
    cells = [([5, 10, 15, 20], False, (18, 19, 20)), ([5, 10, 15, 20], True, (19, 20)),
             ([5, 10, 15, 20, 25, 30], False, (20, 22, 25)), ([10, 20, 30], False, (20, 23, 25))]
    for i, (looks, paired, fixed) in enumerate(cells):
        r = sf.simulate(looks, 1.0, paired, args.reps, seed=9100 + i, fixed=fixed)
        a = sf.simulate(looks, 0.0, paired, args.reps, seed=9200 + i)
        fx = ", ".join(f"{n}: {r[f'fixed{n}']:.3f}" for n in fixed)
        print(f"| {looks} | {'paired ρ 0.5' if paired else 'Welch'} | {r['firm_better']:.3f} | {r['en']:.2f} | "
              f"{fx} | {a['firm_any']:.4f} | {a['en']:.2f} |", flush=True)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
