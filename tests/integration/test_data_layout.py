"""Data layouts of real projects: a git-ignored data dir tracked by a .dvc file outside it."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, add_pure_task, commit_all, git, run

pytestmark = pytest.mark.slow


def test_ignored_data_dir_tracked_from_outside_is_pinned_and_the_hint_says_how(project: Path) -> None:
    # The project git-ignores /data/ (conftest) and, here, no stage tracks it yet.
    add_pure_task(project)  # the data's pinning is under test, not training: task=pure reads no data, pins the same
    git(project, "rm", "-q", "dvc.yaml", "dvc.lock")
    commit_all(project, "no data stage")
    # A real run (the dry run opens no DVC repo): the data is pinned before any trial launches.
    args = ["-m", "task=pure", "variable=lr", "seeds=3", "launcher=inline", "task.epochs=1",
            "hydra.sweep.dir=outputs/layout"]
    res = ablate_in(project, *args)
    assert res.returncode == 2, res.stderr
    assert not (project / "outputs" / "layout").exists()
    (line,) = res.stderr.strip().splitlines()
    assert "data/digits.npz is not tracked by DVC" in line
    assert "data/ is git-ignored, so `dvc add data/digits.npz` would fail" in line and "`dvc add data`" in line
    # what the hint warns about really fails ...
    bad = run([sys.executable, "-m", "dvc", "add", "data/digits.npz"], project, check=False)
    assert bad.returncode != 0 and "git-ignored" in bad.stdout + bad.stderr
    # ... and the command it names works: data.dvc at the root tracks the ignored dir, and the data is pinned
    run([sys.executable, "-m", "dvc", "add", "data"], project)
    git(project, "add", "data.dvc", ".gitignore")
    commit_all(project, "track data/ with data.dvc")
    ok = ablate_cli(project, *args)
    assert ok.returncode == 0, ok.stderr
    plan = yaml.safe_load((project / "outputs" / "layout" / "ablation.yaml").read_text())
    dvc_md5 = yaml.safe_load((project / "data.dvc").read_text())["outs"][0]["md5"]
    pinned = plan["pins"]["data"]["data/digits.npz"]
    assert pinned["recorded_in"] == "data.dvc" and pinned["output"] == "data"
    assert pinned["output_hash"] == f"md5:{dvc_md5}"   # the hash data.dvc records for the ignored dir ...
    file_md5 = hashlib.md5((project / "data" / "digits.npz").read_bytes(), usedforsecurity=False).hexdigest()
    assert pinned["hash"] == f"md5:{file_md5}"   # ... and the file inside it, by its own md5 (what md5sum gives)
    assert len(list((project / "outputs" / "layout").glob("trials/*/seed=*/result.json"))) == 9
