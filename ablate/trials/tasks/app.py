"""The ``app`` form of a task: an existing ``@hydra.main`` script, ablated as it is.

A task config (``conf/task/<name>.yaml``)::

    app: src/train.py               # the script, relative to the project root; never edited
    config_path: null               # default: read from its @hydra.main(config_path=...), relative to it
    config_name: null               # default: read from its @hydra.main(config_name=...)
    overrides: [trainer=cpu, trainer.max_epochs=1]   # the app's overrides, the same in every arm
    metric: val/acc
    goal: maximize
    metric_source: auto             # auto | return | csv | tensorboard | json | stdout | stderr
                                    #   (ablate.metrics)
    metric_pattern: null            # printed lines to read: 'val loss (?P<val_loss>[0-9.eE+-]+)'
    reduce: last                    # last | min | max, for a metric logged at many steps
    seed_key: seed                  # a key of the app's config, set to the seed (seed=<k>); null: not passed
    data: [data/digits.npz]
    env: {}

ablate composes the app's own config with Hydra (its config dir and name, plus ``overrides``); that
composed default is the control, placed at ``task.params``. A variable names the app's own paths:
``key: model.optimizer.lr`` or ``group: model`` with ``values: [mnist_wide]``. App overrides can also
be given on ablate's command line with the ``app.`` prefix (``ablate -m ... app.trainer.max_epochs=1``,
``app.trainer=cpu``), which cannot collide with ablate's own settings.

Each trial runs ``python <app> <overrides> <the arm's change> <frozen ${now:} values> seed=<k>
hydra.run.dir=<trial dir>/run +hydra.callbacks.ablate_return...`` in the pinned code snapshot, and
reads the metric from what the app produced (:mod:`ablate.metrics`). A trial forked from a
warm parent that imported the app (``launcher.warm=true``) calls the app's ``@hydra.main`` function in its
own process with that same argv instead (:mod:`ablate.trials.tasks.app_warm`).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import datetime as _dt
import importlib.util
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import setup_globals
from omegaconf import OmegaConf

from ablate.errors import ConfigError, close_matches
from ablate.metrics import REDUCE, SOURCES, collect, compile_patterns
from ablate.metrics.files import SEEN_FILE
from ablate.plan.app_config import APP_NODE, escaped, to_app_key
from ablate.plan.arms import MISSING, derived_keys, flatten, resolve, select
from ablate.plan.arms import _same as same_value  # the plan proof's equality (1 != True, nan == nan): one rule
from ablate.plan.compose import reject_sweeps
from ablate.plan.hydra_semantics import freeze_now, missing_keys, trial_hydra
from ablate.plan.overrides import format_override
from ablate.plan.suite import suite_record
from ablate.plan.trial_resolved import plan_dependent
from ablate.trials import seeding
from ablate.trials.tasks import app_warm
from ablate.trials.tasks.argstyle import check_task_env
from ablate.trials.tasks.command import RUN_DIR_NAME, hydra_refused_key, read_from, spawn, tail_lines, task_dir
from ablate.trials.tasks.contract import TaskOutput
from ablate.trials.tasks.hydra_callback import CALLBACK_OVERRIDE
from ablate.trials.workdir import guard_snapshot, own_workdir

#: Settings of an app task, with defaults (anything else is refused with close matches).
APP_TASK_KEYS: dict[str, Any] = {
    "app": None, "config_path": None, "config_name": None, "overrides": [], "metric": None, "goal": "maximize",
    "metric_source": "auto", "metric_pattern": None, "reduce": "last", "seed_key": "seed", "data": [], "env": {},
    "timing_metrics": [],
}
#: Keys ablate fills in: the composed config, the keys whose ``${now:}`` it froze, the keys resolved
#: only in the trial (:func:`trial_resolved_keys`) and the app's own ``hydra.mode`` / ``hydra.searchpath``.
FILLED_KEYS = ("params", "frozen_now", "trial_resolved", "app_hydra")
#: The command-line prefix of an app override.
CLI_PREFIX = "app."
#: Forces one run per trial: an app whose config sets ``hydra.mode: MULTIRUN`` would sweep otherwise.
RUN_MODE_OVERRIDE = "hydra.mode=RUN"
_RESOLVER = re.compile(r"\$\{([A-Za-z_][\w.]*):")


# -- reading the script ---------------------------------------------------------------------------------
def read_decorator(script: Path) -> dict[str, Any]:
    """``config_path``, ``config_name`` and ``version_base`` of the script's ``@hydra.main``, without running it.

    Parameters
    ----------
    script : Path
        The app's script.

    Returns
    -------
    dict
        The keyword arguments given as literals (absent ones are left out).

    Raises
    ------
    ConfigError
        No ``@hydra.main`` (or ``@main`` imported from hydra) decorates a function of the script.
    """
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"), filename=str(script))
    except SyntaxError as exc:
        raise ConfigError(f"{script} has a syntax error at line {exc.lineno}: {exc.msg}", where="task.app",
                          fix=f"fix the script (`python -m py_compile {script}` shows the error)") from None
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if not isinstance(dec, ast.Call):
                continue
            f = dec.func
            name = f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                else f.id if isinstance(f, ast.Name) else ""
            if name not in ("hydra.main", "main"):
                continue
            out: dict[str, Any] = {}
            for kw in dec.keywords:
                if kw.arg in ("config_path", "config_name", "version_base") and isinstance(kw.value, ast.Constant):
                    out[kw.arg] = kw.value.value
            for arg, key in zip(dec.args, ("config_path", "config_name"), strict=False):
                if isinstance(arg, ast.Constant):
                    out[key] = arg.value
            out["function"] = node.name  # the decorated function (a warm fork calls it: app_warm)
            return out
    raise ConfigError(f"{script} has no function decorated with @hydra.main", where="task.app",
                      fix="name the @hydra.main script, or give `config_path` and `config_name` in the task config")


def settings(task: Mapping[str, Any]) -> dict[str, Any]:
    """The app-form settings of a task config, defaults filled in.

    Raises
    ------
    ConfigError
        An unknown key (close matches listed), ``params`` set by hand, or a setting of the wrong type.
    """
    unknown = sorted(set(task) - set(APP_TASK_KEYS) - set(FILLED_KEYS))
    if unknown:
        near = close_matches(unknown[0], list(APP_TASK_KEYS))
        hint = f" Close matches: {', '.join(near)}." if near else ""
        raise ConfigError(f"{unknown[0]!r} is not a setting of an app task.{hint}", where=f"task.{unknown[0]}",
                          fix="put the app's own keys in `overrides:` (e.g. `overrides: [trainer.max_epochs=1]`); "
                          f"settings: {', '.join(APP_TASK_KEYS)}")
    s = {k: task.get(k, d) for k, d in APP_TASK_KEYS.items()}
    s["overrides"] = list(s["overrides"] or [])
    if not all(isinstance(o, str) for o in s["overrides"]):
        raise ConfigError(f"must be a list of Hydra overrides (strings), got {s['overrides']!r}",
                          where="task.overrides", fix="e.g. `overrides: [trainer=cpu, trainer.max_epochs=1]`")
    sources = [k for k in SOURCES if k != "file"]  # `file`: the metrics file a command task is handed
    if s["metric_source"] not in ("auto", *sources):
        raise ConfigError(f"must be one of auto, {', '.join(sources)}, got {s['metric_source']!r}",
                          where="task.metric_source", fix="e.g. `metric_source: csv`")
    if s["reduce"] not in REDUCE:
        raise ConfigError(f"must be one of {', '.join(REDUCE)}, got {s['reduce']!r}", where="task.reduce",
                          fix="e.g. `reduce: max` for the best validation accuracy over epochs")
    compile_patterns(s["metric_pattern"])
    if isinstance(s["env"], Mapping):
        check_task_env(s["env"])
    return s


def config_location(s: Mapping[str, Any], cwd: str | os.PathLike[str]) -> tuple[Path, str, str | None]:
    """The app's config dir (absolute), config name and Hydra ``version_base``.

    Raises
    ------
    ConfigError
        The script or its config dir does not exist, or no config name can be found.
    """
    script = Path(cwd) / str(s["app"])
    if not script.is_file():
        raise ConfigError(f"the app script {s['app']} does not exist in {Path(cwd).absolute()}", where="task.app",
                          fix="give its path relative to the project root, e.g. `app: src/train.py`")
    dec = read_decorator(script) if s["config_path"] is None or s["config_name"] is None else {}
    rel = s["config_path"] if s["config_path"] is not None else dec.get("config_path")
    name = s["config_name"] if s["config_name"] is not None else dec.get("config_name")
    if rel is None or name is None:
        raise ConfigError(f"{s['app']}'s @hydra.main gives no {'config_path' if rel is None else 'config_name'}",
                          where="task.app", fix="set `config_path` and `config_name` in the task config")
    base = Path(cwd) if s["config_path"] is not None else script.parent
    cdir = (base / str(rel)).resolve()
    if not cdir.is_dir():
        raise ConfigError(f"the app's config dir {cdir} does not exist", where="task.config_path",
                          fix="give the dir of the app's primary config (relative to the script in @hydra.main)")
    return cdir, str(name).removesuffix(".yaml"), dec.get("version_base", "1.1")


# -- composing the app's config ----------------------------------------------------------------------
def compose_app(cdir: Path, name: str, version_base: str | None,
                overrides: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Compose the app's config with Hydra, as ``python <app> <overrides>`` would.

    Hydra's own compose API, with the app's config dir: the primary config's ``hydra.searchpath``
    (``pkg://`` entries included) is honoured by Hydra itself. The app's module must be imported
    first (:func:`import_app`), so its ConfigStore entries and import-time resolvers exist, and its
    dir is on ``sys.path`` for ``pkg://`` packages beside it.

    Returns
    -------
    config, choices, own : dict, dict, dict
        The composed config without ``hydra`` (interpolations unresolved, Enum values by name), the
        option chosen in each of the app's config groups, and the app's own ``hydra.mode`` and
        ``hydra.searchpath``.

    Raises
    ------
    ConfigError
        An override Hydra refuses (an unknown key or option: close matches listed).
    """
    reject_sweeps(overrides)
    saved = GlobalHydra.instance().hydra if GlobalHydra.instance().is_initialized() else None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(cdir), version_base=version_base, job_name="app"):
            try:
                cfg = compose(config_name=name, overrides=list(overrides), return_hydra_config=True)
            except Exception as exc:
                raise _explain(exc, cdir, name, version_base, overrides) from None
    finally:
        GlobalHydra.instance().clear()
        if saved is not None:
            GlobalHydra.instance().initialize(saved)
    choices = dict(OmegaConf.to_container(cfg.hydra.runtime.choices))  # type: ignore[arg-type]
    # Enum values of a ConfigStore schema are stored by name, as Hydra writes them to .hydra/config.yaml
    container: dict[str, Any] = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)  # type: ignore[assignment]
    hydra_node = container.pop("hydra", None) or {}
    own = {"mode": str(hydra_node.get("mode") or "RUN"), "searchpath": list(hydra_node.get("searchpath") or [])}
    return container, {k: v for k, v in choices.items() if not k.startswith("hydra/")}, own


