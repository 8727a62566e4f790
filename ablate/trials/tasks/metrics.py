"""Read a trial's metrics from what an app already produces, with no shim in the app.

Sources, looked for in this order unless ``task.metric_source`` names one:

1. ``return``: the value the ``@hydra.main`` function returned (a mapping, or a scalar taken as
   ``task.metric``), saved by :mod:`ablate.trials.tasks.hydra_callback`;
2. ``csv``: a Lightning ``CSVLogger`` ``metrics.csv`` (one column per metric, a ``step`` column);
3. ``tensorboard``: TensorBoard event files, read with TensorBoard's own ``EventAccumulator``
   (the ``tensorboard`` package: ``pip install 'hydra-ablate[tensorboard]'``);
4. ``json``: ``*.json`` (an object of numbers) or ``*.jsonl`` (one object per line) files;
5. ``stdout``: ``key: value`` or ``key=value`` lines the app printed (as Guild AI captures output scalars).

Files are looked for under the trial's run dir (``${hydra:runtime.output_dir}``), then among the
files the app wrote into its working dir (``<trial dir>/work``: a ``hydra.job.chdir=false`` app's
``metrics.json``; the mirror's links to the code snapshot are never read).

A metric logged at many steps is reduced by ``task.reduce``: ``last`` (default), ``min`` or ``max``.
The source, file, step and rule used are returned with the metrics and recorded in ``result.json``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.trials.tasks.hydra_callback import SEEN_FILE

SOURCES = ("return", "csv", "tensorboard", "json", "stdout")
REDUCE = ("last", "min", "max")
#: The file the Hydra callback writes the app's return value to, in the app's output dir.
RETURN_FILE = "ablate_return.json"
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|infinity)"
_LINE = re.compile(rf"^\s*([A-Za-z_][\w./\-]*)\s*(?::|=)\s*({_NUMBER})\s*$", re.IGNORECASE)

#: A series: (step, value) pairs in logging order.
Series = list[tuple[int | None, float]]


def reduce_series(series: Series, rule: str) -> tuple[float, int | None]:
    """Reduce a logged series to one value by ``rule`` (``last``, ``min`` or ``max``).

    NaN values are skipped by ``min``/``max`` (``last`` keeps the last logged value, NaN included,
    so a run that diverged at its end reads as diverged).

    Returns
    -------
    value, step : float, int or None
        The value and the step it was logged at (None when the source has no steps).
    """
    if rule == "last":
        step, value = series[-1]
        return value, step
    finite = [(s, v) for s, v in series if not math.isnan(v)] or series
    pick = min if rule == "min" else max
    step, value = pick(finite, key=lambda sv: sv[1])  # the first step reaching the extreme
    return value, step


def _number(v: Any) -> float | None:
    """A metric value read from an app's output as a number; a bool stays a bool (a 0/1 metric, which the
    trial counts as 1/0 and names in its record, as for a function task), anything else None (skipped)."""
    if hasattr(v, "item") and callable(v.item):  # numpy / torch scalars
        try:
            v = v.item()
        except (TypeError, ValueError):
            return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str) and v.lower() in ("nan", "inf", "-inf"):  # how the callback stores them (JSON has none)
        return float(v)
    return None


def _flat_numbers(obj: Any, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            out.update(_flat_numbers(v, f"{prefix}.{k}" if prefix else str(k)))
    else:
        n = _number(obj)
        if n is not None and prefix:
            out[prefix] = n
    return out


# -- one reader per source: each returns {metric: series} and the file it read ----------------------
def _files(run_dir: Path | list[Path], pattern: str) -> list[Path]:
    """Files matching ``pattern`` under the dirs, the first dir's last, each dir's oldest first (readers take the
    last); links (a working dir's mirror of the code) and ``.hydra/`` are skipped."""
    roots = run_dir if isinstance(run_dir, list) else [run_dir]
    found = [(-rank, p) for rank, root in enumerate(roots) for p in root.rglob(pattern)
             if ".hydra" not in p.parts and p.is_file() and not p.is_symlink()]
    return [p for _, p in sorted(found, key=lambda rp: (rp[0], rp[1].stat().st_mtime, str(rp[1])))]


def read_return(run_dir: Path, metric: str) -> tuple[dict[str, Series], Path | None]:
    """The app's return value (saved by the Hydra callback): a mapping, or a scalar named ``metric``."""
    path = run_dir / RETURN_FILE
    if not path.is_file():
        return {}, None
    rec = json.loads(path.read_text())
    value = rec.get("value")
    if isinstance(value, Mapping):
        return {k: [(None, v)] for k, v in _flat_numbers(value).items()}, path
    n = _number(value)
    return ({metric: [(None, n)]} if n is not None else {}), path


def read_csv(run_dir: Path | list[Path]) -> tuple[dict[str, Series], Path | None]:
    """The newest Lightning ``metrics.csv`` under ``run_dir``: every numeric column but ``step``/``epoch``."""
    import pandas as pd

    files = _files(run_dir, "metrics.csv")
    if not files:
        return {}, None
    path = files[-1]
    df = pd.read_csv(path)
    steps = df["step"] if "step" in df.columns else pd.Series(range(len(df)))
    out: dict[str, Series] = {}
    for col in df.columns:
        if col in ("step", "epoch") or not pd.api.types.is_numeric_dtype(df[col]):
            continue
        rows = df[col].notna()
        if rows.any():
            out[str(col)] = [(int(s), float(v)) for s, v in zip(steps[rows], df[col][rows], strict=True)]
    return out, path


def read_tensorboard(run_dir: Path | list[Path]) -> tuple[dict[str, Series], Path | None]:
    """Scalars of the newest TensorBoard event file's directory under ``run_dir`` (TensorBoard's reader)."""
    files = _files(run_dir, "events.out.tfevents.*")
    if not files:
        return {}, None
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        raise ConfigError(f"the app wrote TensorBoard event files ({files[-1]}), but the `tensorboard` package that "
                          "reads them is not installed", where="task.metric_source",
                          fix="pip install 'hydra-ablate[tensorboard]' (or tensorboard), or set `metric_source` to "
                          "another source") from None
    logdir = files[-1].parent
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    out = {tag: [(int(e.step), float(e.value)) for e in acc.Scalars(tag)] for tag in acc.Tags().get("scalars", [])}
    return {k: v for k, v in out.items() if v}, logdir


def read_json(run_dir: Path | list[Path]) -> tuple[dict[str, Series], Path | None]:
    """The newest ``*.jsonl`` (one object per line; ``step`` read when present) or ``*.json`` object."""
    files = [p for p in _files(run_dir, "*.json*") if p.suffix in (".json", ".jsonl")
             and p.name not in (RETURN_FILE, SEEN_FILE)]
    for path in reversed(files):
        out: dict[str, Series] = {}
        try:
            if path.suffix == ".jsonl":
                for i, line in enumerate(path.read_text().splitlines()):
                    if not line.strip():
                        continue
                    row = json.loads(line)
                    if not isinstance(row, Mapping):
                        continue
                    step = int(row["step"]) if isinstance(row.get("step"), int) else i
                    for k, v in _flat_numbers(row).items():
                        if k != "step":
                            out.setdefault(k, []).append((step, v))
            else:
                obj = json.loads(path.read_text())
                out = {k: [(None, v)] for k, v in _flat_numbers(obj).items()} if isinstance(obj, Mapping) else {}
        except (ValueError, OSError):
            continue
        if out:
            return out, path
    return {}, None


def read_stdout(lines: Iterable[str]) -> dict[str, Series]:
    """``key: value`` / ``key=value`` lines (one number per line); the step is the line number (from 1)."""
    out: dict[str, Series] = {}
    for i, line in enumerate(lines, 1):
        m = _LINE.match(line)
        if m:
            out.setdefault(m.group(1), []).append((i, float(m.group(2))))
    return out


def collect(run_dir: Path, stdout_lines: list[str], metric: str, *, source: str = "auto",
            reduce: str = "last", stdout_path: Path | None = None,
            work_dir: Path | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """Find ``metric`` in the app's outputs and reduce every metric of that source by ``reduce``.

    Parameters
    ----------
    run_dir : Path
        The app's output dir (``${hydra:runtime.output_dir}`` of the trial).
    stdout_lines : list of str
        What the app printed in this run.
    metric : str
        The metric the verdict compares (``task.metric``).
    source : str
        ``auto`` (the first source, in :data:`SOURCES` order, that has ``metric``) or one of them.
    reduce : str
        ``last``, ``min`` or ``max``.
    stdout_path : Path, optional
        The log file ``stdout_lines`` came from (recorded as the path of the ``stdout`` source).
    work_dir : Path, optional
        The trial's working dir: its files (not its links) are looked at after the run dir's.

    Returns
    -------
    metrics, record : dict, dict
        Metric name -> reduced value; and ``{kind, path, step, reduce, n_logged}`` for ``metric``.

    Raises
    ------
    ConfigError
        When no source has ``metric``: the message lists what each source had, and where.
    """
    order = SOURCES if source == "auto" else (source,)
    roots = [run_dir, *([work_dir] if work_dir is not None and work_dir.is_dir() else [])]
    seen: list[str] = []
    for kind in order:
        if kind == "return":
            found, path = read_return(run_dir, metric)
        elif kind == "csv":
            found, path = read_csv(roots)
        elif kind == "tensorboard":
            found, path = read_tensorboard(roots)
        elif kind == "json":
            found, path = read_json(roots)
        else:
            found, path = read_stdout(stdout_lines), stdout_path
        if metric in found:
            metrics, steps = {}, {}
            for k, series in found.items():
                metrics[k], steps[k] = reduce_series(series, reduce)
            rec = {"kind": kind, "path": str(path) if path else None, "step": steps[metric], "reduce": reduce,
                   "n_logged": len(found[metric])}
            return metrics, rec
        if found:
            names = ", ".join(sorted(found)[:12]) + (" ..." if len(found) > 12 else "")
            seen.append(f"{kind} ({path}): {names}")
    looked = ", ".join(map(str, roots))
    what = "; ".join(seen) if seen else f"no metrics in any of {', '.join(order)} (looked in {looked})"
    raise ConfigError(f"the app logged no metric {metric!r}; found: {what}", where="task.metric",
                      fix="set `metric` to one of the names found, or `metric_source` to the source that logs it")
