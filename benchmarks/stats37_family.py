"""Issue 37, items 1-2 (measurement only): the firm family-wise error of the default Holm path when m null treatments
share one control and are lognormal and wider than it. Usage: ``python benchmarks/stats37_family.py [--reps 4000]``.

Each replication: m treatments (lognormal σ_log = 1, SD 3 times the control's; or "grows": the treatment's log-SD
2 instead of 1, so its skew grows with its spread, as in Colas et al. 2019's lognormal) and one lognormal control
(σ_log = 1, SD 1), all with equal means (A/A); paired rows pair seeds that share nothing (ρ = 0). Per treatment
:func:`ablate.stats.decide_batch` (what
``compare()`` runs), the skew guard's p x 10 entering Holm as ``adjust_comparisons`` does
(:func:`ablate.stats.multiplicity.holm`), then :func:`ablate.stats.core.is_firm` on the adjusted p: the same rule
``compare()`` + ``adjust_comparisons`` apply, vectorised over replications (a check at the end runs both on the first
replications and asserts equal firm verdicts). Printed: the share of replications with at least one firm better/worse
(family-wise error) and with at least one better/worse of any kind.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from ablate.stats import adjust_comparisons, compare, decide_batch
from ablate.stats.core import BETTER, WORSE, is_firm
from ablate.stats.multiplicity import holm


def _lognormal(rng: np.random.Generator, sigma_log: float, size: tuple[int, ...]) -> np.ndarray:
    """Lognormal draws standardised to mean 0, SD 1 (skewness grows with ``sigma_log``)."""
    var = (math.exp(sigma_log**2) - 1) * math.exp(sigma_log**2)
    return (rng.lognormal(0.0, sigma_log, size) - math.exp(sigma_log**2 / 2)) / math.sqrt(var)


def arms(rng: np.random.Generator, m: int, n: int, reps: int, ratio: float, growing: bool, paired: bool
         ) -> tuple[np.ndarray, np.ndarray]:
    """(treatments (m, reps, n), control (reps, n)) on A/A: equal means, treatment SD ``ratio``."""
    control = _lognormal(rng, 1.0, (reps, n))
    sig = 1.0 + 0.5 * (ratio - 1) if growing else 1.0  # growing: a wider treatment is also more skewed
    treat = ratio * _lognormal(rng, sig, (m, reps, n))
    return treat, control


def family_rates(m: int, n: int, reps: int, ratio: float, growing: bool, paired: bool, seed: int
                 ) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    treat, control = arms(rng, m, n, reps, ratio, growing, paired)
    p = np.empty((m, reps))
    res = []
    for j in range(m):
        r = decide_batch(treat[j], control, paired=paired, n_comparisons=m)
        p[j] = np.minimum(1.0, r.pvalue * r.guard_factor)
        res.append(r)
    adj = np.apply_along_axis(holm, 0, p)
    any_firm = np.zeros(reps, bool)
    any_sig = np.zeros(reps, bool)
    for j, r in enumerate(res):
        verdict = np.where(adj[j] < 0.05, np.where(r.diff > 0, BETTER, WORSE), 0)
        firm = is_firm(verdict, adj[j], 0.05, r.guard_factor, np.minimum(r.n_treatment, r.n_control), r.paired)
        any_firm |= firm
        any_sig |= np.isin(verdict, (BETTER, WORSE))
    # the same rule through compare() + adjust_comparisons on the first replications
    for i in range(min(20, reps)):
        comps = adjust_comparisons([compare(treat[j, i], control[i], paired=paired, n_comparisons=m)
                                    for j in range(m)], "holm")
        assert any(bool(c.firm) for c in comps) == bool(any_firm[i]), (m, n, i)
    return float(any_firm.mean()), float(any_sig.mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=4000)
    args = ap.parse_args()
    print(f"### Family-wise error of firm verdicts, Holm, m null lognormal treatments 1:{3} against one control "
          f"({args.reps} replications per cell, MC SE {math.sqrt(0.05 * 0.95 / args.reps):.4f} at 0.05): "
          "firm / any better-worse\n")
    ns = (5, 10, 20, 50)
    print("| design | skew | m | " + " | ".join(f"N={n}" for n in ns) + " |")
    print("|---|---|---|" + "---|" * len(ns))
    for paired in (False, True):
        for growing in (False, True):
            for m in (1, 2, 5, 10):
                cells = []
                for n in ns:
                    f, a = family_rates(m, n, args.reps, 3.0, growing, paired, seed=1000 * m + n + 7 * paired)
                    cells.append(f"{f:.3f} / {a:.3f}")
                print(f"| {'paired (ρ = 0)' if paired else 'unpaired'} | {'grows' if growing else 'fixed'} | {m} | "
                      + " | ".join(cells) + " |", flush=True)
    print()


if __name__ == "__main__":
    main()
