"""The ``app`` form of a task: an existing ``@hydra.main`` script, ablated as it is.

A task config (``conf/task/<name>.yaml``)::

    app: src/train.py               # the script, relative to the project root; never edited
    config_path: null               # default: read from its @hydra.main(config_path=...), relative to it
    config_name: null               # default: read from its @hydra.main(config_name=...)
    overrides: [trainer=cpu, trainer.max_epochs=1]   # the app's overrides, the same in every arm
    metric: val/acc
    goal: maximize
    metric_source: auto             # auto | return | csv | tensorboard | json | stdout (ablate.trials.tasks.metrics)
    reduce: last                    # last | min | max, for a metric logged at many steps
    seed_key: seed                  # the app's seed key (passed as seed=<k>); null: not passed
    data: [data/digits.npz]
    env: {}

ablate composes the app's own config with Hydra (its config dir and name, plus ``overrides``); that
composed default is the control, placed at ``task.params``. A variable names the app's own paths:
``key: model.optimizer.lr`` or ``group: model`` with ``values: [mnist_wide]``. App overrides can also
be given on ablate's command line with the ``app.`` prefix (``ablate -m ... app.trainer.max_epochs=1``,
``app.trainer=cpu``), which cannot collide with ablate's own settings.

Each trial runs ``python <app> <overrides> <the arm's change> <frozen ${now:} values> seed=<k>
hydra.run.dir=<trial dir>/run +hydra.callbacks.ablate_return...`` in the pinned code snapshot, and
reads the metric from what the app produced (:mod:`ablate.trials.tasks.metrics`). A trial forked from a
warm parent that imported the app (``launcher.warm=true``) calls the app's ``@hydra.main`` function in its
own process with that same argv instead (:mod:`ablate.trials.tasks.app_warm`).
"""

from __future__ import annotations

import ast
import copy
import datetime as _dt
import importlib.util
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError, close_matches
from ablate.plan.app_config import APP_NODE, to_app_key
from ablate.plan.arms import MISSING, flatten, resolve, select
from ablate.plan.compose import reject_sweeps
from ablate.plan.hydra_semantics import freeze_now, missing_keys, trial_hydra
from ablate.plan.overrides import format_override
from ablate.trials import seeding
from ablate.trials.tasks import app_warm
from ablate.trials.tasks.base import TaskOutput
from ablate.trials.tasks.command import RUN_DIR_NAME, read_from, spawn, task_dir
from ablate.trials.tasks.hydra_callback import CALLBACK_OVERRIDE
from ablate.trials.tasks.metrics import REDUCE, SOURCES, collect

#: Settings of an app task, with defaults (anything else is refused with close matches).
APP_TASK_KEYS: dict[str, Any] = {
    "app": None, "config_path": None, "config_name": None, "overrides": [], "metric": None, "goal": "maximize",
    "metric_source": "auto", "reduce": "last", "seed_key": "seed", "data": [], "env": {},
}
#: Keys ablate fills in (the composed config and the keys whose ``${now:}`` it froze).
FILLED_KEYS = ("params", "frozen_now")
#: The command-line prefix of an app override.
CLI_PREFIX = "app."
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
        raise ConfigError(f"{script} has a syntax error at line {exc.lineno}: {exc.msg}", where="task.app") from None
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
    if s["metric_source"] not in ("auto", *SOURCES):
        raise ConfigError(f"must be one of auto, {', '.join(SOURCES)}, got {s['metric_source']!r}",
                          where="task.metric_source", fix="e.g. `metric_source: csv`")
    if s["reduce"] not in REDUCE:
        raise ConfigError(f"must be one of {', '.join(REDUCE)}, got {s['reduce']!r}", where="task.reduce",
                          fix="e.g. `reduce: max` for the best validation accuracy over epochs")
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
                overrides: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compose the app's config with Hydra, as ``python <app> <overrides>`` would.

    Returns
    -------
    config, choices : dict, dict
        The composed config without ``hydra`` (interpolations unresolved), and the option chosen in
        each of the app's config groups.

    Raises
    ------
    ConfigError
        An override Hydra refuses (an unknown key or option: close matches listed).
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

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
    container: dict[str, Any] = OmegaConf.to_container(cfg, resolve=False)  # type: ignore[assignment]
    container.pop("hydra", None)
    return container, {k: v for k, v in choices.items() if not k.startswith("hydra/")}


