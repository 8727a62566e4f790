"""The command form of a task: run an existing script, unmodified, with the trial's settings.

A task config with ``command`` instead of ``fn`` (``conf/task/<name>.yaml``), here for a nanoGPT-style
script (``python train.py config/small.py --dropout=0.1``)::

    command: python train.py config/small.py   # a string (split like a shell would, no shell runs) or a list
    args: --key=value               # how settings reach it: hydra (key=value, the default), --key=value,
                                    #   --key value, env (ablate.trials.tasks.argstyle)
    values: python                  # python (literals: False, 'a b'), json or plain; default per `args`
    params:                         # the script's own settings: each leaf is passed in the `args` style
      dropout: 0.0                  #   -> --dropout=0.0
      compile: false                #   -> --compile=False
    seed_key: seed                  # the trial seed, passed as --seed=<k>; null: not passed
    seed_env: null                  # also set this environment variable to the seed (e.g. SEED)
    determinism_key: null           # e.g. trainer.deterministic: passed as true under determinism=strict
    output_dir_key: out_dir         # passed as --out_dir=<trial dir>/run (hydra.run.dir for args: hydra,
                                    #   else null: not passed)
    metric_pattern: 'val loss (?P<val_loss>[0-9.eE+-]+)'   # printed lines to read (ablate.metrics)
    metric_source: auto             # auto | file | csv | tensorboard | json | stdout | stderr
    reduce: last                    # last | min | max, for a metric logged at many steps
    metrics_file: null              # a JSON the script writes, relative to the run dir (e.g. metrics.json);
                                    #   null: $ABLATE_METRICS_FILE, read when the script writes it
    metrics_key: null               # e.g. metrics_path: that path is also passed as a setting
    timing_metrics: []              # more metrics that measure the machine (``ablate repro`` shows, never
                                    #   compares them; *_runtime, *_per_second, time, duration are known)
    env: {}                         # extra environment variables for the script
    env_prefix: ''                  # args: env: prepended to each variable's name (OPTIM_LR)
    data: [data/train.npz]          # as for any task: DVC-tracked, pinned, verified in every trial
    metric: val_loss
    goal: minimize

How a trial runs it (:func:`run_command_task`):

- **code**: the command runs in the trial's own mirror (``<trial dir>/work``: real dirs, files linked) of
  the code snapshot (``<sweep dir>/code/<project subdir>``, the pinned commit), so edits made after
  launch never reach it, and what it writes into its working dir (a checkpoint, a metrics file) stays
  in its trial's dir; a write into the shared snapshot itself stops the ablation naming the path.
  Each ``task.data`` path is linked into the snapshot from the project, so relative data paths work
  as they do in the project. A first
  word ``python`` or ``python3`` means the interpreter running ablate (the pinned environment).
- **settings**: every leaf under ``task.params`` (the variable's key ``task.params.a.b`` reaches the
  script as ``a.b``; ``task.params.--dropout`` is accepted for ``dropout``), then the seed at
  ``seed_key``, ``determinism_key`` (true under determinism=strict), ``output_dir_key`` (the trial's run
  dir) and ``metrics_key``, in the ``args`` style (Hydra overrides are quoted by
  :mod:`ablate.plan.overrides`). Keys the script's config lacks make Hydra (or argparse, or a
  configurator) refuse, which stops the ablation at the first trial with a message naming the key.
- **paths**: the trial paths handed to the script hold no ``=``, ``,`` or space, which parsers split
  on: when the trial dir's path has one, the script gets a safe alias of it
  (:mod:`ablate.trials.tasks.trialpath`).
- **environment**: the parent's, plus ``PYTHONHASHSEED`` (seeded, strict) and
  ``CUBLAS_WORKSPACE_CONFIG`` (strict), ``ABLATE_SEED``, ``ABLATE_DETERMINISM``, ``ABLATE_TRIAL_DIR``,
  ``ABLATE_RUN_DIR``, ``ABLATE_METRICS_FILE``, and ``task.env``. ablate cannot seed the script's
  generators or switch torch to deterministic algorithms from outside: the script does that from
  the seed it receives (and ``determinism_key`` / ``ABLATE_DETERMINISM``).
- **output**: the script's stdout and stderr are appended to the trial's ``stdout.log`` / ``stderr.log``;
  ``command.json`` records the argv, working dir, the variables ablate set, exit code and duration.
- **result**: exit code 0, and the metric in one of the sources of :mod:`ablate.metrics`
  (the metrics file ablate names, a JSON/CSV/TensorBoard file in the run dir, printed lines) -> the
  metrics; the source, the matched line and the rule are recorded. A non-zero exit is a failed trial
  whose error starts with the script's exception line, then the end of its log; a script killed past
  ``timeout_min`` is a ``timeout``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ablate import metrics
from ablate.errors import ConfigError
from ablate.plan.arms import resolve
from ablate.plan.overrides import flatten_params
from ablate.record.errorline import exception_line
from ablate.record.sweepdir import PLAN_FILE, SweepDir, TrialPaths, open_log, read_json, write_json
from ablate.trials import proctree, seeding
from ablate.trials.tasks import argstyle
from ablate.trials.tasks.contract import ScriptFailed, TaskOutput, TrialTimeout
from ablate.trials.tasks.trialpath import safe_alias
from ablate.trials.workdir import guard_snapshot, own_workdir, trial_workdir

#: Keys a command-form task config may have (anything else is refused: it would not reach the script).
COMMAND_TASK_KEYS = {
    "command": None, "args": "hydra", "values": None, "params": {}, "seed_key": "seed", "seed_env": None,
    "determinism_key": None, "output_dir_key": None, "metrics_file": None, "metrics_key": None,
    "metric_source": "auto", "metric_pattern": None, "reduce": "last", "timing_metrics": [], "env": {},
    "env_prefix": "", "data": [], "metric": None, "goal": "maximize",
}
#: ``output_dir_key`` when the task gives none: Hydra's run dir for Hydra overrides, else not passed.
HYDRA_OUTPUT_DIR_KEY = "hydra.run.dir"
METRICS_ENV = "ABLATE_METRICS_FILE"
RUN_DIR_NAME = "run"
DEFAULT_METRICS_NAME = "metrics.json"
_PYTHONS = ("python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}")


class CommandFailed(ScriptFailed):
    """The task's command exited with a non-zero code (a failed trial; the message starts with its exception
    line, then the end of its log). ``before_first_step``: it printed no metric line before it died."""


def _printed_a_metric(tp: TrialPaths, record: Mapping[str, Any], task: Mapping[str, Any]) -> bool:
    """Whether this run printed any metric line (its ``metric_pattern``, else ``key: value`` lines)."""
    try:
        patterns = metrics.compile_patterns(task.get("metric_pattern"))
    except ConfigError:
        patterns = []
    lines = [*read_from(tp.stdout, int(record.get("stdout_start", 0))).splitlines(),
             *read_from(tp.stderr, int(record.get("stderr_start", 0))).splitlines()]
    return bool(metrics.read_lines(lines, patterns)[0])


# -- building the command ---------------------------------------------------------------------------
def split_command(command: Any) -> list[str]:
    """``task.command`` as an argv list: a string is split like a POSIX shell would (no shell runs).

    Raises
    ------
    ConfigError
        When the command is empty, unparsable (an unclosed quote) or not a string or list of strings.
    """
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ConfigError(f"cannot be split into arguments ({exc}): {command!r}", where="task.command",
                              fix="close the quote, or give the command as a list: [python, train.py]") from None
    elif isinstance(command, list | tuple) and all(isinstance(a, str | int | float) for a in command):
        argv = [str(a) for a in command]
    else:
        raise ConfigError(f"must be a string or a list of strings, got {command!r}", where="task.command",
                          fix="e.g. `command: python train.py` or `command: [python, train.py]`")
    if not argv:
        raise ConfigError("is empty", where="task.command", fix="e.g. `command: python train.py`")
    return argv


def task_settings(task: Mapping[str, Any]) -> dict[str, Any]:
    """The command-form settings of a resolved task config, defaults filled in (see the module docstring).

    Raises
    ------
    ConfigError
        For unknown keys (a hyperparameter outside ``params`` would never reach the script) or a
        setting of the wrong type.
    """
    unknown = sorted(set(task) - set(COMMAND_TASK_KEYS) - {"fn"})
    if unknown:
        raise ConfigError(
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a setting of a command task, and "
            "would never reach the script",
            where=f"task.{unknown[0]}",
            fix=f"move the script's own keys under `params:` (they are passed as overrides); valid settings: "
            f"{', '.join(COMMAND_TASK_KEYS)}",
        )
    s = {k: task.get(k, d) for k, d in COMMAND_TASK_KEYS.items()}
    s["params"] = s["params"] or {}
    if not isinstance(s["params"], Mapping):
        raise ConfigError(f"must be a mapping of the script's config keys, got {s['params']!r}", where="task.params",
                          fix="e.g. `params: {lr: 0.1, epochs: 5}`")
    s["env"] = s["env"] or {}
    if not isinstance(s["env"], Mapping):
        raise ConfigError(f"must be a mapping of variable names to values, got {s['env']!r}", where="task.env",
                          fix="e.g. `task.env: {OMP_NUM_THREADS: '1'}` in the task's YAML")
    s["args"], s["values"] = argstyle.check_style(s["args"], s["values"])
    if "output_dir_key" not in task and s["args"] == "hydra":
        s["output_dir_key"] = HYDRA_OUTPUT_DIR_KEY
    for k in ("seed_key", "seed_env", "determinism_key", "output_dir_key", "metrics_file", "metrics_key"):
        if s[k] is not None and (not isinstance(s[k], str) or not s[k].strip()):
            raise ConfigError(f"must be a non-empty string or null, got {s[k]!r}", where=f"task.{k}",
                              fix=f"set `task.{k}` to a name, or remove it")
        if isinstance(s[k], str) and s["args"] != "hydra" and k.endswith("_key"):
            s[k] = s[k].lstrip("-")  # `seed_key: --seed` names the setting `seed`
    if s["metric_source"] not in ("auto", *metrics.SOURCES):
        raise ConfigError(f"must be one of auto, {', '.join(metrics.SOURCES)}, got {s['metric_source']!r}",
                          where="task.metric_source", fix="e.g. `metric_source: stdout`")
    if s["reduce"] not in metrics.REDUCE:
        raise ConfigError(f"must be one of {', '.join(metrics.REDUCE)}, got {s['reduce']!r}", where="task.reduce",
                          fix="e.g. `reduce: min` for the best validation loss over steps")
    metrics.compile_patterns(s["metric_pattern"])
    s["timing_metrics"] = list(s["timing_metrics"] or [])
    argstyle.check_task_env(s["env"])
    if s["args"] == "env":  # each setting becomes a variable: none may replace ablate's or the process's own
        named = {re.sub(r"(^|\.)-+", r"\1", k): f"task.params.{k}" for k in flatten_params(s["params"])}
        named.update({s[k]: f"task.{k}" for k in ("seed_key", "determinism_key", "output_dir_key", "metrics_key")
                      if s[k]})
        argstyle.check_env_names(named, str(s["env_prefix"] or ""))
    return s


def settings_of(s: Mapping[str, Any], *, seed: int, determinism: str, run_dir: Path,
                metrics_path: Path) -> dict[str, Any]:
    """The flat settings a trial hands its script, in order: ``params``, seed, determinism, dirs."""
    style = s["args"]
    out = {(k if style == "hydra" else re.sub(r"(^|\.)-+", r"\1", k)): v
           for k, v in flatten_params(s["params"]).items()}
    if s["seed_key"]:
        out[s["seed_key"]] = int(seed)
    if s["determinism_key"]:
        out[s["determinism_key"]] = determinism == "strict"
    if s["output_dir_key"]:
        out[s["output_dir_key"]] = str(run_dir)
    if s["metrics_key"]:
        out[s["metrics_key"]] = str(metrics_path)
    return out


def build_command(task: Mapping[str, Any], *, seed: int, determinism: str, run_dir: Path,
                  metrics_path: Path) -> tuple[list[str], dict[str, str]]:
    """One trial's argv and the environment variables its settings set (``args: env``; ``seed_env``).

    Parameters are those of :func:`build_argv`.
    """
    s = task_settings(task)
    argv = split_command(s["command"])
    if argv[0] in _PYTHONS:
        argv[0] = sys.executable
    rendered, env = argstyle.render(settings_of(s, seed=seed, determinism=determinism, run_dir=run_dir,
                                                metrics_path=metrics_path),
                                    s["args"], s["values"], env_prefix=str(s["env_prefix"] or ""))
    if s["seed_env"]:
        env[str(s["seed_env"])] = str(int(seed))
    return argv + rendered, env


def build_argv(task: Mapping[str, Any], *, seed: int, determinism: str, run_dir: Path,
               metrics_path: Path) -> list[str]:
    """The full argv of one trial's command: the command, then its overrides (see the module docstring).

    Parameters
    ----------
    task : mapping
        The resolved task config.
    seed : int
        The trial seed.
    determinism : {"off", "seeded", "strict"}
    run_dir : Path
        The script's output dir (``<trial dir>/run``), passed via ``output_dir_key``.
    metrics_path : Path
        Where the script writes its metrics when ``metrics_file`` is null, passed via ``metrics_key``.
    """
    return build_command(task, seed=seed, determinism=determinism, run_dir=run_dir, metrics_path=metrics_path)[0]


def metrics_location(task: Mapping[str, Any], tp: TrialPaths) -> Path:
    """Where the trial reads the metrics: ``<run dir>/<metrics_file>``, or ``<trial dir>/metrics.json``."""
    name = task.get("metrics_file")
    return tp.dir / RUN_DIR_NAME / str(name) if name else tp.dir / DEFAULT_METRICS_NAME


# -- checking before launch --------------------------------------------------------------------------
def check_command_task(plan: Any, cwd: str | os.PathLike[str]) -> None:
    """Check a command-form task before anything launches, without running it.

    Parameters
    ----------
    plan : ablate.plan.arms.Plan
        The derived plan (its control's task config and each treatment's changed keys).
    cwd : path-like
        The project directory (the command runs in the snapshot of it).

    Raises
    ------
    ConfigError
        Unknown task settings, a command whose program or script cannot be found, or a treatment
        that changes nothing the script receives (no key under ``task.params``, ``task.env`` or
        ``task.command`` changes, so the script would run the control's config in every arm).
    """
    task = resolve(plan.control.config).get("task") or {}
    s = task_settings(task)
    argv = split_command(s["command"])
    prog = argv[0]
    if prog in _PYTHONS:
        script = next((a for a in argv[1:] if not a.startswith("-")), None)
        if script and script.endswith(".py") and not (Path(cwd) / script).is_file():
            raise ConfigError(f"the script {script} does not exist in {Path(cwd).absolute()}", where="task.command",
                              fix="give its path relative to the project root (the command runs in the code "
                              "snapshot of the project), and commit it")
    elif "/" in prog:
        if not (Path(cwd) / prog).is_file():
            raise ConfigError(f"the program {prog} does not exist in {Path(cwd).absolute()}", where="task.command",
                              fix="give its path relative to the project root, and commit it")
    elif shutil.which(prog) is None:
        raise ConfigError(f"the program {prog!r} is not on PATH", where="task.command",
                          fix="install it, or give its path relative to the project root")
    reaches = ("task.params.", "task.env.", "task.command")
    for arm in plan.arms[1:]:
        if not any(k == "task.command" or k.startswith(reaches) for k in arm.changes):
            changed = ", ".join(sorted(arm.changes)) or "nothing"
            raise ConfigError(
                f"treatment {arm.name} changes {changed}, none of which the script receives (it gets only "
                "`task.params` as overrides, plus `task.env`), so every arm would run the same config",
                where="variable.key",
                fix="declare the script's key under `task.params` and ablate it there (e.g. `key: task.params.lr`; "
                "the script receives `lr=<value>`)",
            )


# -- running ------------------------------------------------------------------------------------------
def _find_sweep(tp: TrialPaths) -> SweepDir | None:
    for parent in tp.dir.parents:
        if (parent / PLAN_FILE).is_file():
            return SweepDir(parent)
    return None


def task_dir(tp: TrialPaths, task: Mapping[str, Any]) -> tuple[Path, Path | None]:
    """Where the script runs: the trial's own mirror of the code snapshot (``task.data`` linked in), and
    the shared snapshot to guard (:func:`ablate.trials.workdir.trial_workdir`); the cwd outside a sweep dir."""
    sd = _find_sweep(tp)
    return (Path.cwd(), None) if sd is None else trial_workdir(sd, sd.plan(), task, tp.dir)


def _pdeathsig() -> Any:
    """A preexec function asking Linux to SIGKILL the script when the trial process dies, or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes  # noqa: PLC0415  # lazy: ctypes only on Linux, for prctl

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _kill(proc: subprocess.Popen[bytes], child_group: bool) -> None:
    if proc.poll() is not None:
        return
    if child_group:
        proctree.kill_group(proc.pid)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            proc.kill()
    proc.wait()


def read_from(path: Path, offset: int, max_bytes: int = 65536) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(offset, os.path.getsize(path) - max_bytes))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def tail_lines(text: str, n_lines: int = 20) -> str:
    """The last ``n_lines`` lines of ``text``."""
    return "\n".join(text.rstrip().splitlines()[-n_lines:])


