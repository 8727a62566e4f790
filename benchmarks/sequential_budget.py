"""Reallocation within a seed budget (issue 39 item 2): the issue-39 suite (5 treatments, true effects 0, 0, 0, 0.5,
1 SD, one control; normal and lognormal seeds), ``effect=0.5`` with futility γ, planned looks ``LOOKS`` and a budget
B of trials over every arm. The freed seeds go to the arms still running by equal shares, looks appended at the
same spacing (:mod:`ablate.stats.budget`), every arm tested at the extended design's boundaries; beside it the same
looks without a budget and fixed N = ``LOOKS[-1]`` on the same data. Family-wise error (any better/worse among the
null arms), P(better) per real treatment, expected trials. Usage:
``nice -n 10 python benchmarks/sequential_budget.py [--reps 1000]``."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ablate.stats import decide_batch, group_sequential_batch
from ablate.stats.budget import budget_last_look, budget_looks, trials_used
from ablate.stats.core import BETTER, WORSE
from tests.unit.test_sequential_futility import ALPHA, EFFECTS, draw

LOOKS = [20, 40, 60]


def simulate_budget(looks: list[int], budget: int | None, shape: str, reps: int, seed: int, *, effect: float = 0.5,
                    gamma: float = 0.3) -> dict[str, object]:
    """One suite design on ``reps`` replications: with ``budget`` None the planned looks only, else the extended
    looks and the budget's stops (two passes through ``group_sequential_batch``: the stops without a budget, which
    fix the ledger, then the budget's last look per row). Fixed N = ``looks[-1]`` on the same data."""
    m = len(EFFECTS)
    lk = list(looks) if budget is None else budget_looks(looks, budget, m + 1)
    rng = np.random.default_rng(seed)
    c = draw(rng, reps, lk[-1], shape)
    ts = [draw(rng, reps, lk[-1], shape) + d for d in EFFECTS]
    kw = {"alpha": ALPHA, "n_comparisons": m, "effect": effect, "futility": gamma}
    runs = [group_sequential_batch(t, c, lk, **kw) for t in ts]
    if budget is not None:
        end = budget_last_look(np.stack([r.stopped_at for r in runs], 1), lk, len(looks), budget)
        runs = [group_sequential_batch(t, c, lk, last_look=end, **kw) for t in ts]
    fixed = [decide_batch(t[:, :looks[-1]], c[:, :looks[-1]], alpha=ALPHA, n_comparisons=m) for t in ts]
    null = [i for i, d in enumerate(EFFECTS) if d == 0]
    fw = np.zeros(reps, bool)
    fw_fixed = np.zeros(reps, bool)
    for i in null:
        fw |= np.isin(runs[i].verdict, (BETTER, WORSE))
        fw_fixed |= np.isin(fixed[i].verdict, (BETTER, WORSE))
    trials = trials_used(np.stack([r.n_used for r in runs], 1))
    return {"looks": lk, "fwer": float(fw.mean()), "fwer_fixed": float(fw_fixed.mean()),
            "better": [float((r.verdict == BETTER).mean()) for r in runs],
            "fixed_better": [float((f.verdict == BETTER).mean()) for f in fixed],
            "en": [float(r.n_used.mean()) for r in runs], "trials": float(trials.mean()),
            "max_trials": int(trials.max()), "fixed_trials": (m + 1) * looks[-1]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    args = ap.parse_args()
    se = math.sqrt(ALPHA * (1 - ALPHA) / args.reps)
    print(f"5 treatments ({', '.join(map(str, EFFECTS))} SD) vs one control, α = {ALPHA} family-wise, looks "
          f"{LOOKS}, effect=0.5 futility=0.3, {args.reps} replications per row (MC SE near α {se:.4f})\n")
    print("| seeds | budget B | looks run | FWER (fixed N) | P(better) 0.5 SD / fixed (ratio) | "
          "P(better) 1 SD / fixed | E[N] null / 0.5 / 1 SD | E[trials] (max) / fixed | saving |")
    print("|---|---|---|---|---|---|---|---|---|")
    t0 = time.time()
    for shape in ("normal", "lognormal"):
        for budget in (None, 360, 420):
            r = simulate_budget(LOOKS, budget, shape, args.reps, seed=3990 + (budget or 0) + (shape == "normal"))
            b, f, en = r["better"], r["fixed_better"], r["en"]
            print(f"| {shape} | {budget or 'none'} | {r['looks'][-1]} | {r['fwer']:.4f} ({r['fwer_fixed']:.4f}) | "
                  f"{b[3]:.3f} / {f[3]:.3f} ({b[3] / f[3]:.3f}) | {b[4]:.3f} / {f[4]:.3f} | "
                  f"{sum(en[:3]) / 3:.1f} / {en[3]:.1f} / {en[4]:.1f} | {r['trials']:.1f} ({r['max_trials']}) / "
                  f"{r['fixed_trials']} | {1 - r['trials'] / r['fixed_trials']:.1%} |", flush=True)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
