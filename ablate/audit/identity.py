"""Runs as identities: one run logged at once to several trackers (a Hydra dir, an MLflow store, a W&B dir) is
one run, counted once; a record given twice is read once; and a run that did not finish is left out, never
counted with its last value.

The same run through two records: the same seed, the same value of every config key both record (numbers as
numbers), the same commit where both recorded one, and the same logged values (the last value of every metric
both logged, and every value where both logged as many; to 1e-6, as TensorBoard keeps float32); or one record
naming the other (an MLflow run id used as the W&B run name). Runs of one record are never merged: two runs of
one store at one seed are genuine duplicates, flagged by the audit (:func:`duplicates`), never merged or renumbered.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from ablate.audit.runs import Run

#: Which record of a merged run speaks for it, most complete first (W&B records the environment too).
PREFERRED = ("ablate", "wandb", "mlflow", "dvc", "tensorboard", "hydra")
#: Logged series that are counters, not metrics (never proposed as the metric, never a run's fingerprint).
COUNTERS = ("epoch", "step", "global_step", "trainer/global_step", "iteration")


def seed_of(run: Run, seed_keys: Collection[str]) -> Any:
    """The run's seed: the value of the first of ``seed_keys`` its config has (None when it has none)."""
    return next((run.config[k] for k in seed_keys if k in run.config), None)


def _close(x: float, y: float) -> bool:
    """Equal as logged: to 1e-6 relative (TensorBoard keeps float32, the others float64)."""
    return x == y or (math.isfinite(x) and math.isfinite(y) and abs(x - y) <= 1e-6 * max(abs(x), abs(y), 1e-30))


