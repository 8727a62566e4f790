"""The curve verdict's A/A, coverage and power tables (issue 38), from the simulations of
tests/unit/test_curves_aa.py (the same functions, through :func:`ablate.stats.curve_band`).

Usage::

    OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/curve_aa.py [--reps 400] \
        [--out benchmarks/results/curve_aa.md]

Tables (markdown):

1. A/A: for every curve length (50, 200, 500 steps), AR(1) correlation rho (0, 0.5, 0.9, 0.95), seed-noise shape
   (normal, heavy, seed_skew), design (paired, unpaired) and N (3, 5, 10, 20, 50): the rate of "better or worse
   anywhere" of the simultaneous band, beside the pointwise approach's rate (an uncorrected t-test at every point)
   and Bonferroni's over points. The band passes a cell when its rate <= alpha + 2 MC SE.
2. Under a warmup-like difference (1 noise SD at the start, decaying over the first tenth): coverage of the
   band (the whole true difference curve inside it) and power ("better" found anywhere) against Bonferroni.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.unit.test_curves_aa as sim

LENGTHS = (50, 200, 500)
RHOS = (0.0, 0.5, 0.9, 0.95)
NS = (3, 5, 10, 20, 50)


def _seed(*cell: object) -> int:
    """A seed per cell, the same in every run (str hashing is salted per process; crc32 is not)."""
    return zlib.crc32(repr(cell).encode())


def aa_table(reps: int, out: list[str]) -> int:
    """The A/A table; returns the number of cells over alpha + 2 MC SE."""
    se = math.sqrt(sim.ALPHA * (1 - sim.ALPHA) / reps)
    out += [f"### A/A: rate of 'better or worse anywhere' (alpha = {sim.ALPHA}, {reps} replications per cell, "
            f"MC SE {se:.4f}, pass <= {sim.ALPHA + 2 * se:.4f})", "",
            "Each cell: band / pointwise (uncorrected t at every point) / Bonferroni over points.", "",
            "| length | rho | shape | design | " + " | ".join(f"N={n}" for n in NS) + " |",
            "|---|---|---|---|" + "---|" * len(NS)]
    fails, worst = 0, 0.0
    for length, rho, kind, paired in itertools.product(LENGTHS, RHOS, sim.SHAPES, (True, False)):
        cells = []
        for n in NS:
            seed = _seed(length, rho, kind, paired, n)
            c = sim.run_cell(n, length, rho, kind, paired, reps=reps, seed=seed)
            fails += c.anywhere > sim.ALPHA + 2 * se
            worst = max(worst, c.anywhere)
            cells.append(f"{c.anywhere:.3f} / {c.pointwise:.2f} / {c.bonferroni:.3f}")
        design = "paired" if paired else "unpaired"
        out.append(f"| {length} | {rho:g} | {kind} | {design} | " + " | ".join(cells) + " |")
        print(out[-1], file=sys.stderr, flush=True)
    total = len(LENGTHS) * len(RHOS) * len(sim.SHAPES) * 2 * len(NS)
    out += ["", f"Cells over alpha + 2 MC SE: {fails} of {total}; the largest band rate: {worst:.3f}.", ""]
    return fails


def power_table(reps: int, out: list[str]) -> None:
    """Coverage and power under a warmup-like difference of 1 noise SD."""
    out += [f"### Under a warmup-like difference (1 SD at the start, decaying over the first tenth; {reps} "
            "replications, normal noise)", "",
            "Each cell: coverage of the band / power of the band / power of Bonferroni over points (both: 'better' "
            "found anywhere).", "",
            "| length | rho | design | " + " | ".join(f"N={n}" for n in NS[1:]) + " |",
            "|---|---|---|" + "---|" * (len(NS) - 1)]
    for length, rho, paired in itertools.product((50, 200, 500), (0.0, 0.9), (True, False)):
        effect = sim.warmup_effect(length, 1.0)
        cells = []
        for n in NS[1:]:
            c = sim.run_cell(n, length, rho, "normal", paired, reps=reps, seed=_seed(length, rho, paired, n, "power"),
                             effect=effect)
            cells.append(f"{c.coverage:.3f} / {c.better:.2f} / {c.bonferroni_better:.2f}")
        out.append(f"| {length} | {rho:g} | {'paired' if paired else 'unpaired'} | " + " | ".join(cells) + " |")
        print(out[-1], file=sys.stderr, flush=True)
    out.append("")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    out: list[str] = []
    fails = aa_table(args.reps, out)
    power_table(args.reps, out)
    out.append(f"({time.perf_counter() - t0:.0f} s; `python benchmarks/curve_aa.py --reps {args.reps}`)")
    text = "\n".join(out) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
