"""The command form of a task: run an existing script, unmodified, with the trial's overrides.

A task config with ``command`` instead of ``fn`` (``conf/task/<name>.yaml``)::

    command: python train.py        # a string (split like a shell would, but no shell runs) or a list
    params:                         # the script's own config: each leaf is passed as key=value
      lr: 0.05                      #   -> lr=0.05
      optim: {momentum: 0.9}        #   -> optim.momentum=0.9
    seed_key: seed                  # the trial seed is passed as seed=<k>; null: not passed
    determinism_key: null           # e.g. trainer.deterministic: passed as =true under determinism=strict
    output_dir_key: hydra.run.dir   # passed as hydra.run.dir=<trial dir>/run; null for non-Hydra scripts
    metrics_file: null              # the JSON the script writes, relative to the run dir (e.g. metrics.json);
                                    # null: the script writes to the path in $ABLATE_METRICS_FILE
    metrics_key: null               # e.g. metrics_path: that path is also passed as metrics_path=<path>
    env: {}                         # extra environment variables for the script
    data: [data/train.npz]          # as for any task: DVC-tracked, pinned, verified in every trial
    metric: val_acc
    goal: maximize

How a trial runs it (:func:`run_command_task`):

- **code**: the command runs in the trial's own mirror (``<trial dir>/work``: real dirs, files linked) of
  the code snapshot (``<sweep dir>/code/<project subdir>``, the pinned commit), so edits made after
  launch never reach it, and what it writes into its working dir (a checkpoint, a metrics file) stays
  in its trial's dir; a write into the shared snapshot itself stops the ablation naming the path.
  Each ``task.data`` path is linked into the snapshot from the project, so relative data paths work
  as they do in the project. A first
  word ``python`` or ``python3`` means the interpreter running ablate (the pinned environment).
- **overrides**: every leaf under ``task.params`` (the variable's key ``task.params.a.b`` reaches the
  script as ``a.b``), then ``<seed_key>=<seed>``, ``<determinism_key>=true|false``,
  ``<output_dir_key>=<trial dir>/run``, ``<metrics_key>=<metrics path>``, in Hydra override syntax
  (values quoted by :mod:`ablate.plan.overrides`). Keys the script's config lacks make Hydra refuse, which
  stops the ablation at the first trial with a message naming the key.
- **environment**: the parent's, plus ``PYTHONHASHSEED`` (seeded, strict) and
  ``CUBLAS_WORKSPACE_CONFIG`` (strict), ``ABLATE_SEED``, ``ABLATE_DETERMINISM``, ``ABLATE_TRIAL_DIR``,
  ``ABLATE_RUN_DIR``, ``ABLATE_METRICS_FILE``, and ``task.env``. ablate cannot seed the script's
  generators or switch torch to deterministic algorithms from outside: the script does that from
  the seed it receives (and ``determinism_key`` / ``ABLATE_DETERMINISM``).
- **output**: the script's stdout and stderr are appended to the trial's ``stdout.log`` / ``stderr.log``;
  ``command.json`` records the argv, working dir, the variables ablate set, exit code and duration.
- **result**: exit code 0 and a JSON object of numbers in the metrics file -> the metrics (nested
  objects are flattened to dotted names). A non-zero exit is a failed trial whose error holds the
  log tail; a script killed past ``timeout_min`` is a ``timeout``.
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.plan.arms import resolve
from ablate.plan.overrides import flatten_params, format_override
from ablate.record.sweepdir import PLAN_FILE, SweepDir, TrialPaths, open_log, read_json, write_json
from ablate.trials import seeding
from ablate.trials.tasks.base import TrialTimeout
from ablate.trials.workdir import guard_snapshot, trial_workdir

#: Keys a command-form task config may have (anything else is refused: it would not reach the script).
COMMAND_TASK_KEYS = {
    "command": None, "params": {}, "seed_key": "seed", "determinism_key": None, "output_dir_key": "hydra.run.dir",
    "metrics_file": None, "metrics_key": None, "env": {}, "data": [], "metric": None, "goal": "maximize",
}
METRICS_ENV = "ABLATE_METRICS_FILE"
RUN_DIR_NAME = "run"
DEFAULT_METRICS_NAME = "metrics.json"
_PYTHONS = ("python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}")


class CommandFailed(RuntimeError):
    """The task's command exited with a non-zero code (a failed trial; the message holds the log tail)."""


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
    for k in ("seed_key", "determinism_key", "output_dir_key", "metrics_file", "metrics_key"):
        if s[k] is not None and (not isinstance(s[k], str) or not s[k].strip()):
            raise ConfigError(f"must be a non-empty string or null, got {s[k]!r}", where=f"task.{k}",
                              fix=f"set `task.{k}` to a name, or remove it")
    return s


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
    s = task_settings(task)
    argv = split_command(s["command"])
    if argv[0] in _PYTHONS:
        argv[0] = sys.executable
    argv += [format_override(k, v) for k, v in flatten_params(s["params"]).items()]
    if s["seed_key"]:
        argv.append(format_override(s["seed_key"], int(seed)))
    if s["determinism_key"]:
        argv.append(format_override(s["determinism_key"], determinism == "strict"))
    if s["output_dir_key"]:
        argv.append(format_override(s["output_dir_key"], str(run_dir)))
    if s["metrics_key"]:
        argv.append(format_override(s["metrics_key"], str(metrics_path)))
    return argv


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
        import ctypes

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
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if child_group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    proc.wait()


