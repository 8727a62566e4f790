"""Helpers for tests: run real commands (git, dvc, the ablate console script) and check them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

REPO = Path(__file__).resolve().parents[1]


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing text output; raise with the output when ``check`` and it fails."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def clean_env(mp: pytest.MonkeyPatch) -> None:
    """Keep the runner's environment out of a test (SLURM job variables, Hydra's error mode, GPUs) and give git an
    identity: every test gets it (tests/conftest.py); a module-scoped fixture that runs ablate takes it too, inside
    ``with pytest.MonkeyPatch.context() as mp``."""
    for k in list(os.environ):
        if k.startswith("SLURM_") or k in ("HYDRA_FULL_ERROR", "CUDA_VISIBLE_DEVICES", "ABLATE_PARENT_PID"):
            mp.delenv(k, raising=False)
    mp.setenv("DVC_NO_ANALYTICS", "1")
    mp.setenv("GIT_AUTHOR_NAME", "ablate tests")
    mp.setenv("GIT_AUTHOR_EMAIL", "tests@ablate.local")
    mp.setenv("GIT_COMMITTER_NAME", "ablate tests")
    mp.setenv("GIT_COMMITTER_EMAIL", "tests@ablate.local")


def git(cwd: Path, *args: str) -> str:
    return run(["git", *args], cwd).stdout


def commit_all(cwd: Path, message: str = "update") -> str:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)
    return git(cwd, "rev-parse", "HEAD").strip()


def add_mode_task(project: Path, name: str, source: str, out: Path, *, mode: str, values: str,
                  extra: str = "", message: str = "task") -> Path:
    """Add an ``fn`` task to ``project`` and commit it: module ``<name>.py`` (``source``, with ``train``),
    ``conf/task/<name>.yaml`` (metric ``val_acc``, maximized; ``mode``, ``extra`` lines, ``out``: a dir made
    here for what the task records) and the variable ``mode`` over ``values`` (a YAML list). Returns ``out``."""
    (project / f"{name}.py").write_text(source)
    out.mkdir()
    (project / "conf" / "task" / f"{name}.yaml").write_text(
        f"fn: {name}:train\nmetric: val_acc\ngoal: maximize\nmode: {mode}\n{extra}out: {out}\n")
    (project / "conf" / "variable" / "mode.yaml").write_text(f"key: task.mode\nvalues: {values}\n")
    commit_all(project, message)
    return out


#: A pure-Python ``fn`` task (no torch, no numpy): for tests about orchestration rather than training, where
#: the digits example would spend 1.6-2.4 s of CPU per process importing torch to show the same thing. Its config
#: (``conf/task/pure.yaml``, :func:`add_pure_task`) has the digits task's keys (``optim.lr``, ``optim.momentum``,
#: ``epochs``, ``hidden``, ``batch_size``) and data, so ``variable=lr`` and ``task.epochs=1`` work as on digits;
#: ``val_acc`` and ``val_loss`` depend on the lr and the seed only (each pair of them draws its own noise).
PURE_TASK = """import random


def train(cfg):
    t = cfg.task
    lr = float(t.optim.lr)
    noise = random.Random(f"{cfg.seed}/{lr}").random() / 100  # per seed and arm: the differences vary
    off = abs(lr - 0.1)
    return {"val_acc": 0.9 - off + noise, "val_loss": 0.3 + off - noise}
"""
PURE_CONF = """fn: pure_task:train
data: [data/digits.npz]
metric: val_acc
goal: maximize
epochs: 15
batch_size: 32
hidden: 64
optim:
  lr: 0.05
  momentum: 0.9
"""


def add_pure_task(project: Path) -> Path:
    """Add :data:`PURE_TASK` to ``project`` as ``task=pure`` (``pure_task.py``, ``conf/task/pure.yaml``) and commit."""
    (project / "pure_task.py").write_text(PURE_TASK)
    (project / "conf" / "task" / "pure.yaml").write_text(PURE_CONF)
    commit_all(project, "the pure-Python task")
    return project


def copy_project(src: Path, dest: Path) -> Path:
    """A copy of a project with every sweep dir in it (a finished ablation of a module-scoped fixture, for a test
    that changes it). ablate reads a sweep dir where it sits, so ``status``, ``verdict`` and ``resume`` work on
    the copy as on the original (checked when this helper was written)."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


