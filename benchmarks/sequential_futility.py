"""Futility stops in sequential mode (issue 39 item 2, Done-when (b)): a suite of 5 treatments against one control
(true effects 0, 0, 0, 0.5 and 1 SD; normal and lognormal seeds), each design run with ``effect=0.5`` (the planned
effect) beside fixed N at the last look on the same data, through ``group_sequential_batch`` (proven equal row by
row to the verdict's ``sequential_state``, futility stops included, by tests/unit/test_sequential_futility.py).
Family-wise error, power per treatment (P(better), sequential / fixed), P(futility stop), expected trials and the
saving against fixed N. Markdown for docs/verdict.md. Usage:
``nice -n 10 python benchmarks/sequential_futility.py [--reps 4000] [--design 0 4]``."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.unit.test_sequential_futility as sf

#: (looks, planned effect, γ): the default looks, and looks sized for the planned effect (fixed N = 80: power 0.71
#: at 0.5 SD and α/5; N = 120: 0.91), at the default γ = 0.1 and at γ = 0.3
#: (the last: tests/unit/test_sequential_futility.py's fast subset).
DESIGNS = (([5, 10, 15, 20], 0.5, 0.1), ([10, 20, 30, 40, 50, 60, 70, 80], 0.5, 0.1),
           ([15, 30, 45, 60, 75, 90, 105, 120], 0.5, 0.1), ([15, 30, 45, 60, 75, 90, 105, 120], 0.5, 0.3),
           ([20, 40, 60, 80, 100, 120], 0.5, 0.3))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--design", type=int, nargs="*", help="indices into DESIGNS (default: all)")
    args = ap.parse_args()
    se = math.sqrt(sf.ALPHA * (1 - sf.ALPHA) / args.reps)
    print(f"5 treatments (true effects {', '.join(map(str, sf.EFFECTS))} SD) vs one control, α = {sf.ALPHA} "
          f"family-wise (α/5 per treatment), {args.reps} replications per row (MC SE of a rate near α {se:.4f})\n")
    print("| looks | seeds | effect= / γ | FWER seq (fixed) | P(better) 0.5 SD seq / fixed (ratio) | "
          "P(better) 1 SD seq / fixed (ratio) | P(futility) null / 0.5 / 1 SD | E[N] null / 0.5 / 1 SD / control | "
          "E[trials] / fixed | saving |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.time()
    for i, (looks, effect, gamma) in enumerate(DESIGNS):
        if args.design and i not in args.design:
            continue
        for j, shape in enumerate(("normal", "lognormal")):
            r = sf.simulate_suite(looks, effect, shape, args.reps, seed=3900 + 10 * i + j, futility=gamma)
            sb, fb, fu, en = r["seq_better"], r["fixed_better"], r["futile"], r["en"]
            null_fut = sum(fu[:3]) / 3
            null_en = sum(en[:3]) / 3
            save = 1 - r["trials"] / r["fixed_trials"]
            print(f"| {looks} | {shape} | {effect} / {gamma} | {r['fwer']:.4f} ({r['fwer_fixed']:.4f}) | "
                  f"{sb[3]:.3f} / {fb[3]:.3f} ({sb[3] / fb[3]:.3f}) | "
                  f"{sb[4]:.3f} / {fb[4]:.3f} ({sb[4] / fb[4]:.3f}) | "
                  f"{null_fut:.3f} / {fu[3]:.3f} / {fu[4]:.3f} | {null_en:.1f} / {en[3]:.1f} / {en[4]:.1f} / "
                  f"{r['control_n']:.1f} | {r['trials']:.1f} / {r['fixed_trials']} | {save:.1%} |", flush=True)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
