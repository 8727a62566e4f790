"""Attack (issue 35, item 10): a task that writes to its DVC-tracked data through the trial's data link. The
user's working copy (``data/digits.npz``) must keep its bytes: a trial's inputs are a read-only copy of the
pinned data, once per ablation; a write fails (a permission error) or, as root, changes only that copy, which the
trials' pins name (``pin_mismatch``)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from tests.issue35 import inside, plain_project

pytestmark = pytest.mark.slow

FN_WRITER = '''
import numpy as np

def train(cfg):
    d = dict(np.load("data/digits.npz"))
    if cfg.seed == 0 and cfg.task.mode == "a":  # one trial writes its input back, relabelled
        d["y_val"] = d["y_val"][::-1].copy()
        np.savez("data/digits.npz", **d)
    return {"val_acc": float(d["y_val"][:10].mean()) + 0.01 * cfg.seed}
'''

CMD_WRITER = '''
import json, os
with open("data/digits.npz", "r+b") as fh:   # in place, as `rsync --inplace` or a careless cache would
    fh.seek(100)
    fh.write(b"\\0" * 16)
json.dump({"val_acc": 0.5 + int(os.environ["ABLATE_SEED"]) * 0.01}, open(os.environ["ABLATE_METRICS_FILE"], "w"))
'''


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _locked_md5(proj: Path) -> str:
    import yaml

    lock = yaml.safe_load((proj / "dvc.lock").read_text())
    return lock["stages"]["prepare"]["outs"][0]["md5"]


@pytest.fixture(scope="module", params=["fn", "command"])
def written(request: pytest.FixtureRequest, project_template: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, Path, str]:
    import ablate

    form = request.param
    root = tmp_path_factory.mktemp(f"readonly-{form}") / "proj"
    if form == "fn":
        proj = plain_project(project_template, root, source=FN_WRITER, name="writer")
    else:
        proj = plain_project(project_template, root, source=CMD_WRITER, name="writer")
        (proj / "conf" / "task" / "writer.yaml").write_text(
            "command: python writer.py\nargs: env\nmetric: val_acc\ngoal: maximize\ndata: [data/digits.npz]\n"
            "params: {mode: a}\n")
        (proj / "conf" / "variable" / "mode.yaml").write_text("key: task.params.mode\nvalues: [b]\n")
        subprocess.run(["git", "commit", "-qam", "command writer"], cwd=proj, check=True)
    assert _md5(proj / "data" / "digits.npz") == _locked_md5(proj)
    with inside(proj), pytest.raises(ConfigError) as err:  # the task writes its input: it is wrong, stop
        ablate.run(proj / "conf", variable="mode", seeds=3, launcher="inline",
                   overrides=["task=writer", "progress=off", "task.data=[data/digits.npz]"])
    (sd,) = [p.parent for p in proj.glob("outputs/ablate/*/*/ablation.yaml")]
    return proj, sd, str(err.value)


def test_the_users_data_keeps_its_bytes(written: tuple[Path, Path, str]) -> None:
    proj, _, _ = written
    assert _md5(proj / "data" / "digits.npz") == _locked_md5(proj)
    status = subprocess.run([sys.executable, "-m", "dvc", "status", "prepare"], cwd=proj, capture_output=True,
                            text=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"}, check=True).stdout
    assert "modified" not in status and "changed" not in status


def test_the_trials_data_is_a_read_only_copy_and_the_write_is_named(written: tuple[Path, Path, str]) -> None:
    _, sd, err = written
    copy = sd / "code" / "data" / "digits.npz"
    assert copy.is_file() and not copy.is_symlink() and oct(copy.stat().st_mode & 0o777) == "0o400"
    (rec,) = [json.loads(p.read_text()) for p in sd.glob("trials/*/*/result.json")]  # stopped at the writer
    assert (rec["arm"], rec["seed"], rec["status"]) == ("control", 1 if "command" in str(sd) else 0, "failed")
    if os.geteuid() == 0:  # root writes a read-only file: its copy changed, and the trial names it
        assert "the trial's task wrote to its input data/digits.npz (`task.data`)" in rec["error"]
    else:  # anyone else cannot write it at all
        assert "Permission denied" in rec["error"] and "data/digits.npz" in rec["error"]
    assert "\n" not in err and "data/digits.npz" in err and "Fix: " in err
