"""The proof, from what each trial's app resolved, for keys the plan could not resolve that depend on the variable.

An app may register a resolver inside ``main()`` (``OmegaConf.register_new_resolver("batches", ...)``) and use it in a
key that reads the variable (``steps_per_epoch: ${batches:${trainer.limit_train_batches},1}``). The plan cannot
resolve such a key, so it lists it per arm (``ablation.yaml``'s ``trial_dependent``,
:func:`ablate.plan.trial_resolved.plan_dependent`) and runs the ablation; each trial's app records the config it
resolved (``ablate_seen.json``, the manifest's ``config`` and ``seen``). Here, for every such key, the records must
show one value per arm (the variable's consequence: the same on every seed), and the control's value in every arm
whose change the key does not depend on (a suite's other arms). The general confound check
(:func:`ablate.judge.confounds.check`) leaves these keys to this one; every other key it compares as usual. A key
this proof fails for makes the verdict invalid, naming it and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ablate.plan.arms import flatten, format_value

#: The fix a failed proof names.
FIX = ("register the resolver at the top level of the app's module (ablate imports it before composing, so the plan "
       "resolves the key and proves the arms itself), or ablate a key no such value reads")


def dependent_keys(plan: Mapping[str, Any]) -> set[str]:
    """Every key some arm lists under ``trial_dependent`` (dotted, ``task.params.<app key>``)."""
    return {str(k) for keys in (plan.get("trial_dependent") or {}).values() for k in keys or []}


def check(plan: Mapping[str, Any], manifests: Mapping[tuple[str, int], Mapping[str, Any]],
          used: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    """Prove, from the trials' own records, that each arm differs from control in its variable alone on the keys
    resolved only in the trial that depend on it.

    Parameters
    ----------
    plan : mapping
        The plan record (``ablation.yaml``; ``trial_dependent``: arm -> keys).
    manifests : mapping
        (arm, seed) -> manifest.json content.
    used : iterable of (arm, seed)
        The trials whose metrics enter the statistics.

    Returns
    -------
    list of dict
        Findings in the form of :func:`ablate.judge.confounds.check` (severity ``invalid``), one per key the proof
        fails for; empty when it holds (or there is nothing to prove).
    """
    keys = dependent_keys(plan)
    if not keys:
        return []
    arms = [a["name"] for a in plan["arms"]]
    own = {arm: set(v or []) for arm, v in (plan.get("trial_dependent") or {}).items()}
    values: dict[str, dict[str, dict[str, int]]] = {k: {} for k in keys}  # key -> arm -> shown value -> trials
    unproved: dict[str, list[str]] = {}  # key -> trials whose app recorded no resolved value for it
    for arm, seed in used:
        m = manifests.get((arm, seed)) or {}
        flat = flatten(m.get("config") or {}) if m.get("seen") else {}
        for k in keys:
            v = flat.get(k)
            if v is None or (isinstance(v, str) and "${" in v):
                unproved.setdefault(k, []).append(f"{arm}/seed={seed}")
                continue
            shown = format_value(v)
            values[k].setdefault(arm, {})[shown] = values[k].get(arm, {}).get(shown, 0) + 1
    findings = []
    for k in sorted(keys):
        why = _why_not(k, values[k], unproved.get(k) or [], arms, own)
        if why:
            findings.append({"kind": "config", "field": k, "severity": "invalid", "aligned": False,
                             "split": {a: values[k][a] for a in arms if a in values[k]},
                             "message": f"config `{k}` is resolved only in the trial (a resolver the app registers "
                                        f"inside main()), and {why}, so the arms are not shown to differ in their "
                                        f"variable alone. Fix: {FIX}"})
    return findings


def _why_not(key: str, per_arm: Mapping[str, Mapping[str, int]], unproved: list[str], arms: list[str],
             own: Mapping[str, set[str]]) -> str | None:
    """Why the records do not prove ``key`` (None: they do)."""
    if unproved:
        shown = ", ".join(unproved[:3]) + (f" (+{len(unproved) - 3} more)" if len(unproved) > 3 else "")
        return f"the app of {shown} recorded no resolved value for it (its ablate_seen.json)"
    several = [a for a in arms if len(per_arm.get(a) or {}) > 1]
    if several:
        a = several[0]
        return (f"it took {len(per_arm[a])} values within arm {a} ({', '.join(sorted(per_arm[a]))}): it depends on "
                "more than the variable")
    control = next(iter(per_arm.get(arms[0]) or {}), None)
    for a in arms[1:]:
        value = next(iter(per_arm.get(a) or {}), None)
        if key not in own.get(a, set()) and value is not None and control is not None and value != control:
            return f"it is {value} in arm {a}, whose change it does not read, against {control} in the control"
    return None
