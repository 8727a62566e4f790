"""Tests against a real SLURM cluster: the one `bash ablate/trials/launchers/slurm/cluster.sh start` runs on
this machine (CI starts it in .ci/run). Tests marked ``slurm`` are skipped, with the reason, when no
cluster answers ``sinfo``. Jobs run as root on this machine, so the pytest tmp dirs are visible to them;
every test has its own project and sweep dir (job ids restart at 1 after ``start --fresh``)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import commit_all
from tests.slurm.helpers import PROBE_CONF, PROBE_TASK

START = "start one with `bash ablate/trials/launchers/slurm/cluster.sh start`"


@functools.cache
def no_cluster_reason() -> str | None:
    """None when a SLURM cluster answers with a usable node, else why the slurm tests are skipped."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return f"no SLURM client tools (sinfo, sbatch) on PATH; {START}"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 20 s"
    if proc.returncode != 0:
        return f"no SLURM cluster answers (sinfo: {proc.stderr.strip()}); {START}"
    states = proc.stdout.split()
    if not any(s.rstrip("*~#!%$@^-+").lower() in ("idle", "mixed", "allocated", "completing") for s in states):
        return f"the SLURM cluster has no usable node (node states: {', '.join(states) or 'none'})"
    return None


@pytest.fixture(autouse=True)
def _needs_cluster(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("slurm") is not None and (why := no_cluster_reason()):
        pytest.skip(why)


@pytest.fixture
def probe_project(project: Path) -> Path:
    """The test project plus the probe task (``task=probe``) and variables ``bonus`` and ``mode``."""
    (project / "slurmprobe.py").write_text(PROBE_TASK)
    (project / "conf" / "task" / "probe.yaml").write_text(PROBE_CONF)
    (project / "conf" / "variable" / "bonus.yaml").write_text("key: task.bonus\nvalues: [1.0]\n")
    (project / "conf" / "variable" / "mode.yaml").write_text("key: task.mode\nvalues: [sleep]\n")
    commit_all(project, "probe task")
    return project
