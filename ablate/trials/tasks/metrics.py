"""Read a trial's metrics from what its task already produces, with no shim in it (every form: ``app``,
``command``, and an ``fn`` task whose return value lacks the metric, :func:`ablate.trials.tasks.fn.metrics_of`).

Sources, looked for in this order unless ``task.metric_source`` names one:

1. ``return``: the value the ``@hydra.main`` function returned (a mapping, or a scalar taken as
   ``task.metric``), saved by :mod:`ablate.trials.tasks.hydra_callback` (an ``fn`` task's return value is
   this source too, looked at first by the ``fn`` form itself);
2. ``file``: the JSON object a command task wrote to ``$ABLATE_METRICS_FILE`` (or its ``metrics_file``);
3. ``csv``: a ``metrics.csv`` with a header row (Lightning's ``CSVLogger``, or any other: one column per
   metric, a ``step`` column when there is one);
4. ``tensorboard``: TensorBoard event files, read with TensorBoard's own ``EventAccumulator``
   (the ``tensorboard`` package: ``pip install 'hydra-ablate[tensorboard]'``);
5. ``json``: ``*.json`` (an object of numbers) or ``*.jsonl`` (one object per line) files: the newest
   that holds the metric (``eval_results.json`` of a Trainer-style script);
6. ``stdout``, ``stderr``: lines the script printed. With ``task.metric_pattern`` (a regular expression,
   or a list of them, with named groups: ``val loss (?P<val_loss>[0-9.eE+-]+)``; a group named ``step``
   gives the step), each group is a metric; without, ``key: value`` or ``key=value`` lines (as Guild AI
   captures output scalars). With a pattern, these two come first.

Files are looked for under the trial's run dir (``${hydra:runtime.output_dir}``), then among the
files the script wrote into its working dir (``<trial dir>/work``: a ``hydra.job.chdir=false`` app's
``metrics.json``; the mirror's links to the code snapshot are never read).

A metric logged at many steps is reduced by ``task.reduce``: ``last`` (default), ``min`` or ``max``.
The source, file, step, rule and the matched line (or CSV row, or JSON key) are returned with the
metrics and recorded in ``result.json``. When nothing matches, the error shows the lines that came
closest to the pattern.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.trials.tasks.hydra_callback import SEEN_FILE

SOURCES = ("return", "file", "csv", "tensorboard", "json", "stdout", "stderr")
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


def read_csv(run_dir: Path | list[Path], metric: str | None = None) -> tuple[dict[str, Series], Path | None]:
    """The newest ``*.csv`` with a header under ``run_dir`` holding ``metric`` (Lightning's ``metrics.csv``
    first among equals): every numeric column but ``step``/``epoch``; the step is the ``step`` column, else
    the row number."""
    files = _files(run_dir, "*.csv")
    files.sort(key=lambda p: p.name == "metrics.csv")  # stable: metrics.csv files last, so tried first
    return _newest_holding(files, read_csv_file, metric)


def _newest_holding(files: list[Path], read: Any, metric: str | None) -> tuple[dict[str, Series], Path | None]:
    """The newest of ``files`` (oldest first) whose series hold ``metric``, else the newest with any series."""
    first: tuple[dict[str, Series], Path | None] = ({}, None)
    for path in reversed(files):
        found = read(path)
        if found and (metric is None or metric in found):
            return found, path
        if found and first[1] is None:
            first = found, path
    return first


def read_csv_file(path: Path) -> dict[str, Series]:
    """One CSV file with a header row as metric series ({} when unreadable)."""
    import pandas as pd  # lazy: pandas is heavy

    try:
        df = pd.read_csv(path)
    except (ValueError, OSError, pd.errors.ParserError):
        return {}
    steps = df["step"] if "step" in df.columns else pd.Series(range(1, len(df) + 1))
    out: dict[str, Series] = {}
    for col in df.columns:
        if col in ("step", "epoch") or not pd.api.types.is_numeric_dtype(df[col]):
            continue
        rows = df[col].notna()
        if rows.any():
            out[str(col)] = [(int(s), float(v)) for s, v in zip(steps[rows], df[col][rows], strict=True)]
    return out


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


def read_json(run_dir: Path | list[Path], metric: str | None = None, skip: Sequence[Path] = ()
              ) -> tuple[dict[str, Series], Path | None]:
    """The newest ``*.jsonl`` (one object per line; ``step`` read when present) or ``*.json`` object holding
    ``metric`` (the newest with any number when none does, or when ``metric`` is None)."""
    files = [p for p in _files(run_dir, "*.json*") if p.suffix in (".json", ".jsonl")
             and p.name not in (RETURN_FILE, SEEN_FILE)
             and p not in skip]
    return _newest_holding(files, read_json_file, metric)


def read_json_file(path: Path) -> dict[str, Series]:
    """One ``*.json`` object or ``*.jsonl`` file as metric series ({} when unreadable or holding no number)."""
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
        return {}
    return out



def compile_patterns(patterns: Any) -> list[re.Pattern[str]]:
    """``task.metric_pattern`` (a regular expression, or a list of them) compiled; each needs a named group.

    Raises
    ------
    ConfigError
        Not a string or list of strings, a pattern that does not compile, or one without a named group.
    """
    if patterns is None:
        return []
    items = [patterns] if isinstance(patterns, str) else patterns
    if not isinstance(items, list | tuple) or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"must be a regular expression or a list of them, got {patterns!r}",
                          where="task.metric_pattern",
                          fix=r"e.g. `metric_pattern: 'val loss (?P<val_loss>[0-9.eE+-]+)'`")
    out = []
    for x in items:
        try:
            rx = re.compile(x)
        except re.error as exc:
            raise ConfigError(f"{x!r} is not a regular expression ({exc})", where="task.metric_pattern",
                              fix="quote it in single quotes in YAML, and escape regex characters with \\") from None
        if not set(rx.groupindex) - {"step"}:
            raise ConfigError(f"{x!r} has no named group, so it names no metric", where="task.metric_pattern",
                              fix=r"name the number's group after the metric: `(?P<val_loss>[0-9.eE+-]+)`")
        out.append(rx)
    return out


def read_lines(lines: Iterable[str], patterns: Sequence[re.Pattern[str]] = ()
               ) -> tuple[dict[str, Series], dict[str, list[str]]]:
    """Metrics in printed lines, and the line each value came from.

    With ``patterns``, every named group of a pattern found in a line is a metric (a group ``step`` gives
    the step, else the line number from 1); without, ``key: value`` / ``key=value`` lines (one number per
    line). A group whose text is no number is skipped.
    """
    out: dict[str, Series] = {}
    where: dict[str, list[str]] = {}
    for i, line in enumerate(lines, 1):
        text = line.rstrip("\n")
        if not patterns:
            m = _LINE.match(text)
            if m:
                out.setdefault(m.group(1), []).append((i, float(m.group(2))))
                where.setdefault(m.group(1), []).append(f"line {i}: {text.strip()[:200]}")
            continue
        for rx in patterns:
            m = rx.search(text)
            if not m:
                continue
            groups = m.groupdict()
            step: int | None = i
            if groups.get("step") is not None:
                try:
                    step = int(float(groups["step"]))
                except ValueError:
                    step = i
            for name, val in groups.items():
                if name == "step" or val is None:
                    continue
                try:
                    num = float(val)
                except ValueError:
                    continue
                _whole_number(m, name, text, i)
                out.setdefault(name, []).append((step, num))
                where.setdefault(name, []).append(f"line {i}: {text.strip()[:200]}")
    return out, where


#: A number as Python's ``float`` reads one (sign, digits, a point, an exponent): what a metric's group must take whole.
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _whole_number(m: re.Match[str], name: str, text: str, lineno: int) -> None:
    """Refuse a pattern whose group ``name`` took only the start of a number in the line (``[0-9.]+`` on
    ``1.1e-06`` takes ``1.1``; ``\\d+`` on ``0.97`` takes ``0``): the value recorded would be wrong, silently.

    Raises
    ------
    ConfigError
        Naming the group, what it took, the whole number and the line, with a pattern that takes it.
    """
    whole = _NUMBER.match(text, m.start(name))
    if whole is not None and whole.end() > m.end(name):
        raise ConfigError(f"the group {name!r} took {m.group(name)!r} of the number {whole.group()!r} in printed "
                          f"line {lineno} ({text.strip()[:200]!r}): the metric would be recorded wrong",
                          where="task.metric_pattern",
                          fix=f"capture the whole number, e.g. `(?P<{name}>[-+0-9.eE]+)` or "
                          f"`(?P<{name}>[-+]?\\d*\\.?\\d+(?:[eE][-+]?\\d+)?)`")


def read_stdout(lines: Iterable[str]) -> dict[str, Series]:
    """``key: value`` / ``key=value`` lines (one number per line); the step is the line number (from 1)."""
    return read_lines(lines)[0]


def closest_lines(lines: Sequence[str], patterns: Sequence[re.Pattern[str]], metric: str, n: int = 3,
                  window: int = 400) -> list[str]:
    """The printed lines (of the last ``window``) that came closest to ``patterns`` (or to ``metric``), in log
    order, numbered from 1: what to compare the pattern with when it matched nothing."""
    start = max(0, len(lines) - window)
    recent = [(start + i + 1, ln.strip()) for i, ln in enumerate(lines[start:]) if ln.strip()]
    if not recent:
        return []
    literals = [re.sub(r"\(\?P<\w+>(?:[^()]|\([^()]*\))*\)|\\[dDsSwW]|[\\^$.*+?()\[\]{}|]", " ", rx.pattern)
                for rx in patterns] or [metric]

    def score(text: str) -> float:  # the share of the pattern's literal text found, in order, in the line
        best = 0.0
        for lit in literals:
            lit = " ".join(lit.split())
            if lit:
                sm = difflib.SequenceMatcher(None, lit, text[:300], autojunk=False)
                best = max(best, sum(b.size for b in sm.get_matching_blocks()) / len(lit))
        return best

    best = sorted(recent, key=lambda t: (-score(t[1]), -t[0]))[:n]  # the closest; among equals, the latest
    return [f"line {i}: {text[:200]}" for i, text in sorted(best)]


def collect(run_dir: Path, stdout_lines: list[str], metric: str, *, source: str = "auto",
            reduce: str = "last", stdout_path: Path | None = None, stderr_lines: list[str] | None = None,
            stderr_path: Path | None = None, patterns: Sequence[re.Pattern[str]] = (),
            metrics_file: Path | None = None, work_dir: Path | None = None) -> tuple[dict[str, float], dict[str, Any]]:
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
