"""Seeds the task ignored: every trial of an arm gave bit-identical metrics across different seeds.

A script that seeds itself from a constant (nanoGPT's ``torch.manual_seed(1337 + seed_offset)``), or that is
never handed the seed, gives the same numbers for every seed: N seeds are then one run repeated, and any
difference between arms is a sample of one. The verdict refuses to call a difference then, and says how to
hand the script its seed; ``ablate repro`` and the Setup line say the same. Only what was observed is said:
the metrics were identical, so the seed changed nothing the task reports (or its metric cannot vary).
Checked for every form: a script (``command``, ``app``) ablate cannot seed from outside, and an ``fn`` task that
seeds itself again after ablate did (Lightning's ``seed_everything(42)``; ``seed_everything()`` with no argument
reads ``$PL_GLOBAL_SEED``, which every trial sets to its seed, :func:`ablate.trials.seeding.seed_environment`).
Equal values can also be a metric that cannot vary (a 0/1 metric solved at every seed): the message says both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ablate.record.results import RESERVED_COLUMNS
from ablate.record.timing import is_timing_metric, task_timing_metrics

_NOT_METRICS = {*RESERVED_COLUMNS, "attempt"}


def _bits(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int | float):
        return "nan" if math.isnan(v) else float(v).hex()
    return repr(v)


def has_task(plan: Mapping[str, Any]) -> bool:
    """The plan names the task ablate ran (any form); runs made without ablate (``ablate audit``) have none."""
    task = plan.get("task") or {}
    return bool(task.get("fn") or task.get("command") or task.get("app"))


def metric_names(plan: Mapping[str, Any], trials: Sequence[Mapping[str, Any]]) -> list[str]:
    """The metric columns of ``trials`` (results.csv rows), timing metrics (:mod:`ablate.record.timing`) left out:
    they vary by machine, not by seed or arm."""
    extra = task_timing_metrics(plan)
    return sorted({k for t in trials for k in t if k not in _NOT_METRICS and not is_timing_metric(k, extra)})


def metric_bits(trial: Mapping[str, Any], names: Sequence[str]) -> dict[str, str]:
    """A trial's metrics ``names`` as exact text (a float's hex): equal only when bit-identical."""
    return {k: _bits(trial.get(k)) for k in names}


def ignored_seed(plan: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The arms whose finished trials (2 or more, different seeds) gave bit-identical metrics.

    Timing metrics (:mod:`ablate.record.timing`) are left out: they vary by machine, not by seed.

    Returns
    -------
    dict
        Arm name -> ``{"arm", "label", "seeds", "metrics"}`` (the metrics every seed gave).
    """
    if not has_task(plan):
        return {}  # runs made without ablate (`ablate audit`): no task form whose seeding is known
    labels = {a["name"]: str(a.get("label", a["name"])) for a in plan.get("arms") or []}
    by_arm: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "ok":
            by_arm.setdefault(str(r["arm"]), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for arm, trials in by_arm.items():
        if len({t["seed"] for t in trials}) < 2:
            continue
        names = metric_names(plan, trials)
        if not names:
            continue
        first = metric_bits(trials[0], names)
        if all(metric_bits(t, names) == first for t in trials[1:]):
            out[arm] = {"arm": arm, "label": labels.get(arm, arm), "seeds": sorted(int(t["seed"]) for t in trials),
                        "metrics": {k: trials[0].get(k) for k in names}}
    return out


def seed_fix(plan: Mapping[str, Any]) -> str:
    """How to hand the task its seed, for the task's form."""
    task = (plan.get("task") or {})
    arms = plan.get("arms") or []
    cfg_task = (arms[0].get("config") or {}).get("task") or {} if arms else {}
    if task.get("command") or cfg_task.get("command"):
        if cfg_task.get("seed_key") is None and "seed_key" in cfg_task:
            return ("pass the seed to the script: set `seed_key:` in the task config to the script's seed setting "
                    "(e.g. `seed_key: seed`, passed in its `args` style as --seed=<k>), or `seed_env:` to the "
                    "variable it reads; if it has no seed setting, make it read one (or $ABLATE_SEED)")
        return ("make the script use the seed it is given (its `seed_key` setting, or $ABLATE_SEED), instead of a "
                "constant of its own")
    if task.get("app") or cfg_task.get("app"):
        return "make the app seed itself from its `seed_key` setting (e.g. `seed_everything(cfg.seed)`)"
    return ("make the task draw its randomness from the generators ablate seeds, not from a fixed seed of its own: "
            "it seeds them again itself (e.g. Lightning's `seed_everything(42)`, or `torch.manual_seed` with a "
            "constant); call `seed_everything(cfg.seed)` with the trial's seed, or drop the call (ablate seeded "
            "python, numpy and torch before the task ran)")


def short_why(plan: Mapping[str, Any]) -> str:
    """The bottom line's few words for an arm whose seeds were one run: what the task does with its seed, by form."""
    task = (plan.get("task") or {})
    arms = plan.get("arms") or []
    cfg_task = (arms[0].get("config") or {}).get("task") or {} if arms else {}
    if task.get("command") or task.get("app") or cfg_task.get("command") or cfg_task.get("app"):
        if cfg_task.get("seed_key", "seed") is None:
            return "its seeds were one run: the script is given no seed (`seed_key: null`)"
        return "its seeds were one run: the script ignores the seed it is given, as the warning above says"
    return "its seeds were one run: the task re-seeds from a constant (e.g. Lightning's `seed_everything(42)`)"


def message(flagged: Mapping[str, Mapping[str, Any]], plan: Mapping[str, Any]) -> str:
    """One sentence naming the arms, what they gave, and the fix."""
    parts = []
    for f in flagged.values():
        shown = ", ".join(f"{k} {v!r}" for k, v in list(f["metrics"].items())[:3])
        parts.append(f"arm {f['label']} gave bit-identical metrics for seeds {', '.join(map(str, f['seeds']))} "
                     f"({shown})")
    return ("the task ignored its seed: " + "; ".join(parts) + ", so its seeds are one run repeated and no "
            "difference can be called (or the metric cannot vary). Fix: " + seed_fix(plan))
