"""SLURM messages that name the right setting and the right actor (issue 26): a constraint no node has is
refused naming `launcher.constraint`, and its fix runs; trials ablate cancels itself (on_failure=abort) say
ablate cancelled them, not "from outside"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in
from tests.slurm.helpers import result, sweep_dir

pytestmark = pytest.mark.slurm


def test_constraint_no_node_has_is_refused_naming_the_setting_and_its_fix_runs(probe_project: Path) -> None:
    args = ["-m", "variable=bonus", "seeds=3", "task=probe", "task.steps=1", "task.step_s=0.1", "launcher=slurm"]
    res = ablate_in(probe_project, *args, "launcher.constraint=nosuchfeature")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("ablate: error: `launcher.constraint`: SLURM refuses the job request:"), line
    assert "Invalid feature specification" in line and "`launcher.constraint=null`" in line, line
    assert not (probe_project / "outputs").exists()
    fixed = ablate_cli(probe_project, *args, "launcher.constraint=null", timeout=600)  # the fix it names
    assert fixed.returncode == 0, fixed.stderr
    sd = sweep_dir(probe_project)
    assert all(result(sd, arm, s)["status"] == "ok" for arm in ("control", "bonus=1.0") for s in (0, 1, 2))


def test_trials_ablate_cancels_after_an_abort_say_ablate_cancelled_them(probe_project: Path) -> None:
    # control exits without a result at once; the treatment would sleep for minutes: ablate aborts and cancels it
    res = ablate_cli(probe_project, "-m", "variable=mode", "seeds=3", "task=probe", "task.mode=exit", "task.steps=600",
                     "launcher=slurm", "on_failure=abort", timeout=400)
    assert res.returncode == 1 and "aborted after a failed trial" in res.stderr, res.stderr
    sd = sweep_dir(probe_project)
    cancelled = [r for s in (0, 1, 2) if (r := result(sd, "mode=sleep", s))["slurm"].get("state") == "CANCELLED"]
    assert cancelled, [result(sd, "mode=sleep", s) for s in (0, 1, 2)]
    for rec in cancelled:
        assert rec["status"] == "killed", rec
        assert "cancelled by ablate, which stopped the ablation early" in rec["error"], rec
        assert "from outside" not in rec["error"], rec
