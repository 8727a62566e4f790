"""A trial's curve: the series its metric came from, read against a declared x-axis (``curve.x``).

Where the series comes from, in this order (:func:`curve_from`):

1. the source the metric was read from (:func:`ablate.metrics.collect`'s ``series_out``): a Lightning
   ``metrics.csv``, TensorBoard events, a JSON/JSONL file, printed lines (a ``step`` group gives the step);
2. a history the ``fn`` task returned under the key ``history``: a mapping of lists (Keras' ``History.history``:
   ``{"val_acc": [...], "step": [...]}``, the index from 0 when it holds no ``step``) or a list of rows
   (``[{"step": 0, "val_acc": 0.5}, ...]``);
3. the values the task logged with :func:`ablate.log_step` (``steps.jsonl``, read exactly from ``float.hex``).

The x-axis is ``step`` (the logged step; for printed lines without a ``step`` group, the line number), or any
column logged beside the metric at the same step: ``epoch`` or ``tokens`` in the same CSV, JSONL row, pattern
group or ``log_step`` call; ``wall_time`` for TensorBoard events (seconds since the first event of the tag).

After the run (``ablate verdict DIR --curve``, on an ablation that did not ask for curves), the same series are
read again from what the trial left (:func:`recorded_source_series`, :func:`steps_series`,
:func:`run_file_series`); a returned history is the one series that is not kept.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.metrics.files import read_csv, read_csv_file, read_json, read_json_file, read_tensorboard
from ablate.metrics.lines import read_lines
from ablate.metrics.series import Series, flat_numbers, number

#: The key of an ``fn`` task's return value that holds its history (see the module docstring).
HISTORY_KEY = "history"
#: The x-axis of a curve unless ``curve.x`` names another column.
DEFAULT_X = "step"


def history_series(history: Any) -> dict[str, Series]:
    """A returned history as metric series ({} when it is neither a mapping of lists nor a list of rows)."""
    out: dict[str, Series] = {}
    if isinstance(history, Mapping):
        cols = {str(k): list(v) for k, v in history.items() if isinstance(v, list | tuple)}
        steps = cols.get("step")
        for k, vals in cols.items():
            if k == "step":
                continue
            out[k] = []
            for i, v in enumerate(vals):
                num = number(v)
                step = number(steps[i]) if steps is not None and i < len(steps) else float(i)
                if num is not None and step is not None:
                    out[k].append((int(step), float(num)))
        return {k: v for k, v in out.items() if v}
    if isinstance(history, list | tuple):
        for i, row in enumerate(history):
            if not isinstance(row, Mapping):
                continue
            step = number(row.get("step"))
            for k, v in flat_numbers(row).items():
                if k != "step":
                    out.setdefault(k, []).append((int(step) if step is not None else i, float(v)))
    return out


def steps_series(path: Path) -> dict[str, Series]:
    """The scalars logged with :func:`ablate.log_step` (``steps.jsonl``), each as (step, value); ``params``
    digests are skipped ({} when there is no such file)."""
    out: dict[str, Series] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            step = int(rec["step"])
        except (ValueError, KeyError, TypeError):
            continue
        for k, v in rec.items():
            if k in ("step", "params") or not isinstance(v, str):
                continue
            try:
                out.setdefault(k, []).append((step, float.fromhex(v)))
            except ValueError:
                continue
    return out


def _csv_column(path: Path, column: str) -> dict[int, float]:
    """step -> ``column`` of a CSV with a header (the step as :func:`ablate.metrics.read_csv_file` reads it: the
    ``step`` column, else the row number from 1); the last row of a step wins."""
    out: dict[int, float] = {}
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        for i, row in enumerate(csv.DictReader(fh), 1):
            try:
                step = int(float(row["step"])) if "step" in row else i
                out[step] = float(row[column])
            except (KeyError, TypeError, ValueError):
                continue
    return out


def _tensorboard_wall(logdir: Path, tag: str) -> dict[int, float]:
    """step -> seconds since the first event of ``tag`` in a TensorBoard log dir."""
    from tensorboard.backend.event_processing.event_accumulator import (  # noqa: PLC0415  # lazy: an optional extra, for event times
        EventAccumulator,
    )

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    events = acc.Scalars(tag) if tag in acc.Tags().get("scalars", []) else []
    t0 = events[0].wall_time if events else 0.0
    return {int(e.step): float(e.wall_time - t0) for e in events}


def x_at_steps(series: Mapping[str, Series], metric: str, x: str, kind: str | None = None,
               path: str | None = None) -> dict[int, float] | None:
    """step -> the x-axis value ``x`` logged beside ``metric`` (None when the source has no such column)."""
    if x in series:
        return {int(s): v for s, v in series[x] if s is not None}
    if kind == "csv" and path and Path(path).is_file():
        col = _csv_column(Path(path), x)
        return col or None
    if kind == "tensorboard" and x == "wall_time" and path:
        return _tensorboard_wall(Path(path), metric) or None
    return None


def curve_from(series: Mapping[str, Series], metric: str, x: str = DEFAULT_X, *, kind: str | None = None,
               path: str | None = None) -> tuple[list[float], list[float]] | str:
    """The curve of ``metric`` against ``x`` from a source's series, in logging order.

    Returns
    -------
    (xs, ys) or str
        The x value and the metric at each logged point (NaN where a point's x was not logged); or why there
        is no curve, as a sentence.
    """
    points = series.get(metric)
    if not points:
        return f"the source logged no series {metric!r}"
    if x == DEFAULT_X:
        if any(s is None for s, _ in points):
            return f"{metric!r} was logged without steps (a single value, or a JSON object)"
        return [float(s) for s, _ in points], [float(v) for _, v in points]  # type: ignore[arg-type]
    at = x_at_steps(series, metric, x, kind, path)
    if at is None:
        logged = ", ".join(sorted(k for k in series if k != metric)[:12]) or "nothing else"
        return f"no column {x!r} was logged beside {metric!r} (logged: {logged})"
    return [at.get(int(s), math.nan) if s is not None else math.nan for s, _ in points], [v for _, v in points]


def run_file_series(roots: Sequence[Path], metric: str) -> Iterator[tuple[str, dict[str, Series], dict[str, Any]]]:
    """The series a run's files hold, one source kind at a time (a Lightning ``metrics.csv``, TensorBoard events,
    JSONL): ``(kind, series, {"kind", "path"})``, each read only when the caller asks for the next. TensorBoard is
    skipped when its package is not installed (it has nothing to give then)."""
    if not roots:
        return
    for kind, read in (("csv", read_csv), ("tensorboard", lambda r, _m: read_tensorboard(r)), ("json", read_json)):
        try:
            found, path = read(list(roots), metric)
        except ConfigError:  # tensorboard not installed: that source has nothing to give
            continue
        yield kind, found, {"kind": kind, "path": str(path) if path else None}


def recorded_source_series(kind: str, path: Path, patterns: Sequence[re.Pattern[str]] = ()) -> dict[str, Series]:
    """The series of the source a trial's metric was read from (``result.json``'s ``metric_source``), read again
    from its file after the run: a CSV, a JSON/JSONL file, a TensorBoard log dir, or a log of printed lines
    (``stdout``/``stderr``, with the task's ``metric_pattern``; without a ``step`` group the step is the line number
    in the whole log). {} for a source with no series to give (a returned value, a metrics file of one object) or a
    file that is gone."""
    try:
        if kind == "csv" and path.is_file():
            return read_csv_file(path)
        if kind in ("json", "file") and path.is_file():
            return read_json_file(path)
        if kind == "tensorboard" and path.is_dir():
            return read_tensorboard(path)[0]
        if kind in ("stdout", "stderr") and path.is_file():
            return read_lines(path.read_text(encoding="utf-8", errors="replace").splitlines(), patterns)[0]
    except (ConfigError, OSError):  # tensorboard not installed, or the file went away: nothing to give
        return {}
    return {}
