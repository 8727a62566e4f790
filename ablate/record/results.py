"""Collect trial records into one tidy table (``results.csv``): one row per trial, failures included."""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ablate.errors import SweepDirError
from ablate.record.names import format_value
from ablate.record.sweepdir import SweepDir, misplaced, parse_record, read_bytes, read_json, write_atomic, write_json

if TYPE_CHECKING:
    import pandas as pd

    from ablate.record.verdict_key import TrialDigest

#: Columns that come before the metric columns, in this order.
BASE_COLUMNS = ["arm", "value", "seed", "status", "attempt", "duration_s", "error"]
#: Columns of results.csv (and of :func:`load`'s frame) that are not metrics: a declared metric may not be
#: named so (refused at plan time); a returned extra one so named becomes ``metric:<name>`` (never overwrites).
RESERVED_COLUMNS = (*BASE_COLUMNS, "variable", "role", "setting")


def metric_column(name: str) -> str:
    """The results column of metric ``name``: itself, or ``metric:<name>`` when it is a reserved column."""
    return f"metric:{name}" if name in RESERVED_COLUMNS else name


def to_number(v: Any) -> float:
    """A metric value from a record as a float: numbers as they are, "nan"/"inf"/"-inf" strings (how JSON
    records hold them) as those floats, anything else NaN (a string such as "0.7" too: trials refuse them)."""
    if isinstance(v, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(v, math.nan)
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def trial_state(sd: SweepDir, arm: str, seed: int, digest: TrialDigest | None = None
                ) -> tuple[str, dict[str, Any] | None]:
    """The state of one trial: (status, result record or None).

    ``status`` is the result's status when ``result.json`` exists (``interrupted`` when it is another trial's
    record, :func:`ablate.record.sweepdir.misplaced`: not finished, so a resume re-runs it); ``running`` when only
    ``manifest.json`` exists (started, not finished; or its process died); ``pending`` otherwise.
    ``digest`` (:class:`ablate.record.verdict_key.TrialDigest`) is fed the result's bytes as read.
    """
    if digest is None:
        rec = sd.read_record(arm, seed)
    else:
        try:
            data: bytes | None = read_bytes(sd.trial_file(arm, seed, "result.json"))
        except FileNotFoundError:
            data = None
        digest.add(f"{arm}/seed={seed}/result.json", data)
        rec = None if data is None else parse_record(data)
    if rec is not None and misplaced(rec, arm, seed):  # another trial's record: this one has not finished
        return "interrupted", None
    if rec is not None:
        return str(rec.get("status", "failed")), rec
    if os.path.exists(sd.trial_file(arm, seed, "manifest.json")):
        return "running", None
    return "pending", None


def misplaced_records(sd: SweepDir, plan: Mapping[str, Any]) -> list[str]:
    """One line per trial dir of the plan whose ``result.json`` is another trial's record (its ``arm`` or
    ``seed`` names another dir: :func:`ablate.record.sweepdir.misplaced`). Such a trial counts as not finished:
    ``ablate resume`` moves the copy to the trial's ``attempts/`` and runs the trial."""
    out = []
    for arm in plan.get("arms") or []:
        for seed in plan.get("seeds") or []:
            try:
                rec = sd.read_record(arm["name"], seed)
            except SweepDirError:
                continue
            if why := misplaced(rec, arm["name"], seed):
                out.append(why)
    return out


def misplaced_warning(sd: SweepDir, lines: list[str]) -> str:
    """The warning for :func:`misplaced_records`' ``lines`` (not empty): what, and that resume re-runs them."""
    n = len(lines)
    return (f"warning: {n} trial record(s) belong to another trial, so those trials count as not finished and "
            f"their records are not used: {'; '.join(lines[:5])}{' ...' if n > 5 else ''}. `ablate resume "
            f"{sd.root}` moves each to its trial's attempts/ and runs the trial")


def without_result(sd: SweepDir, plan: dict[str, Any] | None = None) -> tuple[int, int]:
    """(trials with a result.json, trials without one: pending, running or interrupted) of the plan."""
    plan = plan if plan is not None else sd.plan()
    trials = [(a["name"], seed) for a in plan["arms"] for seed in plan["seeds"]]
    if plan.get("tuning"):  # a tuned ablation's evaluation trials too
        trials += [(r["arm"], r["seed"]) for r in evaluation_rows(sd, plan)]
    done = sum(os.path.exists(sd.trial_file(arm, seed, "result.json")) for arm, seed in trials)
    return done, len(trials) - done


def nothing_finished(sd: SweepDir, plan: dict[str, Any] | None = None) -> str | None:
    """``"no trial has finished yet: N pending"`` when no trial of the plan has a result, else None: every
    command on such a sweep dir says this line (a verdict has no number to compute from)."""
    done, left = without_result(sd, plan)
    return None if done else f"no trial has finished yet: {left} pending"


def collect(sd: SweepDir, plan: dict[str, Any] | None = None, digest: TrialDigest | None = None
            ) -> list[dict[str, Any]]:
    """One row per planned trial (arm x seed), in plan order, with its status and metrics.

    ``value`` is the variable's value in the trial's arm (a number stays a number, so metrics can be
    plotted against it). Trials without a result are included with status ``pending`` or
    ``running`` so nothing is silently missing from the table. ``digest`` is fed every result.json's
    bytes (:class:`ablate.record.verdict_key.TrialDigest`: the verdict's reuse key).
    """
    plan = plan if plan is not None else sd.plan()
    tuned = bool(plan.get("tuning"))
    rows: list[dict[str, Any]] = []
    for arm in plan["arms"]:
        for seed in plan["seeds"]:
            rows.append(_row(sd, plan, arm, arm["name"], seed, digest, "tuning" if tuned else None))
    if tuned:  # then each arm's evaluation trials: its chosen setting's arm at the evaluation seeds
        rows += evaluation_rows(sd, plan, digest)
    return rows


def evaluation_rows(sd: SweepDir, plan: Mapping[str, Any], digest: TrialDigest | None = None
                    ) -> list[dict[str, Any]]:
    """A tuned ablation's evaluation rows (role ``evaluation``): per arm of the ablation, its chosen setting's
    arm (``tuning.json``) at each evaluation seed; before the choice is made, one pending row per arm and seed
    under the arm's own name (no trial of it has run)."""
    tuning = plan["tuning"]
    chosen = (sd.read_tuning() or {}).get("chosen") or {}
    by_name = {a["name"]: a for a in plan["arms"]}
    rows = []
    for base in tuning.get("base_arms") or []:
        name = chosen.get(base, base)
        arm = by_name.get(name) or next((a for a in plan["arms"] if a.get("base") == base), {"name": base})
        for seed in tuning.get("eval_seeds") or []:
            rows.append(_row(sd, plan, arm, name, int(seed), digest, "evaluation"))
    return rows


def _row(sd: SweepDir, plan: Mapping[str, Any], arm: Mapping[str, Any], name: str, seed: int,
         digest: TrialDigest | None, role: str | None) -> dict[str, Any]:
    status, rec = trial_state(sd, name, seed, digest)
    row: dict[str, Any] = {"arm": name, "value": arm.get("value"), "seed": seed, "status": status}
    if plan.get("suite"):  # a suite: which variable the arm ablates (None for the control)
        row["variable"] = arm.get("variable")
    if role is not None:  # a tuned ablation: the trial's role, and the setting it ran (None: not chosen yet)
        row["role"] = role
        row["setting"] = ", ".join(f"{k.rsplit('.', 1)[-1]}={format_value(v)}"
                                   for k, v in (arm.get("setting") or {}).items()) or None
    if rec is not None:
        row["attempt"] = rec.get("attempt", 1)
        row["duration_s"] = rec.get("duration_s")
        row["error"] = rec.get("error")
        for k, v in (rec.get("metrics") or {}).items():
            row[metric_column(k)] = to_number(v)
    return row


def to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows from :func:`collect` as a DataFrame with the base columns first, then metrics (sorted)."""
    import pandas as pd  # noqa: PLC0415  # lazy: pandas off this module's import

    df = pd.DataFrame(rows)
    for c in BASE_COLUMNS:
        if c not in df.columns:
            df[c] = None
    base = _base_columns(rows)
    metrics = sorted(c for c in df.columns if c not in base)
    return df[base + metrics]


def _base_columns(rows: list[dict[str, Any]]) -> list[str]:
    """``BASE_COLUMNS``, with ``variable`` after ``arm`` for a suite's rows."""
    out = list(BASE_COLUMNS)
    if any("variable" in r for r in rows):
        out.insert(1, "variable")
    if any("role" in r for r in rows):  # a tuned ablation: each trial's role and setting, after the arm
        out[1:1] = ["role", "setting"]
    return out


def write_results(sd: SweepDir, plan: dict[str, Any] | None = None, digest: TrialDigest | None = None
                  ) -> list[dict[str, Any]]:
    """Write ``results.csv`` (atomically) and return the rows. Uses the csv module, not pandas, so
    collecting stays fast; :func:`load` gives the DataFrame. ``digest``: see :func:`collect`."""
    rows = collect(sd, plan, digest)
    base = _base_columns(rows)
    metrics = sorted({k for r in rows for k in r} - set(base))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=base + metrics, extrasaction="ignore", lineterminator="\n")
    w.writeheader()

    for r in rows:
        cells = {k: ("" if r.get(k) is None else r.get(k)) for k in base + metrics}
        cells["value"] = format_value(r.get("value"))  # null, [64, 64], true: as YAML writes them
        w.writerow(cells)
    write_atomic(sd.results_file, buf.getvalue())
    write_per_seed(sd, plan if plan is not None else sd.plan(), rows)
    return rows