def ablate_cli(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the real ``ablate`` console script in ``cwd`` (a separate process)."""
    exe = shutil.which("ablate") or str(Path(sys.executable).with_name("ablate"))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    env.pop("PYTHONPATH", None)
    return run([exe, *text_only(args)], cwd, env=env, check=False, timeout=timeout)


def text_only(args: tuple[str, ...] | list[str]) -> list[str]:
    """``ablate -m ...`` arguments with ``plots=false`` added after ``-m`` unless the call sets ``plots`` itself:
    the detached process that draws a run's PNG plots (python and matplotlib) costs 1.2-1.4 s of CPU per ablation,
    and only the tests about plots read them (they pass ``plots=true``). Other commands are left as they are."""
    args = list(args)
    if "-m" not in args or any(a.startswith("plots=") for a in args):
        return args
    i = args.index("-m") + 1
    return [*args[:i], "plots=false", *args[i:]]


def ablate_in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``ablate ARGS`` from ``cwd`` in this process (:func:`ablate.cli.main.main`, as the console script calls it), its
    output captured: the exit code, stdout and stderr :func:`ablate_cli` gives for the same arguments, without an
    interpreter start and ablate's imports (about 0.07 s of CPU against 1.1-1.3 s for a refusal).

    For refusals, dry runs, commands on an existing sweep dir, and ablations whose trials run inline or under the
    local launcher (warm and fresh: their trial processes are this process's children, as they are the console
    script's). What needs ablate as a process of its own stays with :func:`ablate_cli`: a signal to ablate or a kill
    of it, two ablate processes at once, the orchestrator's own ``PYTHONHASHSEED`` or environment, the console
    script's exit; and a few calls per file as the proof of the console script. A warning ablate lets through
    reaches this process, where pytest's ``filterwarnings = error`` fails the test: what the console script would
    print to the user is caught here. What a call leaves in this process is undone after it: the working dir, the
    environment, ``sys.path``, the modules it imported from outside the installation (a project's task module, an
    app's script), the app scripts ablate counts as imported, the OmegaConf resolvers and ConfigStore entries an app
    registered, Hydra's global state, the root logger's handlers and the signal handlers."""
    import contextlib
    import io
    import signal

    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf.basecontainer import BaseContainer

    from ablate.cli.main import main
    from ablate.orchestrate import pipeline, single
    from ablate.trials.tasks import app

    out, err = io.StringIO(), io.StringIO()
    env, path, modules = dict(os.environ), list(sys.path), set(sys.modules)
    imported, resolvers = set(app._IMPORTED), dict(BaseContainer._resolvers)
    store = _leaves(ConfigStore.instance().repo)
    app_overrides, sweep = list(single.APP_OVERRIDES), pipeline.CURRENT_SWEEP_DIR
    loggers = _loggers()
    signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                                                  signal.SIGUSR2)}
    try:
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(text_only(args))
    finally:
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = path
        kept = (sys.prefix, sys.base_prefix, *(str(REPO / d) for d in ("ablate", "hydra_plugins", "tests")))
        for name in set(sys.modules) - modules:
            f = getattr(sys.modules[name], "__file__", None) or ""
            if name.startswith("_ablate_app_") or (f and not f.startswith(kept)):
                del sys.modules[name]
        app._IMPORTED.intersection_update(imported)
        BaseContainer._resolvers.clear()
        BaseContainer._resolvers.update(resolvers)
        _drop_new_leaves(ConfigStore.instance().repo, store)
        GlobalHydra.instance().clear()
        single.APP_OVERRIDES[:] = app_overrides
        pipeline.CURRENT_SWEEP_DIR = sweep
        _restore_loggers(loggers)
        for s, h in signals.items():
            signal.signal(s, h)
    return subprocess.CompletedProcess(["ablate", *args], code, out.getvalue(), err.getvalue())


def _loggers() -> dict[str, tuple[object, list[object], int, bool, bool]]:
    """Every logger's handlers, level, ``disabled`` and ``propagate`` (Hydra's single run configures logging)."""
    import logging

    names = ["", *logging.Logger.manager.loggerDict]
    out = {}
    for name in names:
        lg = logging.getLogger(name)
        out[name] = (lg, list(lg.handlers), lg.level, lg.disabled, lg.propagate)
    return out


def _restore_loggers(before: dict[str, tuple[object, list[object], int, bool, bool]]) -> None:
    """Put back what :func:`_loggers` saw; handlers added since are closed (a run's log file), new loggers reset."""
    import logging

    for name in ["", *logging.Logger.manager.loggerDict]:
        lg = logging.getLogger(name)
        old = before.get(name)
        handlers, level, disabled, propagate = (old[1], old[2], old[3], old[4]) if old else ([], logging.NOTSET,
                                                                                          False, True)
        for h in lg.handlers:
            if h not in handlers:
                h.close()
        lg.handlers[:] = handlers  # type: ignore[assignment]
        lg.setLevel(level)
        lg.disabled, lg.propagate = disabled, propagate