_HYDRA_KEY_ERRORS = (
    re.compile(r"Could not override '([^']+)'"),
    re.compile(r"Key '([^']+)' is not in struct"),
    re.compile(r"Could not append to config\. An item is already at '([^']+)'"),
)


def hydra_refused_key(stderr: str) -> str | None:
    """The key of an override Hydra refused, as its error in ``stderr`` names it, or None."""
    for pat in _HYDRA_KEY_ERRORS:
        m = pat.search(stderr)
        if m:
            return m.group(1)
    return None


def _unknown_key(stderr: str, task: Mapping[str, Any]) -> ConfigError | None:
    """Hydra refusing an override the trial passed: the (command) task config names a key the script lacks."""
    key = hydra_refused_key(stderr)
    if key is not None:
        s = task_settings(task)
        where = "task.params." + key
        if key == s["seed_key"]:
            where = "task.seed_key"
        elif key in (s["determinism_key"], s["metrics_key"]):
            where = "task.determinism_key" if key == s["determinism_key"] else "task.metrics_key"
        return ConfigError(
            f"the script's config has no key {key!r}, so Hydra refused the override (stderr: "
            f"{tail_lines(stderr, 3).replace(chr(10), ' | ')})",
            where=where,
            fix="name keys of the script's own config (`<command> --cfg job` lists them); set "
            "`seed_key: null` if the script takes no seed",
        )
    return None


