"""A trial's config: the plan read back from the sweep dir, and one arm's config resolved for one seed.

Used by the trial process (:func:`ablate.trials.trial.run_trial`) and, before its forks, by the warm parent
(:mod:`ablate.trials.warm.parent`), which resolves and dumps each arm's config once so every fork only fills in
its seed (:func:`config_yaml`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ablate.errors import ConfigError
from ablate.plan.app_config import resolve_container
from ablate.plan.arms import flatten, references
from ablate.plan.hydra_semantics import per_trial_keys
from ablate.record.sweepdir import SweepDir, dump_yaml


def load_plan(sd: SweepDir) -> dict[str, Any]:
    """Read ``ablation.yaml`` of a sweep dir as a plain dict (validated, cached per process; do not mutate).

    Raises
    ------
    SweepDirError
        When ablation.yaml is missing or corrupted.
    """
    return sd.plan()


def arm_record(plan: Mapping[str, Any], arm: str) -> Mapping[str, Any]:
    """The plan's record of ``arm`` (name, label, value, config ...)."""
    for a in plan["arms"]:
        if a["name"] == arm:
            return a
    raise ConfigError(f"no arm named {arm!r} in this ablation", where="arm",
                      fix=f"one of {', '.join(a['name'] for a in plan['arms'])}")


_resolved_cache: dict[int, dict[str, Any]] = {}


def resolve_config(arm_config: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Resolve an arm's config for one seed: set ``seed``, evaluate interpolations, return a plain dict.

    When no interpolation reads ``seed``, an arm is resolved once per process and copied per seed
    (the resolvers of a planned config are stable: the plan refused any that were not).
    """
    key = id(arm_config)
    hit = _resolved_cache.get(key)
    if hit is not None and hit["arm"] is arm_config:
        if hit["reusable"] is None:  # a second trial of this arm in this process: is reuse safe?
            hit["reusable"] = "seed" not in _raw_refs(arm_config) and not reads_hydra_state(arm_config)
        if hit["reusable"]:
            out = copy.deepcopy(hit["resolved"])
            out["seed"] = int(seed)
            _seed_app(out, seed)
            return out

    raw = {**arm_config, "seed": int(seed)}
    if isinstance(raw.get("task"), Mapping) and raw["task"].get("app"):  # the app's own `${seed}` reads it too
        raw["task"] = copy.deepcopy(dict(raw["task"]))
        _seed_app(raw, seed)
    out = resolve_container(raw) if _interpolated(raw) else copy.deepcopy(raw)  # nothing to resolve: no OmegaConf
    if hit is None or hit["arm"] is not arm_config:  # one-trial processes never pay for the check
        _resolved_cache[key] = {"arm": arm_config, "resolved": copy.deepcopy(out), "reusable": None}
    return out  # type: ignore[return-value]


_SEED_MARK = 987654321987654321  # a seed no plan holds (seeds are below 2**32): where a template's seed goes
_yaml_cache: dict[int, tuple[Mapping[str, Any], dict[str, Any], str, str]] = {}


def config_yaml(arm_config: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
    """``config.yaml``'s text for a trial of the arm whose plan config is ``arm_config`` and resolved config
    ``cfg``: :func:`ablate.record.sweepdir.dump_yaml` of ``cfg``, dumped once per arm in a process (or in the warm
    parent before its forks: :func:`prime_config`) with a marker for the seed, which each trial fills in (its
    top-level ``seed: N`` line is the only place the seed goes). A ``cfg`` that differs from the template other
    than in ``seed`` (an app's seed in its params, a per-trial value) is dumped itself."""
    rest = {k: v for k, v in cfg.items() if k != "seed"}
    hit = _yaml_cache.get(id(arm_config))
    if hit is None or hit[0] is not arm_config or hit[1] != rest or not isinstance(cfg.get("seed"), int):
        hit = prime_config(arm_config, cfg)
    if hit is None:
        return dump_yaml(cfg)
    return f"{hit[2]}{int(cfg['seed'])}{hit[3]}"


def prime_config(arm_config: Mapping[str, Any], cfg: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """Dump the template :func:`config_yaml` fills in for ``arm_config``; None when the seed marker does not
    stand alone on one top-level line of the dump."""
    if not isinstance(cfg.get("seed"), int) or isinstance(cfg.get("seed"), bool):
        return None
    text = dump_yaml({**cfg, "seed": _SEED_MARK})
    line = f"seed: {_SEED_MARK}\n"
    at = text.find(line)
    if text.count(str(_SEED_MARK)) != 1 or at < 0 or (at > 0 and text[at - 1] != "\n"):
        return None
    hit = (arm_config, {k: v for k, v in cfg.items() if k != "seed"}, text[:at + 6], text[at + len(line) - 1:])
    _yaml_cache[id(arm_config)] = hit
    return hit


def _interpolated(node: Any) -> bool:
    """True when some string in ``node`` holds ``${`` (an interpolation, escaped or not): only then can resolving
    change anything (a config of plain values resolves to an equal copy of itself)."""
    if isinstance(node, str):
        return "${" in node
    if isinstance(node, Mapping):
        return any(_interpolated(k) or _interpolated(v) for k, v in node.items())
    if isinstance(node, list | tuple):
        return any(_interpolated(v) for v in node)
    return False


def _seed_app(resolved: dict[str, Any], seed: int) -> None:
    """An ``app`` task receives the trial seed at its ``seed_key``: record it there too."""
    task = resolved.get("task") or {}
    key = task.get("seed_key", "seed") if isinstance(task, dict) else None
    if isinstance(task, dict) and task.get("app") and key and isinstance(task.get("params"), dict):
        node = task["params"]
        for part in key.split(".")[:-1]:
            node = node.setdefault(part, {})
        node[key.split(".")[-1]] = int(seed)


def reads_hydra_state(arm_config: Mapping[str, Any]) -> bool:
    """True when the arm's config reads Hydra's per-trial state (``${hydra:runtime.output_dir}`` ...): it is then
    resolved inside each trial's own Hydra context, never reused across trials."""
    return bool(per_trial_keys(dict(arm_config)))


def _raw_refs(arm_config: Mapping[str, Any]) -> set[str]:
    refs: set[str] = set()
    for path, v in flatten(dict(arm_config)).items():
        if isinstance(v, str) and "${" in v:
            refs |= references(v, path)
    return refs


def plain_config(arm_config: Mapping[str, Any]) -> bool:
    """True when an arm's config has nothing to resolve (no interpolation, no key of Hydra's per-trial state):
    each trial's resolved config is then this config with the trial's seed, the same in any process."""
    return not _interpolated(arm_config) and not reads_hydra_state(arm_config)
