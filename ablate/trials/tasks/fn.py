"""The ``fn`` form of a task: a Python callable ``module:function`` called in the trial process.

``fn(cfg: DictConfig) -> Mapping[str, float] | None``; the trial seeds every generator before calling it.
Its run dir is ``<trial dir>/run`` (created before the call), under every launcher, named by
``$ABLATE_RUN_DIR`` (with ``$ABLATE_TRIAL_DIR`` and ``$ABLATE_SEED``) and, for a function whose module uses
``HydraConfig``, by ``HydraConfig.get().runtime.output_dir`` as in a Hydra run.

Metrics come from the sources of :mod:`ablate.metrics`, as for ``command`` and ``app`` tasks,
with the task's settings (in ``conf/task/<name>.yaml``, beside ``fn``)::

    metric_source: auto     # auto | return | csv | tensorboard | json | stdout | stderr
    metric_pattern: null    # printed lines to read: 'val loss (?P<val_loss>[0-9.eE+-]+)'
    reduce: last            # last | min | max, for a metric logged at many steps

The return value is the first source: a mapping holding ``task.metric`` is used as it is (with
``metric_source: auto`` or ``return``). Otherwise (``None``, a mapping without the metric, or
``metric_source`` naming another source) the metric is looked for in the files the task wrote under its
run dir (a Lightning-style ``metrics.csv``, TensorBoard events, ``*.json``/``*.jsonl``) and, when the task
declares ``metric_pattern`` (or ``metric_source: stdout``/``stderr``), in the lines it printed, which
reach the trial's ``stdout.log``/``stderr.log`` under every launcher (:mod:`ablate.trials.tasks.capture`).
Undeclared ``key: value`` lines are not read for an ``fn`` task. The metrics found are added to what the
function returned, and ``result.json`` records the source, the matched line or row and the rule
(``metric_source``). A function that returns ``None`` and logs the metric nowhere fails with a message
listing what each source had.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import pickle
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ablate import metrics
from ablate.errors import ConfigError
from ablate.plan.hydra_semantics import trial_hydra
from ablate.trials.isolation import within
from ablate.trials.tasks.capture import trial_output
from ablate.trials.tasks.contract import TaskOutput
from ablate.trials.tasks.taskcheck import check_task_fn
from ablate.trials.workdir import WORK_DIR_NAME

#: The metric settings of an ``fn`` task, and their defaults (see the module docstring).
FN_METRIC_SETTINGS = {"metric_source": "auto", "metric_pattern": None, "reduce": "last"}
#: The sources an ``fn`` task's metric may come from (no ``file``: that is a command task's $ABLATE_METRICS_FILE).
FN_SOURCES = tuple(k for k in metrics.SOURCES if k != "file")
RUN_DIR_NAME = "run"


def import_callable(spec: str, code_root: str | os.PathLike[str] | None = None) -> Callable[..., Any]:
    """Import ``module:function`` (or ``module.function``), from ``code_root`` first when given.

    When ``code_root`` is given (the code snapshot of the pinned commit), modules of the task's
    top-level package that were already imported from elsewhere are dropped from ``sys.modules`` so
    the snapshot's copy is used, not the live working tree's; so is every module imported from another
    snapshot than ``code_root`` (an earlier ablation in this process), whatever its package.

    Raises
    ------
    ConfigError
        When the module cannot be imported or has no such attribute (message names ``task.fn``).
    """
    if ":" in spec:
        mod_name, attr = spec.split(":", 1)
    elif "." in spec:
        mod_name, attr = spec.rsplit(".", 1)
    else:
        raise ConfigError(f"{spec!r} is not `module:function`", where="task.fn",
                          fix="e.g. `task.fn=examples.digits.task:train`")
    if code_root is not None:
        root = str(code_root)
        top = mod_name.split(".")[0]
        if root in _ROOT_IDS and _ROOT_IDS[root] != _dir_id(root):  # a new snapshot at a path used before
            _forget_root(root)
        held = _FROM_ROOT.get(top)
        if root not in sys.path[:1]:
            sys.path.insert(0, root)
        new_root = root not in _ROOTS[-1:]  # not the snapshot this process last imported from
        if new_root and _ROOTS:  # another snapshot than the last one
            _drop_other_snapshots(root)
        if new_root:
            _drop_shadowed(root)
        if held is None or held[0] != root or held[1] is not sys.modules.get(top):
            _drop_outside(top, root)  # else imported from the snapshot already, here or in the warm parent (see below)
        if new_root:
            _ROOTS.append(root)
            _ROOT_IDS[root] = _dir_id(root)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module {mod_name!r} ({exc})", where="task.fn",
                          fix="check the module path; it is imported from the project root "
                          "(the pinned commit's snapshot)") from exc
    if code_root is not None and within(str(getattr(sys.modules.get(top), "__file__", None) or ""), root):
        _FROM_ROOT[top] = (root, sys.modules[top])
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"module {mod_name!r} has no attribute {part!r}", where="task.fn",
                              fix=f"name a function defined in {mod_name}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"{spec!r} is not callable", where="task.fn",
                          fix="name a function, as `task.fn: package.module:function`")
    return obj


#: Top-level package -> (code root, its module) once :func:`import_callable` imported it from that root. While
#: that module object is still ``sys.modules[top]``, nothing of ``top`` can come from elsewhere (the scan ran
#: before it was imported, and a submodule is found through the package's own path, in the snapshot), so the scan of
#: ``sys.modules`` (about 750 copy-on-write page faults in a fork of a parent holding torch) and the finders'
#: cache reset are skipped; the snapshot itself is never edited, and its digest is checked by every trial.
_FROM_ROOT: dict[str, tuple[str, Any]] = {}


#: The code roots :func:`import_callable` imported from in this process, the last one last.
_ROOTS: list[str] = []
#: Code root -> its directory's (device, inode) when first imported from: a snapshot made anew at the same path (a
#: sweep dir deleted and run again in one process) is another snapshot, whose modules are imported afresh.
_ROOT_IDS: dict[str, tuple[int, int] | None] = {}


def _dir_id(root: str) -> tuple[int, int] | None:
    try:
        st = os.stat(root)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _forget_root(root: str) -> None:
    """Forget the snapshot once at ``root`` (gone, and another made there): drop its modules from
    ``sys.modules``, as :func:`_drop_other_snapshots` does for another path."""
    for name, mod in list(sys.modules.items()):
        if within(getattr(mod, "__file__", None) or "", root):
            del sys.modules[name]
    for top in [t for t, (r, _m) in _FROM_ROOT.items() if r == root]:
        del _FROM_ROOT[top]
    _ROOTS[:] = [r for r in _ROOTS if r != root]
    _ROOT_IDS.pop(root, None)
    importlib.invalidate_caches()


def _drop_shadowed(root: str) -> None:
    """Drop from ``sys.modules`` every module imported from outside the snapshot ``root`` that the snapshot
    provides itself (``helper.py`` or ``pkg/sub/__init__.py`` in it under that module's name): the caller's
    own process imported it from the live tree (a notebook's ``import helper`` before ``ablate.run`` under
    ``launcher=inline``, perhaps of a file edited and committed since). A fresh process, with the snapshot
    first on ``sys.path``, would import the snapshot's copy; so does the trial. Modules of the interpreter's
    installation (``sys.prefix``: the standard library, site-packages, a venv inside the project) are kept."""
    installed = tuple({p.rstrip(os.sep) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                           sys.base_exec_prefix)})
    dropped = False
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not f or f.startswith(installed) or within(f, root):
            continue
        rel = os.path.join(root, *name.split("."))
        if os.path.isfile(rel + ".py") or os.path.isfile(os.path.join(rel, "__init__.py")):
            del sys.modules[name]
            dropped = True
    if dropped:
        importlib.invalidate_caches()


def _drop_other_snapshots(root: str) -> None:
    """Drop from ``sys.modules`` every module imported from another code snapshot than ``root`` (an earlier
    ablation of another commit run in this process: ``ablate.run`` twice under ``launcher=inline``), whatever its
    package: a module the task imports (a sibling ``helper.py``) is then this snapshot's, as in a fresh process."""
    others = tuple(r + os.sep for r in _ROOTS if r != root)
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None) or ""
        if f.startswith(others) and not f.startswith(root + os.sep):
            del sys.modules[name]
    importlib.invalidate_caches()


