"""ablate's own settings, read from the composed config and validated up front (before any launch)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ablate.errors import ConfigError
from ablate.plan.arms import parse_seeds
from ablate.trials.seeding import check_mode, check_variable_values

ON_FAILURE = ("report", "retry", "abort")
PAIRING = ("auto", "paired", "unpaired")
MULTIPLICITY = ("holm", "dunnett", "bh", "none")
SEQUENTIAL = ("off", "group")
FAMILIES = ("suite", "variable")
GOALS = ("maximize", "minimize")


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if value is False and "off" in allowed:  # YAML 1.1 reads an unquoted `off` as false
        value = "off"
    if value not in allowed:
        raise ConfigError(f"must be one of {', '.join(allowed)}, got {value!r}", where=where,
                          fix=f"e.g. `{where}={allowed[0]}`")
    return str(value)


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ConfigError(f"must be true or false, got {value!r}", where=where, fix=f"e.g. `{where}=true`")


def _number(value: Any, where: str, *, lo: float | None = None, hi: float | None = None,
            integer: bool = False, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if integer:
        ok = ok and float(value).is_integer()
    if ok and lo is not None and value < lo:
        ok = False
    if ok and hi is not None and value > hi:
        ok = False
    if not ok:
        kind = "an integer" if integer else "a number"
        rng = f" in [{lo}, {hi}]" if lo is not None and hi is not None else (f" >= {lo}" if lo is not None else "")
        raise ConfigError(f"must be {kind}{rng}{' or null' if allow_none else ''}, got {value!r}", where=where)
    return int(value) if integer else value


#: Words that clear the margin (``--margin none``); 0 clears it too (a zero margin tests nothing).
NO_MARGIN = ("none", "null", "off", "no", "0", "0%")


def parse_margin(value: Any) -> float | str | None:
    """``margin``: null, a number in metric units (also written as a string, as ``--margin 0.01`` gives
    it), or a percentage of the control mean (``"2%"``). ``none``, ``null``, ``off``, ``0`` clear it."""
    if value is None or value is False or (isinstance(value, int | float) and not isinstance(value, bool)
                                           and value == 0):
        return None
    if isinstance(value, str) and value.strip().lower() in NO_MARGIN:
        return None
    if isinstance(value, str) and not value.strip().endswith("%"):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*%\s*", value):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    raise ConfigError(f"must be a positive number (metric units), a percentage such as '2%', or none, got {value!r}",
                      where="margin", fix="e.g. `margin=0.01`, `margin='2%'` or `--margin none` to clear it")


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
    sweep_dir_mode: int = 0o700
    threads: int = 1
    alpha: float = 0.05
    margin: float | str | None = None
    pairing: str = "auto"
    multiplicity: str = "holm"
    sequential: str = "off"
    looks: list[int] = field(default_factory=lambda: [5, 10, 15, 20])
    launcher: dict[str, Any] = field(default_factory=lambda: {"name": "local"})
    tracker: dict[str, Any] | None = None
    family: str = "suite"
    metrics: list[str] | None = None

    def record(self) -> dict[str, Any]:
        """The options as written to ``ablation.yaml`` (seeds and metric are recorded separately)."""
        d = asdict(self)
        d.pop("seeds")
        d.pop("metric")
        d.pop("goal")
        d["sweep_dir_mode"] = oct(self.sweep_dir_mode)
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
        raise ConfigError("must be a config node (conf/task/<name>.yaml)", where="task")
    metric = task.get("metric")
    if not isinstance(metric, str) or not metric:
        raise ConfigError("the task declares no metric to compare arms on", where="task.metric",
                          fix="set `metric: val_acc` (a key the task returns) in conf/task/<name>.yaml")
    goal = _choice(task.get("goal", "maximize"), GOALS, "task.goal")
    mode_raw = cfg.get("sweep_dir_mode", "0700")
    try:
        mode = int(str(mode_raw), 8)
        if not 0 <= mode <= 0o777 or not mode & 0o700 == 0o700:
            raise ValueError
    except ValueError:
        raise ConfigError(f"must be octal permission bits giving the owner rwx (e.g. \"0700\" or \"0750\"), "
                          f"got {mode_raw!r}", where="sweep_dir_mode") from None
    if mode & 0o022:
        raise ConfigError(f"{oct(mode)[2:].zfill(4)} lets other users write into the sweep dir (they could replace "
                          "the code snapshot trials import, or the records the verdict reads)",
                          where="sweep_dir_mode",
                          fix=f"drop group/world write, e.g. `sweep_dir_mode={oct(mode & ~0o022)[2:].zfill(4)}`")
    launcher = cfg.get("launcher")
    if not isinstance(launcher, Mapping) or "name" not in launcher:
        raise ConfigError("no launcher selected", where="launcher", fix="use launcher=local, inline or slurm")
    looks = cfg.get("looks", [5, 10, 15, 20])
    if not isinstance(looks, list | tuple) or not looks or any(
        not isinstance(x, int) or isinstance(x, bool) or x < 3 for x in looks
    ) or list(looks) != sorted(set(looks)):
        raise ConfigError(f"must be an increasing list of seed counts >= 3, got {looks!r}", where="looks",
                          fix="e.g. `looks=[5,10,15,20]`")
    seeds = parse_seeds(cfg.get("seeds"))
    sequential = _choice(cfg.get("sequential", "off"), SEQUENTIAL, "sequential")
    if sequential == "group" and len(seeds) < looks[-1]:
        if not isinstance(cfg.get("seeds"), int):  # an explicit seed list too short for the last look
            raise ConfigError(f"lists {len(seeds)} seeds, but sequential=group runs up to {looks[-1]} per arm "
                              f"(looks={list(looks)})", where="seeds",
                              fix=f"list at least {looks[-1]} seeds, or end `looks` at {len(seeds)}")
        seeds = list(range(looks[-1]))  # `seeds=N` with sequential=group: the last look sets the count
    check_variable_values(cfg.get("variable"))  # `ablate -m variable=determinism`: each value must be a mode
    progress = cfg.get("progress", "auto")
    if progress is False:
        progress = "off"
    return Options(
        seeds=seeds,
        metric=metric,
        goal=goal,
        determinism=check_mode(cfg.get("determinism", "seeded")),
        dry_run=_bool(cfg.get("dry_run", False), "dry_run"),
        allow_dirty=_bool(cfg.get("allow_dirty", False), "allow_dirty"),
        wait=_bool(cfg.get("wait", True), "wait"),
        on_failure=_choice(cfg.get("on_failure", "report"), ON_FAILURE, "on_failure"),
        max_retries=_number(cfg.get("max_retries", 1), "max_retries", lo=0, integer=True),
        timeout_min=_number(cfg.get("timeout_min"), "timeout_min", lo=0, allow_none=True),
        progress=_choice(progress, ("auto", "off"), "progress"),
        sweep_dir_mode=mode,
        threads=_number(cfg.get("threads", 1), "threads", lo=1, integer=True),
        alpha=_number(cfg.get("alpha", 0.05), "alpha", lo=1e-6, hi=0.5),
        margin=parse_margin(cfg.get("margin")),
        pairing=_choice(cfg.get("pairing", "auto"), PAIRING, "pairing"),
        multiplicity=_choice(cfg.get("multiplicity", "holm"), MULTIPLICITY, "multiplicity"),
        sequential=sequential,
        looks=list(looks),
        launcher=dict(launcher),
        tracker=_tracker(cfg.get("tracker")),
        family=_choice(cfg.get("family", "suite"), FAMILIES, "family"),
        metrics=_metrics(cfg.get("metrics"), metric),
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
    out = [primary, *[m for m in value if m != primary]]
    return list(dict.fromkeys(out))


def _tracker(value: Any) -> dict[str, Any] | None:
    from ablate.trackers import check_tracker

    return check_tracker(value)
