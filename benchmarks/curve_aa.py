"""The curve verdict's A/A, coverage and power tables (issue 38), from the simulations of
tests/unit/test_curves_aa.py (the same functions, through :func:`ablate.stats.curve_band`).

Usage::

    OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/curve_aa.py [--reps 400] \
        [--out benchmarks/results/curve_aa.md]

Tables (markdown):

1. A/A: for every curve length (50, 200, 500 steps), AR(1) correlation rho (0, 0.5, 0.9, 0.95), seed-noise shape
   (normal, heavy, seed_skew), design (paired, unpaired) and N (3, 5, 10, 20, 50): the rate of "better or worse
   anywhere" of the simultaneous band, beside the pointwise approach's rate (an uncorrected t-test at every point)
   and Bonferroni's over points. The band passes a cell when its rate <= alpha + 2 MC SE; over 360 cells, a test
   whose rate is exactly alpha (the band's, with random permutations) lands about 8 of them over that bar by
   chance, so each such cell is run again with fresh seeds and 2000 replications (a second, independent look).
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


def aa_table(reps: int, out: list[str]) -> list[tuple[int, int, float, str, bool]]:
    """The A/A table; returns the cells over alpha + 2 MC SE as (n, length, rho, shape, paired)."""
    se = math.sqrt(sim.ALPHA * (1 - sim.ALPHA) / reps)
    out += [f"### A/A: rate of 'better or worse anywhere' (alpha = {sim.ALPHA}, {reps} replications per cell, "
            f"MC SE {se:.4f}, pass <= {sim.ALPHA + 2 * se:.4f})", "",
            "Each cell: band / pointwise (uncorrected t at every point) / Bonferroni over points.", "",
            "| length | rho | shape | design | " + " | ".join(f"N={n}" for n in NS) + " |",
            "|---|---|---|---|" + "---|" * len(NS)]
    fails: list[tuple[int, int, float, str, bool]] = []
    worst = 0.0
    for length, rho, kind, paired in itertools.product(LENGTHS, RHOS, sim.SHAPES, (True, False)):
        cells = []
        for n in NS:
            seed = _seed(length, rho, kind, paired, n)
            c = sim.run_cell(n, length, rho, kind, paired, reps=reps, seed=seed)
            if c.anywhere > sim.ALPHA + 2 * se:
                fails.append((n, length, rho, kind, paired))
            worst = max(worst, c.anywhere)
            cells.append(f"{c.anywhere:.3f} / {c.pointwise:.2f} / {c.bonferroni:.3f}")
        design = "paired" if paired else "unpaired"
        out.append(f"| {length} | {rho:g} | {kind} | {design} | " + " | ".join(cells) + " |")
        print(out[-1], file=sys.stderr, flush=True)
    total = len(LENGTHS) * len(RHOS) * len(sim.SHAPES) * 2 * len(NS)
    expected = total * 0.0228  # P(Z > 2): cells an exact-alpha test puts over the bar by chance
    out += ["", f"Cells over alpha + 2 MC SE: {len(fails)} of {total} (a test whose rate is exactly alpha puts "
            f"about {expected:.0f} there by chance: P(Z > 2) = 2.3%); the largest band rate: {worst:.3f}.", ""]
    return fails


def recheck(cells: list[tuple[int, int, float, str, bool]], reps: int, out: list[str]) -> int:
    """Run each flagged cell again with fresh seeds and ``reps`` replications (an independent second look: a cell
    over the bar by chance comes back under it); returns how many stay over alpha + 2 MC SE."""
    se = math.sqrt(sim.ALPHA * (1 - sim.ALPHA) / reps)
    out += [f"### Second look at the cells over the bar ({reps} fresh replications each, MC SE {se:.4f}, pass <= "
            f"{sim.ALPHA + 2 * se:.4f})", "", "| N | length | rho | shape | design | band | pointwise | Bonferroni |",
            "|---|---|---|---|---|---|---|---|"]
    still = 0
    for n, length, rho, kind, paired in cells:
        c = sim.run_cell(n, length, rho, kind, paired, reps=reps, seed=_seed(length, rho, kind, paired, n, "again"))
        still += c.anywhere > sim.ALPHA + 2 * se
        out.append(f"| {n} | {length} | {rho:g} | {kind} | {'paired' if paired else 'unpaired'} | {c.anywhere:.4f} | "
                   f"{c.pointwise:.3f} | {c.bonferroni:.4f} |")
        print(out[-1], file=sys.stderr, flush=True)
    out += ["", f"Still over the bar on the second look: {still} of {len(cells)}.", ""]
    return still


def flagged_in(path: Path, reps: int) -> list[tuple[int, int, float, str, bool]]:
    """The cells of an earlier run's A/A table (its markdown) whose band rate is over alpha + 2 MC SE."""
    bar = sim.ALPHA + 2 * math.sqrt(sim.ALPHA * (1 - sim.ALPHA) / reps)
    out = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if len(parts) != 4 + len(NS) or parts[2] not in sim.SHAPES:
            continue
        for n, cell in zip(NS, parts[4:], strict=True):
            if float(cell.split("/")[0]) > bar:
                out.append((n, int(parts[0]), float(parts[1]), parts[2], parts[3] == "paired"))
    return out


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


