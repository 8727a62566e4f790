"""``ablate.judge.verdict.analyse`` on values held in memory: the plan and trial rows a sweep dir would give, with
no file written (for the statistics tests that prove a vectorised simulation equal to the verdict, row by row)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ablate.judge.options import VerdictOptions
from ablate.judge.verdict import analyse


def analyse_values(control: Sequence[float], treatments: Sequence[Sequence[float]], *, paired: bool = False,
                   multiplicity: str = "holm", alpha: float = 0.05, goal: str = "maximize",
                   margin: float | None = None) -> dict[str, Any]:
    """The verdict (verdict.json's content) of one control and its treatments; seed j is index j of each arm.

    ``paired`` declares the design paired (``pairing=paired``), else ``pairing=unpaired``. NaN is a failed trial.
    """
    arms = [np.asarray(control, float), *(np.asarray(t, float) for t in treatments)]
    n = max(a.size for a in arms)
    names = ["control", *(f"lr={i + 1}" for i in range(len(treatments)))]
    plan: Mapping[str, Any] = {
        "metric": "m", "goal": goal, "seeds": list(range(n)), "task": {"fn": "task:train"},
        "variable": {"name": "lr", "key": "task.lr", "values": list(range(1, len(treatments) + 1))},
        "options": {}, "arms": [{"name": nm, "label": nm, "value": i} for i, nm in enumerate(names)]}
    rows = [{"arm": nm, "seed": j, "status": "ok" if np.isfinite(v) else "failed", "m": float(v)}
            for nm, a in zip(names, arms, strict=True) for j, v in enumerate(a)]
    opts = VerdictOptions(alpha=alpha, margin=margin, pairing="paired" if paired else "unpaired",
                          multiplicity=multiplicity)
    return analyse(plan, rows, opts)
