"""A trial's ``curve.json``: the series its metric came from, against the declared x-axis (``curve.x``).

One small file per trial, beside ``result.json``, written when the ablation asks for curves
(``curve.enabled``); above :data:`ablate.stats.curves.MAX_POINTS` logged points it keeps every k-th point and
the last (``stride: k``), so the values kept are logged ones. Fields::

    {"metric": "val_loss", "x": "step", "source": "csv", "path": ".../metrics.csv",
     "n_logged": 1200, "stride": 1, "xs": [...], "ys": [...]}      # or {"metric", "x", "error": "why not"}

Non-finite values are written as null (the verdict drops them: :func:`ablate.stats.curves.clean_series`).
Records are input from others: :func:`read_curve` checks the shape and never trusts it further.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.record.sweepdir import write_atomic

#: Logged points kept per trial at most (above it: every k-th point and the last).
MAX_POINTS = 2000


def _finite_or_none(v: float) -> float | None:
    return v if isinstance(v, float | int) and math.isfinite(v) else None


def stride_of(n: int, max_points: int = MAX_POINTS) -> int:
    """The stride that keeps at most ``max_points`` of ``n`` logged points (plus the last)."""
    return max(1, math.ceil(n / max_points))


def write_curve(path: Path, meta: Mapping[str, Any], xs: Sequence[float] = (), ys: Sequence[float] = ()) -> None:
    """Write ``curve.json`` atomically: ``meta`` (metric, x, source, path, or error) and the points, downsampled
    to :data:`MAX_POINTS` (every k-th and the last; ``n_logged`` and ``stride`` say so)."""
    n = len(xs)
    k = stride_of(n)
    idx = list(range(0, n, k))
    if n and idx[-1] != n - 1:
        idx.append(n - 1)
    rec = {**meta, "n_logged": n, "stride": k, "xs": [_finite_or_none(float(xs[i])) for i in idx],
           "ys": [_finite_or_none(float(ys[i])) for i in idx]} if "error" not in meta else dict(meta)
    write_atomic(path, json.dumps(rec, separators=(",", ":"), allow_nan=False) + "\n")


def read_curve(path: Path) -> dict[str, Any] | None:
    """A trial's curve record: ``{"xs", "ys", ...}`` as float arrays (NaN for null), ``{"error": ...}``, or None when
    there is no file. A file that is not such a record reads as ``{"error": ...}`` naming what is wrong."""
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"error": f"{path.name} is unreadable ({type(exc).__name__})"}
    if not isinstance(rec, dict):
        return {"error": f"{path.name} holds no object"}
    if "error" in rec:
        return {**rec, "error": str(rec["error"])}
    xs, ys = rec.get("xs"), rec.get("ys")
    if not isinstance(xs, list) or not isinstance(ys, list) or len(xs) != len(ys):
        return {"error": f"{path.name} has no xs/ys lists of one length"}
    import numpy as np  # noqa: PLC0415  # lazy: numpy, only where a verdict reads curves (null -> NaN in one C loop)

    try:
        rec["xs"], rec["ys"] = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    except (TypeError, ValueError):
        return {"error": f"{path.name} holds a value that is not a number"}
    if rec["xs"].ndim != 1 or rec["ys"].ndim != 1:
        return {"error": f"{path.name} holds a value that is not a number"}
    return rec