def read_metrics(path: Path) -> dict[str, Any]:
    """Read the script's metrics JSON: an object of numbers; nested objects flatten to dotted names.

    Raises
    ------
    ConfigError
        When the file is missing, is not JSON, or is not a JSON object.
    """
    try:
        data = read_json(path)
    except FileNotFoundError:
        raise ConfigError(
            f"the command exited 0 but wrote no metrics file at {path}", where="task.metrics_file",
            fix=f"make the script write a JSON object such as {{\"val_acc\": 0.97}} to the path in ${METRICS_ENV}, or "
            "set `metrics_file` to the file it writes in its Hydra output dir (relative to it)",
        ) from None
    except ValueError as exc:
        raise ConfigError(f"the metrics file {path} is not valid JSON ({exc})", where="task.metrics_file",
                          fix="write it with json.dump") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"the metrics file {path} holds a {type(data).__name__}, not a JSON object",
                          where="task.metrics_file", fix="write an object of metric name to number")
    return flatten_params(data)


def run_command_task(cfg: Mapping[str, Any], tp: TrialPaths, opts: Mapping[str, Any],
                     metric: str | None = None) -> TaskOutput:
    """Run ``task.command`` for one trial and return its metrics (see the module docstring).

    Parameters
    ----------
    cfg : mapping
        The trial's resolved config (``seed`` set).
    tp : TrialPaths
        The trial's directory; logs, ``run/`` and ``command.json`` go there.
    opts : mapping
        The ablation's options (``determinism``, ``timeout_min``).
    metric : str, optional
        The verdict's metric (default ``task.metric``), looked for in the script's outputs.

    Returns
    -------
    TaskOutput
        The metrics the script produced (values are checked to be numbers by the trial), and where
        they came from (source, file, step, rule, matched line).

    Raises
    ------
    ConfigError
        No ``fn`` and no ``command``; a bad setting; the script's parser refusing a key it lacks; the
        script exiting 0 without the metric anywhere. These stop the ablation: every trial would
        fail the same way.
    CommandFailed
        The script exited with a non-zero code (the message starts with its exception line).
    TrialTimeout
        The script ran past ``timeout_min`` and was killed.
    """
    task = cfg.get("task") or {}
    if not task.get("command"):
        raise ConfigError("the task declares neither `fn` (module:function) nor `command`", where="task",
                          fix="set `task.fn: my_module:train` in conf/task/<name>.yaml")
    s = task_settings(task)
    seed = int(cfg.get("seed", 0))
    mode = seeding.check_mode(opts.get("determinism", "seeded"))
    run_dir = tp.dir / RUN_DIR_NAME
    run_dir.mkdir(parents=True, exist_ok=True)
    default_metrics = tp.dir / DEFAULT_METRICS_NAME
    metrics_path = metrics_location(task, tp)
    for stale in {default_metrics, metrics_path}:
        stale.unlink(missing_ok=True)
    sd = _find_sweep(tp)
    alias = tp.dir if s["args"] == "hydra" else safe_alias(tp.dir, sd.root if sd is not None else None)  # Hydra
    # quotes its values; other parsers get a path with no `=`, `,` or space
    argv, style_env = build_command(task, seed=seed, determinism=mode, run_dir=alias / RUN_DIR_NAME,
                                    metrics_path=alias / DEFAULT_METRICS_NAME)
    set_env = {**seeding.environment_for(mode, seed), **seeding.seed_environment(seed), "ABLATE_DETERMINISM": mode,
               "ABLATE_TRIAL_DIR": str(alias), "ABLATE_RUN_DIR": str(alias / RUN_DIR_NAME),
               METRICS_ENV: str(alias / DEFAULT_METRICS_NAME), "PYTHONUNBUFFERED": "1", **style_env}
    set_env.update({str(k): str(v) for k, v in (task.get("env") or {}).items()})
    cwd, snapshot = task_dir(tp, task)
    record: dict[str, Any] = {"metrics_file": str(metrics_path)}
    if alias != tp.dir:
        record["trial_dir_alias"] = str(alias)
    with guard_snapshot(snapshot, task.get("data")):
        rec = spawn(argv, set_env, cwd, tp, opts, task, record)
    if metrics_path.is_file():
        read_metrics(metrics_path)  # a metrics file that is there must be a JSON object (a clear error if not)
    return _collect(s, str(metric or s["metric"] or ""), tp, run_dir, metrics_path, cwd, rec)


