"""Warm trial processes of ``launcher=local`` (issue 15): real forks of a real warm parent that
imported torch, real signals; the hazards it must refuse, and the ``launcher.warm=false`` way out."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, add_mode_task, add_pure_task, commit_all

pytestmark = pytest.mark.slow

#: A task that imports torch at module top, keeps module state, and reports what its process saw.
PROBE = '''
import os
import random

import torch

CALLS = []  # module state a trial mutates: must never reach another trial


def train(cfg):
    CALLS.append(cfg.seed)
    if cfg.task.mode == "exit" and cfg.seed == 1:
        os._exit(3)  # a hard crash: no result written, no cleanup
    info = {
        "pid": os.getpid(), "pgid": os.getpgid(0), "ppid": os.getppid(), "calls": len(CALLS),
        "hash": hash("ablate-warm"), "draw": random.random(), "torch_draw": float(torch.rand(1)),
        "torch_threads": torch.get_num_threads(), "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "hashseed": os.environ.get("PYTHONHASHSEED"),
    }
    out = os.path.join(cfg.task.out, f"{cfg.task.mode}-{cfg.seed}.json")
    with open(out, "w") as fh:
        fh.write(__import__("json").dumps(info))
    return {"val_acc": 0.5 + 0.01 * cfg.seed}
'''

#: :data:`PROBE` without torch, for tests about what a task module's import does rather than torch: module
#: state, the hard crash of one trial, and what its process saw.
LIGHT_PROBE = '''
import os
import random

CALLS = []  # module state a trial mutates: must never reach another trial


def train(cfg):
    CALLS.append(cfg.seed)
    if cfg.task.mode == "exit" and cfg.seed == 1:
        os._exit(3)  # a hard crash: no result written, no cleanup
    info = {"pid": os.getpid(), "ppid": os.getppid(), "calls": len(CALLS), "draw": random.random()}
    with open(os.path.join(cfg.task.out, f"{cfg.task.mode}-{cfg.seed}.json"), "w") as fh:
        fh.write(__import__("json").dumps(info))
    return {"val_acc": 0.5 + 0.01 * cfg.seed}
'''

#: Task modules that make forking unsafe at import time.
UNSAFE = {
    "thread": ("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
               "started 1 thread(s)"),
    # No GPU here: CUDA initialisation is simulated by the task module itself (the one mock in this file).
    "cuda": ("import torch\ntorch.cuda.is_initialized = lambda: True\n", "initialised CUDA"),
}


@pytest.fixture
def probe_project(project: Path, tmp_path: Path) -> Path:
    add_mode_task(project, "probe", PROBE, tmp_path / "seen", mode="plain", values="[exit]", message="probe task")
    return project


def _sweep(project: Path) -> Path:
    (sd,) = sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))
    return sd


def _seen(project: Path) -> dict[tuple[str, int], dict]:
    out = Path(next(line.split(": ", 1)[1] for line in (project / "conf/task/probe.yaml").read_text().splitlines()
                    if line.startswith("out:")))
    return {(p.stem.split("-")[0], int(p.stem.split("-")[1])): json.loads(p.read_text()) for p in out.glob("*.json")}


@functools.cache
def _hash_under(seed: str, text: str) -> int:
    """``hash(text)`` in a fresh interpreter started with ``PYTHONHASHSEED=seed`` (the reference; one interpreter per
    seed and text, not one per trial checked against it)."""
    out = subprocess.run([sys.executable, "-c", f"print(hash({text!r}))"], env={**os.environ, "PYTHONHASHSEED": seed},
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_trials_are_isolated_processes(probe_project: Path, warm: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # two "GPUs" by id: each slot gets its own (none is used)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    res = ablate_in(probe_project, "-m", "variable=mode", "task=probe", "seeds=3", "launcher=local",
                    "launcher.max_parallel=2", f"launcher.warm={str(warm).lower()}", "determinism=off")
    sd = _sweep(probe_project)
    results = {(d.parent.name, int(d.name.split("=")[1])): json.loads((d / "result.json").read_text())
               for d in sd.glob("trials/*/seed=*")}
    # the os._exit(3) in one trial is recorded there and touches no other
    crashed = results[("mode=exit", 1)]
    assert crashed["status"] == "failed" and "exited with code 3" in crashed["error"], crashed
    assert all(r["status"] == "ok" for k, r in results.items() if k != ("mode=exit", 1)), res.stderr
    seen = _seen(probe_project)
    assert len(seen) == 5
    pids = [s["pid"] for s in seen.values()]
    assert len(set(pids)) == 5  # a process per trial
    assert all(s["pgid"] == s["pid"] for s in seen.values())  # each leads its own process group
    assert all(s["calls"] == 1 for s in seen.values())  # module state never leaks into the next trial
    assert len({s["draw"] for s in seen.values()}) == 5  # determinism=off: fresh RNG state per trial, not the parent's
    assert len({s["torch_draw"] for s in seen.values()}) == 5
    assert all(s["torch_threads"] == 1 for s in seen.values())
    assert {s["cvd"] for s in seen.values()} <= {"0", "1"}
    manifests = {k: json.loads((sd / "trials" / k[0] / f"seed={k[1]}" / "manifest.json").read_text()) for k in results}
    hashseeds = {m["environment"]["env"].get("PYTHONHASHSEED") for m in manifests.values()}
    (hashseed,) = hashseeds  # one PYTHONHASHSEED per ablation, warm or not, recorded in every manifest
    assert hashseed is not None
    for s in seen.values():
        assert s["hashseed"] == hashseed and s["hash"] == _hash_under(hashseed, "ablate-warm")
    if warm:
        (parent,) = {s["ppid"] for s in seen.values()}  # all forks of one warm parent
        assert all(m["warm_parent"] == parent for m in manifests.values())
    else:
        assert all("warm_parent" not in m for m in manifests.values())
        assert len({s["ppid"] for s in seen.values()}) == 1  # children of the orchestrating process itself
    assert not list(sd.glob("trials/*/seed=*/std*.log"))  # the probe prints nothing: no empty log files
    assert not (sd / "warm-parent.log").exists()


def test_seeded_trials_share_the_plans_hash_seed(probe_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """determinism=seeded (the default): PYTHONHASHSEED is the plan's first seed, and the seeded draws
    of one seed are the same in every arm. The thread count asked for (the plan's `threads`; the shell's
    OMP_NUM_THREADS never decides it) reaches each fork, although the warm parent imported torch with one thread."""
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    res = ablate_in(probe_project, "-m", "variable=mode", "task=probe", "seeds=[4,7,9]", "launcher=local",
                    "launcher.max_parallel=2", "variable.values=[other]", "threads=2")
    assert res.returncode == 0, res.stderr
    seen = _seen(probe_project)
    assert {s["hashseed"] for s in seen.values()} == {"4"}
    assert {s["torch_threads"] for s in seen.values()} == {2}
    assert {s["hash"] for s in seen.values()} == {_hash_under("4", "ablate-warm")}
    import random

    import torch

    for seed in (4, 7, 9):
        assert seen[("plain", seed)]["draw"] == seen[("other", seed)]["draw"] == random.Random(seed).random()
        # torch as seeded by the trial (the fork leaves it to the trial: no entropy draw first)
        want = float(torch.rand(1, generator=torch.Generator().manual_seed(seed)))
        assert seen[("plain", seed)]["torch_draw"] == seen[("other", seed)]["torch_draw"] == want


@pytest.mark.parametrize("kind", sorted(UNSAFE))
def test_unsafe_task_module_is_refused_and_warm_false_runs_it(probe_project: Path, kind: str) -> None:
    module, reason = UNSAFE[kind]
    # the thread needs no torch (LIGHT_PROBE: the fix's 6 fresh trials would each import it); the cuda kind does
    (probe_project / "probe.py").write_text(module + (LIGHT_PROBE if kind == "thread" else PROBE))
    commit_all(probe_project, f"probe task that is unsafe to fork ({kind})")
    args = ["-m", "variable=mode", "task=probe", "seeds=3", "launcher=local", "launcher.max_parallel=2"]
    res = ablate_in(probe_project, *args)
    assert res.returncode == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("ablate: error:")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "`launcher.warm`" in lines[0] and reason in lines[0] and "`launcher.warm=false`" in lines[0]
    assert not list(probe_project.glob("outputs/ablate/*/*/trials/*/seed=*/result.json"))  # nothing ran
    fixed = ablate_in(probe_project, *args, "launcher.warm=false")  # the fix the message names
    assert fixed.returncode == 0, fixed.stderr  # it runs (seed 1 of the treatment crashes on purpose)
    assert "6/6 trials" in fixed.stderr


def test_warm_option_is_checked(probe_project: Path) -> None:
    res = ablate_in(probe_project, "-m", "variable=mode", "task=probe", "seeds=3", "launcher=local",
                    "launcher.warm=maybe")
    assert res.returncode == 2 and "launcher.warm" in res.stderr and "Traceback" not in res.stderr, res.stderr


#: A task module that makes a temporary directory at import (in the warm parent, when forked warm) and
#: writes into it in every trial.
TEMPDIR_TASK = '''
import os
import tempfile

import torch  # noqa: F401  (a warm parent holding torch: its operator libraries' finalizers too)

SCRATCH = tempfile.TemporaryDirectory()  # the importing process's: removed at its exit by a weakref finalizer


def train(cfg):
    with open(os.path.join(SCRATCH.name, f"seed{cfg.seed}"), "w") as fh:  # fails once the dir is gone
        fh.write("x")
    with open(os.path.join(os.environ["ABLATE_RUN_DIR"], "scratch_dir"), "w") as fh:  # where it was
        fh.write(SCRATCH.name)
    return {"val_acc": 0.5 + 0.01 * cfg.seed, "files": len(os.listdir(SCRATCH.name))}
'''


def test_a_forks_exit_leaves_the_warm_parents_objects_alone(project: Path) -> None:
    """Finalizers the warm parent registered for its own objects (a TemporaryDirectory made at import) are the
    parent's: a fork's exit does not run them, so the next fork still finds the directory (run by each fork,
    the first trial's exit deleted it and every later trial failed)."""
    (project / "scratch.py").write_text(TEMPDIR_TASK)
    (project / "conf" / "task" / "scratch.yaml").write_text("fn: scratch:train\nmetric: val_acc\ngoal: maximize\n"
                                                            "mode: plain\n")
    (project / "conf" / "variable" / "mode.yaml").write_text("key: task.mode\nvalues: [other]\n")
    commit_all(project, "task with a temporary directory made at import")
    res = ablate_in(project, "-m", "variable=mode", "task=scratch", "seeds=3", "launcher=local",
                    "launcher.max_parallel=1")
    assert res.returncode == 0, res.stderr
    sd = _sweep(project)
    recs = [json.loads(p.read_text()) for p in sd.glob("trials/*/seed=*/result.json")]
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    # one directory for the whole launch, kept until the warm parent ends: one trial at a time, one file per seed
    # (both arms of a seed write the same name), so each trial saw the files of the seeds before it
    assert sorted(r["metrics"]["files"] for r in recs) == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    # and removed when the warm parent ended: it exits without tearing its modules down (os._exit), but only
    # after its atexit functions, weakref finalizers among them, have run
    dirs = {p.read_text() for p in sd.glob("trials/*/seed=*/run/scratch_dir")}
    assert len(dirs) == 1 and not Path(dirs.pop()).exists()


def test_the_orchestrator_does_its_meanwhile_work_while_the_warm_parent_starts(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm launch runs the monitor's `meanwhile` work (the verdict's imports, under `ablate -m`) once, in the
    orchestrating process, once the warm parent was started (its process runs then); the trial then runs
    forked from it as ever. A second launch with the same monitor does not run it again."""
    from ablate.record.sweepdir import SweepDir
    from ablate.trials.launchers.base import Monitor, TrialRef
    from ablate.trials.launchers.local import LocalLauncher

    # the pure-Python task (tests.helpers.PURE_TASK): the point is when the work runs, not what the trials train;
    # the digits task's warm parents (this launch's and the two below) would each import torch
    add_pure_task(project)
    # the console script, as this file's proof of it (its cheapest ablation); the others run in this process
    res = ablate_cli(project, "-m", "variable=lr", "seeds=3", "task=pure", "launcher=local")
    assert res.returncode == 0, res.stderr
    sd = _sweep(project)
    for seed in (0, 1):
        (sd / "trials" / "control" / f"seed={seed}" / "result.json").unlink()  # to run again
    monkeypatch.delenv("PYTHONPATH", raising=False)
    calls: list[int] = []

    def warm_parents() -> None:  # this process's children running the warm parent, as the work runs
        kids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                and _ppid(p) == os.getpid() and b"trials.warm.parent" in _cmdline(p)]
        calls.append(len(kids))

    monitor = Monitor(meanwhile=warm_parents)
    for seed in (0, 1):
        LocalLauncher(max_parallel=1).launch(SweepDir.open(sd), [TrialRef("control", seed, 2)], monitor)
        rec = json.loads((sd / "trials" / "control" / f"seed={seed}" / "result.json").read_text())
        manifest = json.loads((sd / "trials" / "control" / f"seed={seed}" / "manifest.json").read_text())
        assert rec["status"] == "ok" and rec["attempt"] == 2 and manifest["warm_parent"] != os.getpid()
    assert calls == [1]


def _ppid(proc: Path) -> int:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def test_monitor_meanwhile_runs_once() -> None:
    from ablate.trials.launchers.base import Monitor

    calls: list[str] = []
    monitor = Monitor(meanwhile=lambda: calls.append("x"))
    monitor.idle()
    monitor.idle()
    assert calls == ["x"] and Monitor().idle() is None


SLOW_IMPORT_TASK = '''
import glob
import os
import time

# A task module slow to import (torch, at scale): here it waits, up to 60 s, until the trials' working dirs of the
# running ablation exist (WAIT_FOR_WORKDIRS of them), so the test does not depend on how fast the machine is. The
# warm parent imports it in the sweep dir's code snapshot (SWEEP/code): the trials' dirs are beside it.
want = int(os.environ.get("WAIT_FOR_WORKDIRS", "0"))
deadline = time.time() + 60
while want and len(glob.glob("../trials/*/seed=*/work")) < want and time.time() < deadline:
    time.sleep(0.05)


def train(cfg):
    return {"val_acc": 0.5 + 0.01 * cfg.seed, "listing": float(len(os.listdir(".")))}
'''


def test_trial_working_dirs_are_built_while_the_warm_parent_imports_the_task(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the warm parent imports the task (here, until the 6 trials' working dirs exist: without them built
    ahead, it waits 60 s and no trial finds its dir made), the orchestrator builds each fn trial's working dir;
    each trial then finds its mirror made (older than the config.yaml it writes before it would build one), the
    same entries a trial builds for itself (launcher.warm=false), and runs in it."""
    (project / "slowimport.py").write_text(SLOW_IMPORT_TASK)
    (project / "conf" / "task" / "slowimport.yaml").write_text("fn: slowimport:train\nmetric: val_acc\n"
                                                               "goal: maximize\nmode: plain\n")
    (project / "conf" / "variable" / "mode.yaml").write_text("key: task.mode\nvalues: [other]\n")
    commit_all(project, "a task slow to import")
    monkeypatch.setenv("WAIT_FOR_WORKDIRS", "6")
    res = ablate_in(project, "-m", "variable=mode", "task=slowimport", "seeds=3", "launcher=local",
                    "launcher.max_parallel=1")
    assert res.returncode == 0, res.stderr
    warm_sd = _sweep(project)
    monkeypatch.delenv("WAIT_FOR_WORKDIRS")
    res = ablate_in(project, "-m", "variable=mode", "task=slowimport", "seeds=3", "launcher=local",
                    "launcher.warm=false")
    assert res.returncode == 0, res.stderr
    (fresh_sd,) = [p for p in project.glob("outputs/ablate/*/*") if p != warm_sd]

    def tree(work: Path) -> list[tuple[str, bool, str]]:
        return sorted((str(p.relative_to(work)), p.is_symlink(), os.readlink(p).split("/code/", 1)[-1]
                       if p.is_symlink() else "") for p in work.rglob("*"))

    trials = sorted(warm_sd.glob("trials/*/seed=*"))
    assert len(trials) == 6
    for tp in trials:
        rec = json.loads((tp / "result.json").read_text())
        assert rec["status"] == "ok", rec.get("error")
        work = tp / "work"
        assert work.stat().st_mtime < (tp / "config.yaml").stat().st_mtime, tp  # made before the trial started
        assert tree(work) == tree(fresh_sd / tp.relative_to(warm_sd) / "work")  # what the trial would have built
        assert rec["metrics"]["listing"] == len(os.listdir(work))  # the trial ran in it
