"""What every tracker logs, read from a sweep dir, and the interface each tracker implements."""

from __future__ import annotations

import abc
import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from ablate.record.results import evaluation_rows, to_number
from ablate.record.sweepdir import VERDICT_JSON, SweepDir, load_yaml, read_json
from ablate.trackers.limits import flat_params


@dataclass(frozen=True)
class TrialRecord:
    """One finished trial, as a tracker logs it.

    Attributes
    ----------
    arm, label : str
        Arm name (``control``, ``lr=0.1``) and its label (``0.05 (control)``, ``0.1``).
    seed, attempt : int
    status : str
        ``ok``, ``failed``, ``diverged``, ``timeout``, ``killed``, ``pin_mismatch``.
    metrics : dict
        Metric name -> float (NaN kept).
    config : dict
        The trial's resolved config (nested; :attr:`params` flattens it).
    duration_s : float or None
        Seconds the trial took.
    started_at, finished_at : str or None
        ISO 8601 times from result.json.
    error : str or None
    tags : dict
        String tags: the ablation's (see :class:`AblationRecord`) plus ``ablate.arm``, ``ablate.value``,
        ``ablate.seed``, ``ablate.attempt``, ``ablate.status``.
    """

    arm: str
    label: str
    seed: int
    attempt: int
    status: str
    metrics: dict[str, float]
    config: dict[str, Any]
    duration_s: float | None
    started_at: str | None
    finished_at: str | None
    error: str | None
    tags: dict[str, str]

    @property
    def params(self) -> dict[str, Any]:
        """The resolved config flattened to dotted keys (``task.optim.lr``), one per value: a literal key with a
        dot that meets a nested one (``"opt.lr"`` beside ``opt: {lr}``) is ``task["opt.lr"]``
        (:func:`~ablate.trackers.limits.flat_params`)."""
        return flat_params(self.config)[0]

    @property
    def merged_params(self) -> dict[str, list[str]]:
        """Dotted names two or more config keys flatten to -> the names the others got in :attr:`params`."""
        return flat_params(self.config)[1]


@dataclass(frozen=True)
class AblationRecord:
    """A finished (or partly finished) ablation, as trackers log it.

    Attributes
    ----------
    ablation_id : str
        ``<sweep dir name>-<8 hex of sha256(ablation.yaml)>``: unique per ablation and stable, so
        re-logging a sweep dir finds what was logged before.
    sweep_dir : Path
    created_at : str or None
        When the ablation was planned (ISO 8601).
    variable : dict
        ``name``, ``key``, ``values`` of the variable.
    metric, goal : str
    seeds : list of int
    tags : dict
        ``ablate.ablation_id``, ``ablate.variable``, ``ablate.variable_name``, ``ablate.metric``,
        ``ablate.direction`` (``higher is better`` / ``lower is better``), ``ablate.commit``,
        ``ablate.dirty``, ``ablate.sweep_dir``, and ``ablate.data.<path>`` = DVC hash
        for every pinned data path.
    verdict : dict
        verdict.json (empty when not written yet).
    artifacts : list of Path
        verdict.md, verdict.json, results.csv, per_seed.csv, ablation.yaml and plots (*.png) that exist.
    trials : list of TrialRecord
        Trials with a result, in plan order.
    """

    ablation_id: str
    sweep_dir: Path
    created_at: str | None
    variable: dict[str, Any]
    metric: str
    goal: str
    seeds: list[int]
    tags: dict[str, str]
    verdict: dict[str, Any]
    artifacts: list[Path]
    trials: list[TrialRecord] = field(default_factory=list)

    @property
    def verdict_words(self) -> dict[str, str]:
        """Treatment arm -> verdict word as verdict.md's bottom line says it (``better (indicative)`` for an
        indicative better, :func:`ablate.stats.core.verdict_label`), from verdict.json's ``verdict`` and ``firm``."""
        from ablate.stats.core import verdict_label  # noqa: PLC0415  # lazy: numpy and ablate.stats, off `ablate -m`'s start (issue 42)

        return {str(c.get("arm")): verdict_label(c.get("verdict"), c.get("firm"))
                for c in self.verdict.get("comparisons") or []}

    @property
    def bottom_line(self) -> dict[str, str]:
        """verdict.md's bottom line in plain text (verdict.json's ``bottom_line``): treatment arm -> its sentence;
        empty when the verdict has none."""
        bl = self.verdict.get("bottom_line") or {}
        return {str(t.get("arm")): str(t.get("sentence")) for t in bl.get("treatments") or []}

    @property
    def next_line(self) -> str | None:
        """verdict.md's Next line in plain text (the one command to run next, or why nothing is), or None."""
        line = ((self.verdict.get("bottom_line") or {}).get("next") or {}).get("line")
        return str(line) if line else None

    @property
    def direction(self) -> str:
        """``higher is better`` or ``lower is better``: the metric's direction, as every report says it."""
        return "lower is better" if self.goal == "minimize" else "higher is better"

    def summary_metrics(self) -> dict[str, float]:
        """Numbers from verdict.json worth a metric: per arm ``<arm>.mean|sd|n``, per treatment
        ``<arm>.diff|pvalue|effect_size`` (whatever of those verdict.json holds as numbers). ``diff`` and
        ``effect_size`` are treatment − control in the metric's own sign, as verdict.md prints them (verdict.json's
        are sign-normalised: positive is better); with curve verdicts ``<arm>.curve.<auc|time_to|final>.diff|p_adj`` and
        ``<arm>.curve.better_points|worse_points`` (grid points where the simultaneous band is above / below 0)."""
        sign = -1.0 if self.goal == "minimize" else 1.0
        out: dict[str, float] = {}
        for a in self.verdict.get("arms") or []:
            for k in ("mean", "sd", "n", "n_failed"):
                _put_number(out, f"{a.get('arm')}.{k}", a.get(k))
        for c in self.verdict.get("comparisons") or []:
            for k in ("diff", "pvalue", "pvalue_adjusted", "effect_size"):
                x = c.get(k)
                _put_number(out, f"{c.get('arm')}.{k}", sign * x if k in ("diff", "effect_size") and
                            isinstance(x, int | float) and not isinstance(x, bool) else x)
        for c in (self.verdict.get("curves") or {}).get("comparisons") or []:  # curve verdicts (curve.enabled)
            for name, s in (c.get("summaries") or {}).items():
                for k in ("diff", "p_adj"):
                    _put_number(out, f"{c.get('arm')}.curve.{name}.{k}", s.get(k))
            for word in ("better", "worse"):
                if c.get("regions") is not None:
                    _put_number(out, f"{c.get('arm')}.curve.{word}_points",
                                sum(r["points"] for r in c["regions"] if r["word"] == word))
        return out


