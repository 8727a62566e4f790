"""Helpers for the tests against a real SLURM cluster."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# A task for the scheduling tests: sleeps `steps` x `step_s` seconds, saving its step in
# $ABLATE_CHECKPOINT_DIR so a requeued trial resumes; `mode: exit` dies without a result. Once the file
# `release` names exists (the test writes it with `release()` after it stopped a job), every step is 0.01 s:
# the trials that only have to finish after the stop do so at once instead of sleeping out their steps.
PROBE_TASK = '''
import json
import os
import time
from pathlib import Path


def run(cfg):
    t = cfg.task
    if t.mode == "exit":
        os._exit(3)
    t0 = time.time()
    ckpt = os.environ.get("ABLATE_CHECKPOINT_DIR")
    state = Path(ckpt) / "state.json" if ckpt else None
    step = json.loads(state.read_text())["step"] if state is not None and state.exists() else 0
    resumed_from = step
    while step < t.steps:
        time.sleep(0.01 if t.release and os.path.exists(t.release) else t.step_s)
        step += 1
        if state is not None:
            tmp = state.with_name("state.json.tmp")
            tmp.write_text(json.dumps({"step": step}))
            os.replace(tmp, state)
    return {"score": float(cfg.seed) + t.bonus, "resumed_from": float(resumed_from),
            "requeues": float(os.environ.get("ABLATE_REQUEUES", "-1")), "t0": t0, "t1": time.time()}
'''

PROBE_CONF = """fn: slurmprobe:run
metric: score
goal: maximize
mode: sleep
steps: 4
step_s: 0.5
bonus: 0.0
release: ""
"""


def sweep_dir(project: Path) -> Path:
    """The one sweep dir of the project."""
    (sd,) = [p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml")]
    return sd


def jobs(sd: Path) -> dict[tuple[str, int], str]:
    """(arm, seed) -> SLURM job id, from the sweep dir's record."""
    data = json.loads((sd / "slurm" / "jobs.json").read_text())
    return {(j["arm"], j["seed"]): j["job_id"] for j in data["jobs"]}


def result(sd: Path, arm: str, seed: int) -> dict[str, Any]:
    return json.loads((sd / "trials" / arm / f"seed={seed}" / "result.json").read_text())


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``predicate`` every 0.2 s until it returns something truthy; fail after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


def slurm(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, check=True).stdout


def preempt(job_id: str, log: Path, timeout_s: float = 30) -> None:
    """Send USR2 to a running job, as SLURM does before preempting it, and return once its log shows
    the signal arrived.

    ``scancel --signal`` on a task of a job array that still has pending tasks reports "Job can not be
    altered now, try again later" (Slurm 22.05) although the signal was delivered, then retries until
    the requeued task runs again and signals it a second time; so scancel is stopped once the job has
    caught the signal.
    """
    proc = subprocess.Popen(["scancel", "--signal=USR2", job_id], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: log.exists() and "Caught signal SIGUSR2" in log.read_text(), timeout_s,
                 f"job {job_id} to catch USR2")
    finally:
        proc.kill()
        proc.wait()


def status_counts(stdout: str) -> dict[str, list[int]]:
    """``ablate status`` output -> {arm: [pending, running, done, failed]} (the interrupted column,
    which a scheduler's trials never reach, is left out)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["arm", "pending"]) + 1
    rows = {}
    for line in lines[start:]:
        if not line.strip():
            break
        arm, *counts = line.split()
        rows[arm] = [int(c) for c in counts[:4]]
    return rows



def release_file(project: Path) -> tuple[Path, str]:
    """A path for the probe's ``release`` file (not there yet) and the override that names it."""
    path = project.parent / "probe-release"
    return path, f"task.release={path}"


def release(path: Path) -> None:
    """Let every probe trial of the ablation finish its remaining steps at once (see ``PROBE_TASK``). Call it only
    once the job the test stopped is surely stopped (:func:`release_when_restarted`, or after a ``collect``): a
    trial released while SLURM's stop is still on its way would finish instead of being stopped."""
    path.write_text("go\n")


def release_when_restarted(path: Path, job_id: str, out_log: Path) -> None:
    """Wait until the requeued job ``job_id`` has started again (its submitit log ``out_log`` shows a second
    start: every process of its first start is gone), then :func:`release` the probe trials."""
    wait_for(lambda: out_log.exists() and out_log.read_text().count("Starting with JobEnvironment") >= 2, 240,
             f"job {job_id} to start again after its requeue")
    release(path)
