"""Warm apps: an ``app`` trial that is a fork of a warm parent which imported the app once.

Under ``launcher=local`` (and in a packed SLURM job) with ``launcher.warm=true``, the warm parent
(:mod:`ablate.trials.warm.parent`) calls :func:`preload` for an app task: it imports the app's script
from the code snapshot as a module (its ``__main__`` block does not run), and with it the app's heavy
imports (torch, Lightning ...), first in a probe fork that checks the same hazards as for ``fn`` tasks (no
thread started, CUDA untouched), then in itself. Each trial forked from it then calls the app's
``@hydra.main`` function in its own process (:func:`call`), with ``sys.argv`` set to exactly the overrides a
fresh ``python <app> ...`` would get, in the same working dir and environment, its output going to the
trial's logs: no new interpreter, no second import. ``command.json`` records ``in_process`` (the trial's pid
and its warm parent's) so a trial says how it ran.

Where that cannot be done safely (the import fails, starts a thread, initialises CUDA, or no
``@hydra.main`` function is found), every trial of the app starts ``python <app> ...`` afresh as without a
warm parent, and the launcher says why, once (:func:`fallback_reason`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ablate.errors import ConfigError
from ablate.record.errorline import exception_line
from ablate.record.sweepdir import TrialPaths, open_log, write_json
from ablate.trials.tasks.command import CommandFailed, _printed_a_metric, read_from, tail_lines

#: The app modules this process imported for warm trials: script path -> (module, function name).
_LOADED: dict[str, tuple[ModuleType, str]] = {}


def script_path(task: Mapping[str, Any], code_root: str | os.PathLike[str] | None) -> Path:
    """The app's script in the code snapshot (``code_root``; the current dir without one)."""
    return (Path(code_root) if code_root else Path.cwd()) / str(task["app"])


def load(script: Path) -> ModuleType:
    """Import ``script`` as a module (never its ``__main__`` block), with its dir on ``sys.path`` as a
    ``python <script>`` run has it. Raises what the import raises."""
    if str(script.parent) not in sys.path:
        sys.path.insert(0, str(script.parent))
    spec = importlib.util.spec_from_file_location(f"_ablate_app_{script.stem}", script)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    # dataclasses look their module up there: without it an app whose schema is a dataclass with string
    # annotations (``from __future__ import annotations``, as the Lightning-Hydra templates) failed to import,
    # and every trial of it started a fresh `python <app>` (as app.py's own import does it)
    sys.modules[spec.name] = mod  # type: ignore[union-attr]
    try:
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    except BaseException:
        sys.modules.pop(spec.name, None)  # type: ignore[union-attr]
        raise
    return mod


def remember(script: Path, mod: ModuleType, fn: str) -> None:
    """In the warm parent: keep the imported app and its ``@hydra.main`` function for the forks.

    Raises
    ------
    AttributeError
        The module has no callable ``fn`` once imported.
    """
    if not callable(getattr(mod, fn, None)):
        raise AttributeError(f"{script.name} defines no callable {fn!r} once imported")
    _LOADED[str(script)] = (mod, fn)


def loaded(task: Mapping[str, Any], code_root: str | os.PathLike[str] | None) -> tuple[ModuleType, str] | None:
    """The app's module and ``@hydra.main`` function name when this process holds them (a warm fork), else None."""
    return _LOADED.get(str(script_path(task, code_root)))


def _as_main(decorated: Any) -> None:
    """Make Hydra find the app's config as for ``python <script>``: it looks relative to the script's file only
    when the task function's module is ``__main__`` (else it looks for a Python package of that module's
    name). Only the trial's own copy (a fork) is changed."""
    inner = decorated
    while hasattr(inner, "__wrapped__"):
        inner = inner.__wrapped__
    with contextlib.suppress(AttributeError, TypeError):
        inner.__module__ = "__main__"


def call(target: tuple[ModuleType, str], argv: Sequence[str], set_env: Mapping[str, str], cwd: Path,
         tp: TrialPaths, task: Mapping[str, Any], record: dict[str, Any] | None = None, *,
         refused: Callable[[str], ConfigError | None] | None = None) -> dict[str, Any]:
    """Run the app's ``@hydra.main`` function in this process as ``argv`` (``[python, script, overrides...]``)
    would run it afresh: ``sys.argv`` set to the script and its overrides, ``set_env`` in the environment,
    ``cwd`` as the working dir; write ``command.json`` as :func:`ablate.trials.tasks.command.spawn` does.

    Only ever called in a trial's own process (a fork of the warm parent): what the app changes in it (the
    working dir, ``sys.argv``, the environment, module state, Hydra's singletons) ends with the trial.

    Raises
    ------
    ConfigError
        What ``refused`` reads in the failed run's stderr (a key Hydra refused: the app form's
        :func:`ablate.trials.tasks.app.refused_override`).
    CommandFailed
        The app raised (Hydra printed the error and exited 1) or called ``sys.exit`` with a non-zero code.
    """
    from hydra.core.global_hydra import GlobalHydra  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import

    mod, fn = target
    record = {"argv": list(argv), "cwd": str(cwd), "env": dict(set_env), **(record or {}),
              "in_process": {"pid": os.getpid(), "warm_parent": os.getppid(), "function": fn}}
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    out_fd, err_fd = open_log(tp.stdout), open_log(tp.stderr)  # appended to, as a fresh app's output is
    record["stdout_start"] = os.fstat(out_fd).st_size
    err_start = os.fstat(err_fd).st_size
    record["stderr_start"] = err_start  # as :func:`ablate.trials.tasks.command.spawn` records it
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    os.environ.update({str(k): str(v) for k, v in set_env.items()})
    sys.argv = [str(argv[1]), *[str(a) for a in argv[2:]]]
    GlobalHydra.instance().clear()
    _as_main(getattr(mod, fn))
    t0 = time.perf_counter()
    code = 0
    try:
        with contextlib.chdir(cwd):
            getattr(mod, fn)()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:  # what Hydra lets through (it reports and exits on most errors itself)
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, target in zip(saved, (1, 2), strict=True):
            os.dup2(fd, target)
            os.close(fd)
    record.update(returncode=code, duration_s=time.perf_counter() - t0)
    write_json(tp.dir / "command.json", record)
    if code != 0:
        stderr = read_from(tp.stderr, err_start)
        bad_key = refused(stderr) if refused is not None else None  # the app form's reading (app.refused_override)
        if bad_key is not None:
            raise bad_key
        line = exception_line(stderr)
        failed = CommandFailed(f"the app's @hydra.main function {fn}() exited with code {code}"
                               + (f": {line}" if line else "") + " (called in the trial's process, a fork of the "
                               f"warm parent); end of its log (stderr.log):\n{tail_lines(stderr) or '(empty)'}")
        failed.before_first_step = not _printed_a_metric(tp, record, task)
        raise failed
    return record