def _collect(s: Mapping[str, Any], name: str, tp: TrialPaths, run_dir: Path, metrics_path: Path, cwd: Path,
             rec: Mapping[str, Any]) -> TaskOutput:
    """The metrics a finished run produced (:func:`ablate.metrics.collect` over this run's part of its logs, its
    run dir, its metrics file), with their source; a :class:`ConfigError` naming the ways to declare the metric
    when the run exited 0 with none found and nothing declared."""
    out_lines = read_from(tp.stdout, rec["stdout_start"], max_bytes=1 << 24).splitlines()
    err_lines = read_from(tp.stderr, rec["stderr_start"], max_bytes=1 << 24).splitlines()
    patterns = metrics.compile_patterns(s["metric_pattern"])
    series: dict[str, Any] = {}
    try:
        values, source = metrics.collect(run_dir, out_lines, name, source=s["metric_source"], reduce=s["reduce"],
                                         stdout_path=tp.stdout, stderr_lines=err_lines, stderr_path=tp.stderr,
                                         patterns=patterns, metrics_file=metrics_path,
                                         work_dir=own_workdir(cwd, tp), series_out=series)
    except ConfigError as exc:
        if s["metric_source"] == "auto" and not patterns and not metrics_path.is_file():
            raise ConfigError(
                f"the command exited 0 but wrote no metrics file at {metrics_path}, and {exc.what}",
                where="task.metric_pattern",
                fix=f"declare the printed line to read, e.g. `metric_pattern: '{name} (?P<{name}>[0-9.eE+-]+)'`; or "
                f"make the script write a JSON object such as {{\"{name}\": 0.97}} to the path in ${METRICS_ENV}, or "
                "set `metrics_file` to the file it writes in its run dir (relative to it)",
            ) from None
        raise
    return TaskOutput(metrics=values, source=source, series=series)


