"""The ``curve`` settings (curve verdicts, docs/verdict.md#curves): their defaults and their validation.

Read at plan time (:mod:`ablate.orchestrate.options`); the plan records them as ``options.curve`` (absent when
curves are off), which the trial (``curve.json``) and the verdict (:mod:`ablate.judge.curves`) read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ablate.errors import ConfigError
from ablate.plan.checks import boolean, choice, number

#: Curve options and their defaults (``ablate_base.yaml`` states them for users; a test holds the two equal).
CURVE_DEFAULTS: dict[str, Any] = {"enabled": False, "metric": None, "x": "step", "summary": "final",
                                  "threshold": None, "points": 200, "width": None}
#: The summaries ``curve.summary`` may put in the ablation table and the forest plot.
SUMMARIES = ("final", "auc", "time_to")


def parse_curve(value: Any, metric: str) -> dict[str, Any] | None:
    """``curve``: None (off) or the validated settings with defaults filled in.

    Raises
    ------
    ConfigError
        A setting of the wrong type, an unknown key, ``summary: time_to`` without a threshold, or a curve key set
        while ``curve.enabled`` is false (the fix says to enable it).
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(f"must be a mapping of curve settings, got {value!r}", where="curve",
                          fix="e.g. `curve.enabled=true curve.x=step`")
    unknown = sorted(set(value) - set(CURVE_DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown curve setting(s) {', '.join(unknown)}", where=f"curve.{unknown[0]}",
                          fix=f"one of {', '.join(CURVE_DEFAULTS)}")
    s = {k: value.get(k, d) for k, d in CURVE_DEFAULTS.items()}
    if not boolean(s["enabled"], "curve.enabled"):
        changed = [k for k in CURVE_DEFAULTS if k != "enabled" and s[k] != CURVE_DEFAULTS[k]]
        if changed:
            raise ConfigError(f"curve.{changed[0]} is set but curve verdicts are off", where="curve.enabled",
                              fix="add `curve.enabled=true` (each trial then keeps its metric's series, and the "
                              "verdict compares curves)")
        return None
    for key in ("metric", "x"):
        if s[key] is not None and (not isinstance(s[key], str) or not s[key]):
            raise ConfigError(f"must be a column name, got {s[key]!r}", where=f"curve.{key}",
                              fix="e.g. `curve.x=step` (or epoch, tokens, samples, wall_s)" if key == "x" else
                              f"e.g. `curve.metric={metric}`")
    s["metric"] = s["metric"] or metric
    s["summary"] = choice(s["summary"], SUMMARIES, "curve.summary")
    s["threshold"] = number(s["threshold"], "curve.threshold", allow_none=True, example=0.9)
    s["points"] = number(s["points"], "curve.points", lo=2, integer=True, example=200)
    s["width"] = number(s["width"], "curve.width", allow_none=True, example=0.01)
    if s["width"] is not None and s["width"] <= 0:
        raise ConfigError(f"must be a positive number (metric units), got {s['width']!r}", where="curve.width",
                          fix="e.g. `curve.width=0.01`")
    if s["summary"] == "time_to" and s["threshold"] is None:
        raise ConfigError("curve.summary=time_to needs the value to time", where="curve.threshold",
                          fix="e.g. `curve.threshold=0.9` (metric units; reached when >= it, or <= for a metric to "
                          "minimize)")
    return s
