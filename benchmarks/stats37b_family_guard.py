"""Issue 37, the last firm cell over 0.056 (unpaired bimodal arms 1:3, m = 10, N = 20: 0.0582 +- 0.0007): the
candidate rules for families of 5-10 treatments at 20-25 seeds per arm, their firm family-wise error and power.
Usage: ``python benchmarks/stats37b_family_guard.py [--reps 40000] [--power-reps 4000]``.

Arms, decide_batch and Holm as in ``benchmarks/stats37_firm.py`` (whose ``family()`` checks the rule that runs
against ``compare()`` + ``adjust_comparisons``). Each candidate only removes firm verdicts from the rule before it
("before": what ``is_firm`` did without ``skew_z``), so no cell of the grid can rise; the columns:

- ``before``: the rule without the family guard;
- ``guard z>=1.0`` / ``z>=0.5`` (what ships, 1.0: :data:`ablate.stats.core.FAMILY_GUARD_Z`): p x 10 where the guard's
  oriented D'Agostino z is at least 1.0 / 0.5, the skew guard calibrated at the family's per-step level;
- ``p x 2`` / ``p x 3``: a firm factor for families at 20-29 seeds;
- "firm from 30" (candidate (a)): no firm verdict at all in these cells, power 0 (not simulated).

Printed: A/A, the share of replications with any firm better/worse (unpaired bimodal 1:3, m = 5-10); power, with
every treatment d (0.5, 1) control SDs better, the share with at least one firm better.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from stats37_firm import arms

from ablate.stats import decide_batch
from ablate.stats.core import BETTER, WORSE, is_firm
from ablate.stats.multiplicity import holm

RULES = ("before", "guard z>=1.0", "guard z>=0.5", "p x 2", "p x 3")


def rules(shape: str, m: int, n: int, reps: int, ratio: float, paired: bool, seed: int, d: float = 0.0
          ) -> dict[str, float]:
    """Each candidate's share of replications with a firm better/worse (a firm better when d > 0)."""
    treat, control = arms(np.random.default_rng(seed), shape, m, n, reps, ratio, d)
    res = [decide_batch(treat[j], control, paired=paired, n_comparisons=m) for j in range(m)]
    adj = np.stack([np.minimum(1.0, r.pvalue * r.guard_factor) for r in res])
    adj = np.apply_along_axis(holm, 0, adj) if m > 1 else adj
    out = {k: np.zeros(reps, bool) for k in RULES}
    for j, r in enumerate(res):
        v = np.where(adj[j] < 0.05, np.where(r.diff > 0, BETTER, WORSE), 0)
        v = np.where(v == BETTER, BETTER, 0) if d > 0 else v
        f = is_firm(v, adj[j], 0.05, r.guard_factor, np.minimum(r.n_treatment, r.n_control), r.paired, r.skewed, m)
        out["before"] |= f
        for z in (1.0, 0.5):
            out[f"guard z>={z}"] |= f & ~((r.skew_z >= z) & (adj[j] * 10 >= 0.05))
        for k in (2, 3):
            out[f"p x {k}"] |= f & (adj[j] * k < 0.05)
    return {k: float(x.mean()) for k, x in out.items()}


def cell(shape: str, m: int, n: int, reps: int, ratio: float, paired: bool, seed: int, d: float = 0.0,
         chunk: int = 5000) -> dict[str, float]:
    """:func:`rules` over ``reps`` replications in chunks (new seeds per chunk)."""
    acc = dict.fromkeys(RULES, 0.0)
    for k in range(0, reps, chunk):
        w = min(chunk, reps - k)
        for key, x in rules(shape, m, n, w, ratio, paired, seed + k, d).items():
            acc[key] += x * w / reps
    return acc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=40_000)
    ap.add_argument("--power-reps", type=int, default=4000)
    args = ap.parse_args()
    head = "| design | shape | SD ratio | m | N | d | " + " | ".join(RULES) + " |\n|---|---|---|---|---|---|" + \
        "---|" * len(RULES)
    print(f"### A/A firm family-wise error, {args.reps} replications per cell\n\n{head}")
    for m in range(5, 11):
        for n in (20, 25):
            a = cell("bimodal", m, n, args.reps, 3.0, False, 9_000_000 + 1000 * m + n)
            print(f"| unpaired | bimodal | 1:3 | {m} | {n} | 0 | " + " | ".join(f"{a[k]:.4f}" for k in RULES) + " |",
                  flush=True)
    print(f"\n### Power (a firm better, every treatment d control SDs better), {args.power_reps} replications\n")
    print(head)
    for paired in (False, True):
        for shape, ratio in (("normal", 1.0), ("normal", 3.0), ("bimodal", 3.0)):
            for m in (5, 10):
                for n in (20, 25):
                    for d in (0.5, 1.0):
                        seed = 5_000_000 + 1000 * m + n + int(10 * d) + 100 * int(ratio) + 50_000 * paired
                        a = cell(shape, m, n, args.power_reps, ratio, paired, seed, d)
                        print(f"| {'paired' if paired else 'unpaired'} | {shape} | 1:{ratio:g} | {m} | {n} | {d:g} | "
                              + " | ".join(f"{a[k]:.3f}" for k in RULES) + " |", flush=True)
    print()


if __name__ == "__main__":
    main()
