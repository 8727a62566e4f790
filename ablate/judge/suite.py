"""A suite's part of the verdict: its multiplicity statement, its verdict.md section and verdict.json entry, and
the per-arm confound check (a treatment may differ from the control only in its own variable's keys).

The suite itself is planned in :mod:`ablate.plan.suite` and run from :mod:`ablate.orchestrate.suite`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ablate.plan.arms import flatten, format_value
from ablate.plan.suite import families


def family_statement(plan: Mapping[str, Any], family: str, multiplicity: str) -> str | None:
    """The sentence the verdict prints about the suite's multiplicity; None for a one-variable ablation."""
    suite = plan.get("suite")
    if not suite:
        return None
    fams = families(plan, family)
    n = sum(len(f) for f in fams)
    names = ", ".join(v["name"] for v in suite["variables"])
    if family == "variable":
        return (f"Suite of {len(suite['variables'])} variables ({names}) sharing one control; multiplicity "
                f"({multiplicity}) is adjusted per variable (family=variable): "
                + "; ".join(f"{v['name']}: {len(v['arms'])} treatment(s)" for v in suite["variables"])
                + ". Across the suite the family-wise error is not controlled.")
    return (f"Suite of {len(suite['variables'])} variables ({names}) sharing one control; multiplicity "
            f"({multiplicity}) is adjusted over all {n} treatments of the suite (family=suite).")


def suite_markdown(v: Mapping[str, Any]) -> list[str]:
    """verdict.md lines for a suite: variables, their arms and the multiplicity statement."""
    s = v.get("suite")
    if not s:
        return []
    L = ["## Suite", "", s["statement"], "", "| variable | key | treatments |", "|---|---|---|"]
    for var in s["variables"]:
        L.append(f"| {var['name']} | `{var['key']}` | {', '.join(var['arms'])} |")
    trials = s.get("trials") or {}
    if trials:
        L += ["", f"Trials: {trials['suite']} with the shared control; {trials['one_by_one']} if each variable had "
              f"run alone with its own control ({trials['saved']} saved)."]
    return [*L, ""]


def suite_summary(plan: Mapping[str, Any], family: str, multiplicity: str) -> dict[str, Any] | None:
    """The ``suite`` entry of verdict.json: variables with their arms, the family and its statement, and the
    trial counts with the shared control against one ablation per variable."""
    s = plan.get("suite")
    if not s:
        return None
    n_seeds = len(plan["seeds"])
    suite_trials = len(plan["arms"]) * n_seeds
    one_by_one = sum(len(var["arms"]) + 1 for var in s["variables"]) * n_seeds
    return {"variables": s["variables"], "family": family,
            "statement": family_statement(plan, family, multiplicity),
            "trials": {"suite": suite_trials, "one_by_one": one_by_one, "saved": one_by_one - suite_trials}}


def suite_confounds(plan: Mapping[str, Any], manifests: Mapping[tuple[str, int], Mapping[str, Any]],
                    used: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    """Per-arm confound check of a suite: a treatment's trials may differ from the control only in the keys its
    own variable changes.

    The suite-wide check (:func:`ablate.judge.confounds.check`) exempts every variable's keys in every arm; this one
    checks, for each treatment trial, the keys that *other* variables change against the control's
    recorded value.

    Returns
    -------
    list of dict
        Findings in the form of :func:`ablate.judge.confounds.check` (severity ``invalid``).
    """
    if not plan.get("suite"):
        return []
    arms = {a["name"]: a for a in plan["arms"]}
    control = plan["arms"][0]
    c_flat = flatten(control.get("resolved") or {})
    all_keys = {k for a in plan["arms"] for k in (a.get("changes") or {})}
    findings = []
    for arm_name, seed in used:
        arm = arms.get(arm_name)
        if arm is None or arm_name == control["name"] or (arm_name, seed) not in manifests:
            continue
        own = set(arm.get("changes") or {})
        seen = flatten((manifests[(arm_name, seed)].get("config")) or {})
        for k in sorted(all_keys - own):
            if k in c_flat and k in seen and seen[k] != c_flat[k]:
                findings.append({
                    "kind": "config", "field": k, "severity": "invalid", "aligned": False,
                    "split": {arm_name: {format_value(seen[k]): 1}},
                    "message": f"config `{k}` is {format_value(seen[k])} in {arm_name}/seed={seed}, but that arm "
                               f"ablates {arm.get('variable')} only (control: {format_value(c_flat[k])})"})
    return findings