def _explain(exc: Exception, cdir: Path, name: str, version_base: str | None,
             overrides: Sequence[str]) -> ConfigError:
    msg = str(exc).strip()
    first = msg.splitlines()[0] if msg else type(exc).__name__
    m = re.search(r"Could not override '([^']+)'", msg) or re.search(r"Key '([^']+)' is not in struct", msg)
    if m:
        key = m.group(1)
        try:
            base, choices, _ = compose_app(cdir, name, version_base, [])
            near = close_matches(key, list(flatten(base)) + list(choices))
        except ConfigError:
            near = []
        hint = f" Close matches: {', '.join(near)}." if near else ""
        return ConfigError(f"{key!r} is not a key of the app's config ({cdir}/{name}.yaml).{hint}",
                           where="task.overrides", fix=f"fix the override, or add a new key with +{key}=...")
    m = re.search(r"Could not find '([^']+)/([^']+)'", msg)
    if m:
        group, option = m.group(1), m.group(2)
        # Hydra lists the options it found on the app's whole search path (hydra.searchpath, pkg:// included)
        listed = re.search(rf"Available options in '{re.escape(group)}':\n((?:\t.*\n?)*)", msg)
        opts = sorted(x.strip() for x in listed.group(1).splitlines() if x.strip()) if listed else \
            sorted(p.stem for p in (cdir / group).glob("*.yaml"))
        near = close_matches(option, opts)
        hint = f"Close matches: {', '.join(near)}. " if near else ""
        return ConfigError(f"the app has no {group} option {option!r}. {hint}Available: {', '.join(opts) or 'none'}",
                           where="task.overrides", fix=f"choose one of them, or add {cdir}/{group}/{option}.yaml")
    cause = str(exc.__cause__ or "").strip()
    if first.startswith("Error merging override") and cause:
        first = f"{first}: {cause.splitlines()[0]}"  # Hydra's reason: a schema's type or Enum values
    return ConfigError(f"the app's config cannot be composed with overrides {list(overrides)}: {first}",
                       where="task.overrides", fix="check the override named above (`python <app> --cfg job` shows "
                       "the app's composed config)")


