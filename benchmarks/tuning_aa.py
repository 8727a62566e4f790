"""The tuned verdict's A/A table (issue 40), from the simulation of tests/unit/test_tuning_aa.py (the same function,
through :func:`ablate.stats.decide_batch`, the verdict's vectorised core).

Usage::

    OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/tuning_aa.py [--reps 2000] \
        [--out benchmarks/results/tuning_aa.md]

For every response surface (flat, peaked, shallow), number of settings k (2, 4, 8, 16), tuning seeds per setting
(3, 10) and evaluation seeds N (3, 5, 10, 20): the rate of "better or worse" of the tuned verdict (each arm where
:func:`ablate.stats.choose` says: its own choice, or one common setting, on fresh seeds), beside each arm judged at
its own choice (the rule before the common setting), the naive best-vs-best comparison on the tuning seeds and a
tuned arm against an untuned one, how often the two identical arms chose the same setting and how often they were
judged at a common one. A cell passes when the tuned rate is at most alpha + 2 MC SE.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.unit.test_tuning_aa as sim

KS = (2, 4, 8, 16)
NS = (3, 5, 10, 20)
TUNE_SEEDS = (3, 10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    bar = sim.ALPHA + 2 * sim.mc_se(sim.ALPHA, args.reps)
    t0 = time.time()
    lines = [f"# Tuned verdict, A/A ({args.reps} replications per cell, alpha = {sim.ALPHA}, bar = alpha + 2 MC SE = "
             f"{bar:.4f})", "",
             "| surface | k | tuning seeds | N | tuned | pass | each at its own choice | best vs best (tuning seeds) | "
             "tuned vs untuned | same own choice | common setting |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    fails = 0
    for kind, k, nt, n in itertools.product(sim.SURFACES, KS, TUNE_SEEDS, NS):
        rng = np.random.default_rng([40, sim.SURFACES.index(kind), k, nt, n])
        r = sim.simulate(rng, args.reps, k, nt, n, kind)
        ok = r["tuned"] <= bar
        fails += not ok
        lines.append(f"| {kind} | {k} | {nt} | {n} | {r['tuned']:.4f} | {'yes' if ok else '**no**'} | "
                     f"{r['own']:.4f} | {r['best_vs_best']:.4f} | {r['tuned_vs_one']:.4f} | {r['same_choice']:.3f} | "
                     f"{r['common']:.3f} |")
    cells = len(sim.SURFACES) * len(KS) * len(TUNE_SEEDS) * len(NS)
    own_fails = sum(1 for ln in lines[4:] if float(ln.split(" | ")[6]) > bar)
    lines += ["", f"{cells - fails} of {cells} cells pass; judging each arm at its own choice, "
              f"{cells - own_fails} would; {time.time() - t0:.0f} s."]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
