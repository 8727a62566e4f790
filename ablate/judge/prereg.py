"""Pre-registration: the analysis the plan froze before any trial ran, and what a later verdict changed.

``ablation.yaml`` is written before the first trial starts, with the primary metric, its goal, the seed list
(the seed plan: seeds per arm, or the looks in sequential mode) and the verdict options (α, margin, pairing,
multiplicity, family, sequential). The metric, goal and seeds cannot be changed afterwards; the options can,
with ``ablate verdict DIR --alpha ...``. A verdict computed with any of them changed is **post hoc**: its
bottom line and verdict.json say so and name what changed, and the pre-registered verdict (the plan's own
options on the same trials) stays in verdict.json (``preregistered_verdict``) and in the bottom line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ablate.judge.options import VerdictOptions

#: The verdict options a plan freezes (``against`` only adds a section, never changes a number).
FROZEN = ("alpha", "margin", "pairing", "multiplicity", "family", "sequential", "looks", "effect", "futility")


def preregistered(plan: Mapping[str, Any], planned: VerdictOptions) -> dict[str, Any]:
    """The analysis as the plan froze it: metric, goal, seed plan and the verdict options.

    Parameters
    ----------
    plan : mapping
        The plan record (``ablation.yaml``).
    planned : VerdictOptions
        The options resolved from the plan alone (no override, nothing remembered).

    Returns
    -------
    dict
    """
    seeds = list(plan.get("seeds") or [])
    ext = plan.get("extension")  # `ablate extend`: the plan froze the stage-1 seeds; the extension is recorded apart
    planned_seeds = list(ext.get("stage1_seeds") or seeds) if isinstance(ext, Mapping) else seeds
    out: dict[str, Any] = {"metric": plan.get("metric"), "goal": plan.get("goal", "maximize"),
                           "seeds_per_arm": len(planned_seeds), "created_at": plan.get("created_at")}
    if isinstance(ext, Mapping):
        out["extended_to"] = len(seeds)
    out.update({k: getattr(planned, k) for k in FROZEN})
    return out


def changes(planned: VerdictOptions, used: VerdictOptions) -> dict[str, dict[str, Any]]:
    """The frozen options a verdict changed: ``{name: {"planned": x, "used": y}}`` (empty when none).

    Parameters
    ----------
    planned, used : VerdictOptions
        The plan's options, and the options the verdict was computed with.

    Returns
    -------
    dict
    """
    return {k: {"planned": getattr(planned, k), "used": getattr(used, k)} for k in FROZEN
            if getattr(planned, k) != getattr(used, k)}


def summary(comparisons: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The pre-registered verdict per treatment, compactly (for verdict.json and the bottom line)."""
    keep = ("arm", "verdict", "firm", "diff", "ci", "ci_level", "pvalue", "pvalue_adjusted", "test")
    return [{k: c.get(k) for k in keep} for c in comparisons]


def text(changed: Mapping[str, Mapping[str, Any]]) -> str:
    """``alpha 0.05 → 0.1, margin none → 2%`` for the bottom line."""
    def show(x: Any) -> str:
        return "none" if x is None else str(x)

    return ", ".join(f"{k} {show(v['planned'])} → {show(v['used'])}" for k, v in changed.items())