def unregistered_resolvers(cfg: Any) -> list[str]:
    """Resolver names used in ``${name:...}`` interpolations of ``cfg`` that OmegaConf does not know yet."""
    setup_globals()
    names = {m for v in flatten(cfg).values() if isinstance(v, str) for m in _RESOLVER.findall(v)}
    return sorted(n for n in names if not OmegaConf.has_resolver(n))


_IMPORTED: set[str] = set()


def import_app(script: Path, root: Path) -> None:
    """Import the app's module (never its ``__main__`` block), as ``python <app>`` does before Hydra composes.

    So what the module sets up when imported exists for composing and resolving: ConfigStore entries
    (a dataclass schema in the defaults list), resolvers registered at its top level, environment
    variables (``rootutils.setup_root`` sets ``PROJECT_ROOT``), and its dir on ``sys.path`` (for
    ``pkg://`` search path entries beside it). Imported at most once per process and script.

    Raises
    ------
    ConfigError
        The import fails.
    """
    try:
        key = script.relative_to(root).as_posix()  # one app per process: the planning process's import serves an
    except ValueError:                             # inline trial too (importing it twice re-registers its resolvers)
        key = str(script)
    if key in _IMPORTED:
        return
    for p in (str(script.parent), str(root)):
        if p not in sys.path:
            sys.path.insert(0, p)
    spec = importlib.util.spec_from_file_location(f"_ablate_app_{script.stem}", script)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = mod  # type: ignore[union-attr]  # dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    except Exception as exc:
        sys.modules.pop(spec.name, None)  # type: ignore[union-attr]
        raise ConfigError(f"importing the app {script} failed ({type(exc).__name__}: {exc}); ablate imports it "
                          "before composing its config, as running it does", where="task.app",
                          fix="make the script importable (its training starts under `if __name__ == '__main__'`), "
                          "and install what it imports") from None
    _IMPORTED.add(key)