def spawn(argv: list[str], set_env: Mapping[str, str], cwd: Path, tp: TrialPaths, opts: Mapping[str, Any],
          task: Mapping[str, Any], record: dict[str, Any] | None = None, *,
          refused: Callable[[str], ConfigError | None] | None = None) -> dict[str, Any]:
    """Run one trial's script to its end, its output appended to the trial's logs; write ``command.json``.

    Parameters
    ----------
    argv : list of str
        The full command line.
    set_env : mapping
        The environment variables ablate sets on top of its own environment (recorded).
    cwd : Path
        Where the script runs (the code snapshot).
    tp : TrialPaths
        The trial's directory.
    opts : mapping
        The ablation's options (``timeout_min``).
    task : mapping
        The resolved task config (to name a key Hydra refused).
    record : dict, optional
        Extra fields for ``command.json``.
    refused : callable, optional
        Reads a failed run's stderr as the task's form knows it: the :class:`ConfigError` of an argument or
        override every trial would have refused, or None (default: a ``command`` task's, :func:`refused_by`).

    Returns
    -------
    dict
        The ``command.json`` record (``argv``, ``cwd``, ``env``, ``returncode``, ``duration_s``,
        ``stdout_start``: the offset in ``stdout.log`` where this run's output begins).

    Raises
    ------
    ConfigError
        The program cannot start, or Hydra refused a key the script's config lacks.
    CommandFailed
        A non-zero exit.
    TrialTimeout
        The script ran past ``timeout_min`` and was killed.
    """
    # A trial process that leads its process group (launcher=local) keeps the script in it, so the launcher's
    # group kill reaches the script; otherwise (inline, SLURM) the script gets its own group, killed on timeout.
    child_group = os.getpgrp() != os.getpid()
    timeout_s = float(opts["timeout_min"]) * 60 if opts.get("timeout_min") else None
    record = {"argv": argv, "cwd": str(cwd), "env": dict(set_env), **(record or {})}

    out_fd, err_fd = open_log(tp.stdout), open_log(tp.stderr)
    err_start = os.fstat(err_fd).st_size
    record["stdout_start"] = os.fstat(out_fd).st_size
    record["stderr_start"] = err_start
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **set_env}, stdin=subprocess.DEVNULL,
                                stdout=out_fd, stderr=err_fd, start_new_session=child_group,
                                preexec_fn=_pdeathsig())
    except OSError as exc:
        raise ConfigError(f"cannot start {argv[0]!r} ({exc.strerror})", where="task.command",
                          fix="check the program name and that it is executable") from None
    finally:
        os.close(out_fd)
        os.close(err_fd)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc, child_group)
        record.update(returncode=proc.returncode, duration_s=time.perf_counter() - t0, timed_out=True)
        write_json(tp.dir / "command.json", record)
        raise TrialTimeout(f"exceeded timeout_min ({timeout_s / 60:g} min); the command was killed; log tail:\n"
                           f"{tail_lines(read_from(tp.stderr, err_start))}") from None
    except BaseException:  # SIGALRM timeout of an inline trial, Ctrl-C: never leave the script running
        _kill(proc, child_group)
        raise
    record.update(returncode=proc.returncode, duration_s=time.perf_counter() - t0)
    write_json(tp.dir / "command.json", record)
    if proc.returncode != 0:
        raise _failure(proc.returncode, tp, record, task, refused)
    return record


