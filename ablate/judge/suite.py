"""A suite's part of the verdict: its multiplicity statement, its verdict.md section and verdict.json entry, and
the per-arm confound check (a treatment may differ from the control only in its own variable's keys).

The suite itself is planned in :mod:`ablate.plan.suite` and run from :mod:`ablate.orchestrate.suite`.
"""

from __future__ import annotations

import os
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
    if multiplicity == "group sequential":  # the looks spend α/m over every treatment (family=variable is refused)
        return (f"Suite of {len(suite['variables'])} variables ({names}) sharing one control; multiplicity (group "
                f"sequential: Bonferroni α/m over all {n} treatments of the suite, each spent over the looks).")
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
    if trials.get("ran") is not None:  # sequential: the planned counts are what every look would run
        L += ["", f"Trials: {trials['ran']} ran (the looks stopped arms early); at most {trials['suite']} with the "
              f"shared control, {trials['one_by_one']} if each variable had run alone with its own control."]
    elif trials:
        L += ["", f"Trials: {trials['suite']} with the shared control; {trials['one_by_one']} if each variable had "
              f"run alone with its own control ({trials['saved']} saved)."]
    return [*L, ""]


def suite_summary(plan: Mapping[str, Any], family: str, multiplicity: str, ran: int | None = None
                  ) -> dict[str, Any] | None:
    """The ``suite`` entry of verdict.json: variables with their arms, the family and its statement, and the
    trial counts with the shared control against one ablation per variable.

    ``multiplicity`` is the verdict's (``group sequential`` under ``sequential=group``); ``ran``, there, the trials
    recorded, since the looks may stop arms before the planned counts (``trials.ran``; the counts are then maxima).
    """
    s = plan.get("suite")
    if not s:
        return None
    n_seeds = len(plan["seeds"])
    suite_trials = len(plan["arms"]) * n_seeds
    one_by_one = sum(len(var["arms"]) + 1 for var in s["variables"]) * n_seeds
    trials = {"suite": suite_trials, "one_by_one": one_by_one, "saved": one_by_one - suite_trials}
    return {"variables": s["variables"], "family": family,
            "statement": family_statement(plan, family, multiplicity),
            "trials": trials if ran is None else {**trials, "ran": ran}}


def suite_confounds(plan: Mapping[str, Any], manifests: Mapping[tuple[str, int], Mapping[str, Any]],
                    used: Sequence[tuple[str, int]], root: str | os.PathLike[str] | None = None
                    ) -> list[dict[str, Any]]:
    """Per-arm confound check of a suite: a treatment's trials may differ from the control only in the keys its
    own variable changes.

    The suite-wide check (:func:`ablate.judge.confounds.check`) exempts every variable's keys in every arm; this one
    checks, for each treatment trial, the keys that *other* variables change against the control's: what the
    control's trial at the same seed saw (else its planned value). A value that names the trial's own run (its
    trial dir, so ``${hydra:runtime.output_dir}``, a checkpoint dir under it, the working dir; its
    ``${hydra:job.override_dirname}``) is compared with each trial's own written as ``<trial dir>``
    (:func:`own_run_text`): each trial writes into its own dir by design, whichever arm brings the key into play.

    Parameters
    ----------
    plan : mapping
        The plan record (``ablation.yaml``).
    manifests : mapping
        (arm, seed) -> manifest.json content.
    used : sequence of (arm, seed)
        The trials whose metrics enter the statistics.
    root : path-like, optional
        The sweep dir, whose ``trials/<arm>/seed=<k>`` is each trial's own dir.

    Returns
    -------
    list of dict
        Findings in the form of :func:`ablate.judge.confounds.check` (severity ``invalid``).
    """
    if not plan.get("suite"):
        return []
    arms = {a["name"]: a for a in plan["arms"]}
    control = plan["arms"][0]
    planned = flatten(control.get("resolved") or {})
    all_keys = {k for a in plan["arms"] for k in (a.get("changes") or {})}
    findings = []
    for arm_name, seed in used:
        arm = arms.get(arm_name)
        if arm is None or arm_name == control["name"] or (arm_name, seed) not in manifests:
            continue
        own = set(arm.get("changes") or {})
        seen = own_run_text(manifests[(arm_name, seed)], _trial_dir(root, arm_name, seed))
        ref = manifests.get((control["name"], seed))
        c_flat = own_run_text(ref, _trial_dir(root, control["name"], seed)) if ref is not None else planned
        for k in sorted(all_keys - own):
            if k in c_flat and k in seen and seen[k] != c_flat[k]:
                findings.append({
                    "kind": "config", "field": k, "severity": "invalid", "aligned": False,
                    "split": {arm_name: {format_value(seen[k]): 1}},
                    "message": f"config `{k}` is {format_value(seen[k])} in {arm_name}/seed={seed}, but that arm "
                               f"ablates {arm.get('variable')} only (control: {format_value(c_flat[k])})"})
    return findings


#: How a trial's own dir is written in values compared across trials (as the plan writes it).
OWN_DIR = "<trial dir>"
#: How a trial's own ``${hydra:job.override_dirname}`` is written in values compared across trials.
OWN_OVERRIDES = "<override dirname>"


def _trial_dir(root: str | os.PathLike[str] | None, arm: str, seed: int) -> str | None:
    return None if root is None else os.path.join(os.fspath(root), "trials", arm, f"seed={seed}")


def own_run_text(manifest: Mapping[str, Any], trial_dir: str | None) -> dict[str, Any]:
    """A trial's config as it saw it (flattened), with what names its own run written alike for every trial:
    its dir (``trial_dir``, and the one its app's ``${hydra:runtime.output_dir}`` was in: the sweep dir may
    have moved since) as ``<trial dir>``, its app's ``${hydra:job.override_dirname}`` as ``<override dirname>``."""
    hydra = (manifest.get("seen") or {}).get("hydra") or {}
    subs: list[tuple[str, str]] = []
    out_dir = hydra.get("runtime.output_dir")
    for d in {trial_dir, os.path.dirname(out_dir) if isinstance(out_dir, str) and out_dir else None} - {None}:
        subs.append((str(d).rstrip(os.sep), OWN_DIR))
    name = hydra.get("job.override_dirname")
    if isinstance(name, str) and name:
        subs.append((name, OWN_OVERRIDES))
    subs.sort(key=lambda s: -len(s[0]))  # the longest first: a dir inside another is replaced whole

    def norm(v: Any) -> Any:
        if isinstance(v, str):
            for text, mark in subs:
                v = v.replace(text, mark)
            return v
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    return {k: norm(v) for k, v in flatten(manifest.get("config") or {}).items()}
