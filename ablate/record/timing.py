"""Metrics that measure the machine, not what was learned: shown, never compared for reproducibility or seeds.

Known by name (the field's conventions): a time-unit suffix (``train_s``, ``step_time``, ``epoch_ms``), a
rate (``samples_per_s``, ``eval_samples_per_second``), a runtime (``eval_runtime``, Hugging Face's Trainer),
``time`` or ``duration``. A task names more with ``timing_metrics: [...]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Names of timing metrics (matched against the whole name, case-insensitive).
TIMING_METRIC = re.compile(
    r"(?:^|.*[_./])(?:time|duration|runtime|elapsed|wall)$"
    r"|.*(?:_s|_ms|_us|_ns|_sec|_secs|_seconds|_min|_per_s|_per_sec|_per_second)$"
    r"|.*per_second$",
    re.IGNORECASE,
)


def is_timing_metric(name: str, extra: Iterable[str] = ()) -> bool:
    """True when ``name`` is a timing metric: known by name (:data:`TIMING_METRIC`) or listed in ``extra``.

    Parameters
    ----------
    name : str
        A metric name as the task returned it.
    extra : iterable of str
        The task's own ``timing_metrics``.
    """
    return name in set(extra) or TIMING_METRIC.fullmatch(name) is not None


def task_timing_metrics(plan: object) -> list[str]:
    """The ``timing_metrics`` a plan's control task declares (empty when none)."""
    try:
        task = plan["arms"][0]["config"].get("task") or {}  # type: ignore[index]
    except (KeyError, IndexError, TypeError, AttributeError):
        return []
    names = task.get("timing_metrics") if isinstance(task, dict) else None
    return [str(n) for n in names] if isinstance(names, list) else []