def _failure(rc: int, tp: TrialPaths, record: Mapping[str, Any], task: Mapping[str, Any],
             refused: Callable[[str], ConfigError | None] | None) -> ConfigError | CommandFailed:
    """What a run that exited with ``rc`` (non-zero) raises: the :class:`ConfigError` of an argument every trial
    would have refused (``refused``, :func:`spawn`), else :class:`CommandFailed` naming how it ended, its exception
    line and the end of its log (this run's part of ``stderr.log``, or of ``stdout.log`` when that is empty)."""
    stderr = read_from(tp.stderr, record["stderr_start"])
    bad_key = (refused or (lambda text: refused_by(text, task)))(stderr)
    if bad_key is not None:
        return bad_key
    how = f"exited with code {rc}"
    if rc < 0:
        how = f"was killed by signal {-rc}"
        with contextlib.suppress(ValueError):
            how = f"was killed by {signal.Signals(-rc).name}"
    log, text = ("stderr.log", stderr) if stderr.strip() else ("stdout.log", read_from(tp.stdout,
                                                                                       record["stdout_start"]))
    line = exception_line(text)
    failed = CommandFailed(f"the command {how}" + (f": {line}" if line else "")
                           + f"; end of its log ({log}):\n{tail_lines(text) or '(empty)'}")
    failed.before_first_step = not _printed_a_metric(tp, record, task)
    return failed