def trial_resolved_keys(cfg: Any) -> tuple[list[str], list[str]]:
    """Keys that can only be resolved inside the trial, and the resolvers that make them so.

    A key whose value uses a resolver OmegaConf does not know once the app's module is imported
    (one the app registers inside ``main()``; Hydra resolves lazily, so the app runs), and every key
    that interpolates from such a key.

    Returns
    -------
    keys, resolvers : list of str, list of str
    """
    missing = set(unregistered_resolvers(cfg))
    if not missing:
        return [], []
    flat = flatten(cfg)
    roots = {k for k, v in flat.items() if isinstance(v, str) and set(_RESOLVER.findall(v)) & missing}
    return sorted(roots | derived_keys(flat, roots)), sorted(missing)


def _resolves(cfg: Any) -> bool:
    try:
        with trial_hydra("<trial dir>/run"):
            OmegaConf.to_container(OmegaConf.create(dict(cfg)), resolve=True)
    except Exception:
        return False
    return True


def register_app_resolvers(cfg: Any, script: Path, root: Path, later: Sequence[str] = ()) -> None:
    """In a trial: import the app's module (:func:`import_app`, from the code snapshot) when resolving its
    config needs what the import sets up (a resolver, ``PROJECT_ROOT``); the trial process composes
    nothing, so an app whose config resolves without it (torch at its top) is not imported twice.

    Parameters
    ----------
    later : sequence of str
        The keys resolved only in the trial (:func:`trial_resolved_keys`): their resolvers are the
        app's ``main()``'s, which no import registers.
    """
    rest = escaped(cfg, list(later)) if later else cfg
    if not unregistered_resolvers(rest) and _resolves(rest):
        return
    import_app(script, root)


