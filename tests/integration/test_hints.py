"""Every fix hint that names a command works: the test runs the command the message names (issue 17, item 6)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, add_pure_task, commit_all, run

pytestmark = pytest.mark.slow


def hinted(stderr: str, prefix: str) -> str:
    """The one backticked command in ``stderr`` that starts with ``prefix``."""
    found = [c for c in re.findall(r"`([^`]+)`", stderr) if c.startswith(prefix)]
    assert found, stderr
    return found[0]


def run_dvc_hint(cwd: Path, stderr: str) -> str:
    cmd = hinted(stderr, "dvc checkout")
    run([sys.executable, "-m", "dvc", *shlex.split(cmd)[1:]], cwd)
    return cmd


@pytest.mark.parametrize(("given", "want"), [
    ("'[0.1,0.01]'", "variable.values=[0.1,0.01]"),
    ("'[0.2, 0.005]'", "variable.values=[0.2,0.005]"),
    ("'[1e-3]'", "variable.values=[0.001]"),
    ("'0.2'", "variable.values=[0.2]"),
    ("0.2", "variable.values=[0.2]"),
])
def test_values_hint_runs(project: Path, given: str, want: str) -> None:
    res = ablate_in(project, "-m", "variable=lr", f"variable.values={given}", "dry_run=true")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    fix = hinted(res.stderr, "variable.values=")
    assert fix == want
    res = ablate_in(project, "-m", "variable=lr", fix, "dry_run=true")
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("damage", ["modified", "deleted"])
def test_dvc_hint_at_plan_time_runs(project: Path, damage: str) -> None:
    add_pure_task(project)  # the hint and the run it unblocks are under test, not training: no torch (same data)
    data = project / "data" / "digits.npz"
    original = data.read_bytes()
    if damage == "modified":
        data.write_bytes(original + b"x")
    else:
        data.unlink()
    small = ["-m", "variable=lr", "task=pure", "variable.values=[0.2]", "seeds=3", "task.epochs=1", "launcher=inline"]
    res = ablate_in(project, *small)  # refused while pinning, before any trial
    assert res.returncode == 2, res.stderr
    cmd = run_dvc_hint(project, res.stderr)
    assert cmd == ("dvc checkout --force data/digits.npz" if damage == "modified" else "dvc checkout data/digits.npz")
    assert data.read_bytes() == original
    res = ablate_in(project, *small)
    assert res.returncode == 0, res.stderr


TAMPER = '''
import os
from pathlib import Path


def train(cfg):
    marker = Path(os.environ["ABLATE_TRIAL_DIR"]).parents[2] / "tampered"  # in the sweep dir: outlives the attempt
    if cfg.task.tamper and cfg.seed == 0 and not marker.exists():  # once: its re-run leaves the data be
        marker.write_text("once")
        with open(Path(cfg.task.project) / "data" / "digits.npz", "ab") as fh:  # the project's own data
            fh.write(b"x")
    return {"val_acc": 0.5 + 0.01 * cfg.seed}
'''


def test_dvc_hint_on_resume_runs(project: Path) -> None:
    (project / "tamper.py").write_text(TAMPER)
    (project / "conf" / "task" / "tamper.yaml").write_text(
        f"fn: tamper:train\nmetric: val_acc\ngoal: maximize\ntamper: false\ndata: [data/digits.npz]\n"
        f"project: {project}\n")
    (project / "conf" / "variable" / "tamper.yaml").write_text("key: task.tamper\nvalues: [true]\n")
    commit_all(project, "tamper task")
    # the console script (this file's proof of it); the other ablations here run in this process
    res = ablate_cli(project, "-m", "variable=tamper", "task=tamper", "seeds=3", "launcher=inline")
    (sd,) = [p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml")]
    res = ablate_in(project, "resume", str(sd))
    assert res.returncode == 2, res.stderr
    assert run_dvc_hint(project, res.stderr) == "dvc checkout --force data/digits.npz"
    res = ablate_in(project, "resume", str(sd))
    assert res.returncode == 0, res.stderr
    rec = json.loads((sd / "trials" / "tamper=true" / "seed=1" / "result.json").read_text())
    assert rec["status"] == "ok"
