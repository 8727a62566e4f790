"""What every task form implements and returns: the :class:`TaskForm` protocol, the result and error types, and
which form a task config names (:func:`form_of`).

The forms' own modules import this one (so it names no form). Outside :mod:`ablate.trials.tasks`, code uses the
forms through :mod:`ablate.trials.tasks.interface`, which re-exports these names; a module that needs only a
name of this one (``FORM_KEYS`` in option parsing) imports it here, without loading any form.

- ``fn`` (:mod:`ablate.trials.tasks.fn`): a Python callable ``module:function`` called in the trial process.
- ``command`` (:mod:`ablate.trials.tasks.command`): any script, given ``task.params`` as overrides, that writes
  a metrics JSON.
- ``app`` (:mod:`ablate.trials.tasks.app`): an existing ``@hydra.main`` script, run as it is; its own composed
  config is the control and its metrics come from what it already produces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ablate.errors import ConfigError

#: The keys that name a task form, in the order they are looked for.
FORM_KEYS = ("fn", "command", "app")


class TrialTimeout(Exception):
    """Raised inside a trial when it exceeds ``timeout_min``."""


class ScriptFailed(RuntimeError):
    """A task's script exited non-zero: the message says how, starting with its exception line, then the end of
    its log. ``before_first_step``: it printed no metric line before it died."""

    before_first_step: bool = False


@dataclass
class TaskOutput:
    """What a task form returns for one trial when it knows more than the metrics.

    Attributes
    ----------
    metrics : dict
        Metric name -> number.
    source : dict
        Where the metric came from: ``kind`` (return, csv, tensorboard, json, stdout), ``path``,
        ``step`` of the value used, ``reduce`` (last, min, max).
    seen : dict or None
        What the task's own process saw, when it reported it: ``config`` (its config, resolved by it:
        the trial's manifest records this instead of ablate's resolution of the plan) and ``hydra``
        (the Hydra values it could read, e.g. ``job.override_dirname``).
    series : dict or None
        Every series of the source the metric came from (name -> (step, value) pairs): the trial's curve
        when ``curve.enabled`` (:mod:`ablate.trials.curve`).
    """

    metrics: dict[str, float]
    source: dict[str, Any] = field(default_factory=dict)
    seen: dict[str, Any] | None = None
    series: dict[str, Any] | None = None


class TaskForm(Protocol):
    """How one form of task is checked, run and shown."""

    name: str

    def check(self, plan: Any, cwd: str) -> None:
        """Check the task before launch without running the user's code (raises ConfigError)."""

    def run(self, cfg: Mapping[str, Any], tp: Any, opts: Mapping[str, Any], *, plan: Mapping[str, Any],
            arm: Mapping[str, Any]) -> Any:
        """Run one trial; return a mapping of metrics or a :class:`TaskOutput`."""

    def dry_run_lines(self, plan: Any, cwd: str) -> list[str]:
        """Lines a dry run prints about this task (e.g. each arm's exact argv)."""


def form_of(task: Mapping[str, Any]) -> str:
    """The form of a task config: ``fn``, ``command`` or ``app``.

    Raises
    ------
    ConfigError
        When the task names none of them, or more than one.
    """
    named = [k for k in FORM_KEYS if task.get(k)]
    if not named:
        raise ConfigError("the task declares none of `fn` (module:function), `command` or `app` (a @hydra.main "
                          "script)", where="task",
                          fix="set one in conf/task/<name>.yaml, e.g. `app: src/train.py` or `fn: my_module:train`")
    if len(named) > 1:
        raise ConfigError(f"the task declares {' and '.join(f'`{k}`' for k in named)}; a task has one form",
                          where=f"task.{named[1]}", fix=f"keep one of {', '.join(named)}")
    return named[0]


def is_script_form(task: Mapping[str, Any]) -> bool:
    """True for forms that run a script handed the seed as a setting (``command``, ``app``): ablate seeds nothing."""
    return bool(task.get("command") or task.get("app")) and not task.get("fn")