def split_cli(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ablate's command-line overrides into ablate's and the app's (``app.`` prefixed, prefix removed).

    ``app.trainer.max_epochs=1`` -> ``trainer.max_epochs=1``; ``+app.x=1`` -> ``+x=1``; ``app.trainer=cpu``
    chooses the app's config group option. ablate has no ``app`` setting, so these never collide.
    """
    ours, app = [], []
    for ov in overrides:
        m = re.match(r"^(\+\+|\+|~)?app\.(.+)$", ov)
        if m:
            app.append(f"{m.group(1) or ''}{m.group(2)}")
        else:
            ours.append(ov)
    return ours, app


def with_cli_overrides(composed: Any, app_overrides: Sequence[str]) -> Any:
    """Append the command line's ``app.`` overrides to the task's ``overrides`` (an ``app`` task only).

    Raises
    ------
    ConfigError
        ``app.`` overrides given for a task that is not an app.
    """
    if not app_overrides:
        return composed
    task = composed.cfg.get("task")
    if not isinstance(task, Mapping) or not task.get("app"):
        raise ConfigError(f"`{CLI_PREFIX}` overrides ({', '.join(app_overrides)}) are for an `app:` task, and this "
                          "task is not one", where=f"{CLI_PREFIX}{app_overrides[0]}",
                          fix="drop the `app.` prefix to set a key of ablate's config, or choose an app task")
    composed.cfg["task"] = {**task, "overrides": [*list(task.get("overrides") or []), *app_overrides]}
    return composed


def _refuse_missing(params: Mapping[str, Any]) -> None:
    """Raise a :class:`ConfigError` naming the app's keys left ``???`` (a mandatory value) in ``params``."""
    missing = missing_keys(params)
    if missing:
        raise ConfigError(f"the app's config leaves {', '.join(missing[:10])} unset (???, a mandatory value)",
                          where=missing[0], fix=f"give it a value: add `{missing[0]}=<value>` to `overrides:` in "
                          f"the task config, or `app.{missing[0]}=<value>` on ablate's command line")


def _onto_app(var: Mapping[str, Any], params: Mapping[str, Any], app_choices: Mapping[str, Any]) -> dict[str, Any]:
    """The variable with its key or group mapped onto the app's config when it names one of the app's keys or
    groups (``key: model.lr`` -> ``task.params.model.lr``, ``group: model`` -> ``task/params/model``)."""
    var = dict(var)
    key, group = var.get("key"), var.get("group")
    if isinstance(key, str) and not key.startswith(APP_NODE + ".") and key.split(".")[0] in params:
        var["key"] = f"{APP_NODE}.{key}"
    if isinstance(group, str) and group in app_choices:
        var["group"] = f"{APP_NODE.replace('.', '/')}/{group}"
    return var


def attach(cfg: Mapping[str, Any], compose: Callable[[str], Mapping[str, Any]] | None,
           choices: Mapping[str, Any] | None, cwd: str | os.PathLike[str],
           when: _dt.datetime | None = None) -> tuple[dict[str, Any], Callable[[str], Mapping[str, Any]],
                                                      dict[str, Any]]:
    """Compose an app task's own config into ablate's config, at ``task.params``.

    Also maps the variable onto the app's paths (:func:`_onto_app`), freezes ``${now:}`` once for the
    ablation, refuses ``???`` values and registers the resolvers the app registers when imported.

    Parameters
    ----------
    cfg : mapping
        ablate's composed config (plain container).
    compose : callable or None
        ablate's own ``compose(override)`` (for group variables of ablate's config).
    choices : mapping or None
        ablate's config group choices.
    cwd : path-like
        The project root.
    when : datetime, optional
        The ablation's time, for ``${now:}`` (default: now).

    Returns
    -------
    cfg, compose, choices
        The config with the app's config attached; a composer that also swaps the app's groups
        (``task/params/model=wide``); the choices with the app's groups added under ``task/params/``.

    Raises
    ------
    ConfigError
        Bad settings, an override the app's config refuses, ``???`` values, unknown resolvers.
    """
    when = when or _dt.datetime.now()
    out = copy.deepcopy(dict(cfg))
    task = dict(out["task"])
    if task.get("params") is not None:
        raise ConfigError("is filled by ablate with the app's own composed config", where="task.params",
                          fix="drop `params:`; set the app's keys in `overrides:` (e.g. `overrides: [model.lr=0.1]`)")
    s = settings(task)
    cdir, name, vb = config_location(s, cwd)
    import_app(Path(cwd) / str(s["app"]), Path(cwd))  # before composing: its ConfigStore entries and resolvers
    own: dict[str, Any] = {}

    def compose_params(extra: Sequence[str] = ()) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        params, app_choices, hydra_own = compose_app(cdir, name, vb, [*s["overrides"], *extra])
        own.update(hydra_own)
        frozen = freeze_now(params, when)
        _refuse_missing(params)
        return params, app_choices, sorted(frozen)

    params, app_choices, frozen = compose_params()
    task["params"], task["frozen_now"] = params, frozen
    task["trial_resolved"] = trial_resolved_keys(params)[0]
    task["app_hydra"] = dict(own)
    out["task"] = task
    if isinstance(out.get("variable"), Mapping):
        out["variable"] = _onto_app(out["variable"], params, app_choices)
    all_choices = {**(choices or {}), **{f"{APP_NODE.replace('.', '/')}/{g}": c for g, c in app_choices.items()}}

    def compose_with(extra: str) -> Mapping[str, Any]:
        prefix = APP_NODE.replace(".", "/") + "/"
        if extra.startswith(prefix):
            treat = copy.deepcopy(out)
            p, _, fz = compose_params([extra[len(prefix):]])
            treat["task"] = {**treat["task"], "params": p, "frozen_now": fz,
                             "trial_resolved": trial_resolved_keys(p)[0]}
            return treat
        if compose is None:
            raise ConfigError(f"cannot compose {extra}", where="variable",
                              fix="run the ablation from the CLI (`ablate -m ...`), which composes each arm")
        base = dict(compose(extra))
        base["task"] = {**dict(base.get("task") or {}), "params": params, "frozen_now": frozen,
                        "trial_resolved": task["trial_resolved"], "app_hydra": task["app_hydra"]}
        return base

    return out, compose_with, all_choices


# -- the trial's argv -------------------------------------------------------------------------------
def arm_variable(plan: Mapping[str, Any], arm: Mapping[str, Any]) -> Mapping[str, Any]:
    """The variable an arm ablates: in a suite, the arm's own (named by its ``variable``), else the plan's.

    A suite's plan-level ``variable`` only summarises its variables (``lr+model``, keys joined by
    commas); an override built from it would set no key, or a key that does not exist.

    Parameters
    ----------
    plan : mapping
        The plan record (``ablation.yaml``): ``variable`` and, in a suite, ``suite.variables``.
    arm : mapping
        The arm's record (``name``, ``value`` and, in a suite, ``variable``).

    Raises
    ------
    ConfigError
        A suite treatment whose variable is not one of the suite's (an edited ``ablation.yaml``).
    """
    suite = (plan.get("suite") or {}).get("variables")
    if not suite or arm.get("name") == "control":
        return plan.get("variable") or {}
    for v in suite:
        if v.get("name") == arm.get("variable"):
            return v
    raise ConfigError(f"arm {arm.get('name')} names variable {arm.get('variable')!r}, which is not one of the "
                      f"suite's ({', '.join(str(v.get('name')) for v in suite)})", where="ablation.yaml",
                      fix="restore the sweep dir's ablation.yaml as ablate wrote it, or plan the suite again")


def arm_override(variable: Mapping[str, Any], arm: Mapping[str, Any]) -> list[str]:
    """The override that makes an arm of the app: none for control, ``key=value`` or ``group=option``; then, for an
    arm of a tuned ablation, ``key=value`` for each tuned key of its setting.

    ``variable`` is the arm's own (:func:`arm_variable`). A string value is passed as written in the
    plan, interpolations included (``${hydra:runtime.output_dir}/alt``): the app resolves it in the trial,
    against its own config, exactly as the plan resolved it to prove the arm's changes.
    """
    tuned = [format_override(k, v) for k, v in ((to_app_key(str(k)), v) for k, v in (arm.get("setting") or {}).items())
             if k]  # a tuned ablation's setting (:mod:`ablate.plan.tuning`): the app's own keys
    if not variable or arm.get("base", arm.get("name")) == "control":
        return tuned
    key = str(variable.get("key", ""))
    if variable.get("is_group"):
        app_group = to_app_key(key.replace("/", "."))
        return [*([f"{app_group.replace('.', '/')}={arm.get('value')}"] if app_group else []), *tuned]
    app_key = to_app_key(key)
    return [*([format_override(app_key, arm.get("value"), interpolate=True)] if app_key else []), *tuned]


def build_argv(task: Mapping[str, Any], arm_overrides: Sequence[str], *, seed: int, run_dir: Path) -> list[str]:
    """The full argv of one app trial (see the module docstring).

    Parameters
    ----------
    task : mapping
        The trial's resolved task config (``params`` holds the app's resolved config).
    arm_overrides : sequence of str
        The arm's change (:func:`arm_override`).
    seed : int
        The trial seed, passed at ``seed_key``.
    run_dir : Path
        The app's output dir (``hydra.run.dir``).
    """
    s = settings(task)
    params = task.get("params") or {}
    argv = [sys.executable, str(s["app"]), *_config_flags(s), *s["overrides"], *arm_overrides]
    for key in task.get("frozen_now") or []:
        argv.append(format_override(key, select(params, key)))
    if s["seed_key"]:  # a key of the app's config (:func:`check_seed_key`): overridden, never appended
        argv.append(format_override(s["seed_key"], int(seed)))
    argv.append(RUN_MODE_OVERRIDE)  # one job per trial, whatever hydra.mode the app's config sets
    argv.append(format_override("hydra.run.dir", str(run_dir)))
    argv.append(CALLBACK_OVERRIDE)
    return argv


def _config_flags(s: Mapping[str, Any]) -> list[str]:
    """Hydra's ``--config-path`` / ``--config-name`` for a task that names the app's config itself (the plan composed
    that one, so the trial must run it, not its ``@hydra.main`` default); ``config_path`` is the project's, written
    relative to the script's dir, as Hydra reads it (the trial runs the script from its mirror of the snapshot)."""
    flags = []
    if s.get("config_path") is not None:
        rel = os.path.relpath(str(s["config_path"]), os.path.dirname(str(s["app"])) or ".")
        flags.append(f"--config-path={rel}")
    if s.get("config_name") is not None:
        flags.append(f"--config-name={s['config_name']}")
    return flags


def _has(cfg: Mapping[str, Any], key: str) -> bool:
    return select(cfg, key) is not MISSING


def _seed_key_fix(key: str, config_file: str) -> str:
    add = f"`{key}: 0`" if "." not in key else f"the key `{key}` (a value such as 0)"
    return (f"add {add} to the app's config ({config_file}) and seed from it, or set `seed_key: <the key the app "
            "seeds from>` in the task's YAML (`+task.seed_key=<key>` on the command line), or `seed_key: null` "
            "(`+task.seed_key=null`) if ablate should pass no seed: each trial then gets its seed only in "
            "$ABLATE_SEED (and PYTHONHASHSEED unless determinism=off), and the app seeds itself as it does "
            "when run alone")


def check_seed_key(task: Mapping[str, Any], cwd: str | os.PathLike[str]) -> None:
    """Refuse a ``seed_key`` the app's composed config lacks: Hydra would refuse every trial's ``<key>=<seed>``.

    Raises
    ------
    ConfigError
        The key is not in the composed config (``task.params``), naming the app's config file and the fixes.
    """
    s = settings(task)
    key = s["seed_key"]
    if not key or _has(task.get("params") or {}, str(key)):
        return
    cdir, name, _ = config_location(s, cwd)
    path = cdir / f"{name}.yaml"
    with contextlib.suppress(ValueError):
        path = path.relative_to(Path(cwd).resolve())
    raise ConfigError(f"the app's composed config has no key {key!r}, so Hydra would refuse every trial's "
                      f"`{key}=<seed>` (Could not override {key!r})", where="task.seed_key",
                      fix=_seed_key_fix(str(key), str(path)))


def refused_override(stderr: str, task: Mapping[str, Any]) -> ConfigError | None:
    """Hydra refusing an override an app trial passed (the app's own words, from its stderr), or None.

    A seed key the app's config lacks is refused at planning (:func:`check_seed_key`); this names it when a
    trial meets it anyway (the app's config changed under a resumed ablation).
    """
    key = hydra_refused_key(stderr)
    if key is None:
        return None
    s = settings(task)
    tail = tail_lines(stderr, 3).replace("\n", " | ")
    if key == s["seed_key"]:
        return ConfigError(f"the app's config has no key {key!r}, so Hydra refused the trial's seed (stderr: {tail})",
                           where="task.seed_key", fix=_seed_key_fix(key, "its primary config"))
    return ConfigError(f"Hydra refused the override of {key!r} (stderr: {tail})", where="task.overrides",
                       fix="override keys of the app's own config (`python <app> --cfg job` lists them); "
                       "`+key=value` appends a new one")


def preload_warm(task: Mapping[str, Any], code_root: str | os.PathLike[str] | None) -> str:
    """In a warm parent: import the app's script from the code snapshot (never its ``__main__`` block) so its
    forks call its ``@hydra.main`` function (:mod:`ablate.trials.tasks.app_warm`); returns the function's name.

    Raises
    ------
    ConfigError
        The script has no ``@hydra.main`` function.
    Exception
        Whatever importing the script raises.
    """
    script = app_warm.script_path(task, code_root)
    fn = str(read_decorator(script)["function"])
    mod = app_warm.load(script)
    _IMPORTED.add(str(script))  # its import-time resolvers are registered: a trial never imports it again
    app_warm.remember(script, mod, fn)
    return fn


class AppForm:
    """The ``app`` task form (see the module docstring)."""

    name = "app"

    def check(self, plan: Any, cwd: str) -> None:
        """The script and its config dir exist, its decorator can be read, and Hydra composes each treatment
        with its key's change alone. A key resolved only in the trial that depends on the variable is not refused:
        the verdict proves it from what each trial's app resolved (:mod:`ablate.judge.trial_resolved`)."""
        config_location(settings(plan.control.config["task"]), cwd)
        check_seed_key(plan.control.config["task"], cwd)
        check_arms_with_hydra(plan, cwd)

    def register_resolvers(self, task: Mapping[str, Any], code_root: Any) -> None:
        """In a trial: register the resolvers the app registers when imported (from the code snapshot)."""
        root = Path(code_root) if code_root else Path.cwd()
        register_app_resolvers(task.get("params") or {}, root / str(task["app"]), root,
                               task.get("trial_resolved") or [])

    def run(self, cfg: Mapping[str, Any], tp: Any, opts: Mapping[str, Any], *, plan: Mapping[str, Any],
            arm: Mapping[str, Any], code_root: Any = None) -> TaskOutput:
        """Run the app for one trial and read its metric from what it produced."""
        task = cfg["task"]
        s = settings(task)
        seed = int(cfg["seed"])
        mode = seeding.check_mode(opts.get("determinism", "seeded"))
        run_dir = tp.dir / RUN_DIR_NAME
        run_dir.mkdir(parents=True, exist_ok=True)
        argv = build_argv(task, arm_override(arm_variable(plan, arm), arm), seed=seed, run_dir=run_dir)
        set_env = {**seeding.environment_for(mode, seed), **seeding.seed_environment(seed), "ABLATE_DETERMINISM": mode,
                   "ABLATE_TRIAL_DIR": str(tp.dir), "ABLATE_RUN_DIR": str(run_dir), "PYTHONUNBUFFERED": "1"}
        if os.environ.get(seeding.APP_HASH_SEED_ENV):  # `ablate repro` of a trial that ran in a warm fork
            set_env["PYTHONHASHSEED"] = os.environ[seeding.APP_HASH_SEED_ENV]
        set_env.update({str(k): str(v) for k, v in (s["env"] or {}).items()})
        cwd, snapshot = task_dir(tp, task)
        warm = app_warm.loaded(task, code_root)  # a fork of a warm parent holding the app: call it here

        def refused(stderr: str) -> ConfigError | None:  # read as an app's failure, never a command task's
            return refused_override(stderr, task)

        with guard_snapshot(snapshot, s.get("data")):
            if warm is not None:
                record = app_warm.call(warm, argv, set_env, cwd, tp, task, refused=refused)
            else:
                record = spawn(argv, set_env, cwd, tp, opts, task, refused=refused)
        lines = read_from(tp.stdout, record["stdout_start"], max_bytes=1 << 24).splitlines()
        err = read_from(tp.stderr, record["stderr_start"], max_bytes=1 << 24).splitlines()
        series: dict[str, Any] = {}
        metrics, source = collect(run_dir, lines, str(plan.get("metric") or s["metric"]), source=s["metric_source"],
                                  reduce=s["reduce"], stdout_path=tp.stdout, stderr_lines=err, stderr_path=tp.stderr,
                                  patterns=compile_patterns(s["metric_pattern"]),
                                  work_dir=own_workdir(cwd, tp), series_out=series)
        try:
            seen = json.loads((run_dir / SEEN_FILE).read_text())
        except (OSError, ValueError):
            seen = None
        return TaskOutput(metrics=metrics, source=source, seen=seen if seen and "config" in seen else None,
                          series=series)

    def dry_run_lines(self, plan: Any, cwd: str) -> list[str]:
        """Each arm's exact argv for the first seed (``<trial dir>`` stands for the trial's own dir)."""
        record = {"variable": {"key": plan.variable.key, "is_group": plan.variable.is_group}, **suite_record(plan)}
        lines = []
        seed = plan.seeds[0]
        for arm in plan.arms:
            with trial_hydra(Path("<trial dir>") / "run", plan.control.config["task"]):
                task = resolve(arm.config)["task"]
            rec = {"name": arm.name, "value": arm.value, "variable": arm.variable}
            argv = build_argv(task, arm_override(arm_variable(record, rec), rec), seed=seed,
                              run_dir=Path("<trial dir>") / "run")
            argv[0] = "python"
            lines.append(f"  argv {arm.name} seed={seed}: {shlex.join(argv)}")
        task = plan.control.config["task"]
        if not task.get("seed_key", APP_TASK_KEYS["seed_key"]):
            lines.append("  seed: NOT passed to the app (`seed_key: null`): each trial's seed is only in $ABLATE_SEED "
                         "(and PYTHONHASHSEED unless determinism=off); an app that reads neither runs the same for "
                         "every seed. To pass it: `seed_key: <the app's seed key>`")
        mode = (task.get("app_hydra") or {}).get("mode", "RUN")
        if mode != "RUN":
            lines.append(f"  hydra.mode: the app's config sets {mode}; each trial runs it with {RUN_MODE_OVERRIDE} "
                         "(one job, in the trial's own dir)")
        later = sorted({k for arm in plan.arms for k in arm.config["task"].get("trial_resolved") or []})
        if later:
            lines.append(f"  resolved only in the trial: {', '.join(later)} (a resolver the app registers when it "
                         "runs); the arms are compared on their unresolved text")
        dependent = sorted({k for keys in plan_dependent(plan.arms).values() for k in keys})
        if dependent:
            lines.append(f"  depends on the variable, resolved only in the trial: {', '.join(dependent)}; each trial's "
                         "app records what it resolved, and the verdict checks from those records that every arm "
                         "differs from control in its variable alone")
        return lines


def check_arms_with_hydra(plan: Any, cwd: str | os.PathLike[str]) -> None:
    """Compose each treatment of a key variable with Hydra, as its trial's argv will, and compare with control.

    The app's own schema then checks the treatment value (an Enum name, a type) before anything
    launches, and Hydra's composition must differ from control's in the variable's key alone.
    (A group variable's arms are composed by Hydra already.)

    Raises
    ------
    ConfigError
        Hydra refuses a treatment's override, or its composition changes other keys too.
    """
    var = plan.variable
    app_key = to_app_key(var.key)
    if var.is_group or not app_key:
        return
    s = settings(plan.control.config["task"])
    cdir, name, vb = config_location(s, cwd)
    control = flatten(compose_app(cdir, name, vb, s["overrides"])[0])
    for arm in plan.arms[1:]:
        if getattr(arm, "variable", None):  # a suite's arm: its own variable's override is the suite's to build
            continue
        ov = arm_override({"key": var.key, "is_group": False}, {"name": arm.name, "value": arm.value})
        try:
            treat = flatten(compose_app(cdir, name, vb, [*s["overrides"], *ov])[0])
        except ConfigError as exc:
            raise ConfigError(f"treatment {arm.name}: {exc.what}", where="variable.values",
                              fix="give a value the app's config accepts for its key") from None
        extra = sorted(k for k in set(control) | set(treat)
                       if not same_value(control.get(k, MISSING), treat.get(k, MISSING))
                       and k != app_key and not k.startswith(app_key + "."))
        if extra:
            raise ConfigError(f"Hydra composes treatment {arm.name} ({' '.join(ov)}) with more changes than the "
                              f"variable: {', '.join(extra[:5])}", where="variable",
                              fix="ablate a key no other key of the app's config is composed from")


FORM = AppForm()
