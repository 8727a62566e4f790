"""The command form of a task: run an existing script with the trial's overrides (see docs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ablate.errors import ConfigError
from ablate.sweepdir import TrialPaths


def run_command_task(cfg: Mapping[str, Any], tp: TrialPaths, opts: Mapping[str, Any]) -> dict[str, float]:
    """Run ``task.command`` for one trial and return its metrics.

    Raises
    ------
    ConfigError
        When the task declares neither ``fn`` nor ``command``.
    """
    task = cfg.get("task") or {}
    if not task.get("command"):
        raise ConfigError("the task declares neither `fn` (module:function) nor `command`", where="task",
                          fix="set `task.fn: my_module:train` in conf/task/<name>.yaml")
    raise ConfigError("the command form of a task is not available yet", where="task.command")
