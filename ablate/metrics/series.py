"""A logged metric as a series of (step, value) pairs, and its reduction to one value per trial."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

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


def number(v: Any) -> float | None:
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


def flat_numbers(obj: Any, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            out.update(flat_numbers(v, f"{prefix}.{k}" if prefix else str(k)))
    else:
        n = number(obj)
        if n is not None and prefix:
            out[prefix] = n
    return out
