"""Where an ``app`` task's own config lives inside ablate's config, and how it is resolved (pure).

ablate composes the app's config with the app's own Hydra config dir and places it at
``task.params``. Its interpolations are written relative to the app's root (``${model.lr}``), so that
node is resolved as a config of its own (its root is the app's root), and the rest of ablate's
config without it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

#: The dotted path of the app's composed config inside ablate's config.
APP_NODE = "task.params"


def app_params(cfg: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The app's composed config inside ``cfg`` (an ``app`` task), else None."""
    task = cfg.get("task")
    if isinstance(task, Mapping) and task.get("app") and isinstance(task.get("params"), Mapping):
        return task["params"]
    return None


def to_app_key(key: str) -> str | None:
    """``task.params.model.lr`` -> ``model.lr``; None for keys outside the app's config."""
    prefix = APP_NODE + "."
    return key[len(prefix):] if key.startswith(prefix) else None


def resolve_container(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve every interpolation of a plain config container, the app's node against its own root.

    Raises
    ------
    omegaconf.errors.OmegaConfBaseException
        When an interpolation cannot be resolved (the caller reports it).
    """
    from omegaconf import OmegaConf  # noqa: PLC0415  # lazy: OmegaConf off this module's import

    params = app_params(cfg)
    if params is None:
        return OmegaConf.to_container(OmegaConf.create(dict(cfg)), resolve=True)  # type: ignore[return-value]
    rest = copy.copy(dict(cfg))
    rest["task"] = {k: v for k, v in cfg["task"].items() if k != "params"}
    out: dict[str, Any] = OmegaConf.to_container(OmegaConf.create(rest), resolve=True)  # type: ignore[assignment]
    later = cfg["task"].get("trial_resolved") or []
    own = escaped(params, later) if later else dict(params)
    out["task"]["params"] = OmegaConf.to_container(OmegaConf.create(own), resolve=True)
    return out


def escaped(params: Mapping[str, Any], keys: list[str]) -> dict[str, Any]:
    """A copy of the app's config whose ``keys`` hold their unresolved text as a literal string.

    For keys resolved only in the trial (a resolver the app registers when it runs): resolving the
    rest of the config then keeps their text (``${batches:8,1}`` stays that text), and keys that
    interpolate from them read that text too, so two arms are compared on it.
    """
    out = copy.deepcopy(dict(params))
    for key in keys:
        node: Any = out
        parts = key.split(".")
        try:
            for part in parts[:-1]:
                node = node[int(part)] if isinstance(node, list) else node[part]
            last: Any = int(parts[-1]) if isinstance(node, list) else parts[-1]
            value = node[last]
        except (KeyError, IndexError, ValueError, TypeError):
            continue
        if isinstance(value, str):
            node[last] = value.replace("${", "\\${")
    return out

