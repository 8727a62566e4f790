"""The task-form interface: what the orchestrator, the trial process, the warm parent and the command line use
of the task forms (``fn``, ``command``, ``app``). Nothing outside :mod:`ablate.trials.tasks` imports one form's
module (an import-linter contract checks it):

- :func:`form_of` / :func:`get_form`: the form of a task config, and its :class:`~ablate.trials.tasks.contract.TaskForm`
  (``check`` before launch, ``run`` one trial, ``dry_run_lines``);
- :func:`attach`: the task's own config attached to ablate's (an app's composed config at ``task.params``;
  ``${now:}`` frozen and ``???`` refused for every form);
- :func:`split_cli` / :func:`with_cli_overrides`: the command line's ``app.`` overrides, for an app;
- :func:`config_dirs`: a task's own config dirs, hashed with ablate's config files;
- :func:`import_callable`: an ``fn`` task's function, from the code snapshot; :func:`run_fn`: call it and
  read its metric from its return value or what it logged (a single run's);
- :func:`preload_warm`: an ``app`` task's script imported in a warm parent, so its forks call its
  ``@hydra.main`` function (:mod:`ablate.trials.tasks.app_warm`).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from typing import Any

from ablate.errors import ConfigError
from ablate.plan.hydra_semantics import freeze_now, missing_keys
from ablate.trials.tasks import app, app_warm, command, fn
from ablate.trials.tasks.app import preload_warm, split_cli, with_cli_overrides
from ablate.trials.tasks.contract import (
    FORM_KEYS,
    ScriptFailed,
    TaskForm,
    TaskOutput,
    TrialTimeout,
    form_of,
    is_script_form,
)
from ablate.trials.tasks.fn import call_and_read as run_fn
from ablate.trials.tasks.fn import import_callable, prepare_node

_FORMS: dict[str, TaskForm] = {"fn": fn.FORM, "command": command.FORM, "app": app.FORM}


def get_form(name: str) -> TaskForm:
    """The task form called ``name`` (``fn``, ``command`` or ``app``).

    Raises
    ------
    ConfigError
        For any other name.
    """
    try:
        return _FORMS[name]
    except KeyError:
        raise ConfigError(f"unknown task form {name!r}", where="task", fix=f"one of {', '.join(FORM_KEYS)}") from None


def attach(cfg: dict[str, Any], compose: Callable[[str], Mapping[str, Any]] | None,
           choices: Mapping[str, Any] | None, cwd: str | os.PathLike[str] | None
           ) -> tuple[dict[str, Any], Any, Any]:
    """Attach the task's own config to ablate's composed config; freeze ``${now:}``; refuse ``???`` values.

    An ``app`` task's composed config goes to ``task.params`` (:func:`ablate.trials.tasks.app.attach`, which
    also maps the variable onto the app's keys and groups); ``fn`` and ``command`` tasks' configs are ablate's.

    Returns
    -------
    cfg, compose, choices
        As given for ``fn`` and ``command``; for an app, with its config and config groups added.

    Raises
    ------
    ConfigError
        A task with more than one form, a ``???`` value, or anything the app's composition refuses.
    """
    task = cfg.get("task")
    if isinstance(task, Mapping) and task.get("app"):
        form_of(task)  # one form only
        return app.attach(cfg, compose, choices, cwd or os.getcwd())
    cfg = copy.deepcopy(cfg)
    freeze_now(cfg)
    missing = missing_keys(cfg)
    if missing:
        raise ConfigError(f"{', '.join(missing[:10])} {'is' if len(missing) == 1 else 'are'} ??? (a mandatory "
                          "value, not set)", where=missing[0],
                          fix=f"give it a value in its config file or as an override: `{missing[0]}=<value>`")
    return cfg, compose, choices


def check_app_seed_key(task: Mapping[str, Any], cwd: str | os.PathLike[str]) -> None:
    """Refuse an ``app`` task whose ``seed_key`` its composed config lacks
    (:func:`ablate.trials.tasks.app.check_seed_key`)."""
    app.check_seed_key(task, cwd)


def seed_route(task: Mapping[str, Any]) -> str:
    """How a script task's trials hand the script its seed, as the Setup line says it (what ablate does, never
    what the script does with it: that is not observed, except when every seed gave the same metrics)."""
    if task.get("app"):
        key = app.settings(task)["seed_key"]
        return (f"each trial passes its seed as `{key}=<seed>`" if key else "the seed is not passed (seed_key: null)") \
            + " and in $ABLATE_SEED"
    s = command.task_settings(task)
    ways = []
    if s["seed_key"]:
        rendered = command.argstyle.render({s["seed_key"]: 1234567}, s["args"], s["values"],
                                           env_prefix=str(s["env_prefix"] or ""))
        ways.append(f"as `{' '.join(rendered[0]) or ' '.join(f'{k}={v}' for k, v in rendered[1].items())}`"
                    .replace("1234567", "<seed>"))
    if s["seed_env"]:
        ways.append(f"in ${s['seed_env']}")
    ways.append("in $ABLATE_SEED")
    head = "each trial passes its seed to the script " if s["seed_key"] or s["seed_env"] else \
        "the seed is not passed as a setting (seed_key: null); each trial sets it only "
    return head + ", ".join(ways)


def warm_app(task: Mapping[str, Any], code_root: str | os.PathLike[str] | None) -> str | None:
    """The ``@hydra.main`` function an ``app`` trial calls in this process (a fork of a warm parent that
    imported the app), or None: the trial starts ``python <app>`` afresh (and for other forms)."""
    if not task.get("app"):
        return None
    held = app_warm.loaded(task, code_root)
    return held[1] if held else None


def config_dirs(task: Mapping[str, Any], cwd: str | os.PathLike[str]) -> list[str]:
    """The task's own config dirs (an app's; none for ``fn`` and ``command``), as absolute paths."""
    if not task.get("app"):
        return []
    return [str(app.config_location(app.settings(task), cwd)[0])]


__all__ = ["FORM_KEYS", "ScriptFailed", "TaskForm", "TaskOutput", "TrialTimeout", "attach", "config_dirs",
           "form_of", "get_form", "import_callable", "is_script_form", "preload_warm", "prepare_node", "run_fn",
           "seed_route", "split_cli", "warm_app", "with_cli_overrides"]
