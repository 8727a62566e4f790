"""A trial's own working dir (a mirror of the code snapshot) and a single run's (a mirror of the live project)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.record.sweepdir import SweepDir
from ablate.trials.workdir import guard_snapshot, live_workdir, trial_workdir
from tests.helpers import commit_all, git


def _sweep(tmp_path: Path) -> tuple[SweepDir, dict, Path]:
    project = tmp_path / "proj"
    (project / "data").mkdir(parents=True)
    (project / "data" / "d.npz").write_bytes(b"data")
    sd = SweepDir.create(tmp_path / "sweep")
    code = sd.code_dir
    (code / "pkg" / "sub").mkdir(parents=True)
    (code / "pkg" / "__pycache__").mkdir()
    (code / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"")
    (code / "pkg" / "m.py").write_text("x = 1\n")
    (code / "pkg" / "sub" / "cfg.yaml").write_text("a: 1\n")
    (code / "top.txt").write_text("top\n")
    plan = {"pins": {"code": {"subdir": ""}}, "project": {"cwd": str(project)}}
    return sd, plan, project


def test_the_work_dir_links_each_top_level_entry_and_a_rerun_keeps_the_trials_own_files(tmp_path: Path) -> None:
    sd, plan, _ = _sweep(tmp_path)
    trial = sd.root / "trials" / "control" / "seed=1"
    work, snap = trial_workdir(sd, plan, {"data": ["data/d.npz"]}, trial)
    assert (work, snap) == (trial / "work", sd.code_dir)
    assert (work / "pkg").is_symlink() and (work / "pkg").resolve() == sd.code_dir / "pkg"  # one link per top entry
    assert (work / "data").is_dir() and not (work / "data").is_symlink()  # on the way to task.data: its own
    assert (work / "pkg" / "sub" / "cfg.yaml").read_text() == "a: 1\n"  # a relative read sees the snapshot
    assert (work / "data" / "d.npz").read_bytes() == b"data"  # task.data: the snapshot's read-only copy
    assert oct(os.stat(work / "data").st_mode & 0o777) == oct(sd.mode)
    (work / "ckpt.pt").write_text("mine")  # a relative write to a new path: in the trial's dir, not the snapshot
    (work / "data" / "cache.npz").write_text("mine")
    assert not (sd.code_dir / "ckpt.pt").exists() and not (sd.code_dir / "data" / "cache.npz").exists()
    (work / "top.txt").unlink()
    again, _ = trial_workdir(sd, plan, {"data": ["data/d.npz"]}, trial)  # resume, a requeued job: what is missing
    assert (again / "ckpt.pt").read_text() == "mine" and (again / "top.txt").read_text() == "top\n"


def test_the_guard_names_a_dir_replaced_by_a_link_and_ignores_bytecode(
        tmp_path: Path) -> None:
    sd, _, _ = _sweep(tmp_path)
    with guard_snapshot(sd.code_dir):
        (sd.code_dir / "pkg" / "__pycache__" / "n.pyc").write_bytes(b"")  # bytecode: not the task's write
    named = r"wrote into the shared code snapshot.*code/pkg/sub, .*code/pkg/sub/cfg\.yaml;"
    with pytest.raises(ConfigError, match=named), guard_snapshot(sd.code_dir):
        (sd.code_dir / "pkg" / "sub" / "cfg.yaml").rename(tmp_path / "cfg.yaml")
        (sd.code_dir / "pkg" / "sub").rmdir()
        (sd.code_dir / "pkg" / "sub").symlink_to(tmp_path)


def test_a_single_runs_mirror_of_the_live_project(tmp_path: Path) -> None:
    project = tmp_path / "live"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text("print(1)\n")
    (project / "data").mkdir()
    (project / "data" / "big.npz").write_bytes(b"x")
    (project / ".gitignore").write_text("/data/\n/outputs/\n")
    git(project.parent, "init", "-q", str(project))
    commit_all(project, "live")
    run_dir = project / "outputs" / "single"
    run_dir.mkdir(parents=True)
    work = live_workdir(project, run_dir)
    assert work == run_dir / "work"
    assert (work / "src").is_dir() and not (work / "src").is_symlink()
    assert (work / "src" / "train.py").resolve() == project / "src" / "train.py"
    assert (work / "data").is_symlink() and (work / "data" / "big.npz").read_bytes() == b"x"  # ignored: linked whole
    (work / "metrics.json").write_text("{}")
    assert not (project / "metrics.json").exists()
    assert git(project, "status", "--porcelain") == ""