def _put_number(out: dict[str, float], key: str, value: Any) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        out[key] = float(value)


def read_ablation(sd: SweepDir | str | Path) -> AblationRecord:
    """Read what trackers log from a sweep dir (ablation.yaml, trial records, verdict.json).

    Raises
    ------
    SweepDirError
        When ``sd`` is not an ablate sweep dir.
    """
    sd = sd if isinstance(sd, SweepDir) else SweepDir.open(sd)
    plan = sd.plan()
    digest = hashlib.sha256(sd.plan_file.read_bytes()).hexdigest()[:8]
    ablation_id = f"{sd.root.name}-{digest}"
    pins = plan.get("pins") or {}
    code = pins.get("code") or {}
    var = plan.get("variable") or {}
    tags = {
        "ablate.ablation_id": ablation_id,
        "ablate.variable": str(var.get("key")),
        "ablate.variable_name": str(var.get("name")),
        "ablate.metric": str(plan.get("metric")),
        "ablate.direction": "lower is better" if plan.get("goal") == "minimize" else "higher is better",
        "ablate.commit": str(code.get("commit")),
        "ablate.dirty": "true" if code.get("dirty") else "false",
        "ablate.sweep_dir": str(sd.root),
    }
    for path, pin in sorted((pins.get("data") or {}).items()):
        tags[f"ablate.data.{path}"] = str(pin.get("hash"))
    verdict_path = sd.root / VERDICT_JSON
    verdict = read_json(verdict_path) if verdict_path.is_file() else {}
    labels = {a["name"]: str(a.get("label", a["name"])) for a in plan["arms"]}
    trials: list[TrialRecord] = []
    tuned = bool(plan.get("tuning"))
    planned = [(arm, int(seed), "tuning" if tuned else None) for arm in plan["arms"] for seed in plan["seeds"]]
    if tuned:  # a tuned ablation's evaluation trials: each arm's chosen setting at the evaluation seeds
        by_name = {a["name"]: a for a in plan["arms"]}
        planned += [(by_name[r["arm"]], int(r["seed"]), "evaluation") for r in evaluation_rows(sd, plan)
                    if r["arm"] in by_name]
    for arm, seed, role in planned:
        rec = sd.read_result(arm["name"], seed)
        if rec is None:
            continue
        tp = sd.trial(arm["name"], seed)
        config = load_yaml(tp.config) if tp.config.is_file() else {}
        status = str(rec.get("status", "failed"))
        attempt = int(rec.get("attempt", 1))
        trials.append(TrialRecord(
            arm=arm["name"], label=labels[arm["name"]], seed=int(seed), attempt=attempt, status=status,
            metrics={str(k): to_number(v) for k, v in (rec.get("metrics") or {}).items()},
            config=dict(config or {}), duration_s=rec.get("duration_s"), started_at=rec.get("started_at"),
            finished_at=rec.get("finished_at"), error=rec.get("error"),
            tags={**tags, "ablate.role": "trial", "ablate.arm": arm["name"], "ablate.value": labels[arm["name"]],
                  "ablate.seed": str(seed), "ablate.attempt": str(attempt), "ablate.status": status,
                  **({"ablate.arm_variable": str(arm["variable"])} if arm.get("variable") else {}),
                  **({"ablate.tuning": role} if role else {})},
        ))
    names = ["verdict.md", "verdict.json", "summary.json", "results.csv", "per_seed.csv", "ablation.yaml",
             "ablation_table.tex", "ablation_table.csv"]
    artifacts = [sd.root / n for n in names if (sd.root / n).is_file()] + sorted(sd.root.glob("*.png"))
    return AblationRecord(ablation_id=ablation_id, sweep_dir=sd.root, created_at=plan.get("created_at"),
                          variable=dict(var),
                          metric=str(plan.get("metric")), goal=str(plan.get("goal", "maximize")),
                          seeds=list(plan["seeds"]), tags=tags, verdict=verdict, artifacts=artifacts, trials=trials)


def iso_to_ms(stamp: str | None) -> int | None:
    """``2025-01-31T12:00:00+0000`` (result.json's format) -> milliseconds since the epoch, or None."""
    if not stamp:
        return None

    try:
        return int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp() * 1000)
    except ValueError:
        return None


class Tracker(abc.ABC):
    """Logs an :class:`AblationRecord` somewhere. Subclasses declare their options (name -> default)
    in ``OPTIONS`` and import their library inside :meth:`log` only."""

    name: ClassVar[str]
    OPTIONS: ClassVar[dict[str, Any]] = {}

    @abc.abstractmethod
    def log(self, ablation: AblationRecord) -> str:
        """Log every trial of ``ablation`` (skipping those logged before) and the verdict; return a
        one-line summary of where they went. Must never write credentials anywhere."""
