"""Issue 35, item 16: a DVC-tracked directory's hash was shown with a file's name (``data: `assets/table.txt`
md5:….dir`` in verdict.md). A file inside a tracked dir is pinned by its own md5 (what ``md5sum`` gives), the
dir's hash kept beside it; the tracked dir itself keeps DVC's ``.dir`` hash; a sub-dir says whose hash it shows."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.pin.pins import pin_data
from tests.helpers import commit_all
from tests.issue35 import inside, plain_project

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tracked(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    proj = plain_project(project_template, tmp_path_factory.mktemp("dvcdir") / "proj")
    (proj / "assets" / "sub").mkdir(parents=True)
    (proj / "assets" / "table.txt").write_text("1 2 3\n")
    (proj / "assets" / "sub" / "more.txt").write_text("4 5 6\n")
    subprocess.run([sys.executable, "-m", "dvc", "add", "-q", "assets"], cwd=proj, check=True, capture_output=True,
                   env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    commit_all(proj, "track assets")
    return proj


def _md5(path: Path) -> str:
    return "md5:" + hashlib.md5(path.read_bytes()).hexdigest()


def test_each_path_is_pinned_by_its_own_hash(tracked: Path) -> None:
    pins = pin_data(["assets", "assets/table.txt", "assets/sub/more.txt", "assets/sub", "data/digits.npz"],
                    tracked)
    dir_hash = pins["assets"]["hash"]
    assert dir_hash.startswith("md5:") and dir_hash.endswith(".dir")
    assert pins["assets/table.txt"]["hash"] == _md5(tracked / "assets" / "table.txt")
    assert pins["assets/sub/more.txt"]["hash"] == _md5(tracked / "assets" / "sub" / "more.txt")
    assert pins["assets/table.txt"]["output_hash"] == dir_hash and pins["assets/table.txt"]["output"] == "assets"
    assert pins["assets/sub"]["hash"] == f"{dir_hash} (of assets, the DVC-tracked dir holding it)"
    assert pins["data/digits.npz"]["hash"] == _md5(tracked / "data" / "digits.npz")  # an output itself: DVC's
    assert "output_hash" not in pins["data/digits.npz"]


def test_verdict_shows_the_files_own_hash_beside_its_name(tracked: Path) -> None:
    import ablate

    with inside(tracked):
        verdict = ablate.run(tracked / "conf", variable="mode", seeds=3, launcher="inline",
                             overrides=["task=plain", "progress=off", "task.data=[assets/table.txt]"])
    md = verdict.markdown
    assert f"- data: `assets/table.txt` {_md5(tracked / 'assets' / 'table.txt')}" in md
    assert ".dir" not in md.split("- data: `assets/table.txt`")[1].splitlines()[0]