_REFUSED_ARGS = (
    re.compile(r"error: unrecognized arguments: (.+)"),  # argparse
    re.compile(r"error: the following arguments are required: (.+)"),  # argparse, given key=value positionals
    re.compile(r"arguments are not used by the HfArgumentParser: (.+)"),  # transformers' HfArgumentParser
    re.compile(r"Unknown config key: (.+)"),  # nanoGPT's configurator
    re.compile(r"error: argument ([^:]+): (?:expected one argument|invalid \w+ value)"),  # argparse
)


def refused_by(stderr: str, task: Mapping[str, Any]) -> ConfigError | None:
    """What a ``command`` task's failed run refused (a Hydra key, the script's own parser), or None."""
    return _unknown_key(stderr, task) or _refused_args(stderr, task)


def _refused_args(stderr: str, task: Mapping[str, Any]) -> ConfigError | None:
    """The script's own parser refused the arguments ablate passed: every trial would, so stop (one line)."""
    s = task_settings(task)
    for pat in _REFUSED_ARGS:
        found = list(pat.finditer(stderr))  # the last: a traceback shows the raising line's source above it
        m = found[-1] if found else None
        if m and _only_the_seed(m.group(1), s):
            return ConfigError(
                f"the script refused the seed argument it was given ({exception_line(stderr)}): it takes no "
                f"{s['seed_key']!r}", where="task.seed_key",
                fix="set `seed_key:` in the task's YAML to the script's own seed argument (`+task.seed_key=<name>` "
                "on the command line), or `seed_key: null` (`+task.seed_key=null`) if it takes no seed: each trial "
                "then gets its seed only in $ABLATE_SEED (and PYTHONHASHSEED unless determinism=off)",
            )
        if m:
            styles = {"hydra": "`args: hydra` passes key=value", "--key=value": "`args: --key=value` passes "
                      "--key=value", "--key value": "`args: --key value` passes --key value", "env": "`args: env`"}
            return ConfigError(
                f"the script refused the arguments it was given ({exception_line(stderr)}); "
                f"{styles[s['args']]}", where="task.args",
                fix="declare the style the script parses (`args: --key value` for argparse, `args: --key=value` for "
                "a configurator; see `python <script> --help`), and keep under `params:` only keys the script "
                "takes (`seed_key: null` if it takes no seed)",
            )
    return None


