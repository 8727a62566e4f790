"""Record a trial's curve (``curve.json``) when the ablation asks for curves: the series its metric came from,
against ``curve.x`` (:mod:`ablate.metrics.curve` reads it, :mod:`ablate.record.curves` writes it).

Called once by the trial (:func:`ablate.trials.trial.run_trial`) with what the task form returned. It never
fails a trial: a curve that cannot be read is recorded as ``{"error": ...}``, and the verdict names the trial.
Without ``curve.enabled`` it reads and writes nothing (a returned ``history`` is still taken out of the
metrics: it is no metric).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from ablate.metrics.curve import DEFAULT_X, HISTORY_KEY, curve_from, history_series, run_file_series, steps_series
from ablate.record.curves import write_curve
from ablate.record.sweepdir import TrialPaths
from ablate.trials.tasks.contract import TaskOutput
from ablate.trials.workdir import WORK_DIR_NAME


def _take_history(out: Any) -> tuple[Any, Any]:
    """``out`` without a returned ``history`` (a mapping or list of lists, never a metric), and that history."""
    metrics = out.metrics if isinstance(out, TaskOutput) else out
    if not isinstance(metrics, Mapping) or not isinstance(metrics.get(HISTORY_KEY), Mapping | list | tuple):
        return out, None
    history = metrics[HISTORY_KEY]
    rest = {k: v for k, v in metrics.items() if k != HISTORY_KEY}
    return (replace(out, metrics=rest) if isinstance(out, TaskOutput) else rest), history


def _candidates(tp: TrialPaths, out: Any, history: Any, metric: str
                ) -> Iterator[tuple[str, Mapping[str, Any], dict[str, Any]]]:
    """The series a curve may come from, in order (each read only when the ones before had no curve): the
    metric's own source, a returned history, ``ablate.log_step`` values, then the run's files (an app that
    returns its final metric and logs its curve to a Lightning ``metrics.csv``, TensorBoard or JSONL)."""
    if isinstance(out, TaskOutput) and out.series:
        src = out.source or {}
        yield str(src.get("kind")), out.series, {"kind": src.get("kind"), "path": src.get("path")}
    if history is not None:
        yield "history", history_series(history), {}
    yield "log_step", steps_series(tp.steps), {"path": str(tp.steps)}
    yield from run_file_series([d for d in (tp.dir / "run", tp.dir / WORK_DIR_NAME) if d.is_dir()], metric)


def record_curve(tp: TrialPaths, plan: Mapping[str, Any], out: Any) -> Any:
    """Write the trial's ``curve.json`` when ``plan.options.curve`` is set, and return ``out`` without a
    returned history.

    Parameters
    ----------
    tp : TrialPaths
        The trial's files (``curve.json`` is written there; ``steps.jsonl`` and the run's files are read).
    plan : mapping
        The plan (``options.curve``: ``metric``, ``x``; ``metric``).
    out : mapping or TaskOutput
        What the task form returned.

    Returns
    -------
    mapping or TaskOutput
        ``out`` with the key ``history`` taken out when it held a history.
    """
    out, history = _take_history(out)
    cfg = (plan.get("options") or {}).get("curve")
    if not cfg:
        return out
    metric = str(cfg.get("metric") or plan.get("metric"))
    x = str(cfg.get("x") or DEFAULT_X)
    why = []
    for name, series, where in _candidates(tp, out, history, metric):
        got = curve_from(series, metric, x, kind=where.get("kind"), path=where.get("path"))
        if isinstance(got, tuple) and len(got[0]) >= 2:
            write_curve(tp.curve, {"metric": metric, "x": x, "source": name, "path": where.get("path")}, *got)
            return out
        why.append(f"{name}: {got if isinstance(got, str) else 'fewer than 2 points'}")
    write_curve(tp.curve, {"metric": metric, "x": x, "error": f"no curve of {metric!r} against {x!r}: "
                           + "; ".join(why) + f". Fix: log {metric!r} at every step (ablate.log_step(step, "
                           f"{metric}=value) in a fn task, or a metrics.csv / printed `step N: ... {metric} X` "
                           "lines)"})
    return out
