"""A trial's curve for the verdict: its ``curve.json``, or, when the ablation did not ask for curves (``ablate
verdict DIR --curve``) or asks for another metric or x-axis now, the series read again from what the trial left.

What a trial leaves, looked at in this order (the order the trial itself looks in, :mod:`ablate.trials.curve`,
less a returned ``history``, which no trial keeps):

1. the source its metric was read from (``result.json``'s ``metric_source``: a CSV, a JSON/JSONL file, TensorBoard
   events, or its ``stdout.log``/``stderr.log`` read with the task's ``metric_pattern``);
2. the values it logged with ``ablate.log_step`` (``steps.jsonl``, kept by every trial);
3. the files in its run dir and working dir (a Lightning ``metrics.csv``, TensorBoard events, JSONL).

Only files inside the trial's own dir are read: a recorded path is data, so one that points elsewhere (or to
where the sweep dir was before it moved) is looked up under the trial dir by its place there, never followed out.
Every file a curve was read from is named (``inputs``, relative to the sweep dir) for the verdict's reuse key.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError, SweepDirError
from ablate.metrics import compile_patterns
from ablate.metrics.curve import DEFAULT_X, curve_from, recorded_source_series, run_file_series, steps_series
from ablate.record.curves import read_curve
from ablate.record.sweepdir import SweepDir, TrialPaths

#: A trial's run dir and working dir, as the task forms name them (``ablate.trials``: RUN_DIR_NAME, WORK_DIR_NAME).
RUN_DIRS = ("run", "work")


def trial_curve(sd: SweepDir, plan: Mapping[str, Any], arm: str, seed: int, cfg: Mapping[str, Any]
                ) -> tuple[tuple[Any, Any], str, list[str]] | tuple[str, list[str]]:
    """One trial's curve of ``cfg["metric"]`` against ``cfg["x"]``.

    Returns
    -------
    ((xs, ys), source, inputs) or (why, inputs)
        The curve, where it came from (``curve.json``, or the source it was read from after the run, as
        ``log_step``, ``csv``, ``stdout``...) and the files read (relative to the sweep dir: ``curve.json`` always
        first, present or not); or why the trial has none, as a sentence.
    """
    tp = sd.trial(arm, seed)
    metric, x = str(cfg.get("metric") or plan.get("metric")), str(cfg.get("x") or DEFAULT_X)
    inputs = [_rel(sd, tp.curve)]
    rec = read_curve(tp.curve)
    if rec is not None and rec.get("metric") == metric and rec.get("x") == x:
        if "error" in rec:
            return str(rec["error"]), inputs
        return (rec["xs"], rec["ys"]), "curve.json", inputs
    why = []
    for name, series, where, files in _recorded(sd, plan, arm, seed, tp, metric):
        got = curve_from(series, metric, x, kind=where.get("kind"), path=where.get("path"))
        inputs += [f for f in files if f not in inputs]
        if isinstance(got, tuple) and len(got[0]) >= 2:
            import numpy as np  # noqa: PLC0415  # lazy: numpy, only where a verdict reads curves (as ablate.record.curves)

            return (np.asarray(got[0], dtype=float), np.asarray(got[1], dtype=float)), name, inputs
        if series:
            why.append(f"{name}: {got if isinstance(got, str) else 'fewer than 2 points'}")
    return (f"the series of {metric!r} against {x!r} was not recorded"
            + (f" ({'; '.join(why)})" if why else " (no log_step values, no series in its metric's source or its "
               "run's files)")), inputs


def _recorded(sd: SweepDir, plan: Mapping[str, Any], arm: str, seed: int, tp: TrialPaths, metric: str
              ) -> Iterator[tuple[str, Mapping[str, Any], dict[str, Any], list[str]]]:
    """``(name, series, {"kind", "path"}, files read)`` of each source the trial left, in order (see the module
    docstring); each read only when the ones before gave no curve."""
    try:
        result = sd.read_result(arm, seed) or {}
    except SweepDirError:  # an unreadable record: its source is unknown, the other files still tell
        result = {}
    src = result.get("metric_source") if isinstance(result, dict) else None
    if isinstance(src, Mapping) and isinstance(src.get("kind"), str):
        kind = str(src["kind"])
        path = _inside(tp, src.get("path"), kind)
        if path is not None:
            series = recorded_source_series(kind, path, _patterns(plan, arm) if kind in ("stdout", "stderr") else ())
            yield kind, series, {"kind": kind, "path": str(path)}, _files(sd, path)
    yield "log_step", steps_series(tp.steps), {"path": str(tp.steps)}, [_rel(sd, tp.steps)]
    for kind, series, where in run_file_series([tp.dir / d for d in RUN_DIRS if (tp.dir / d).is_dir()], metric):
        yield kind, series, where, _files(sd, Path(where["path"])) if where.get("path") else []


def _inside(tp: TrialPaths, recorded: Any, kind: str) -> Path | None:
    """The recorded source path as a path inside the trial dir (the part after ``seed=k/`` when the sweep dir has
    moved since), or None when it names nothing there; a printed-lines source is the trial's own log."""
    if kind == "stdout":
        return tp.stdout
    if kind == "stderr":
        return tp.stderr
    if not isinstance(recorded, str) or not recorded:
        return None
    root = tp.dir.resolve()
    parts = Path(recorded).parts
    tails = [Path(recorded)] if not os.path.isabs(recorded) else []
    tails += [Path(*parts[i + 1:]) for i, p in enumerate(parts) if p == tp.dir.name and i + 1 < len(parts)]
    for tail in tails:
        cand = tp.dir / tail
        if cand.resolve().is_relative_to(root) and cand.exists():
            return cand
    return None


def _patterns(plan: Mapping[str, Any], arm: str) -> list[Any]:
    """The arm's ``task.metric_pattern``, compiled (none when it has none, or it does not compile)."""
    rec = next((a for a in plan.get("arms") or [] if a.get("name") == arm), {})
    task = ((rec.get("config") or {}).get("task") or {}) if isinstance(rec, Mapping) else {}
    try:
        return compile_patterns(task.get("metric_pattern"))
    except ConfigError:  # the plan's pattern compiled when the trial ran; one that no longer does reads nothing
        return []


def _files(sd: SweepDir, path: Path) -> list[str]:
    """The files a source was read from, relative to the sweep dir (a TensorBoard log dir: its files)."""
    if path.is_dir():
        return sorted(_rel(sd, p) for p in path.iterdir() if p.is_file())
    return [_rel(sd, path)]


def _rel(sd: SweepDir, path: Path) -> str:
    """``path`` relative to the sweep dir, as the reuse key names it (string operations only: one per trial)."""
    return os.path.relpath(path, sd.root)
