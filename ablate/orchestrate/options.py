"""ablate's own settings, read from the composed config and validated up front (before any launch)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ablate.errors import ConfigError
from ablate.judge.curve_options import parse_curve
from ablate.judge.options import (
    DEFAULTS,
    MULTIPLICITY,
    PAIRING,
    SEQUENTIAL,
    parse_effect,
    parse_family,
    parse_futility,
    parse_margin,
)
from ablate.plan.arms import MAX_SEEDS, parse_seeds, too_many_seeds
from ablate.plan.checks import boolean, choice, number
from ablate.record.results import RESERVED_COLUMNS
from ablate.trackers import check_tracker
from ablate.trials.seeding import check_mode, check_variable_values
from ablate.trials.tasks.contract import FORM_KEYS

ON_FAILURE = ("report", "retry", "abort")
GOALS = ("maximize", "minimize")




@dataclass
class Options:
    """Validated ablate settings. See ``ablate/conf/ablate_base.yaml`` for each one's meaning."""

    seeds: list[int]
    metric: str
    goal: str = "maximize"
    determinism: str = "seeded"
    dry_run: bool = False
    allow_dirty: bool = False
    wait: bool = True
    on_failure: str = "report"
    max_retries: int = 1
    timeout_min: float | None = None
    progress: str = "auto"
    plots: bool = True  # False: the verdict after the run draws no PNGs (`ablate verdict DIR` draws them later)
    sweep_dir_mode: int = 0o700
    threads: int = 1
    alpha: float = DEFAULTS.alpha
    margin: float | str | None = DEFAULTS.margin
    pairing: str = DEFAULTS.pairing
    multiplicity: str = DEFAULTS.multiplicity
    sequential: str = DEFAULTS.sequential
    looks: list[int] = field(default_factory=lambda: list(DEFAULTS.looks))
    launcher: dict[str, Any] = field(default_factory=lambda: {"name": "local"})
    tracker: dict[str, Any] | None = None
    family: str = DEFAULTS.family
    metrics: list[str] | None = None
    curve: dict[str, Any] | None = None  # curve verdicts (ablate.judge.curve_options); None: off
    effect: float | None = None  # planned effect (SDs of one seed's metric): futility stops, sequential=group only
    futility: float = DEFAULTS.futility  # γ of the futility stops (conditional power under ``effect``)

    def record(self) -> dict[str, Any]:
        """The options as written to ``ablation.yaml`` (seeds and metric are recorded separately)."""
        d = asdict(self)
        d.pop("seeds")
        d.pop("metric")
        d.pop("goal")
        d["sweep_dir_mode"] = oct(self.sweep_dir_mode)
        if d["curve"] is None:  # off: the plan says nothing of curves
            d.pop("curve")
        return d


