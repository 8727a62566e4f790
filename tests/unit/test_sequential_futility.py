"""Futility stops in sequential mode (issue 39 item 2): a suite of 5 treatments against one control.

Measured through :func:`ablate.stats.group_sequential_batch` with ``effect=`` (the function
tests/unit/test_stats_sequential_twin.py proves equal row by row to :func:`ablate.judge.verdict.sequential_state`,
what ``ablate verdict`` replays, futility stops included), fixed N through :func:`ablate.stats.decide_batch` on the
same data. The full table is benchmarks/sequential_futility.py (docs/verdict.md, Sequential seeds: futility).
"""

from __future__ import annotations

import math

import numpy as np

from ablate.stats import decide_batch, group_sequential_batch
from ablate.stats.core import BETTER, WORSE

ALPHA = 0.05
#: The issue's suite: true effects of the 5 treatments, in SDs of one seed's metric.
EFFECTS = (0.0, 0.0, 0.0, 0.5, 1.0)


def draw(rng: np.random.Generator, reps: int, n: int, shape: str) -> np.ndarray:
    """Seeds of SD 1 (mean 0 before the effect): normal, or lognormal (σ_log 0.5) standardised. Shape (reps, n)."""
    if shape == "normal":
        return rng.normal(size=(reps, n))
    s = 0.5
    x = rng.lognormal(0.0, s, size=(reps, n))
    mean, sd = math.exp(s * s / 2), math.sqrt((math.exp(s * s) - 1) * math.exp(s * s))
    return (x - mean) / sd


def simulate_suite(looks: list[int], effect: float | None, shape: str, reps: int, seed: int,
                   effects: tuple[float, ...] = EFFECTS, futility: float | None = None) -> dict[str, object]:
    """One control and ``len(effects)`` treatments (each tested at α/m, the control shared), sequential with
    futility under the planned ``effect`` beside fixed N = ``looks[-1]`` (Bonferroni α/m, as the looks) on the same
    data. Returns per-treatment P(better) (firm or indicative: on lognormal seeds the skew rule makes most verdicts
    indicative) (seq and fixed), P(futility stop), E[N]; the family-wise error over the
    null treatments (any better/worse verdict, firm or not); expected trials (treatments' seeds plus the control's, which runs to the
    last treatment's stop) and fixed N's."""
    rng = np.random.default_rng(seed)
    n, m = looks[-1], len(effects)
    c = draw(rng, reps, n, shape)
    kw = {} if futility is None else {"futility": futility}
    seq_better, fix_better, fut, en, used, fw_seq, fw_fix = [], [], [], [], [], np.zeros(reps, bool), np.zeros(reps, bool)
    for d in effects:
        t = draw(rng, reps, n, shape) + d
        s = group_sequential_batch(t, c, looks, alpha=ALPHA, n_comparisons=m, effect=effect, **kw)
        f = decide_batch(t, c, alpha=ALPHA, n_comparisons=m)
        seq_better.append(float((s.verdict == BETTER).mean()))
        fix_better.append(float((f.verdict == BETTER).mean()))
        fut.append(float(s.futile.mean()) if s.futile is not None else 0.0)
        en.append(float(s.n_used.mean()))
        used.append(s.n_used)
        if d == 0:
            fw_seq |= np.isin(s.verdict, (BETTER, WORSE))
            fw_fix |= np.isin(f.verdict, (BETTER, WORSE))
    u = np.stack(used, 1)
    trials = u.sum(1) + u.max(1)
    return {"seq_better": seq_better, "fixed_better": fix_better, "futile": fut, "en": en,
            "fwer": float(fw_seq.mean()), "fwer_fixed": float(fw_fix.mean()), "trials": float(trials.mean()),
            "fixed_trials": (m + 1) * n, "control_n": float(u.max(1).mean())}