def _drop_outside(top: str, root: str) -> None:
    """Drop from ``sys.modules`` the modules of package ``top`` imported from outside ``root`` (the live tree),
    so the snapshot's copies are imported instead."""
    for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
        f = getattr(sys.modules[name], "__file__", None) or ""
        if not within(f, root):
            del sys.modules[name]
    importlib.invalidate_caches()


_HYDRA_USE: dict[str, tuple[int, int, bool]] = {}


def uses_hydra_config(fn: Callable[..., Any]) -> bool:
    """Whether the function's module names ``HydraConfig`` (read from its source file, once per version of the
    file in a process; no Hydra import)."""
    try:
        path = inspect.getsourcefile(fn)
        if not path:
            return False
        st = os.stat(path)
        hit = _HYDRA_USE.get(path)
        if hit is not None and hit[:2] == (st.st_mtime_ns, st.st_size):
            return hit[2]
        uses = "HydraConfig" in Path(path).read_text(encoding="utf-8", errors="replace")
        _HYDRA_USE[path] = (st.st_mtime_ns, st.st_size, uses)
        return uses
    except (TypeError, OSError):
        return False


_NODES: dict[int, tuple[Mapping[str, Any], dict[str, Any], bytes | None]] = {}


def _node(cfg: Mapping[str, Any], arm: Mapping[str, Any]) -> Any:
    """The trial's config as the OmegaConf ``DictConfig`` the task receives, built once per arm in a process
    that runs several of its trials (``launcher=inline``), or in the warm parent before it forks them
    (:func:`prepare_node`), and copied per seed (unpickled: a sixth of a deep copy's cost, a tenth of building
    it): the task gets its own copy, so what it changes in it never reaches the next trial."""
    from omegaconf import OmegaConf  # noqa: PLC0415  # lazy: OmegaConf off this module's import

    rest = {k: v for k, v in cfg.items() if k != "seed"}
    hit = _NODES.get(id(arm))
    same = hit is not None and hit[0] is arm and hit[1] == rest
    if same and hit[2] is not None:  # type: ignore[index]
        node = pickle.loads(hit[2])  # type: ignore[index]
        node.seed = cfg.get("seed")
        return node
    node = OmegaConf.create(dict(cfg))
    if hit is None:  # the first trial of this arm here: a one-trial process never pays for a template
        _NODES[id(arm)] = (arm, rest, None)
    elif same:  # a second one: keep a template for the rest
        _NODES[id(arm)] = (arm, rest, _template(node))
    return node