def parse_options(cfg: Mapping[str, Any]) -> Options:
    """Read and validate ablate's settings from a composed config (a plain container).

    Raises
    ------
    ConfigError
        Naming the first invalid setting and how to fix it.
    """
    task = cfg.get("task") or {}
    if not isinstance(task, Mapping):
        raise ConfigError("must be a config node (conf/task/<name>.yaml)", where="task",
                          fix="choose a task option by name (`task=<name>`), not a value")
    metric = task.get("metric")
    if not metric and not any(task.get(k) for k in FORM_KEYS):  # nothing of a task: none was chosen
        raise ConfigError("no task is selected: the composed config's `task` names no `fn`, `command` or `app` and "
                          "no metric", where="task",
                          fix="choose one with `+task=<name>` (a file conf/task/<name>.yaml), or make it the default "
                          "in conf/ablate.yaml: `defaults: [ablate_base, {task: <name>}, _self_]`")
    if not isinstance(metric, str) or not metric:
        raise ConfigError("the task declares no metric to compare arms on", where="task.metric",
                          fix="set `metric: val_acc` (a key the task returns) in conf/task/<name>.yaml")
    check_metric_name(metric, "task.metric")
    goal = choice(task.get("goal", "maximize"), GOALS, "task.goal")
    mode_raw = cfg.get("sweep_dir_mode", "0700")
    try:
        mode = int(str(mode_raw), 8)
        if not 0 <= mode <= 0o777 or not mode & 0o700 == 0o700:
            raise ValueError
    except ValueError:
        raise ConfigError(f"must be octal permission bits giving the owner rwx (e.g. \"0700\" or \"0750\"), "
                          f"got {mode_raw!r}", where="sweep_dir_mode", fix="e.g. `sweep_dir_mode='0700'`") from None
    if mode & 0o022:
        raise ConfigError(f"{oct(mode)[2:].zfill(4)} lets other users write into the sweep dir (they could replace "
                          "the code snapshot trials import, or the records the verdict reads)",
                          where="sweep_dir_mode",
                          fix=f"drop group/world write, e.g. `sweep_dir_mode={oct(mode & ~0o022)[2:].zfill(4)}`")
    launcher = cfg.get("launcher")
    if not isinstance(launcher, Mapping) or "name" not in launcher:
        raise ConfigError("no launcher selected", where="launcher", fix="use launcher=local, inline or slurm")
    looks = cfg.get("looks", DEFAULTS.looks)
    if not isinstance(looks, list | tuple) or not looks or any(
        not isinstance(x, int) or isinstance(x, bool) or x < 3 for x in looks
    ) or list(looks) != sorted(set(looks)):
        raise ConfigError(f"must be an increasing list of seed counts >= 3, got {looks!r}", where="looks",
                          fix="e.g. `looks=[5,10,15,20]`")
    if looks[-1] > MAX_SEEDS:  # sequential=group runs up to the last look: `looks=[3,1000000000]` was a MemoryError
        raise too_many_seeds(looks[-1], f"end `looks` at {MAX_SEEDS} or fewer, e.g. `looks=[5,10,15,20]`", "looks")
    seeds = parse_seeds(cfg.get("seeds"))
    sequential = choice(cfg.get("sequential", DEFAULTS.sequential), SEQUENTIAL, "sequential")
    if sequential == "group" and len(seeds) < looks[-1]:
        if not isinstance(cfg.get("seeds"), int):  # an explicit seed list too short for the last look
            raise ConfigError(f"lists {len(seeds)} seeds, but sequential=group runs up to {looks[-1]} per arm "
                              f"(looks={list(looks)})", where="seeds",
                              fix=f"list at least {looks[-1]} seeds, or end `looks` at {len(seeds)}")
        seeds = list(range(looks[-1]))  # `seeds=N` with sequential=group: the last look sets the count
    check_variable_values(cfg.get("variable"))  # `ablate -m variable=determinism`: each value must be a mode
    progress = "off" if cfg.get("progress", "auto") is False else cfg.get("progress", "auto")
    return Options(
        seeds=seeds,
        metric=metric,
        goal=goal,
        determinism=check_mode(cfg.get("determinism", "seeded")),
        dry_run=boolean(cfg.get("dry_run", False), "dry_run"),
        allow_dirty=boolean(cfg.get("allow_dirty", False), "allow_dirty"),
        wait=boolean(cfg.get("wait", True), "wait"),
        on_failure=choice(cfg.get("on_failure", "report"), ON_FAILURE, "on_failure"),
        max_retries=number(cfg.get("max_retries", 1), "max_retries", lo=0, integer=True, example=1),
        timeout_min=number(cfg.get("timeout_min"), "timeout_min", lo=0, allow_none=True, example=60),
        progress=choice(progress, ("auto", "off"), "progress"),
        plots=boolean(cfg.get("plots", True), "plots"),
        sweep_dir_mode=mode,
        threads=number(cfg.get("threads", 1), "threads", lo=1, integer=True),
        alpha=number(cfg.get("alpha", DEFAULTS.alpha), "alpha", lo=1e-6, hi=0.5, example=DEFAULTS.alpha),
        margin=parse_margin(cfg.get("margin", DEFAULTS.margin)),
        pairing=choice(cfg.get("pairing", DEFAULTS.pairing), PAIRING, "pairing"),
        multiplicity=choice(cfg.get("multiplicity", DEFAULTS.multiplicity), MULTIPLICITY, "multiplicity"),
        sequential=sequential,
        looks=list(looks),
        launcher=dict(launcher),
        tracker=_tracker(cfg.get("tracker")),
        family=parse_family(cfg.get("family", DEFAULTS.family), sequential),
        metrics=_metrics(cfg.get("metrics"), metric),
        curve=parse_curve(cfg.get("curve"), metric),
        effect=(effect := parse_effect(cfg.get("effect"), sequential, looks)),
        futility=parse_futility(cfg.get("futility"), effect, given=True),  # the config's default is null
    )


def _metrics(value: Any, primary: str) -> list[str] | None:
    """``metrics``: null, or the ablation table's metric columns (the primary ``task.metric`` first)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not value or not all(isinstance(m, str) and m for m in value):
        raise ConfigError(f"must be a list of metric names, got {value!r}", where="metrics",
                          fix=f"e.g. `metrics=[{primary},val_loss]`")
    for m in value:
        check_metric_name(m, "metrics")
    out = [primary, *[m for m in value if m != primary]]
    return list(dict.fromkeys(out))


def check_metric_name(name: str, where: str) -> None:
    """Refuse a metric named like a results.csv column (``seed``, ``arm``, ``status`` ...): its values would be
    taken for that column's."""
    if name in RESERVED_COLUMNS:
        raise ConfigError(f"the metric {name!r} has the name of a column results.csv gives every trial "
                          f"({', '.join(RESERVED_COLUMNS)}), so its values could not be told from that column's",
                          where=where, fix=f"have the task return it under another name (e.g. {name}_metric) "
                          "and name that here")


def _tracker(value: Any) -> dict[str, Any] | None:
    return check_tracker(value)
