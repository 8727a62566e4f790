"""One reader per file source (the app's return value, CSV, TensorBoard, JSON/JSONL): each returns
``{metric: series}`` and the file it read."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.metrics.series import Series, flat_numbers, number

#: The file the Hydra callback writes the app's return value to, in the app's output dir.
RETURN_FILE = "ablate_return.json"
#: The file the Hydra callback writes what the app saw (its resolved config, Hydra's state) to.
SEEN_FILE = "ablate_seen.json"


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
        return {k: [(None, v)] for k, v in flat_numbers(value).items()}, path
    n = number(value)
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
                for k, v in flat_numbers(row).items():
                    if k != "step":
                        out.setdefault(k, []).append((step, v))
        else:
            obj = json.loads(path.read_text())
            out = {k: [(None, v)] for k, v in flat_numbers(obj).items()} if isinstance(obj, Mapping) else {}
    except (ValueError, OSError):
        return {}
    return out



