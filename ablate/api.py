"""The Python API; the CLI is a thin layer over it.

::

    import ablate
    verdict = ablate.run("conf", variable="lr", seeds=10, launcher="local")
    df = ablate.load(verdict["sweep_dir"])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ablate.config import Composed


def run_composed(composed: Composed, *, cwd: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """Run the ablation described by an already composed config; returns the verdict (None for dry
    runs; ``{"sweep_dir": ..., "submitted": True}`` for ``wait=false``)."""
    from ablate.orchestrate import start
    from ablate.sweepdir import read_json

    sd = start(composed.cfg, sweep_dir=composed.sweep_dir, variable_name=composed.variable_name,
               available_variables=composed.variables, compose=composed.compose, cwd=cwd,
               config_dirs=composed.config_dirs, choices=composed.choices)
    if sd is None:
        return None
    if not sd.verdict_json.exists():  # wait=false: submitted, collected later with `ablate collect`
        return {"sweep_dir": str(sd.root), "submitted": True}
    verdict = read_json(sd.verdict_json)
    verdict["sweep_dir"] = str(sd.root)
    return verdict


def _override(key: str, value: Any) -> str:
    """Render ``key=value`` in Hydra override syntax, quoting strings safely."""
    from ablate.plan import format_value

    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace("'", "\\'")
        return f"{key}='{escaped}'"
    if isinstance(value, list | tuple):
        return f"{key}=[" + ",".join(_override("x", v)[2:] for v in value) + "]"
    return f"{key}={format_value(value)}"


def run(config_dir: str | os.PathLike[str] | None = None, *, variable: str | None = None,
        values: Sequence[Any] | None = None, seeds: int | Sequence[int] | None = None,
        launcher: str | None = None, overrides: Sequence[str] = (), sweep_dir: str | os.PathLike[str] | None = None,
        **settings: Any) -> dict[str, Any] | None:
    """Run an ablation and return its verdict (the content of verdict.json plus ``sweep_dir``).

    Parameters
    ----------
    config_dir : path-like, optional
        The project's conf/ (with task/ and variable/); default ``./conf`` when it exists.
    variable : str, optional
        The ``conf/variable/<name>.yaml`` to ablate.
    values : sequence, optional
        Treatment values, replacing the variable file's ``values``.
    seeds : int or sequence of int, optional
        Seeds per arm (``10`` means 0..9) or the seed list.
    launcher : {"local", "inline", "slurm"}, optional
    overrides : sequence of str
        Further Hydra overrides, e.g. ``["task.epochs=5"]``.
    sweep_dir : path-like, optional
        Where to write the sweep dir (default ``outputs/ablate/<date>/<time>_<variable>``).
    **settings
        Any top-level ablate setting (``alpha=0.01``, ``determinism="strict"``, ``dry_run=True``...).

    Returns
    -------
    dict or None
        The verdict, or None when ``dry_run=True``, or ``{"sweep_dir": ..., "submitted": True}`` when
        ``wait=False`` (``launcher="slurm"``: collect it later with ``ablate collect DIR``).

    Raises
    ------
    UserError
        For invalid input (nothing is launched).
    AblationFailed
        When ``on_failure="abort"`` stopped the ablation.
    """
    from ablate.config import compose, default_config_path

    ovs: list[str] = []
    if variable is not None:
        ovs.append(f"variable={variable}")
    if values is not None:
        ovs.append(_override("variable.values", list(values)))
    if seeds is not None:
        ovs.append(_override("seeds", list(seeds) if not isinstance(seeds, int) else seeds))
    if launcher is not None:
        ovs.append(f"launcher={launcher}")
    for k, v in settings.items():
        ovs.append(_override(k, v))
    ovs.extend(overrides)
    if sweep_dir is not None:
        ovs.append(_override("hydra.sweep.dir", str(Path(sweep_dir).absolute())))
    cfg_path = str(config_dir) if config_dir is not None else default_config_path()
    composed = compose(ovs, config_path=cfg_path)
    return run_composed(composed)
