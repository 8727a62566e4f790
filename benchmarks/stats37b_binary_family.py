"""Issue 37: families of treatments on a 0/1 metric, through ``compare()``'s score-test path (Newcombe's score test
unpaired, McNemar's exact test paired; firm when Fisher's exact test, adjusted by the same family factor, also
clears the level: :func:`ablate.stats.compare._binary_firm`). ``decide_batch`` does not run this path, so this
simulation calls the functions ``compare()`` calls for 0/1 values (:func:`ablate.stats.binary.pvalue`,
:func:`ablate.stats.binary.firm_pvalue`, Holm as ``adjust_comparisons`` does), tabulated once per N over every pair of
success counts (unpaired) or discordant counts (paired), and checks them against ``compare()`` +
``adjust_comparisons`` on the first replications of each cell (equal verdicts and firm flags, else it stops).
Usage: ``python benchmarks/stats37b_binary_family.py [--reps 20000] [--check 4]``.

A/A: m null treatments and one control, N seeds per arm, every seed a success with probability p (paired: arms
independent, pairs by column). Printed: the share of replications with at least one firm better/worse (firm
family-wise error) and with at least one better/worse (the verdict word's).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from ablate.stats import adjust_comparisons, compare
from ablate.stats import binary as b
from ablate.stats.multiplicity import holm

MS = (1, 5, 10)
NS = (5, 10, 20, 30, 50)
PS = (0.1, 0.3, 0.5)


def tables(n: int, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """(score p, exact p) indexed [k_treatment, k_control] (unpaired) or [treatment-only, control-only discordant]."""
    score, exact = np.ones((n + 1, n + 1)), np.ones((n + 1, n + 1))
    for i in range(n + 1):
        for j in range(n + 1 - i if paired else n + 1):
            c = b.BinaryCounts(True, 0, n, 0, n, i, j) if paired else b.BinaryCounts(False, i, n, j, n)
            score[i, j] = b.pvalue(c)
            exact[i, j] = b.firm_pvalue(c)
    return score, exact


def family(m: int, n: int, p: float, paired: bool, reps: int, seed: int, tab: tuple[np.ndarray, np.ndarray],
           check: int = 20) -> tuple[float, float]:
    """(firm FWER, word FWER) over ``reps`` A/A replications; the first ``check`` checked against compare()."""
    rng = np.random.default_rng(seed)
    t = (rng.random((m, reps, n)) < p).astype(float)
    c = (rng.random((reps, n)) < p).astype(float)
    if paired:
        i, j = ((t == 1) & (c == 0)).sum(2), ((t == 0) & (c == 1)).sum(2)
    else:
        i, j = t.sum(2).astype(int), np.broadcast_to(c.sum(1).astype(int), (m, reps))
    score, exact = tab[0][i, j], tab[1][i, j]
    adj = np.apply_along_axis(holm, 0, score) if m > 1 else score
    word = adj < 0.05
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(score > 0, adj / score, 1.0)
    firm = word & (np.minimum(1.0, exact * factor) < 0.05)
    for r in range(min(check, reps)):  # the same through compare() + adjust_comparisons
        comps = [compare(t[k, r], c[r], paired=paired, n_comparisons=m, pi_interval=False) for k in range(m)]
        comps = adjust_comparisons(comps, "holm") if m > 1 else comps
        for k, cp in enumerate(comps):
            assert (cp.verdict in ("better", "worse")) == bool(word[k, r]), (m, n, p, paired, r, k)
            assert bool(cp.firm) == bool(firm[k, r]), (m, n, p, paired, r, k, cp.firm)
    return float(firm.any(0).mean()), float(word.any(0).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20_000)
    ap.add_argument("--check", type=int, default=4, help="replications per cell checked against compare()")
    args = ap.parse_args()
    se = math.sqrt(0.05 * 0.95 / args.reps)
    print(f"### 0/1 metric, families: A/A firm family-wise error / the word's ({args.reps} replications per cell, "
          f"MC SE {se:.4f} at 0.05)\n")
    print("| design | p | m | " + " | ".join(f"N={n}" for n in NS) + " |")
    print("|---|---|---|" + "---|" * len(NS))
    worst = (0.0, "")
    for paired in (False, True):
        tabs = {n: tables(n, paired) for n in NS}
        for p in PS:
            for m in MS:
                cells = []
                for n in NS:
                    f, w = family(m, n, p, paired, args.reps, 11_000_000 + 100_000 * paired + 1000 * int(10 * p)
                                  + 100 * m + n, tabs[n], args.check)
                    cells.append(f"{f:.4f} / {w:.4f}")
                    if f > worst[0]:
                        worst = (f, f"{'paired' if paired else 'unpaired'} p={p} m={m} N={n}")
                print(f"| {'paired' if paired else 'unpaired'} | {p} | {m} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nworst firm cell: {worst[0]:.4f} ({worst[1]})\n")


if __name__ == "__main__":
    main()
