"""Launch backends: one small interface, one module per backend.

- ``inline``: every trial in the ablate process itself, one after another (debugging, tests).
- ``local``: each trial in its own child process on this machine, ``max_parallel`` at once, each
  with its own GPU when GPUs are visible.
- ``slurm``: one SLURM job array per ablation through submitit (see :mod:`ablate.trials.launchers.slurm.launcher`).

A launcher receives the trials still to run and a :class:`~ablate.trials.launchers.base.Monitor`; it runs
:func:`ablate.trials.trial.run_trial` for each (in whatever process or job), and tells the monitor when a
trial starts and finishes. The trial itself writes everything to the sweep dir.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ablate.errors import ConfigError
from ablate.trials.launchers.base import JobState, Launcher, Monitor, TrialRef
from ablate.trials.launchers.inline import InlineLauncher
from ablate.trials.launchers.local import LocalLauncher
from ablate.trials.launchers.slurm.launcher import SlurmLauncher

LAUNCHERS = ("inline", "local", "slurm")


def launcher_class(name: Any) -> type[Launcher]:
    """The launcher class registered as ``name`` (imported on demand).

    Raises
    ------
    ConfigError
        For an unknown launcher name (the valid ones are listed).
    """
    if name == "inline":
        return InlineLauncher
    if name == "local":
        return LocalLauncher
    if name == "slurm":
        return SlurmLauncher
    raise ConfigError(f"unknown launcher {name!r}", where="launcher",
                      fix=f"use one of: {', '.join(f'launcher={n}' for n in LAUNCHERS)}")


def get_launcher(cfg: Mapping[str, Any]) -> Launcher:
    """Build the launcher named by ``cfg["name"]`` with the rest of ``cfg`` as its options.

    Raises
    ------
    ConfigError
        For an unknown launcher name or unknown options (the valid ones are listed).
    """
    name = cfg.get("name")
    opts = {k: v for k, v in cfg.items() if k != "name"}
    cls = launcher_class(name)
    return cls(**_check(str(name), opts, cls.OPTIONS))


def _check(name: str, opts: dict[str, Any], valid: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(opts) - set(valid))
    if unknown:
        listing = ", ".join(f"{k} (default {v!r})" for k, v in valid.items())
        listing = listing or f"none: launcher={name} takes no options"
        raise ConfigError(f"unknown option(s) {', '.join(unknown)} for launcher={name}",
                          where=f"launcher.{unknown[0]}", fix=f"valid options: {listing}")
    return opts


__all__ = ["LAUNCHERS", "JobState", "Launcher", "Monitor", "TrialRef", "get_launcher", "launcher_class"]