def _template(node: Any) -> bytes | None:
    try:
        return pickle.dumps(node)
    except Exception:  # a value that does not pickle: every trial builds its own
        return None


def prepare_node(cfg: Mapping[str, Any], arm: Mapping[str, Any]) -> None:
    """Build the template :func:`_node` copies for ``arm`` from one trial's resolved config ``cfg`` (the warm
    parent, before it forks the arm's trials: each fork then copies it instead of building its own). A trial
    whose config differs from ``cfg`` other than in ``seed`` builds its own, as without it."""
    from omegaconf import OmegaConf  # noqa: PLC0415  # lazy: OmegaConf off this module's import

    _NODES[id(arm)] = (arm, {k: v for k, v in cfg.items() if k != "seed"}, _template(OmegaConf.create(dict(cfg))))


def fn_settings(task: Mapping[str, Any]) -> dict[str, Any]:
    """The metric settings of an ``fn`` task config, defaults filled in and checked.

    Raises
    ------
    ConfigError
        An unknown ``metric_source`` or ``reduce``, or a ``metric_pattern`` that is no regular expression
        with a named group.
    """
    s = {k: task.get(k, d) if task.get(k) is not None else d for k, d in FN_METRIC_SETTINGS.items()}
    if s["metric_source"] not in ("auto", *FN_SOURCES):
        raise ConfigError(f"must be one of auto, {', '.join(FN_SOURCES)}, got {s['metric_source']!r}",
                          where="task.metric_source", fix="e.g. `metric_source: csv`")
    if s["reduce"] not in metrics.REDUCE:
        raise ConfigError(f"must be one of {', '.join(metrics.REDUCE)}, got {s['reduce']!r}", where="task.reduce",
                          fix="e.g. `reduce: min` for the best validation loss over steps")
    s["patterns"] = metrics.compile_patterns(s["metric_pattern"])
    s["lines"] = bool(s["patterns"]) or s["metric_source"] in ("stdout", "stderr")
    return s


