"""Experiment trackers: log a finished ablation to MLflow or Weights & Biases.

Off by default. ``tracker=mlflow`` or ``tracker=wandb`` (a config group, ``ablate/conf/tracker/``)
makes the orchestrating process log the ablation after its trials finished and its verdict is
written, reading everything from the sweep dir: trials never talk to the tracker, so a tracker
that is down, slow or misconfigured cannot fail or slow a trial. ``ablate track DIR`` logs (or
re-logs) an existing sweep dir. The libraries are optional extras, imported only here and only
when used: ``pip install 'hydra-ablate[mlflow]'`` / ``'hydra-ablate[wandb]'``.

One module per tracker behind :class:`~ablate.trackers.base.Tracker`; what they log comes from one
reader, :func:`~ablate.trackers.base.read_ablation`, so both trackers carry the same tags.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from ablate.errors import AblateError, ConfigError, TrackerError
from ablate.trackers.base import AblationRecord, Tracker, TrialRecord, read_ablation

#: Tracker name -> (module in this package, class name, the library it needs, the pip extra).
TRACKERS: dict[str, tuple[str, str, str, str]] = {
    "mlflow": ("ablate.trackers.mlflow", "MlflowTracker", "mlflow", "mlflow"),
    "wandb": ("ablate.trackers.wandb", "WandbTracker", "wandb", "wandb"),
}


def _class(name: str) -> type[Tracker]:
    import importlib

    mod, cls, _, _ = TRACKERS[name]
    return getattr(importlib.import_module(mod), cls)  # type: ignore[no-any-return]


def check_tracker(cfg: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Validate the ``tracker`` setting before anything launches; returns it as a plain dict (or None).

    Checks the name, the options (unknown ones are listed with the valid ones) and that the library
    is installed, without importing it.

    Raises
    ------
    ConfigError
        Unknown tracker or option, or the library missing (the message names the extra to install).
    """
    if cfg is None:
        return None
    if isinstance(cfg, str):
        cfg = {"name": cfg}
    if not isinstance(cfg, Mapping) or cfg.get("name") not in TRACKERS:
        name = cfg.get("name") if isinstance(cfg, Mapping) else cfg
        raise ConfigError(f"unknown tracker {name!r}", where="tracker",
                          fix=f"use one of: {', '.join(f'tracker={n}' for n in TRACKERS)} (or leave it unset)")
    name = str(cfg["name"])
    _, _, library, extra = TRACKERS[name]
    opts = {k: v for k, v in cfg.items() if k != "name"}
    valid = _class_options(name)
    unknown = sorted(set(opts) - set(valid))
    if unknown:
        listing = ", ".join(f"{k} (default {v!r})" for k, v in valid.items())
        raise ConfigError(f"unknown option(s) {', '.join(unknown)} for tracker={name}",
                          where=f"tracker.{unknown[0]}", fix=f"valid options: {listing}")
    if importlib.util.find_spec(library) is None:
        raise ConfigError(f"tracker={name} needs the {library} library, which is not installed", where="tracker",
                          fix=f"pip install 'hydra-ablate[{extra}]' (or pip install {library})")
    _class(name)(**opts)  # validates the option values (the library is imported only when logging)
    return {"name": name, **opts}


def _class_options(name: str) -> dict[str, Any]:
    # Read the options from the module without importing the tracker library (modules import it lazily).
    return dict(_class(name).OPTIONS)


def get_tracker(cfg: Mapping[str, Any]) -> Tracker:
    """Build the tracker named by ``cfg["name"]`` with the rest of ``cfg`` as its options.

    Raises
    ------
    ConfigError
        See :func:`check_tracker`.
    """
    checked = check_tracker(cfg)
    if checked is None:
        raise ConfigError("no tracker chosen", where="tracker", fix=f"use one of: {', '.join(TRACKERS)}")
    opts = {k: v for k, v in checked.items() if k != "name"}
    return _class(checked["name"])(**opts)


def log_ablation(sd: Any, cfg: Mapping[str, Any]) -> str:
    """Log the ablation in sweep dir ``sd`` to the tracker ``cfg``; returns a one-line summary.

    Raises
    ------
    ConfigError
        For an invalid tracker setting.
    TrackerError
        When the tracker library fails (unreachable server, bad credentials, a refused name ...), in one line.
    """
    tracker = get_tracker(cfg)
    record = read_ablation(sd)
    try:
        return tracker.log(record)
    except AblateError:
        raise
    except Exception as exc:  # the library's own errors (unreachable server, a refused name ...): one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise TrackerError(f"tracker={tracker.name} failed while logging ({type(exc).__name__}: {first})",
                           where="tracker",
                           fix=f"check the tracker's settings and that it is reachable, then `ablate track "
                           f"{record.sweep_dir}` (it logs only what is missing)") from exc


def log_after_ablation(sd: Any, cfg: Mapping[str, Any], warn: Any) -> bool:
    """Log a finished ablation to its tracker from the orchestrating process; never raises.

    A tracker that fails (unreachable, bad credentials ...) costs nothing that ran: the sweep dir
    holds everything, and ``ablate track DIR`` logs it later. Returns True when logging succeeded.
    """
    try:
        warn(f"ablate: {log_ablation(sd, cfg)}")
        return True
    except Exception as exc:  # the ablation is done and on disk; a tracker error must not lose it

        if isinstance(exc, TrackerError) and exc.__cause__ is not None:
            exc = exc.__cause__  # type: ignore[assignment]  # name the library's own error
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        warn(f"ablate: warning: tracker={cfg.get('name')} failed ({type(exc).__name__}: {first}); the ablation is "
             f"complete in {getattr(sd, 'root', sd)}; log it later with `ablate track {getattr(sd, 'root', sd)}`")
        return False


__all__ = ["TRACKERS", "AblationRecord", "Tracker", "TrialRecord", "check_tracker", "get_tracker", "log_ablation",
           "log_after_ablation", "read_ablation"]
