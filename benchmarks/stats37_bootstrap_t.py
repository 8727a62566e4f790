"""Issue 37, items 1-2, a candidate measured and not taken: the studentized bootstrap (bootstrap-t; Hall 1992) in
place of the skew guard's p x 10. Usage: ``python benchmarks/stats37_bootstrap_t.py [--reps 1000]``.

On the arms of ``benchmarks/stats37_family.py`` (m null lognormal treatments, SD 3 times the control's, unpaired):
Welch's t resampled within each centred arm (999 resamples, equal-tailed two-sided p), into Holm, then the firm rule
(:func:`ablate.stats.core.is_firm`) with no guard factor; beside it the current rule (``decide_batch``'s guarded p).
Printed: the family-wise error of firm verdicts for "current", "boot where guard" (the bootstrap p where the guard
fires) and "boot all".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from stats37_family import arms

from ablate.stats import decide_batch
from ablate.stats.core import BETTER, WORSE, is_firm
from ablate.stats.multiplicity import holm


def welch_t(t: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Welch's t over the last axis."""
    vt, vc = t.var(-1, ddof=1) / t.shape[-1], c.var(-1, ddof=1) / c.shape[-1]
    return (t.mean(-1) - c.mean(-1)) / np.sqrt(vt + vc)


def boot_p(t: np.ndarray, c: np.ndarray, rng: np.random.Generator, b_total: int = 999) -> np.ndarray:
    """Equal-tailed two-sided bootstrap-t p of Welch's t, rows of ``t`` and ``c`` (reps, n) resampled in chunks."""
    tobs = welch_t(t, c)
    tc, cc = t - t.mean(1, keepdims=True), c - c.mean(1, keepdims=True)
    reps, n = t.shape
    ge, le = np.zeros(reps), np.zeros(reps)
    for b in range(0, b_total, 111):
        k = min(111, b_total - b)
        ts = np.take_along_axis(np.broadcast_to(tc, (k, reps, n)), rng.integers(0, n, (k, reps, n)), 2)
        cs = np.take_along_axis(np.broadcast_to(cc, (k, reps, n)), rng.integers(0, n, (k, reps, n)), 2)
        tstar = welch_t(ts, cs)
        ge += (tstar >= tobs).sum(0)
        le += (tstar <= tobs).sum(0)
    return np.minimum(1.0, 2 * np.minimum((ge + 1) / (b_total + 1), (le + 1) / (b_total + 1)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=1000)
    reps = ap.parse_args().reps
    for m, n in ((1, 20), (5, 20), (5, 10), (5, 50)):
        rng = np.random.default_rng(m * 1000 + n)
        treat, control = arms(rng, m, n, reps, 3.0, False, False)
        res = [decide_batch(treat[j], control, n_comparisons=m) for j in range(m)]
        pb = np.stack([boot_p(treat[j], control, rng) for j in range(m)])
        out = {}
        for name in ("current", "boot where guard", "boot all"):
            p = np.stack([np.minimum(1, r.pvalue * r.guard_factor) for r in res])
            if name == "boot where guard":
                p = np.stack([np.where(r.guard_factor > 1, pb[j], p[j]) for j, r in enumerate(res)])
            elif name == "boot all":
                p = pb
            adj = np.apply_along_axis(holm, 0, p)
            any_firm = np.zeros(reps, bool)
            for j, r in enumerate(res):
                v = np.where(adj[j] < 0.05, np.where(r.diff > 0, BETTER, WORSE), 0)
                g = r.guard_factor if name == "current" else np.ones(reps)
                any_firm |= is_firm(v, adj[j], 0.05, g, np.minimum(r.n_treatment, r.n_control), False)
            out[name] = round(float(any_firm.mean()), 3)
        print(f"m = {m}, N = {n}: {out}", flush=True)


if __name__ == "__main__":
    main()
