"""The ``fn`` form of a task: a Python callable ``module:function`` called in the trial process.

``fn(cfg: DictConfig) -> Mapping[str, float]``; the trial seeds every generator before calling it. A function
whose module uses ``HydraConfig`` runs with it set as in a Hydra run: ``HydraConfig.get().runtime.output_dir``
is the trial's ``run/`` dir.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.plan.hydra_semantics import trial_hydra
from ablate.trials.tasks.taskcheck import check_task_fn


def import_callable(spec: str, code_root: str | os.PathLike[str] | None = None) -> Callable[..., Any]:
    """Import ``module:function`` (or ``module.function``), from ``code_root`` first when given.

    When ``code_root`` is given (the code snapshot of the pinned commit), modules of the task's
    top-level package that were already imported from elsewhere are dropped from ``sys.modules`` so
    the snapshot's copy is used, not the live working tree's.

    Raises
    ------
    ConfigError
        When the module cannot be imported or has no such attribute (message names ``task.fn``).
    """
    if ":" in spec:
        mod_name, attr = spec.split(":", 1)
    elif "." in spec:
        mod_name, attr = spec.rsplit(".", 1)
    else:
        raise ConfigError(f"{spec!r} is not `module:function`", where="task.fn",
                          fix="e.g. `task.fn=examples.digits.task:train`")
    if code_root is not None:
        root = str(code_root)
        if root not in sys.path[:1]:
            sys.path.insert(0, root)
        top = mod_name.split(".")[0]
        for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
            f = getattr(sys.modules[name], "__file__", None) or ""
            if not f.startswith(root):
                del sys.modules[name]
        importlib.invalidate_caches()
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module {mod_name!r} ({exc})", where="task.fn",
                          fix="check the module path; it is imported from the project root "
                          "(the pinned commit's snapshot)") from exc
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"module {mod_name!r} has no attribute {part!r}", where="task.fn",
                              fix=f"name a function defined in {mod_name}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"{spec!r} is not callable", where="task.fn",
                          fix="name a function, as `task.fn: package.module:function`")
    return obj


def uses_hydra_config(fn: Callable[..., Any]) -> bool:
    """Whether the function's module names ``HydraConfig`` (read from its source file; no Hydra import)."""
    try:
        path = inspect.getsourcefile(fn)
        return bool(path) and "HydraConfig" in Path(path).read_text(encoding="utf-8", errors="replace")
    except (TypeError, OSError):
        return False


_NODES: dict[int, tuple[Mapping[str, Any], dict[str, Any], Any]] = {}


def _node(cfg: Mapping[str, Any], arm: Mapping[str, Any]) -> Any:
    """The trial's config as the OmegaConf ``DictConfig`` the task receives, built once per arm in a process
    that runs several of its trials (``launcher=inline``) and copied per seed: the task gets its own copy, so
    what it changes in it never reaches the next trial."""
    import copy

    from omegaconf import OmegaConf

    rest = {k: v for k, v in cfg.items() if k != "seed"}
    hit = _NODES.get(id(arm))
    same = hit is not None and hit[0] is arm and hit[1] == rest
    if same and hit[2] is not None:  # type: ignore[index]
        node = copy.deepcopy(hit[2])  # type: ignore[index]
        node.seed = cfg.get("seed")
        return node
    node = OmegaConf.create(dict(cfg))
    if hit is None:  # the first trial of this arm here: a one-trial process never pays for a template
        _NODES[id(arm)] = (arm, rest, None)
    elif same:  # a second one: keep a template for the rest
        _NODES[id(arm)] = (arm, rest, copy.deepcopy(node))
    return node


class FnForm:
    """The ``fn`` task form (see the module docstring)."""

    name = "fn"

    def check(self, plan: Any, cwd: str) -> None:
        """Check that ``task.fn`` names a function that exists, without importing it."""
        check_task_fn(str((plan.control.config.get("task") or {})["fn"]), cwd)

    def run(self, cfg: Mapping[str, Any], tp: Any, opts: Mapping[str, Any], *, plan: Mapping[str, Any],
            arm: Mapping[str, Any], code_root: Any = None) -> Any:
        """Import ``task.fn`` from the code snapshot and call it with the trial's resolved config."""
        fn = import_callable(str(cfg["task"]["fn"]), code_root)
        if not uses_hydra_config(fn):
            return fn(_node(cfg, arm))
        run_dir = Path(tp.dir) / "run"  # as in a Hydra run: HydraConfig.get().runtime.output_dir is the trial's
        run_dir.mkdir(parents=True, exist_ok=True)
        with trial_hydra(run_dir, cfg.get("task")):
            return fn(_node(cfg, arm))

    def dry_run_lines(self, plan: Any, cwd: str) -> list[str]:
        """A dry run of an ``fn`` task names the callable."""
        return [f"  task: fn {(plan.control.config.get('task') or {}).get('fn')} (called in each trial's process)"]


FORM = FnForm()
