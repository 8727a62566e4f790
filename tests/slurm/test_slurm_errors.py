"""launcher=slurm input errors that need no cluster: exit 2, one line, nothing created."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import ablate_in


def test_missing_sbatch_is_a_clear_error_before_anything_is_created(project: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # the venv only: no SLURM tools
    res = ablate_in(project, "-m", "variable=lr", "seeds=3", "launcher=slurm")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("ablate: error: `launcher=slurm`: `sbatch` is not installed"), line
    assert "launcher=local" in line
    assert not (project / "outputs").exists()


def test_unknown_slurm_option_lists_the_valid_ones(project: Path) -> None:
    res = ablate_in(project, "-m", "variable=lr", "launcher=slurm", "+launcher.gpus=1")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "unknown option(s) gpus for launcher=slurm" in line and "gpus_per_trial (default 0)" in line, line


def test_wait_false_needs_a_launcher_that_can_detach(project: Path) -> None:
    res = ablate_in(project, "-m", "variable=lr", "launcher=local", "wait=false")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("ablate: error: `wait`:") and "launcher=slurm" in line, line
