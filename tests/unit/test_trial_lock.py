"""The sweep dir's trial lock (ablate.record.trial_lock) with real processes holding real ``flock``s: a resume waits
for trial processes left running, names them when they do not end, and a trial started meanwhile runs nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.errors import SweepDirError
from ablate.record import trial_lock

HOLDER = """
import sys
from ablate.record import trial_lock
with trial_lock.hold(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin (or kills us)
"""


def _holder(root: Path) -> subprocess.Popen[str]:
    """A process holding the trial lock as a trial does, until its stdin is closed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def _end(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None and not pipe.closed:
            pipe.close()


def test_a_holder_is_named_with_its_pid_and_the_fix_that_ends_it_is_run(tmp_path: Path) -> None:
    proc = _holder(tmp_path)
    try:
        assert trial_lock.holders(tmp_path) == [proc.pid]
        told: list[str] = []
        with pytest.raises(SweepDirError) as err, trial_lock.quiet(tmp_path, wait_s=0.0, log=told.append):
            pass
        msg = str(err.value)
        assert f"pid {proc.pid}" in msg and f"`kill {proc.pid}`" in msg and "finished trials are kept" in msg
        subprocess.run(["kill", str(proc.pid)], check=True)  # the fix, as printed
        proc.wait(timeout=30)
        with trial_lock.quiet(tmp_path, wait_s=30.0):
            assert trial_lock.holders(tmp_path) == [os.getpid()]  # ours now, exclusively
    finally:
        _end(proc)


def test_quiet_waits_for_a_running_trial_to_end_and_says_whom_it_waits_for(tmp_path: Path) -> None:
    proc = _holder(tmp_path)
    told: list[str] = []

    def log(msg: str) -> None:  # once told whom it waits for, that trial ends (its stdin closed)
        told.append(msg)
        proc.stdin.close()  # type: ignore[union-attr]

    try:
        with trial_lock.quiet(tmp_path, wait_s=120.0, log=log):
            assert trial_lock.holders(tmp_path) == [os.getpid()]  # the trial's lock had gone before the block ran
        assert proc.wait(timeout=60) == 0  # it ended on its own, once let go
    finally:
        _end(proc)
    assert len(told) == 1 and f"(pid {proc.pid})" in told[0] and "started by an ablate process that is gone" in told[0]


def test_a_trial_started_while_a_resume_decides_runs_nothing(tmp_path: Path) -> None:
    with trial_lock.quiet(tmp_path, wait_s=0.0):
        with pytest.raises(trial_lock.StrayTrial, match="exits without running"), trial_lock.hold(tmp_path):
            pass
        res = subprocess.run([sys.executable, "-c", HOLDER, str(tmp_path)], capture_output=True, text=True, input="")
        assert res.returncode == 1 and "StrayTrial" in res.stderr and "held" not in res.stdout
    with trial_lock.hold(tmp_path), trial_lock.hold(tmp_path):  # shared: trials run side by side
        assert trial_lock.holders(tmp_path) == [os.getpid()]


def test_the_lock_is_never_taken_through_a_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / trial_lock.TRIALS_LOCK).symlink_to(victim)
    with pytest.raises(SweepDirError), trial_lock.hold(tmp_path):
        pass
    assert victim.read_text() == "keep"