def _read_lines(path: Path, start: int) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(start, os.path.getsize(path) - (1 << 24)))
            return fh.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def metrics_of(value: Any, metric: str | None, s: Mapping[str, Any], run_dir: Path, tp: Any,
               starts: tuple[int, int], work_dir: Path | None = None) -> Any:
    """What an ``fn`` trial records: the return value when it holds ``metric`` (or when ``metric_source`` is
    ``return``), else a :class:`TaskOutput` with the metric read from the other sources (see the module).

    A value that is neither None nor a mapping is returned as it is (the trial refuses it, naming the
    contract). A mapping without the metric that no other source has either is returned as it is too:
    that trial fails alone, as before. Files are looked for under ``run_dir``, then among those the task
    wrote into ``work_dir`` (its working dir, ``<trial dir>/work``; never the links to the code).

    Raises
    ------
    ConfigError
        The function returned None and no source has ``metric`` (the message lists what each had).
    """
    source = s["metric_source"]
    if not metric or source == "return" or (value is not None and not isinstance(value, Mapping)):
        return value
    if isinstance(value, Mapping) and metric in value and source == "auto":
        return value
    out_lines = _read_lines(tp.stdout, starts[0]) if s["lines"] else []
    err_lines = _read_lines(tp.stderr, starts[1]) if s["lines"] else []
    series: dict[str, Any] = {}
    try:
        found, record = metrics.collect(run_dir, out_lines, metric, source=source, reduce=s["reduce"],
                                        stdout_path=tp.stdout, stderr_lines=err_lines, stderr_path=tp.stderr,
                                        patterns=s["patterns"], work_dir=work_dir, series_out=series)
    except ConfigError as exc:
        if value is not None:
            return value  # the mapping lacks the metric: this trial fails alone, naming what it returned
        raise ConfigError(
            f"the function returned None, and {exc.what.replace('the script logged', 'it logged')}",
            where=exc.where or "task.metric",
            fix=f"return a mapping such as {{'{metric}': value}}, or log it in the trial's run dir "
            "($ABLATE_RUN_DIR: a metrics.csv, TensorBoard events, a JSON file), or print it and declare "
            f"`metric_pattern: '{metric} (?P<{metric}>[0-9.eE+-]+)'`" + (f"; {exc.fix}" if s["patterns"] else ""),
        ) from None
    return TaskOutput(metrics={**(value or {}), **found}, source=record, series=series)


def call_and_read(call: Callable[[], Any], task: Mapping[str, Any], metric: str | None, tp: Any, run_dir: Path,
                  s: Mapping[str, Any] | None = None, work_dir: Path | None = None) -> Any:
    """Call an ``fn`` task (``call()``) with its printed output reaching ``tp``'s logs when it reads printed
    lines (:func:`ablate.trials.tasks.capture.trial_output`), and read its metric (:func:`metrics_of`; the
    files it wrote into ``work_dir``, its working dir, after those in ``run_dir``).

    Used by a trial (:meth:`FnForm.run`) and by a single run (``ablate`` without ``-m``, in Hydra's run dir).
    """
    s = fn_settings(task) if s is None else s
    with trial_output(tp.stdout, tp.stderr) if s["lines"] else contextlib.nullcontext() as cap:
        value = call()
    starts = (cap.stdout_start, cap.stderr_start) if cap is not None else (0, 0)
    return metrics_of(value, metric, s, run_dir, tp, starts, work_dir)


class FnForm:
    """The ``fn`` task form (see the module docstring)."""

    name = "fn"

    def check(self, plan: Any, cwd: str) -> None:
        """Check that ``task.fn`` names a function that exists, without importing it, and its metric settings."""
        task = plan.control.config.get("task") or {}
        check_task_fn(str(task["fn"]), cwd)
        fn_settings(task)

    def run(self, cfg: Mapping[str, Any], tp: Any, opts: Mapping[str, Any], *, plan: Mapping[str, Any],
            arm: Mapping[str, Any], code_root: Any = None) -> Any:
        """Import ``task.fn`` from the code snapshot, call it with the trial's resolved config, and read its
        metric (:func:`metrics_of`). The trial (:func:`ablate.trials.trial.run_trial`) has set ``$ABLATE_RUN_DIR``
        (``$ABLATE_TRIAL_DIR``, ``$ABLATE_SEED``) to this run dir, which is also HydraConfig's output dir, and
        made the trial's own working dir (``<trial dir>/work``, :func:`ablate.trials.workdir.trial_workdir`) the
        cwd: what the task writes there is read as the run dir's files are."""
        task = cfg.get("task") or {}
        s = fn_settings(task)
        fn = import_callable(str(task["fn"]), code_root)
        run_dir = Path(tp.dir) / RUN_DIR_NAME
        run_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tp.dir) / WORK_DIR_NAME

        def call() -> Any:
            with trial_hydra(run_dir, task) if uses_hydra_config(fn) else contextlib.nullcontext():
                return fn(_node(cfg, arm))

        return call_and_read(call, task, plan.get("metric") or task.get("metric"), tp, run_dir, s,
                             work if work.is_dir() else None)

    def dry_run_lines(self, plan: Any, cwd: str) -> list[str]:
        """A dry run of an ``fn`` task names the callable."""
        return [f"  task: fn {(plan.control.config.get('task') or {}).get('fn')} (called in each trial's process)"]


FORM = FnForm()
