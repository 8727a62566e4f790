"""Collect trial records into one tidy table (``results.csv``): one row per trial, failures included."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ablate.sweepdir import SweepDir, load_yaml, read_json, write_atomic

if TYPE_CHECKING:
    import pandas as pd

#: Columns that come before the metric columns, in this order.
BASE_COLUMNS = ["arm", "value", "seed", "status", "attempt", "duration_s", "error"]


def _num(v: Any) -> float:
    if isinstance(v, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(v, math.nan)
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def trial_state(sd: SweepDir, arm: str, seed: int) -> tuple[str, dict[str, Any] | None]:
    """The state of one trial: (status, result record or None).

    ``status`` is the result's status when ``result.json`` exists; ``running`` when only
    ``manifest.json`` exists (started, not finished; or its process died); ``pending`` otherwise.
    """
    rec = sd.read_result(arm, seed)
    if rec is not None:
        return str(rec.get("status", "failed")), rec
    if sd.trial(arm, seed).manifest.exists():
        return "running", None
    return "pending", None


def collect(sd: SweepDir, plan: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per planned trial (arm x seed), in plan order, with its status and metrics.

    Trials without a result are included with status ``pending`` or ``running`` so nothing is
    silently missing from the table.
    """
    plan = plan if plan is not None else load_yaml(sd.plan_file)
    labels = {a["name"]: a.get("label", a["name"]) for a in plan["arms"]}
    rows: list[dict[str, Any]] = []
    for arm in plan["arms"]:
        for seed in plan["seeds"]:
            status, rec = trial_state(sd, arm["name"], seed)
            row: dict[str, Any] = {"arm": arm["name"], "value": labels[arm["name"]], "seed": seed,
                                   "status": status}
            if rec is not None:
                row["attempt"] = rec.get("attempt", 1)
                row["duration_s"] = rec.get("duration_s")
                row["error"] = rec.get("error")
                for k, v in (rec.get("metrics") or {}).items():
                    row[k] = _num(v)
            rows.append(row)
    return rows


def to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows from :func:`collect` as a DataFrame with the base columns first, then metrics (sorted)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    for c in BASE_COLUMNS:
        if c not in df.columns:
            df[c] = None
    metrics = sorted(c for c in df.columns if c not in BASE_COLUMNS)
    return df[BASE_COLUMNS + metrics]


def write_results(sd: SweepDir, plan: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Write ``results.csv`` (atomically) and return the rows. Uses the csv module, not pandas, so
    collecting stays fast; :func:`load` gives the DataFrame."""
    import csv
    import io

    rows = collect(sd, plan)
    metrics = sorted({k for r in rows for k in r} - set(BASE_COLUMNS))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=BASE_COLUMNS + metrics, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in BASE_COLUMNS + metrics})
    write_atomic(sd.results_file, buf.getvalue())
    return rows


def load(path: str | os.PathLike[str] | Mapping[str, Any]) -> pd.DataFrame:
    """Load a sweep dir as a tidy DataFrame: one row per trial (arm, value, seed, status, attempt,
    duration_s, error, then one column per metric). Reads the trial records, not results.csv, so it
    is current even while the ablation runs.

    Parameters
    ----------
    path : path-like or Verdict
        The sweep dir, or the verdict :func:`ablate.run` returned (its ``sweep_dir`` is used).

    Returns
    -------
    pandas.DataFrame
        Columns ``arm`` (``control`` or e.g. ``lr=0.1``), ``value`` (the variable's value as a label;
        the control's reads ``0.05 (control)``), ``seed``, ``status`` (``ok``, ``failed``, ``diverged``,
        ``timeout``, ``killed``, ``pin_mismatch``, or ``pending``/``running`` before the result), ``attempt``,
        ``duration_s`` (seconds the trial took), ``error``, then one float column per metric, NaN
        where a trial has no value. Plan order: arms, then seeds.

    Raises
    ------
    SweepDirError
        When ``path`` is not an ablate sweep dir.
    """
    if isinstance(path, Mapping):
        path = path["sweep_dir"]
    sd = SweepDir.open(path)
    return to_frame(collect(sd))


def read_manifests(sd: SweepDir, plan: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """Every trial's manifest.json that exists, keyed by (arm, seed)."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for arm in plan["arms"]:
        for seed in plan["seeds"]:
            p = sd.trial(arm["name"], seed).manifest
            try:
                out[(arm["name"], seed)] = read_json(p)
            except (FileNotFoundError, json.JSONDecodeError):
                continue
    return out
