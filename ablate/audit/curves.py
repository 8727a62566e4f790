"""The audit's curve comparison: where along the logged steps side B is better, worse or indistinguishable from
side A, with the curve verdict's own statistics (:func:`ablate.judge.curves.compare_each`: the max-|t| permutation
band, simultaneous over every step and the summaries), on the series each run's records hold (a Hydra run's
metrics file or printed lines, an MLflow metric's history, a W&B run's history).

A run's curve is its metric's series against the logged step; a run that logged one value, or values without a
step, has none and is named. There is no curve comparison when no run of either side logged a series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ablate.audit.runs import Run
from ablate.judge.curve_options import CURVE_DEFAULTS
from ablate.judge.curves import compare_each


def run_curve(run: Run, metric: str) -> tuple[list[float], list[float]] | str:
    """One run's curve of ``metric`` against its logged step, or why it has none."""
    series = run.metrics.get(metric) or []
    stepped = [(s, v) for s, v in series if s is not None]
    if len(stepped) < 2:
        return (f"logged {len(series)} value(s) of {metric!r}" + (" without steps" if series and not stepped else "")
                + ": no curve")
    return [float(s) for s, _ in stepped], [float(v) for _, v in stepped]


def audit_curves(sides: Sequence[tuple[str, str, Sequence[Run], Sequence[int], Sequence[str]]],
                 verdict: Mapping[str, Any]) -> dict[str, Any] | None:
    """audit.json's ``statistics.curves``: verdict.json's ``curves`` object for the two sides, or None when no run
    logged a series.

    Parameters
    ----------
    sides : sequence
        Control then treatment: ``(role, metric, runs, seed ints, seed labels)``, the runs in the order the
        statistics keyed their values by (:func:`ablate.audit.analysis.seed_labels`).
    verdict : mapping
        The post-hoc verdict (:func:`ablate.judge.verdict.analyse` on the two sides' values): the final values,
        the pairing and the level the curves use.

    Returns
    -------
    dict or None
        ``metric``, ``x`` (``step``), ``goal``, ``alpha``, ``method``, ``rules``, ``comparisons`` (one: B against A),
        ``trial_errors`` (``A/seed=label`` -> why a run has no curve) and ``sources`` (runs with a curve per side).
    """
    curves: dict[str, dict[int, tuple[Any, Any]]] = {}
    errors: dict[str, str] = {}
    for role, metric, runs, ints, labels in sides:
        curves[role] = {}
        for run, k, label in zip(runs, ints, labels, strict=True):
            got = run_curve(run, metric)
            if isinstance(got, str):
                errors[f"{'A' if role == 'control' else 'B'}/seed={label}"] = f"{run.id}: {got}"
            else:
                curves[role][k] = got
    if not any(curves.values()):
        return None
    metric = sides[0][1] if sides[0][1] == sides[1][1] else f"{sides[0][1]} / {sides[1][1]}"
    cfg = {**CURVE_DEFAULTS, "enabled": True, "metric": metric}
    return {**compare_each(curves, verdict, cfg), "trial_errors": errors, "asked": "by the audit",
            "sources": {"A": len(curves["control"]), "B": len(curves["treatment"])}}