def _explain(exc: Exception, cdir: Path, name: str, version_base: str | None,
             overrides: Sequence[str]) -> ConfigError:
    msg = str(exc).strip()
    first = msg.splitlines()[0] if msg else type(exc).__name__
    m = re.search(r"Could not override '([^']+)'", msg) or re.search(r"Key '([^']+)' is not in struct", msg)
    if m:
        key = m.group(1)
        try:
            base, choices = compose_app(cdir, name, version_base, [])
            near = close_matches(key, list(flatten(base)) + list(choices))
        except ConfigError:
            near = []
        hint = f" Close matches: {', '.join(near)}." if near else ""
        return ConfigError(f"{key!r} is not a key of the app's config ({cdir}/{name}.yaml).{hint}",
                           where="task.overrides", fix=f"fix the override, or add a new key with +{key}=...")
    m = re.search(r"Could not find '([^']+)/([^']+)'", msg)
    if m:
        group, option = m.group(1), m.group(2)
        opts = sorted(p.stem for p in (cdir / group).glob("*.yaml"))
        near = close_matches(option, opts)
        hint = f"Close matches: {', '.join(near)}. " if near else ""
        return ConfigError(f"the app has no {group} option {option!r}. {hint}Available: {', '.join(opts) or 'none'}",
                           where="task.overrides", fix=f"choose one of them, or add {cdir}/{group}/{option}.yaml")
    return ConfigError(f"the app's config cannot be composed with overrides {list(overrides)}: {first}",
                       where="task.overrides", fix="check the override named above (`python <app> --cfg job` shows "
                       "the app's composed config)")


def unregistered_resolvers(cfg: Any) -> list[str]:
    """Resolver names used in ``${name:...}`` interpolations of ``cfg`` that OmegaConf does not know yet."""
    from hydra.core.utils import setup_globals
    from omegaconf import OmegaConf

    setup_globals()
    names = {m for v in flatten(cfg).values() if isinstance(v, str) for m in _RESOLVER.findall(v)}
    return sorted(n for n in names if not OmegaConf.has_resolver(n))


_IMPORTED: set[str] = set()


def _resolves(cfg: Any) -> bool:
    from omegaconf import OmegaConf

    try:
        with trial_hydra("<trial dir>/run"):
            OmegaConf.to_container(OmegaConf.create(dict(cfg)), resolve=True)
    except Exception:
        return False
    return True


def register_app_resolvers(cfg: Any, script: Path, root: Path) -> None:
    """Import the app's module (never its ``__main__`` block) when its config needs what the import sets up.

    That is: resolvers it registers (``OmegaConf.register_new_resolver`` at the top level), or
    environment variables it sets when imported (``rootutils.setup_root`` sets ``PROJECT_ROOT``, read
    by ``${oc.env:PROJECT_ROOT}``). Imported at most once per process and script.

    Raises
    ------
    ConfigError
        The import fails, or a resolver is still unknown after it.
    """
    missing = unregistered_resolvers(cfg)
    if str(script) in _IMPORTED or (not missing and _resolves(cfg)):
        return
    for p in (str(script.parent), str(root)):
        if p not in sys.path:
            sys.path.insert(0, p)
    spec = importlib.util.spec_from_file_location(f"_ablate_app_{script.stem}", script)
    try:
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    except Exception as exc:
        why = f"uses the resolver(s) {', '.join(missing)}" if missing else "cannot be resolved without it"
        raise ConfigError(f"the app's config {why}; importing {script} failed ({type(exc).__name__}: {exc})",
                          where="task.app",
                          fix="make the script importable (its training starts under `if __name__ == '__main__'`)"
                          ) from None
    _IMPORTED.add(str(script))
    still = unregistered_resolvers(cfg)
    if still:
        raise ConfigError(f"the app's config uses the resolver(s) {', '.join(still)}, which neither Hydra nor "
                          f"{script} registers when imported", where="task.app",
                          fix="register them with OmegaConf.register_new_resolver at the top level of the script")


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


