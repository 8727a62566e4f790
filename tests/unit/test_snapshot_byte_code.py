"""The code snapshot's byte code dirs have the sweep dir's mode, whatever the user's umask: Python writes a trial's
``.pyc`` into ``__pycache__`` beside the source, and one it makes itself under umask 002 is group-writable, so a
group member could plant byte code every later trial would run (a real git repo, a real import writing byte code).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.pin.pins import pin_code, snapshot_code
from ablate.record.sweepdir import SweepDir


def _repo(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "task.py").write_text("VALUE = 7\n")
    (root / "data").mkdir()
    (root / "data" / "notes.txt").write_text("no python here\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "code"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


@pytest.mark.parametrize("dirty", [False, True], ids=["from-the-commit", "dirty-tree"])
def test_byte_code_dirs_take_the_sweep_dirs_mode_under_a_group_writable_umask(tmp_path: Path, dirty: bool) -> None:
    """Both ways a snapshot is made: extracted from the commit (``git archive``) and copied from a dirty tree."""
    repo = _repo(tmp_path / "repo")
    value = "7"
    old = os.umask(0o002)
    try:
        if dirty:  # an uncommitted edit, copied with the tree's own (umask 002) modes
            value = "8"
            (repo / "pkg" / "task.py").write_text("VALUE = 8\n")
        sd = SweepDir.create(tmp_path / "sweep")
        pin = snapshot_code(pin_code(repo, allow_dirty=dirty), sd)
        code = sd.code_dir
        pycache = code / "pkg" / "__pycache__"
        assert stat.S_IMODE(pycache.stat().st_mode) == sd.mode and sd.mode & 0o022 == 0
        assert (code / "__pycache__").is_dir() is False  # only beside .py files
        assert not (code / "data" / "__pycache__").exists()
        # a trial's import writes its byte code there (the dir is not replaced), and the snapshot's digest and
        # file list are those of the sources alone
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        out = subprocess.run([sys.executable, "-c", "import pkg.task; print(pkg.task.VALUE)"], cwd=code, env=env,
                             capture_output=True, text=True, check=True)
        assert out.stdout == f"{value}\n"
        written = list(pycache.glob("task.cpython-*.pyc"))
        assert len(written) == 1 and stat.S_IMODE(pycache.stat().st_mode) == sd.mode
        assert written[0].stat().st_mode & 0o022 == 0  # a .pyc takes its source's mode: not group-writable
        assert (sd.root / pin["snapshot_files"]).read_text().splitlines() == ["data/notes.txt", "pkg/__init__.py",
                                                                               "pkg/task.py"]
    finally:
        os.umask(old)
