"""Duplicate SLURM submission (issue 13, fault 7), against the real local SLURM cluster: the submitting
process is SIGKILLed right after `sbatch` and before `jobs.json` is written; `ablate collect` must find
the orphaned array by its job name and never submit its trials again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm.helpers import sweep_dir

pytestmark = pytest.mark.slurm

#: Runs ablate's real CLI, but SIGKILLs its own process the moment it would record the submitted jobs:
#: sbatch has run, jobs.json is not written (the window in which a real crash loses the record).
DIE_AFTER_SBATCH = """
import os, signal, sys
import ablate.trials.launchers.slurm.launcher as slurm
import ablate.record.sweepdir as sweepdir

real = sweepdir.write_json

def write_json(path, obj):
    if os.path.basename(str(path)) == "jobs.json":
        os.kill(os.getpid(), signal.SIGKILL)
    return real(path, obj)

slurm.write_json = sweepdir.write_json = write_json  # the packed path imports it from sweepdir
from ablate.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLURM_") and k not in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH", "HYDRA_FULL_ERROR")}
    env.update(DVC_NO_ANALYTICS="1")
    return env


def _arrays_named(prefix: str) -> set[str]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-S", "now-1days", "-o", "JobID,JobName"], capture_output=True,
                         text=True, check=True).stdout
    sq = subprocess.run(["squeue", "-h", "--states=all", "-o", "%F|%j"], capture_output=True, text=True,
                        check=True).stdout
    rows = [line.split("|") for line in (out + sq).splitlines() if "|" in line]
    return {jid.split("_")[0] for jid, name in rows if name.startswith(prefix)}


@pytest.mark.parametrize("per_job", [1, 2], ids=["one-trial-per-job", "packed"])
def test_submitter_killed_after_sbatch_is_never_submitted_twice(probe_project: Path, per_job: int) -> None:
    # 0.1 s steps: what is under test is the submission record, not how long the trials run
    args = ["-m", "variable=bonus", "seeds=3", "task=probe", "task.steps=2", "task.step_s=0.1", "launcher=slurm",
            "wait=false", f"launcher.trials_per_job={per_job}"]
    died = subprocess.run([sys.executable, "-c", DIE_AFTER_SBATCH, *args], cwd=probe_project, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert died.returncode == -9, died.stderr  # killed between sbatch and the record
    sd = sweep_dir(probe_project)
    assert not (sd / "slurm" / "jobs.json").exists()
    intents = json.loads((sd / "slurm" / "intents.json").read_text())["intents"]
    (intent,) = intents
    assert intent["name"].startswith("ablate-") and len(intent["trials"]) == 6
    assert [t[3] for t in intent["trials"]] == [i // per_job for i in range(6)]  # each trial's array task
    prefix = intent["name"]
    assert len(_arrays_named(prefix)) == 1  # the array is in SLURM, under the ablation's job name
    # `ablate status` sees the orphaned trials as submitted (and writes nothing)
    st = subprocess.run([str(Path(sys.executable).with_name("ablate")), "status", str(sd)], cwd=probe_project,
                        env=_env(), capture_output=True, text=True, timeout=120)
    assert st.returncode == 0, st.stderr
    assert not (sd / "slurm" / "jobs.json").exists()
    # `ablate collect` adopts the array and waits for it: no second submission
    col = subprocess.run([str(Path(sys.executable).with_name("ablate")), "collect", str(sd)], cwd=probe_project,
                         env=_env(), capture_output=True, text=True, timeout=600)
    assert col.returncode == 0, col.stderr
    assert "already submitted" in col.stderr and "submitted 6 trial(s)" not in col.stderr
    assert len(_arrays_named(prefix)) == 1
    assert len(_arrays_named(prefix[:len("ablate-") + 10])) == 1  # no other array of this ablation
    jobs = json.loads((sd / "slurm" / "jobs.json").read_text())["jobs"]
    (array,) = {j["job_id"].split("_")[0] for j in jobs}
    assert sorted(j["job_id"].split("_")[1] for j in jobs) == sorted(str(i // per_job) for i in range(6))
    assert array in _arrays_named(prefix)
    for p in sd.glob("trials/*/seed=*/result.json"):
        r = json.loads(p.read_text())
        assert r["status"] == "ok" and r["attempt"] == 1
    assert len(list(sd.glob("trials/*/seed=*/result.json"))) == 6
    assert json.loads((sd / "slurm" / "intents.json").read_text())["intents"] == []