def _leaves(tree: dict, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The paths of a ConfigStore repo's entries (nested dicts of groups; anything else is an entry)."""
    out = {prefix} if prefix else set()
    for k, v in tree.items():
        out |= _leaves(v, (*prefix, k)) if isinstance(v, dict) else {(*prefix, k)}
    return out


def _drop_new_leaves(tree: dict, keep: set[tuple[str, ...]], prefix: tuple[str, ...] = ()) -> None:
    for k in list(tree):
        here = (*prefix, k)
        if here == ("hydra",):  # Hydra's own entries, some registered on first use (its plugins' configs)
            continue
        if here not in keep:
            del tree[k]
        elif isinstance(tree[k], dict):
            _drop_new_leaves(tree[k], keep, here)


def make_sweep(root: Path, values: dict[str, list], *, metric: str = "val_acc", goal: str = "maximize",
               options: dict | None = None, manifests: bool = True, key: str = "task.optim.lr") -> Path:
    """Write a synthetic sweep dir: ablation.yaml plus one result.json (and manifest.json) per trial.

    ``values`` maps arm name -> per-seed values (seed = index); None writes a failed trial, the string
    "pending" writes nothing. The first arm is the control. Arm values are parsed from ``key=value`` names.
    """
    import json

    import yaml

    n = max(len(v) for v in values.values())
    arms = []
    for i, name in enumerate(values):
        val = 0.05 if i == 0 else _parse_value(name.split("=", 1)[-1])
        arms.append({"name": name, "label": name if i else "control", "value": val,
                     "changes": {} if i == 0 else {key: [0.05, val]}, "derived": [], "config": {}})
    plan = {"ablate_version": "0.1.0", "variable": {"name": "lr", "key": key, "values": [a["value"] for a in arms[1:]],
                                                    "is_group": False},
            "metric": metric, "goal": goal, "seeds": list(range(n)), "task": {},
            "options": {"alpha": 0.05, "margin": None, "pairing": "auto", "multiplicity": "holm", "sequential": "off",
                        "looks": [5, 10, 15, 20], **(options or {})},
            "pins": {"code": {"commit": "0" * 40, "dirty": False}, "data": {}, "environment": {}, "config_files": {}},
            "arms": arms}
    root.mkdir(parents=True, exist_ok=True)
    (root / "ablation.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    for a in arms:
        for seed, v in enumerate(values[a["name"]]):
            if v == "pending":
                continue
            t = root / "trials" / a["name"] / f"seed={seed}"
            t.mkdir(parents=True, exist_ok=True)
            if v is None:
                rec = {"arm": a["name"], "seed": seed, "status": "failed", "metrics": {}, "error": "RuntimeError: boom"}
            else:
                rec = {"arm": a["name"], "seed": seed, "status": "ok", "metrics": {metric: v}, "error": None}
            (t / "result.json").write_text(json.dumps(rec))
            if manifests:
                m = {"code": {"commit": "0" * 40, "state": "clean"}, "data": {}, "config": {"seed": seed},
                     "determinism": {"mode": "seeded"}, "environment": {"python": "3.11"}}
                (t / "manifest.json").write_text(json.dumps(m))
    return root


def _parse_value(s: str) -> object:
    import yaml

    return yaml.safe_load(s)


def wait_for_plots(root: Path) -> None:
    """Wait until the process drawing ``ablate verdict``'s plots in sweep dir ``root`` is done: it holds the
    sweep dir's lock (handed over without a gap before ``ablate verdict`` returns) until it has rewritten
    verdict.md, and :meth:`SweepDir.acquire` waits for such a holder. No sleep, no polling of files."""
    from ablate.record.sweepdir import SweepDir

    with SweepDir.open(root).locked():
        pass


def ctrl_c_reaches() -> None:
    """``preexec_fn`` for a child a test will Ctrl-C: SIGINT at its default, so Python installs its
    KeyboardInterrupt handler. A shell's background job (``cmd &`` without job control, as a CI runner may
    start the suite) ignores SIGINT, and children inherit that; a terminal's Ctrl-C reaches a foreground one."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def only_sweep(project: Path, pattern: str = "outputs/ablate/*/*/ablation.yaml") -> Path:
    """The project's one sweep dir (the test fails if there are none or several)."""
    (sd,) = sorted(p.parent for p in project.glob(pattern))
    return sd


def results(sd: Path) -> dict[tuple[str, int], dict]:
    """Every trial's ``result.json`` in a sweep dir, by (arm, seed) as the record names them."""
    out = {}
    for p in sd.glob("trials/*/seed=*/result.json"):
        r = json.loads(p.read_text())
        out[r["arm"], r["seed"]] = r
    return out
