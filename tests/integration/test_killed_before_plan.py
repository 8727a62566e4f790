"""Attack (issue 35, item 14): the orchestrator SIGKILLed after it made the sweep dir but before ``ablation.yaml``
exists (while it pins the environment) left ``DIR``, ``DIR_1``, ``DIR_2`` ..., each holding a code snapshot, and
re-running the same command never reused them. A half-created dir (its creator gone, no plan) is reused now.

The kill comes at a fixed point, with no timing: an ``nvidia-smi`` on PATH that the orchestrator runs while it
records the environment (after the sweep dir exists, before the plan) says it was reached, then waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.issue35 import plain_project

pytestmark = pytest.mark.slow

NVIDIA_SMI = '''#!/bin/sh
# a stand-in for nvidia-smi: when the sweep dir is being created, say so and wait to be killed
if ls -d {target}* >/dev/null 2>&1; then
    touch {reached}
    sleep 300
fi
'''


def _start(proj: Path, bin_dir: Path | None) -> subprocess.Popen[str]:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    if bin_dir is not None:
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return subprocess.Popen([str(Path(sys.executable).with_name("ablate")), "-m", "variable=mode", "task=plain",
                             "seeds=3", "launcher=inline", "hydra.sweep.dir=outputs/run1"], cwd=proj, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_a_sweep_dir_killed_before_its_plan_is_reused_by_the_same_command(project_template: Path,
                                                                          tmp_path: Path) -> None:
    proj = plain_project(project_template, tmp_path / "proj")
    bin_dir, reached = tmp_path / "bin", tmp_path / "reached"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI.format(target=proj / "outputs" / "run1", reached=reached))
    (bin_dir / "nvidia-smi").chmod(0o755)
    for _ in range(2):  # killed twice at the same point
        proc = _start(proj, bin_dir)
        while not reached.exists() and proc.poll() is None:
            time.sleep(0.05)
        assert reached.exists(), proc.communicate()
        os.killpg(proc.pid, signal.SIGKILL)  # the orchestrator and its nvidia-smi, as the OOM killer or `kill -9`
        proc.communicate()
        reached.unlink()
        left = sorted(p.name for p in (proj / "outputs").iterdir())
        assert left == ["run1"], left  # the second run reused the first's dir, no run1_1
        assert (proj / "outputs" / "run1" / "code").is_dir() and not (proj / "outputs" / "run1" / "ablation.yaml"
                                                                       ).exists()
    proc = _start(proj, None)  # the same command, not killed
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    assert sorted(p.name for p in (proj / "outputs").iterdir()) == ["run1"]
    sd = proj / "outputs" / "run1"
    assert (sd / "ablation.yaml").is_file() and (sd / "verdict.json").is_file() and not (sd / ".creating").exists()
    assert f"ablate: {sd} was left half-created by an ablate process killed before it wrote the plan" in err


def test_a_live_creation_a_finished_sweep_dir_and_a_users_dir_are_never_reused(tmp_path: Path) -> None:
    from ablate.record.sweepdir import CREATING_FILE, SweepDir

    target = tmp_path / "out" / "run"
    live, reused = SweepDir.claim(target)  # this process is alive: its creation is not abandoned
    assert (live.root, reused) == (target, False)
    other, reused = SweepDir.claim(target)
    assert (other.root, reused) == (tmp_path / "out" / "run_1", False)
    other.plan_file.write_text("arms: []\n")  # a finished one, even with its marker left behind
    (tmp_path / "out" / "run_2").mkdir()  # the user's own dir, no marker
    (tmp_path / "out" / "run_2" / "notes.txt").write_text("mine")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (live.root / CREATING_FILE).write_text(f"{dead} {os.uname().nodename}\n")  # now its creator is gone
    (live.root / "code").mkdir()
    again, reused = SweepDir.claim(target)
    assert (again.root, reused) == (target, True) and not (target / "code").exists()
    fourth, reused = SweepDir.claim(target)
    assert (fourth.root, reused) == (tmp_path / "out" / "run_3", False)
    assert (tmp_path / "out" / "run_2" / "notes.txt").read_text() == "mine"
    (other.root / CREATING_FILE).write_text(f"{dead} another-host\n")
    assert SweepDir.claim(tmp_path / "out" / "run_1")[0].root != other.root  # a finished dir is never reused
