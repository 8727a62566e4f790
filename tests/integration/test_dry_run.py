"""A dry run does no work it does not show (issue 15): no DVC repo is opened, nothing is launched."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers import ablate_cli, ablate_in, commit_all


def test_dry_run_opens_no_dvc_repo(project: Path) -> None:
    shutil.rmtree(project / ".dvc")  # a real run could not pin the data now; a dry run never asks DVC
    commit_all(project, "no DVC")
    res = ablate_cli(project, "-m", "variable=lr", "seeds=3", "dry_run=true")
    assert res.returncode == 0, res.stderr
    assert "data: data/digits.npz (present; hashed and checked against DVC when the run starts)" in res.stdout
    assert "dry run: nothing launched" in res.stdout
    assert not (project / "outputs").exists()
    real = ablate_in(project, "-m", "variable=lr", "seeds=3")  # the check the dry run left to the run (a refusal)
    assert real.returncode == 2 and "`task.data`" in real.stderr, real.stderr
    assert not list(project.glob("outputs/ablate/*/*/trials"))