def attach(cfg: Mapping[str, Any], compose: Callable[[str], Mapping[str, Any]] | None,
           choices: Mapping[str, Any] | None, cwd: str | os.PathLike[str],
           when: _dt.datetime | None = None) -> tuple[dict[str, Any], Callable[[str], Mapping[str, Any]],
                                                      dict[str, Any]]:
    """Compose an app task's own config into ablate's config, at ``task.params``.

    Also maps the variable onto the app's paths (``key: model.lr`` -> ``task.params.model.lr``,
    ``group: model`` -> ``task/params/model``), freezes ``${now:}`` once for the ablation, refuses
    ``???`` values and registers the resolvers the app registers when imported.

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

    def compose_params(extra: Sequence[str] = ()) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        params, app_choices = compose_app(cdir, name, vb, [*s["overrides"], *extra])
        frozen = freeze_now(params, when)
        missing = missing_keys(params)
        if missing:
            raise ConfigError(f"the app's config leaves {', '.join(missing[:10])} unset (???, a mandatory value)",
                              where=missing[0], fix=f"give it a value: add `{missing[0]}=<value>` to `overrides:` in "
                              f"the task config, or `app.{missing[0]}=<value>` on ablate's command line")
        return params, app_choices, sorted(frozen)

    params, app_choices, frozen = compose_params()
    register_app_resolvers(params, Path(cwd) / str(s["app"]), Path(cwd))
    task["params"], task["frozen_now"] = params, frozen
    out["task"] = task
    var = out.get("variable")
    if isinstance(var, Mapping):
        var = dict(var)
        key, group = var.get("key"), var.get("group")
        if isinstance(key, str) and not key.startswith(APP_NODE + ".") and key.split(".")[0] in params:
            var["key"] = f"{APP_NODE}.{key}"
        if isinstance(group, str) and group in app_choices:
            var["group"] = f"{APP_NODE.replace('.', '/')}/{group}"
        out["variable"] = var
    all_choices = {**(choices or {}), **{f"{APP_NODE.replace('.', '/')}/{g}": c for g, c in app_choices.items()}}

    def compose_with(extra: str) -> Mapping[str, Any]:
        prefix = APP_NODE.replace(".", "/") + "/"
        if extra.startswith(prefix):
            treat = copy.deepcopy(out)
            p, _, fz = compose_params([extra[len(prefix):]])
            treat["task"] = {**treat["task"], "params": p, "frozen_now": fz}
            return treat
        if compose is None:
            raise ConfigError(f"cannot compose {extra}", where="variable")
        base = dict(compose(extra))
        base["task"] = {**dict(base.get("task") or {}), "params": params, "frozen_now": frozen}
        return base

    return out, compose_with, all_choices


# -- the trial's argv -------------------------------------------------------------------------------
def arm_override(variable: Mapping[str, Any], arm: Mapping[str, Any]) -> list[str]:
    """The override that makes an arm of the app: none for control, ``key=value`` or ``group=option``."""
    if not variable or arm.get("name") == "control":
        return []
    key = str(variable.get("key", ""))
    if variable.get("is_group"):
        app_group = to_app_key(key.replace("/", "."))
        return [f"{app_group.replace('.', '/')}={arm.get('value')}"] if app_group else []
    app_key = to_app_key(key)
    return [format_override(app_key, arm.get("value"))] if app_key else []


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
    argv = [sys.executable, str(s["app"]), *s["overrides"], *arm_overrides]
    for key in task.get("frozen_now") or []:
        argv.append(format_override(key, select(params, key)))
    if s["seed_key"]:
        present = _has(params, s["seed_key"])
        argv.append(format_override(s["seed_key"], int(seed), "" if present else "+"))
    argv.append(format_override("hydra.run.dir", str(run_dir)))
    argv.append(CALLBACK_OVERRIDE)
    return argv


def _has(cfg: Mapping[str, Any], key: str) -> bool:
    return select(cfg, key) is not MISSING


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
        """The script and its config dir exist, and its decorator can be read."""
        config_location(settings(plan.control.config["task"]), cwd)

    def register_resolvers(self, task: Mapping[str, Any], code_root: Any) -> None:
        """In a trial: register the resolvers the app registers when imported (from the code snapshot)."""
        root = Path(code_root) if code_root else Path.cwd()
        register_app_resolvers(task.get("params") or {}, root / str(task["app"]), root)

    def run(self, cfg: Mapping[str, Any], tp: Any, opts: Mapping[str, Any], *, plan: Mapping[str, Any],
            arm: Mapping[str, Any], code_root: Any = None) -> TaskOutput:
        """Run the app for one trial and read its metric from what it produced."""
        task = cfg["task"]
        s = settings(task)
        seed = int(cfg["seed"])
        mode = seeding.check_mode(opts.get("determinism", "seeded"))
        run_dir = tp.dir / RUN_DIR_NAME
        run_dir.mkdir(parents=True, exist_ok=True)
        argv = build_argv(task, arm_override(plan.get("variable") or {}, arm), seed=seed, run_dir=run_dir)
        set_env = {**seeding.environment_for(mode, seed), "ABLATE_SEED": str(seed), "ABLATE_DETERMINISM": mode,
                   "ABLATE_TRIAL_DIR": str(tp.dir), "ABLATE_RUN_DIR": str(run_dir), "PYTHONUNBUFFERED": "1"}
        set_env.update({str(k): str(v) for k, v in (s["env"] or {}).items()})
        warm = app_warm.loaded(task, code_root)  # a fork of a warm parent holding the app: call it here
        if warm is not None:
            record = app_warm.call(warm, argv, set_env, task_dir(tp, task), tp, {**task, "seed_key": s["seed_key"]})
        else:
            record = spawn(argv, set_env, task_dir(tp, task), tp, opts, {**task, "seed_key": s["seed_key"]})
        lines = read_from(tp.stdout, record["stdout_start"], max_bytes=1 << 24).splitlines()
        metrics, source = collect(run_dir, lines, str(s["metric"]), source=s["metric_source"], reduce=s["reduce"],
                                  stdout_path=tp.stdout)
        return TaskOutput(metrics=metrics, source=source)

    def dry_run_lines(self, plan: Any, cwd: str) -> list[str]:
        """Each arm's exact argv for the first seed (``<trial dir>`` stands for the trial's own dir)."""
        var = {"key": plan.variable.key, "is_group": plan.variable.is_group}
        lines = []
        seed = plan.seeds[0]
        for arm in plan.arms:
            with trial_hydra(Path("<trial dir>") / "run", plan.control.config["task"]):
                task = resolve(arm.config)["task"]
            argv = build_argv(task, arm_override(var, {"name": arm.name, "value": arm.value}), seed=seed,
                              run_dir=Path("<trial dir>") / "run")
            argv[0] = "python"
            lines.append(f"  argv {arm.name} seed={seed}: {shlex.join(argv)}")
        return lines


FORM = AppForm()