def recheck_coverage(path: Path, reps: int, recheck_reps: int, out: list[str]) -> int:
    """Run again, with fresh seeds and ``recheck_reps`` replications, each power-table cell of an earlier output
    whose coverage is under 1 - alpha - 2 MC SE (at ``reps``); returns how many stay under it."""
    bar = 1 - sim.ALPHA - 2 * math.sqrt(sim.ALPHA * (1 - sim.ALPHA) / reps)
    cells = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if len(parts) != 3 + len(NS) - 1 or parts[2] not in ("paired", "unpaired"):
            continue
        for n, cell in zip(NS[1:], parts[3:], strict=True):
            if float(cell.split("/")[0]) < bar:
                cells.append((n, int(parts[0]), float(parts[1]), parts[2] == "paired"))
    se = math.sqrt(sim.ALPHA * (1 - sim.ALPHA) / recheck_reps)
    out += [f"### Second look at the coverage cells under {bar:.3f} ({recheck_reps} fresh replications each, MC SE "
            f"{se:.4f}, pass >= {1 - sim.ALPHA - 2 * se:.4f})", "", "| N | length | rho | design | coverage | power |",
            "|---|---|---|---|---|---|"]
    still = 0
    for n, length, rho, paired in cells:
        c = sim.run_cell(n, length, rho, "normal", paired, reps=recheck_reps,
                         seed=_seed(length, rho, paired, n, "power again"), effect=sim.warmup_effect(length, 1.0))
        still += c.coverage < 1 - sim.ALPHA - 2 * se
        out.append(f"| {n} | {length} | {rho:g} | {'paired' if paired else 'unpaired'} | {c.coverage:.4f} | "
                   f"{c.better:.3f} |")
        print(out[-1], file=sys.stderr, flush=True)
    out += ["", f"Still under the bar on the second look: {still} of {len(cells)}.", ""]
    return still


def summary(path: Path) -> str:
    """The condensed A/A table docs/verdict.md quotes, from an earlier run's markdown: per curve length and design,
    for each N, the band's largest and mean rate over the 12 cells of rho x shape, and the pointwise approach's
    and Bonferroni's mean rates."""
    cells: dict[tuple[int, str], list[list[tuple[float, float, float]]]] = {}
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if len(parts) != 4 + len(NS) or parts[2] not in sim.SHAPES:
            continue
        rates = [tuple(float(v) for v in cell.split("/")) for cell in parts[4:]]
        cells.setdefault((int(parts[0]), parts[3]), []).append(rates)  # type: ignore[arg-type]
    out = ["| length | design | " + " | ".join(f"N={n}" for n in NS) + " |", "|---|---|" + "---|" * len(NS)]
    for (length, design), rows in sorted(cells.items()):
        cols = []
        for j in range(len(NS)):
            band = [r[j][0] for r in rows]
            point = sum(r[j][1] for r in rows) / len(rows)
            bonf = sum(r[j][2] for r in rows) / len(rows)
            cols.append(f"{max(band):.3f} ({sum(band) / len(band):.3f}) / {point:.2f} / {bonf:.3f}")
        out.append(f"| {length} | {design} | " + " | ".join(cols) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--recheck-reps", type=int, default=2000)
    ap.add_argument("--summary", type=Path, default=None, help="print the condensed A/A table of an earlier output")
    ap.add_argument("--recheck-coverage", type=Path, default=None,
                    help="only the second look at the power table's coverage cells under the bar in this output")
    ap.add_argument("--recheck", type=Path, default=None,
                    help="only the second look, at the cells over the bar in this earlier output (--reps: its reps)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out: list[str] = []
    if args.summary:
        print(summary(args.summary))
        return
    if args.recheck_coverage:
        still = recheck_coverage(args.recheck_coverage, args.reps, args.recheck_reps, out)
        print("\n".join(out))
        sys.exit(1 if still else 0)
    if args.recheck:
        still = recheck(flagged_in(args.recheck, args.reps), args.recheck_reps, out)
        print("\n".join(out))
        sys.exit(1 if still else 0)
    fails = aa_table(args.reps, out)
    still = recheck(fails, args.recheck_reps, out) if fails else 0
    power_table(args.reps, out)
    if args.out:  # the coverage cells under the bar, looked at again
        args.out.write_text("\n".join(out) + "\n")
        still += recheck_coverage(args.out, args.reps, args.recheck_reps, out)
    out.append(f"({time.perf_counter() - t0:.0f} s; `python benchmarks/curve_aa.py --reps {args.reps}`)")
    text = "\n".join(out) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    sys.exit(1 if still else 0)


if __name__ == "__main__":
    main()
