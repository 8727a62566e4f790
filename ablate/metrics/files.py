"""One reader per file source (the app's return value, CSV, TensorBoard, JSON/JSONL): each returns
``{metric: series}`` and the file it read."""

from __future__ import annotations

import csv
import json
import math
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


#: Cells read as missing (pandas' default ``na_values``, as Lightning's and pandas' CSV writers leave them).
_MISSING = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                      "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
_BOOLS = {"true": 1.0, "false": 0.0}


def _cell(text: str) -> float | None:
    """A CSV cell as a number, None when missing; raises ValueError for text."""
    text = text.strip()
    if text in _MISSING:
        return None
    if text.lower() in _BOOLS:
        return _BOOLS[text.lower()]
    return float(text)


def _columns(path: Path) -> tuple[list[str], list[list[str]]] | None:
    """The header (duplicate names numbered as pandas does: ``a``, ``a.1``) and the rows of one CSV file; None
    when unreadable (no header, a row longer than the header, not UTF-8)."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if not rows or not rows[0]:
        return None
    header: list[str] = []
    for name in rows[0]:
        n = 0
        while (f"{name}.{n}" if n else name) in header:
            n += 1
        header.append(f"{name}.{n}" if n else name)
    body = [r for r in rows[1:] if r]
    if any(len(r) > len(header) for r in body):
        return None
    return header, [r + [""] * (len(header) - len(r)) for r in body]


def _steps(header: list[str], rows: list[list[str]]) -> list[int]:
    """Each row's step: the ``step`` column when every cell of it is a whole number, else the row number (a step
    cell that is empty or text cannot place its row, so none is trusted)."""
    if "step" in header:
        col = header.index("step")
        try:
            steps = [float(r[col]) for r in rows]
        except ValueError:
            steps = []
        if steps and all(s.is_integer() for s in steps):
            return [int(s) for s in steps]
    return list(range(1, len(rows) + 1))


def read_csv_file(path: Path) -> dict[str, Series]:
    """One CSV file with a header row as metric series ({} when unreadable), read with the stdlib ``csv``
    module (no pandas: it costs about 1 s per trial, and pyarrow's thread would keep a warm parent from
    learning imports). A column is a metric when every cell is a number or missing (blank, ``NA``, ``nan``:
    skipped, as pandas reads them); ``step`` and ``epoch`` are not metrics."""
    table = _columns(path)
    if table is None:
        return {}
    header, rows = table
    steps = _steps(header, rows)
    out: dict[str, Series] = {}
    for col, name in enumerate(header):
        if name in ("step", "epoch"):
            continue
        try:
            cells = [_cell(r[col]) for r in rows]
        except ValueError:  # a text column: not a metric
            continue
        series = [(s, v) for s, v in zip(steps, cells, strict=True) if v is not None and not math.isnan(v)]
        if series:
            out[name] = series
    return out


def read_tensorboard(run_dir: Path | list[Path]) -> tuple[dict[str, Series], Path | None]:
    """Scalars of the newest TensorBoard event file's directory under ``run_dir`` (TensorBoard's reader)."""
    files = _files(run_dir, "events.out.tfevents.*")
    if not files:
        return {}, None
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: PLC0415  # lazy: tensorboard is an optional extra
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



