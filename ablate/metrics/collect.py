"""Find a trial's metric among the sources, in their order, and reduce every metric of that source."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.metrics.files import read_csv, read_json, read_json_file, read_return, read_tensorboard
from ablate.metrics.lines import closest_lines, read_lines
from ablate.metrics.series import reduce_series

#: The sources, in the order ``metric_source: auto`` looks at them (see :mod:`ablate.metrics`).
SOURCES = ("return", "file", "csv", "tensorboard", "json", "stdout", "stderr")
#: How a logged series is reduced to one value per trial (``task.reduce``).
REDUCE = ("last", "min", "max")


def collect(run_dir: Path, stdout_lines: list[str], metric: str, *, source: str = "auto",
            reduce: str = "last", stdout_path: Path | None = None, stderr_lines: list[str] | None = None,
            stderr_path: Path | None = None, patterns: Sequence[re.Pattern[str]] = (),
            metrics_file: Path | None = None, work_dir: Path | None = None,
            series_out: dict[str, Any] | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """Find ``metric`` in the script's outputs and reduce every metric of that source by ``reduce``.

    Parameters
    ----------
    run_dir : Path
        The script's output dir (``<trial dir>/run``; an app's ``${hydra:runtime.output_dir}``).
    stdout_lines, stderr_lines : list of str
        What the script printed in this run.
    metric : str
        The metric the verdict compares (``task.metric``).
    source : str
        ``auto`` (the first source, in :data:`SOURCES` order, that has ``metric``; with ``patterns``,
        ``stdout`` and ``stderr`` first) or one of them.
    reduce : str
        ``last``, ``min`` or ``max``.
    stdout_path, stderr_path : Path, optional
        The log files the lines came from (recorded as the path of those sources).
    patterns : sequence of compiled regex
        ``task.metric_pattern`` (:func:`compile_patterns`).
    metrics_file : Path, optional
        The JSON object a command task writes (the ``file`` source).
    work_dir : Path, optional
        The trial's working dir: its files (not its links) are looked at after the run dir's.
    series_out : dict, optional
        Filled with every series of the source the metric came from (name -> (step, value) pairs): the
        trial's curve (:mod:`ablate.metrics.curve`).

    Returns
    -------
    metrics, record : dict, dict
        Metric name -> reduced value; and ``{kind, path, step, reduce, n_logged, match}`` for ``metric``
        (``match``: the line, CSV row or JSON key the value came from; plus ``pattern`` for a line source).

    Raises
    ------
    ConfigError
        When no source has ``metric``: the message lists what each source had, and where, and the lines
        that came closest to the pattern.
    """
    if source != "auto":
        order: tuple[str, ...] = (source,)
    elif patterns:
        order = ("stdout", "stderr", *(k for k in SOURCES if k not in ("stdout", "stderr")))
    else:
        order = SOURCES
    roots = [run_dir, *([work_dir] if work_dir is not None and work_dir.is_dir() else [])]
    seen: list[str] = []
    for kind in order:
        where: dict[str, list[str]] = {}
        if kind == "return":
            found, path = read_return(run_dir, metric)
        elif kind == "file":
            found, path = (read_json_file(metrics_file), metrics_file) if metrics_file and metrics_file.is_file() \
                else ({}, None)
        elif kind == "csv":
            found, path = read_csv(roots, metric)
        elif kind == "tensorboard":
            found, path = read_tensorboard(roots)
        elif kind == "json":
            found, path = read_json(roots, metric, skip=[metrics_file] if metrics_file else [])
        elif kind == "stdout":
            (found, where), path = read_lines(stdout_lines, patterns), stdout_path
        else:
            (found, where), path = read_lines(stderr_lines or [], patterns), stderr_path
        if metric in found:
            if series_out is not None:
                series_out.update(found)
            metrics, steps = {}, {}
            for k, series in found.items():
                metrics[k], steps[k] = reduce_series(series, reduce)
            rec: dict[str, Any] = {"kind": kind, "path": str(path) if path else None, "step": steps[metric],
                                   "reduce": reduce, "n_logged": len(found[metric])}
            series = found[metric]
            idx = next(i for i, (st, v) in enumerate(series) if st == steps[metric] and
                       (v == metrics[metric] or (math.isnan(v) and math.isnan(metrics[metric]))))
            if kind in ("stdout", "stderr"):
                rec["match"] = where[metric][idx]
                if patterns:
                    rec["pattern"] = [rx.pattern for rx in patterns]
            elif kind == "csv":
                rec["match"] = f"row with step {steps[metric]}: {metric} = {metrics[metric]!r}"
            elif kind in ("json", "file", "return"):
                rec["match"] = f"key {metric!r}" + (f" at step {steps[metric]}" if steps[metric] is not None else "")
            else:
                rec["match"] = f"tag {metric!r} at step {steps[metric]}"
            return metrics, rec
        if found:
            names = ", ".join(sorted(found)[:12]) + (" ..." if len(found) > 12 else "")
            seen.append(f"{kind} ({path}): {names}")
    looked = ", ".join(map(str, roots))
    what = "; ".join(seen) if seen else f"no metrics in any of {', '.join(order)} (looked in {looked})"
    near = closest_lines([*stdout_lines, *(stderr_lines or [])], patterns, metric) \
        if {"stdout", "stderr"} & set(order) else []
    shown = (" The printed lines closest to " + ("the pattern" if patterns else f"{metric!r}") + ": "
             + " | ".join(near)) if near else ""
    how = (f"fix `metric_pattern` so it matches one of those lines (it is searched in each line of stdout and "
           f"stderr, with a named group `(?P<{metric}>...)`)" if patterns else
           "set `metric` to one of the names found, `metric_source` to the source that logs it, or "
           f"`metric_pattern` to a regular expression with a named group (?P<{metric}>...) for a printed line")
    raise ConfigError(f"the script logged no metric {metric!r}; found: {what}.{shown}", where="task.metric", fix=how)