def refused_keys(refused: str) -> set[str]:
    """The setting names in what a parser refused, however it lists them: ``--seed 1``, ``--seed=1``, ``seed=1``
    (argparse), ``['--seed', '1']`` (HfArgumentParser), ``seed`` (a configurator's ``Unknown config key``)."""
    tokens = re.findall(r"[^\s\[\]'\",]+", refused)
    keys = {t.lstrip("-").split("=")[0] for t in tokens if t.startswith("-") or "=" in t}
    return keys or {t for t in tokens if t.isidentifier()}


def _only_the_seed(refused: str, s: Mapping[str, Any]) -> bool:
    """Whether the arguments a parser refused are the seed's alone (``--seed 1``, ``--seed=1``, ``seed``)."""
    if not s["seed_key"] or s["args"] == "env":
        return False
    return refused_keys(refused) == {str(s["seed_key"]).lstrip("-")}


class CommandForm:
    """The ``command`` task form (see the module docstring)."""

    name = "command"

    def check(self, plan: Any, cwd: str) -> None:
        """See :func:`check_command_task`."""
        check_command_task(plan, cwd)

    def run(self, cfg: Mapping[str, Any], tp: TrialPaths, opts: Mapping[str, Any], *, plan: Mapping[str, Any],
            arm: Mapping[str, Any], code_root: Any = None) -> TaskOutput:
        """See :func:`run_command_task`."""
        return run_command_task(cfg, tp, opts, metric=plan.get("metric"))

    def dry_run_lines(self, plan: Any, cwd: str) -> list[str]:
        """Each arm's exact argv for its first seed, as a shell needs it (the run dir and metrics path are the
        trial's); one argument a line when long; the environment variables its settings set."""
        lines = []
        seed = plan.seeds[0]
        for arm in plan.arms:
            task = resolve(arm.config).get("task") or {}
            argv, env = build_command(task, seed=seed, determinism="seeded",
                                      run_dir=Path("<trial dir>") / RUN_DIR_NAME,
                                      metrics_path=Path("<trial dir>") / DEFAULT_METRICS_NAME)
            argv[0] = split_command(task["command"])[0]  # `python` as written: the interpreter running ablate
            words = [*(f"{k}={shell_quote(v)}" for k, v in env.items()), *(shell_quote(a) for a in argv)]
            line = " ".join(words)
            head = f"  argv {arm.name} seed={seed}:"
            if len(head) + len(line) < 100:
                lines.append(f"{head} {line}")
            else:
                lines.append(head)
                cont = [" \\"] * (len(words) - 1) + [""]
                lines.extend(f"      {w}{c}" for w, c in zip(words, cont, strict=True))
        s = task_settings(resolve(plan.control.config).get("task") or {})
        if not s["seed_key"] and not s["seed_env"]:
            lines.append(f"  seed: {NO_SEED_NOTE}")
        return lines


#: The dry run's line for a script that is passed no seed (``seed_key: null``, no ``seed_env``).
NO_SEED_NOTE = ("NOT passed to the script (`seed_key: null`, no `seed_env`): each trial's seed is only in "
                "$ABLATE_SEED (and PYTHONHASHSEED unless determinism=off); a script that reads neither runs the same "
                "for every seed, and the verdict then says it ignored its seed. To pass it: `seed_key: <its seed "
                "setting>` or `seed_env: <the variable it reads>`")


def shell_quote(arg: str) -> str:
    """``arg`` as a POSIX shell reads it back (:func:`shlex.quote`), in double quotes where that reads better
    (``"device='cpu'"`` rather than ``'device='"'"'cpu'"'"''``)."""
    q = shlex.quote(arg)
    if "'" in arg and not any(c in arg for c in '"$`\\!'):
        return f'"{arg}"'
    return q


FORM = CommandForm()
