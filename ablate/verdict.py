"""The verdict: per-treatment statistics against control, confounds, verdict.json and verdict.md.

(First version: Welch's t-test, Hedges' g and a verdict word per treatment. The full statistical
standard lives in :mod:`ablate.stats`.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from ablate.sweepdir import SweepDir, write_atomic, write_json


def _values(rows: list[dict[str, Any]], arm: str, metric: str) -> list[float]:
    return [r[metric] for r in rows if r["arm"] == arm and r["status"] == "ok" and metric in r
            and isinstance(r[metric], float) and math.isfinite(r[metric])]


def write_verdict(sd: SweepDir, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compute the verdict from the trial records in ``sd`` and write verdict.json and verdict.md."""
    import numpy as np
    from scipy import stats

    from ablate.results import collect
    from ablate.trial import load_plan

    plan = load_plan(sd)
    rows = collect(sd, plan)
    metric, goal = plan["metric"], plan.get("goal", "maximize")
    sign = 1.0 if goal == "maximize" else -1.0
    alpha = float((overrides or {}).get("alpha", plan["options"].get("alpha", 0.05)))
    arms = []
    for a in plan["arms"]:
        vals = _values(rows, a["name"], metric)
        n = len(vals)
        failed = sum(1 for r in rows if r["arm"] == a["name"] and r["status"] not in ("ok", "pending", "running"))
        mean = float(np.mean(vals)) if n else math.nan
        sd_ = float(np.std(vals, ddof=1)) if n > 1 else math.nan
        half = float(stats.t.ppf(0.975, n - 1) * sd_ / math.sqrt(n)) if n > 1 else math.nan
        arms.append({"arm": a["name"], "label": a["label"], "n": n, "failed": failed, "mean": mean, "sd": sd_,
                     "ci": [mean - half, mean + half]})
    control = _values(rows, "control", metric)
    comparisons = []
    for a in plan["arms"][1:]:
        t = _values(rows, a["name"], metric)
        comp: dict[str, Any] = {"arm": a["name"], "label": a["label"]}
        if len(t) < 2 or len(control) < 2:
            comp.update(verdict="insufficient data", reason="fewer than 2 completed seeds in an arm")
        else:
            res = stats.ttest_ind(t, control, equal_var=False)
            ci = res.confidence_interval(0.95)
            diff = float(np.mean(t) - np.mean(control))
            sp = math.sqrt((np.var(t, ddof=1) + np.var(control, ddof=1)) / 2)
            g = diff / sp if sp > 0 else math.nan
            p = float(res.pvalue)
            word = "inconclusive"
            if p < alpha:
                word = "better" if sign * diff > 0 else "worse"
            comp.update(diff=diff, ci=[float(ci.low), float(ci.high)], pvalue=p, statistic=float(res.statistic),
                        df=float(res.df), effect_size=g, verdict=word,
                        reason=f"Welch p = {p:.3g}; Δ = {diff:+.4g} [{ci.low:.4g}, {ci.high:.4g}]")
        comparisons.append(comp)
    from ablate.confounds import check, config_drift
    from ablate.results import read_manifests

    used = [(r["arm"], r["seed"]) for r in rows if r["status"] == "ok"]
    confounds = check(plan, read_manifests(sd, plan), used)
    pins = plan.get("pins", {})
    verdict = {"metric": metric, "goal": goal, "alpha": alpha, "arms": arms, "comparisons": comparisons,
               "invalid": confounds["invalid"], "dirty": confounds["dirty"],
               "pins": {"code": pins.get("code"), "data": pins.get("data"), "environment": pins.get("environment")},
               "confounds": confounds, "config_drift": config_drift(pins.get("config_files") or {})}
    write_json(sd.verdict_json, verdict)
    lines = [f"# Ablation of `{plan['variable']['key']}`: {metric} ({goal})", ""]
    if verdict["dirty"]:
        lines += ["**Dirty**: the trials ran uncommitted changes (kept in dirty.patch and dirty_untracked/).", ""]
    for c in comparisons:
        lines.append(f"- **{c['label']}** vs control: **{c['verdict']}**. {c.get('reason', '')}")
    lines += ["", "| arm | n | failed | mean | SD | 95% CI |", "|---|---|---|---|---|---|"]
    for a in arms:
        lines.append(f"| {a['label']} | {a['n']} | {a['failed']} | {a['mean']:.4g} | {a['sd']:.3g} | "
                     f"[{a['ci'][0]:.4g}, {a['ci'][1]:.4g}] |")
    lines += ["", "## Confounds", ""]
    if not confounds["findings"]:
        lines.append("None found." if confounds["complete"] else
                     f"Not checked on every trial (missing manifests: {', '.join(confounds['missing'])}).")
    for f in confounds["findings"]:
        lines.append(f"- **{f['severity']}**: {f['message']}")
    write_atomic(sd.verdict_md, "\n".join(lines) + "\n")
    return verdict


def sequential_rounds(sd: SweepDir, plan: Mapping[str, Any]) -> Iterator[tuple[list[int], list[str] | None]]:
    """Launch rounds for ``sequential=group`` (not yet available: one round with every seed)."""
    yield list(plan["seeds"]), None
