"""Issue 35, items 9, 10 and 13: a trial's work dir costs what the trial writes (one link per top-level entry of
the snapshot, not a mirror of its tree), its data is a read-only copy (never a link to the user's working copy),
and a single run's mirror of the live project never links the ignored dir that holds its own work dir."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.record.sweepdir import SweepDir
from ablate.trials.workdir import guard_snapshot, live_workdir, trial_workdir
from tests.helpers import commit_all, git


def _entries(root: Path) -> tuple[int, int]:
    """(entries, bytes on disk) below ``root``, links not followed: what a trial's dir costs the file system."""
    n = size = 0
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            st = os.lstat(os.path.join(d, name))
            n += 1
            size += st.st_blocks * 512
    return n, size


def _snapshot(tmp_path: Path, tops: int, depth: int, per_dir: int) -> tuple[SweepDir, dict]:
    """A sweep dir whose snapshot has ``tops`` top-level packages, each ``depth`` dirs deep with ``per_dir`` files
    in each, and a project holding ``data/d.npz``."""
    project = tmp_path / "proj"
    (project / "data").mkdir(parents=True)
    (project / "data" / "d.npz").write_bytes(os.urandom(4096))
    sd = SweepDir.create(tmp_path / "sweep")
    for t in range(tops):
        d = sd.code_dir / f"pkg{t}"
        for level in range(depth):
            d = d / f"sub{level}"
            d.mkdir(parents=True)
            for f in range(per_dir):
                (d / f"m{f}.py").write_text("x = 1\n")
    (sd.code_dir / "train.py").write_text("print(1)\n")
    return sd, {"pins": {"code": {"subdir": ""}}, "project": {"cwd": str(project)}}


@pytest.mark.parametrize(("tops", "depth", "per_dir"), [(1, 1, 1), (5, 4, 10), (12, 8, 6)])
def test_a_work_dir_costs_one_link_per_top_level_entry(tmp_path: Path, tops: int, depth: int, per_dir: int) -> None:
    sd, plan = _snapshot(tmp_path, tops, depth, per_dir)
    work, _ = trial_workdir(sd, plan, {"data": ["data/d.npz"]}, sd.root / "trials" / "control" / "seed=1")
    n, size = _entries(work)
    # the packages and train.py as links, data/ as the trial's own dir holding the link to its input
    assert n == tops + 1 + 2
    assert size <= 4096 + 4096  # one directory block (data/), links stored in their inodes
    assert sorted(os.listdir(work)) == sorted([*(f"pkg{t}" for t in range(tops)), "train.py", "data"])
    deep = work / "pkg0" / "/".join(f"sub{i}" for i in range(depth)) / "m0.py"
    assert deep.read_text() == "x = 1\n"  # the same view as a mirror


def test_a_write_into_a_linked_dir_is_named_and_a_new_path_is_the_trials(tmp_path: Path) -> None:
    sd, plan = _snapshot(tmp_path, 2, 2, 1)
    work, snap = trial_workdir(sd, plan, {}, sd.root / "trials" / "control" / "seed=1")
    with guard_snapshot(snap):
        (work / "outputs").mkdir()
        (work / "outputs" / "ckpt.pt").write_bytes(b"w")
    assert not (snap / "outputs").exists()
    with pytest.raises(ConfigError, match=r"code/pkg1/sub0/cache\.pt.*Fix: write to a new path under the working "
                                          r"dir \(`outputs/x`"), guard_snapshot(snap):
        (work / "pkg1" / "sub0" / "cache.pt").write_bytes(b"w")


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_task_data_is_a_read_only_copy_the_users_file_never_written(tmp_path: Path, kind: str) -> None:
    sd, plan = _snapshot(tmp_path, 1, 1, 1)
    project = Path(plan["project"]["cwd"])
    if kind == "dir":
        (project / "assets" / "a").mkdir(parents=True)
        (project / "assets" / "a" / "t.txt").write_text("table\n")
        (project / "assets" / "b.txt").write_text("b\n")
    rel, inner = ("data/d.npz", "data/d.npz") if kind == "file" else ("assets", "assets/a/t.txt")
    user = project / inner
    md5 = hashlib.md5(user.read_bytes()).hexdigest()
    work, _ = trial_workdir(sd, plan, {"data": [rel]}, sd.root / "trials" / "control" / "seed=1")
    placed = sd.code_dir / rel
    assert not placed.is_symlink() and (work / inner).read_bytes() == user.read_bytes()
    mode = stat.S_IMODE(os.stat(sd.code_dir / inner).st_mode)
    assert mode == 0o400  # read-only to the trial (the sweep dir's owner-only mode, without write)
    os.chmod(sd.code_dir / inner, 0o600)  # a task as root, whom modes do not stop: it writes the copy
    (work / inner).write_bytes(b"overwritten by the task")
    assert hashlib.md5(user.read_bytes()).hexdigest() == md5  # the user's working copy is untouched
    other, _ = trial_workdir(sd, plan, {"data": [rel]}, sd.root / "trials" / "control" / "seed=2")
    assert (other / inner).read_bytes() == b"overwritten by the task"  # one copy per ablation: the pins name it


@pytest.mark.parametrize("run_rel", ["outputs/single", "outputs/2026-01-01/12-00-00", "runs/a/b/c"])
def test_a_single_runs_mirror_never_links_the_dir_holding_its_own_work_dir(tmp_path: Path, run_rel: str) -> None:
    project = tmp_path / "live"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text("print(1)\n")
    (project / ".gitignore").write_text("/outputs/\n/runs/\n")
    git(project.parent, "init", "-q", str(project))
    commit_all(project, "live")
    top = run_rel.split("/")[0]
    (project / top / "older_run").mkdir(parents=True)  # another run's files beside it: still seen
    (project / top / "older_run" / "m.json").write_text("{}")
    run_dir = project / run_rel
    run_dir.mkdir(parents=True)
    work = live_workdir(project, run_dir)
    assert (work / top).is_dir() and not (work / top).is_symlink()
    assert (work / top / "older_run" / "m.json").read_text() == "{}"
    for d, dirs, files in os.walk(work):  # no entry leads back to the work dir or above it (no loop)
        for name in dirs + files:
            p = os.path.join(d, name)
            if os.path.islink(p):
                target = os.path.realpath(p)
                assert not str(work.resolve()).startswith(target + os.sep), (p, target)
    assert not os.path.lexists(work / run_rel)  # the run dir itself is not mirrored
