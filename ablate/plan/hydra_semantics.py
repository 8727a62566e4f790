"""Hydra's semantics inside trials, the same on every launcher (pure helpers, plus one context manager).

- ``${hydra:...}`` (e.g. ``${hydra:runtime.output_dir}``) resolves, in a trial, to that trial's own run
  dir (``<trial dir>/run``): :func:`trial_hydra`. Keys that read it differ per trial by design:
  :func:`per_trial_keys` names them, so the confound check leaves them out.
- ``${now:...}`` is resolved once per ablation and frozen into every arm: :func:`freeze_now`.
- ``???`` (a mandatory value left unset) is refused at plan time: :func:`missing_keys`.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as _dt
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ablate.plan.arms import derived_keys, flatten

_NOW = re.compile(r"\$\{now:([^{}]*)\}")
_HYDRA = "${hydra:"
#: Hydra's own config node (``OmegaConf.structured(HydraConf)``) with its defaults, built once per process
#: (:func:`hydra_conf`) and copied by each :func:`trial_hydra` (issue 42): building it from the dataclass was most
#: of a context's cost, 14.6 ms of CPU per context before, 6.8 ms after (load 18); a process that opens several
#: contexts (the plan, ``launcher=inline`` trials) builds it once, and warm trials inherit it from their parent.
_HYDRA_CONF: Any = None


def _flat(cfg: Any, prefix: str = "") -> dict[str, Any]:
    return flatten(cfg, prefix)


def per_trial_keys(raw_cfg: Mapping[str, Any]) -> set[str]:
    """Dotted keys whose unresolved value reads ``${hydra:...}``, directly or through other keys.

    In a trial these resolve to the trial's own run dir, so they differ between trials by design.

    Parameters
    ----------
    raw_cfg : mapping
        A config as a plain container, interpolations unresolved.
    """
    raw_flat = {k: v for k, v in _flat({k: v for k, v in raw_cfg.items() if k != "hydra"}).items()}
    roots = {k for k, v in raw_flat.items() if _reads_hydra(v)}
    if not roots:
        return set()
    return roots | derived_keys(raw_flat, roots)


def _reads_hydra(value: Any) -> bool:
    """A leaf reads ``${hydra:...}``: a string, or a list (a leaf of :func:`flatten`) holding one at any depth."""
    if isinstance(value, str):
        return _HYDRA in value
    if isinstance(value, list | tuple):
        return any(_reads_hydra(v) for v in value)
    if isinstance(value, Mapping):
        return any(_reads_hydra(v) for v in value.values())
    return False


def freeze_now(cfg: dict[str, Any], when: _dt.datetime | None = None) -> dict[str, str]:
    """Replace every ``${now:<pattern>}`` in the config's string values by ``when.strftime(pattern)``, in place.

    One time for the whole ablation, so an arm that starts later is not a different config.

    Parameters
    ----------
    cfg : dict
        A config as a plain container (changed in place; the ``hydra`` node is left alone).
    when : datetime, optional
        The ablation's time (default: now, local time, as Hydra's own ``now`` resolver uses).

    Returns
    -------
    dict
        Dotted key -> its new (frozen) value, for every value that changed.
    """
    when = when or _dt.datetime.now()
    changed: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for k, v in list(items):
            path = f"{prefix}.{k}" if prefix else str(k)
            if path == "hydra":
                continue
            if isinstance(v, str) and "${now:" in v:
                new = _NOW.sub(lambda m: when.strftime(m.group(1)), v)
                node[k] = new
                changed[path] = new
            else:
                walk(v, path)

    walk(cfg, "")
    return changed


def missing_keys(cfg: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose value is ``???`` (Hydra's mandatory value, not set), outside ``hydra``."""
    return sorted(k for k, v in _flat({k: v for k, v in cfg.items() if k != "hydra"}).items() if v == "???")


def hydra_conf() -> Any:
    """Hydra's own config node with its defaults (``OmegaConf.structured(HydraConf)``), built on the first call in
    this process and kept (:data:`_HYDRA_CONF`); callers copy it, never change it. A warm parent builds it before
    forking trials that open a Hydra context (:func:`ablate.trials.warm.parent.prepare_trials`), so they inherit it.
    """
    global _HYDRA_CONF
    if _HYDRA_CONF is None:
        from hydra.conf import HydraConf  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
        from omegaconf import OmegaConf  # noqa: PLC0415  # lazy: OmegaConf off this module's import

        _HYDRA_CONF = OmegaConf.structured(HydraConf)
    return _HYDRA_CONF


@contextlib.contextmanager
def trial_hydra(run_dir: str | os.PathLike[str], task: Mapping[str, Any] | None = None) -> Iterator[None]:
    """Make ``${hydra:...}`` resolve as in a Hydra run whose output dir is ``run_dir``, then restore.

    Sets ``hydra.runtime.output_dir`` and ``hydra.run.dir`` to ``run_dir``, ``hydra.runtime.cwd`` to
    the current directory and ``hydra.job.name`` to the app's script name (``app`` form) or ``ablate``.
    """
    from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from hydra.core.utils import setup_globals  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from omegaconf import OmegaConf  # noqa: PLC0415  # lazy: OmegaConf off this module's import

    setup_globals()  # registers Hydra's `hydra`, `now` and `python_version` resolvers, as a Hydra run does
    node = copy.deepcopy(hydra_conf())  # 2-3 ms of CPU; building it was 13-40 ms, the same every time
    node.runtime.output_dir = str(run_dir)
    node.runtime.cwd = os.getcwd()
    node.run.dir = str(run_dir)
    app = (task or {}).get("app")
    node.job.name = Path(str(app)).stem if app else "ablate"
    node.job.num = 0
    inst = HydraConfig.instance()
    saved = inst.cfg
    inst.set_config(OmegaConf.create({"hydra": node}))
    try:
        yield
    finally:
        inst.cfg = saved