def _f32(x: float) -> float:
    """``x`` as float32 keeps it: equal for a value and its float32 copy (a bucket for the same value)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return x


def _norm(v: Any) -> str:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return repr(float(v))
    return json.dumps(v, sort_keys=True, default=str)


def _same_values(a: Run, b: Run) -> bool:
    shared = [m for m in set(a.metrics) & set(b.metrics) if m not in COUNTERS and a.metrics[m] and b.metrics[m]]
    if not shared:
        return False
    for m in shared:
        xa, xb = [v for _, v in a.metrics[m]], [v for _, v in b.metrics[m]]
        if not _close(xa[-1], xb[-1]) or (len(xa) == len(xb) and not all(map(_close, xa, xb))):
            return False
    return True


def _same_config(a: Run, b: Run) -> bool:
    shared = set(a.config) & set(b.config)
    return bool(shared) and all(_norm(a.config[k]) == _norm(b.config[k]) for k in shared)


def same_run(a: Run, b: Run, seed_keys: Collection[str]) -> bool:
    """Whether ``a`` and ``b`` (read from two records) are one run (see the module's docstring)."""
    sa, sb = seed_of(a, seed_keys), seed_of(b, seed_keys)
    if sa is not None and sb is not None and sa != sb:
        return False
    if a.id in b.names or b.id in a.names:  # one names the other; its config must agree all the same
        return _same_config(a, b)
    recorded = [r.commit for r in (a, b) if r.commit and not r.commit_how.startswith("inferred")]
    if len(recorded) == 2 and not (recorded[0].startswith(recorded[1]) or recorded[1].startswith(recorded[0])):
        return False
    return sa == sb and _same_config(a, b) and _same_values(a, b)


def _combine(group: list[Run]) -> Run:
    """One run from the records of it: the preferred record's fields, completed by the others'."""
    group = sorted(group, key=lambda r: PREFERRED.index(r.source) if r.source in PREFERRED else len(PREFERRED))
    rep = group[0]
    recorded = next((r for r in group if r.commit and not r.commit_how.startswith("inferred")), None)
    anyc = recorded or next((r for r in group if r.commit), None)
    context: dict[str, Any] = {}
    for r in reversed(group):
        for k, v in r.context.items():
            context[k] = {**context[k], **v} if isinstance(v, dict) and isinstance(context.get(k), dict) else v
    return replace(rep, config={k: v for r in reversed(group) for k, v in r.config.items()},
                   metrics={k: v for r in reversed(group) for k, v in r.metrics.items()},
                   commit=anyc.commit if anyc else None, commit_how=anyc.commit_how if anyc else "",
                   context=context, started=min((r.started for r in group if r.started), default=None),
                   repo=next((r.repo for r in group if r.repo), None),
                   interpolations={k: v for r in group for k, v in r.interpolations.items()},
                   status=next((r.status for r in group if r.status), None),
                   names=set().union(*(r.names | {r.id} for r in group)),
                   tags={k: v for r in reversed(group) for k, v in r.tags.items()},
                   experiment=next((r.experiment for r in group if r.experiment), None),
                   records=[f"{r.source}:{r.id}" for r in group])


def _key(r: Run) -> tuple[str, str]:
    return r.source, r.id


def _candidates(items: Sequence[Run], seed_keys: Collection[str]) -> set[tuple[int, int]]:
    """Pairs of runs that may be one run: the same seed and last value of a metric, or one naming the other."""
    by_last: dict[tuple[str, float, str], list[int]] = {}
    for i, r in enumerate(items):
        seed = json.dumps(seed_of(r, seed_keys), default=str)
        for m, s in r.metrics.items():
            if m not in COUNTERS and s:
                by_last.setdefault((m, _f32(s[-1][1]), seed), []).append(i)
    pairs = {(i, j) for idx in by_last.values() if len(idx) > 1 for i in idx for j in idx if i < j}
    by_id: dict[str, list[int]] = {}
    for i, r in enumerate(items):
        by_id.setdefault(r.id, []).append(i)
    for i, r in enumerate(items):
        for n in r.names:
            pairs |= {(min(i, j), max(i, j)) for j in by_id.get(n, ()) if j != i}
    return pairs


def merge(runs: Sequence[Run], seed_keys: Collection[str]) -> tuple[list[Run], dict[str, Any]]:
    """The runs with each run seen through several records combined into one, and what was merged.

    Returns
    -------
    list of Run
        One per run; a merged run lists its records in ``records``.
    dict
        ``runs`` (runs seen through several records), ``records`` (the records they were seen through),
        ``sources`` (their kinds), ``repeated`` (records given more than once, read once), ``message``.
    """
    unique: dict[tuple[str, str], Run] = {}
    repeated = 0
    for r in runs:
        if _key(r) in unique:
            repeated += 1
            continue
        unique[_key(r)] = r
    items = list(unique.values())
    parent = list(range(len(items)))
    origins = [{r.origin} for r in items]

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in sorted(_candidates(items, seed_keys)):
        ri, rj = root(i), root(j)
        if ri == rj or origins[ri] & origins[rj] or not same_run(items[i], items[j], seed_keys):
            continue
        parent[rj] = ri
        origins[ri] |= origins[rj]
    groups: dict[int, list[Run]] = {}
    for i, r in enumerate(items):
        groups.setdefault(root(i), []).append(r)
    out = [g[0] if len(g) == 1 else _combine(g) for g in groups.values()]
    merged = [g for g in groups.values() if len(g) > 1]
    n_rec = sum(len(g) for g in merged)
    kinds = sorted({r.source for g in merged for r in g})
    counts = sorted({len(g) for g in merged})
    each = (f"each seen through {counts[0]} records" if len(counts) == 1 else
            f"seen through {counts[0]} to {counts[-1]} records" if counts else "")
    message = (f"{len(merged)} runs were {each} ({', '.join(kinds)}): counted once (same seed, config, commit and "
               "logged values)" if merged else "")
    if repeated:
        message += ("; " if message else "") + f"{repeated} records given more than once were read once"
    return out, {"runs": len(merged), "records": n_rec, "sources": kinds, "repeated": repeated, "message": message}


def duplicates(runs: Sequence[Run], seed_keys: Collection[str], arm: str) -> list[str]:
    """Seeds that more than one run of one arm ran (genuine duplicates: other runs, not other records of one),
    one line each."""
    by: dict[str, list[Run]] = {}
    for r in runs:
        s = seed_of(r, seed_keys)
        if s is not None:
            by.setdefault(json.dumps(s, default=str), []).append(r)
    return [f"arm {arm} ran seed {s} {len(rs)} times ({', '.join(r.id for r in rs[:4])}): each counted as a "
            "replicate of its own, labelled " + ", ".join(f"{s}#{i + 1}" if i else s for i in range(len(rs)))
            for s, rs in by.items() if len(rs) > 1]


def unfinished(runs: Sequence[Run], metrics: dict[int, str], arm: str) -> tuple[list[Run], list[str], str]:
    """The runs of one arm that finished, the lines naming those left out, and a note when lengths vary.

    A run counts as finished when it logged as many steps of its metric as the most of its arm's runs; shorter
    ones are left out, whatever status their record gives (MLflow marks a run FINISHED when its process exits,
    a crash included; Hydra and TensorBoard record none), unless fewer than half of the arm reach the most
    (lengths that vary by design, as with early stopping: then none is left out, and that is said). ``metrics``
    maps ``id(run)`` to the metric read from it."""
    steps = {id(r): len(r.metrics.get(metrics[id(r)]) or []) for r in runs}
    top = max(steps.values(), default=0)
    short = [r for r in runs if steps[id(r)] < top]
    if not short:
        return list(runs), [], ""
    if sum(1 for r in runs if steps[id(r)] == top) * 2 < len(runs):
        lo = min(steps.values())
        return list(runs), [], (f"arm {arm}'s runs logged {lo} to {top} steps of their metric: lengths vary, so none "
                                "is taken as unfinished")
    lines = [f"{r.id}: logged {steps[id(r)]} of {top} steps of {metrics[id(r)]} (its arm's others logged {top}; "
             + ("its record says finished, as MLflow says of any run whose process exited" if r.status else
                f"{'Hydra' if r.source == 'hydra' else r.source} records no job status") + "): unfinished"
             for r in short]
    gone = {id(r) for r in short}
    return [r for r in runs if id(r) not in gone], lines, ""
