"""An app's keys the plan cannot resolve (a resolver its ``main()`` registers) that depend on the variable (pure).

Such a key is not refused: it is listed per arm in ``ablation.yaml`` (``trial_dependent``), each trial's app records
what it resolved (``ablate_seen.json``, the manifest's ``seen``), and the verdict proves from those records that
the arm differs from control in its variable alone (:mod:`ablate.judge.trial_resolved`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ablate.plan.app_config import APP_NODE, to_app_key
from ablate.plan.arms import derived_keys, flatten


def trial_dependent(control_task: Mapping[str, Any], arm_task: Mapping[str, Any], changes: Iterable[str]) -> list[str]:
    """An arm's keys resolved only in the trial (``trial_resolved``: a resolver the app registers inside ``main()``)
    that depend on what the arm changes: its own key, one that interpolates from a changed key, or one whose
    unresolved text differs from the control's. The plan cannot resolve them; each trial's app records what it
    resolved, and the verdict checks them from there (:mod:`ablate.judge.trial_resolved`).

    Parameters
    ----------
    control_task, arm_task : mapping
        The ``task`` node of the control's and the arm's config (``params``: the app's config, unresolved).
    changes : iterable of str
        The arm's changed keys (``task.params.<app key>``).

    Returns
    -------
    list of str
        App keys (relative to the app's config), sorted.
    """
    later = set(control_task.get("trial_resolved") or []) | set(arm_task.get("trial_resolved") or [])
    if not later:
        return []
    changed = {k for k in (to_app_key(c) for c in changes) if k}
    raw_c, raw_t = flatten(control_task.get("params") or {}), flatten(arm_task.get("params") or {})
    reads = derived_keys(raw_c, changed) | derived_keys(raw_t, changed)
    return sorted(k for k in later if k in changed or k in reads or raw_c.get(k) != raw_t.get(k))


def plan_dependent(arms: Iterable[Any]) -> dict[str, list[str]]:
    """Arm name -> its :func:`trial_dependent` keys as dotted config keys (``task.params.<app key>``), for the
    arms (first: the control; objects with ``name``, ``config``, ``changes``) that have any."""
    arms = list(arms)
    if not arms:
        return {}
    control = (arms[0].config.get("task") or {})
    out = {}
    for arm in arms[1:]:
        keys = trial_dependent(control, arm.config.get("task") or {}, arm.changes)
        if keys:
            out[arm.name] = [f"{APP_NODE}.{k}" for k in keys]
    return out