def write_per_seed(sd: SweepDir, plan: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Write ``per_seed.csv``: one row per seed, a ``seed`` column then one column per arm holding the
    verdict metric of that trial (empty unless the trial is ``ok``). A fixed-shape file that ``dvc plots``
    and spreadsheet users read directly (results.csv is the full tidy table)."""
    metric = plan.get("metric")
    arms = [a["name"] for a in plan["arms"]]
    value = {(r["arm"], r["seed"]): r.get(metric) for r in rows if r.get("status") == "ok"}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["seed", *arms])
    for seed in plan["seeds"]:
        cells = [value.get((arm, seed)) for arm in arms]
        w.writerow([seed, *("" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in cells)])
    write_atomic(sd.per_seed_file, buf.getvalue())


#: The numbers summary.json keeps per arm and, for a treatment, of its comparison with the control
#: (verdict.json keeps everything): what ``dvc metrics show`` / ``diff`` and ``dvc exp show`` print, one
#: column each, so the table stays short (3 for the control, 7 per treatment: 17 for the example).
SUMMARY_ARM = ("n", "mean", "sd")
SUMMARY_COMPARISON = ("diff", "ci_low", "ci_high", "p_adj")


def write_summary(sd: SweepDir) -> dict[str, Any]:
    """Write ``summary.json``: the DVC metrics of the ablation, numbers only (no strings, booleans or lists),
    one flat object of numbers per arm, so ``dvc metrics show`` / ``dvc metrics diff`` / ``dvc exp show``
    print a short table of numbers (columns ``control.mean``, ``lr=0.2.diff`` ...). Returns what was written.

    ``{arm: {n, mean, sd}}`` (:data:`SUMMARY_ARM`), a treatment's object also holding its comparison with
    the control: ``diff``, ``ci_low``, ``ci_high`` (treatment − control in the metric's own sign, as verdict.md
    prints it, and its CI at the level its decision used) and ``p_adj`` (the family-adjusted p)
    (:data:`SUMMARY_COMPARISON`). A field with no finite number (NaN, missing) is left out. The verdict words, the
    levels and the pins are in verdict.json, a plain output (whose ``diff`` and ``ci`` are sign-normalised).
    """
    verdict = read_json(sd.verdict_json)
    sign = -1.0 if verdict.get("goal") == "minimize" else 1.0  # verdict.json's positive-is-better -> the metric's

    def numbers(entry: Mapping[str, Any], keys: Sequence[str]) -> dict[str, float | int]:
        row = {**entry, "p_adj": entry.get("pvalue_adjusted")}
        if isinstance(row.get("diff"), int | float) and not isinstance(row.get("diff"), bool):
            row["diff"] = sign * row["diff"]
        ci = row.get("ci")
        if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
            row["ci_low"], row["ci_high"] = sorted((sign * ci[0], sign * ci[1]))  # an interval: its two ends
        return {k: row[k] for k in keys if isinstance(row.get(k), int | float) and not isinstance(row.get(k), bool)
                and math.isfinite(row[k])}

    out: dict[str, Any] = {str(a.get("arm")): numbers(a, SUMMARY_ARM) for a in verdict.get("arms") or []}
    for c in verdict.get("comparisons") or []:
        out.setdefault(str(c.get("arm")), {}).update(numbers(c, SUMMARY_COMPARISON))
    write_json(sd.summary_file, out)
    return out


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
        Columns ``arm`` (``control`` or e.g. ``lr=0.1``), for a suite ``variable`` (the arm's variable,
        None for the shared control), ``value`` (the variable's value as a label;
        the control's reads ``0.05 (control)``), ``seed``, ``status`` (``ok``, ``failed``, ``diverged``,
        ``timeout``, ``killed``, ``pin_mismatch``, or ``pending``/``running`` before the result), ``attempt``,
        ``duration_s`` (seconds the trial took), ``error``, then one float column per metric, NaN
        where a trial has no value (an extra metric named like a column above is ``metric:<name>``).
        Plan order: arms, then seeds.

    Raises
    ------
    SweepDirError
        When ``path`` is not an ablate sweep dir.
    """
    if isinstance(path, Mapping):
        path = path["sweep_dir"]
    sd = SweepDir.open(path)
    return to_frame(collect(sd))


def read_manifests(sd: SweepDir, plan: dict[str, Any], digest: TrialDigest | None = None
                   ) -> dict[tuple[str, int], dict[str, Any]]:
    """Every trial's manifest.json that exists, keyed by (arm, seed); ``digest``: see :func:`iter_manifests`."""
    return dict(iter_manifests(sd, plan, digest))


def iter_manifests(sd: SweepDir, plan: dict[str, Any], digest: TrialDigest | None = None
                   ) -> Iterator[tuple[tuple[str, int], dict[str, Any]]]:
    """Each trial's manifest.json that exists, as ``((arm, seed), manifest)``, read one at a time in
    plan order (the confound check streams them: 10,000 manifests are never held at once). ``digest`` is
    fed every manifest's bytes as read (:class:`ablate.record.verdict_key.TrialDigest`)."""
    for arm in plan["arms"]:
        for seed in plan["seeds"]:
            p = sd.trial_file(arm["name"], seed, "manifest.json")
            try:
                data = read_bytes(p)
            except FileNotFoundError:
                if digest is not None:
                    digest.add(f"{arm['name']}/seed={seed}/manifest.json", None)
                continue
            if digest is not None:
                digest.add(f"{arm['name']}/seed={seed}/manifest.json", data)
            manifest = parse_record(data)
            if manifest is None:
                continue
            yield (arm["name"], seed), manifest