def read_from(path: Path, offset: int, max_bytes: int = 65536) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(offset, os.path.getsize(path) - max_bytes))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _tail(text: str, n_lines: int = 20) -> str:
    return "\n".join(text.rstrip().splitlines()[-n_lines:])


_HYDRA_KEY_ERRORS = (
    re.compile(r"Could not override '([^']+)'"),
    re.compile(r"Key '([^']+)' is not in struct"),
    re.compile(r"Could not append to config\. An item is already at '([^']+)'"),
)


def _unknown_key(stderr: str, task: Mapping[str, Any]) -> ConfigError | None:
    """Hydra refusing an override the trial passed: the task config names a key the script lacks."""
    for pat in _HYDRA_KEY_ERRORS:
        m = pat.search(stderr)
        if m:
            key = m.group(1)
            s = task_settings(task)
            where = "task.params." + key
            if key == s["seed_key"]:
                where = "task.seed_key"
            elif key in (s["determinism_key"], s["metrics_key"]):
                where = "task.determinism_key" if key == s["determinism_key"] else "task.metrics_key"
            return ConfigError(
                f"the script's config has no key {key!r}, so Hydra refused the override (stderr: "
                f"{_tail(stderr, 3).replace(chr(10), ' | ')})",
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


def run_command_task(cfg: Mapping[str, Any], tp: TrialPaths, opts: Mapping[str, Any]) -> dict[str, Any]:
    """Run ``task.command`` for one trial and return its metrics (see the module docstring).

    Parameters
    ----------
    cfg : mapping
        The trial's resolved config (``seed`` set).
    tp : TrialPaths
        The trial's directory; logs, ``run/`` and ``command.json`` go there.
    opts : mapping
        The ablation's options (``determinism``, ``timeout_min``).

    Returns
    -------
    dict
        The metrics the script wrote (values are checked to be numbers by the trial).

    Raises
    ------
    ConfigError
        No ``fn`` and no ``command``; a bad setting; Hydra refusing a key the script lacks; the
        script exiting 0 without a valid metrics file. These stop the ablation: every trial would
        fail the same way.
    CommandFailed
        The script exited with a non-zero code (the message holds the tail of its stderr).
    TrialTimeout
        The script ran past ``timeout_min`` and was killed.
    """
    task = cfg.get("task") or {}
    if not task.get("command"):
        raise ConfigError("the task declares neither `fn` (module:function) nor `command`", where="task",
                          fix="set `task.fn: my_module:train` in conf/task/<name>.yaml")
    seed = int(cfg.get("seed", 0))
    mode = seeding.check_mode(opts.get("determinism", "seeded"))
    run_dir = tp.dir / RUN_DIR_NAME
    run_dir.mkdir(parents=True, exist_ok=True)
    default_metrics = tp.dir / DEFAULT_METRICS_NAME
    metrics_path = metrics_location(task, tp)
    for stale in {default_metrics, metrics_path}:
        stale.unlink(missing_ok=True)
    argv = build_argv(task, seed=seed, determinism=mode, run_dir=run_dir, metrics_path=default_metrics)
    set_env = {**seeding.environment_for(mode, seed), "ABLATE_SEED": str(seed), "ABLATE_DETERMINISM": mode,
               "ABLATE_TRIAL_DIR": str(tp.dir), "ABLATE_RUN_DIR": str(run_dir), METRICS_ENV: str(default_metrics),
               "PYTHONUNBUFFERED": "1"}
    set_env.update({str(k): str(v) for k, v in (task.get("env") or {}).items()})
    cwd, snapshot = task_dir(tp, task)
    record: dict[str, Any] = {"metrics_file": str(metrics_path)}
    with guard_snapshot(snapshot):
        spawn(argv, set_env, cwd, tp, opts, task, record)
    return read_metrics(metrics_path)


def spawn(argv: list[str], set_env: Mapping[str, str], cwd: Path, tp: TrialPaths, opts: Mapping[str, Any],
          task: Mapping[str, Any], record: dict[str, Any] | None = None) -> dict[str, Any]:
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
                           f"{_tail(read_from(tp.stderr, err_start))}") from None
    except BaseException:  # SIGALRM timeout of an inline trial, Ctrl-C: never leave the script running
        _kill(proc, child_group)
        raise
    record.update(returncode=proc.returncode, duration_s=time.perf_counter() - t0)
    write_json(tp.dir / "command.json", record)
    if proc.returncode != 0:
        stderr = read_from(tp.stderr, err_start)
        bad_key = _unknown_key(stderr, task)
        if bad_key is not None:
            raise bad_key
        rc = proc.returncode
        how = f"exited with code {rc}"
        if rc < 0:
            how = f"was killed by signal {-rc}"
            with contextlib.suppress(ValueError):
                how = f"was killed by {signal.Signals(-rc).name}"
        raise CommandFailed(f"the command {how}; log tail (stderr.log):\n{_tail(stderr) or '(empty)'}")
    return record


class CommandForm:
    """The ``command`` task form (see the module docstring)."""

    name = "command"

    def check(self, plan: Any, cwd: str) -> None:
        """See :func:`check_command_task`."""
        check_command_task(plan, cwd)

    def run(self, cfg: Mapping[str, Any], tp: TrialPaths, opts: Mapping[str, Any], *, plan: Mapping[str, Any],
            arm: Mapping[str, Any], code_root: Any = None) -> dict[str, Any]:
        """See :func:`run_command_task`."""
        return run_command_task(cfg, tp, opts)

    def dry_run_lines(self, plan: Any, cwd: str) -> list[str]:
        """Each arm's exact argv for its first seed (the run dir and metrics path are the trial's)."""
        lines = []
        seed = plan.seeds[0]
        for arm in plan.arms:
            task = resolve(arm.config).get("task") or {}
            run_dir = Path("<trial dir>") / RUN_DIR_NAME
            argv = build_argv(task, seed=seed, determinism="seeded", run_dir=run_dir,
                              metrics_path=Path("<trial dir>") / DEFAULT_METRICS_NAME)
            lines.append(f"  argv {arm.name} seed={seed}: {shlex.join(argv)}")
        return lines


FORM = CommandForm()
