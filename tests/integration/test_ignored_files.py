"""Files the task reads that git ignores and DVC does not track (issue 17, item 5): listed at plan time,
recorded in the plan, shown as unpinned in verdict.md, and named when a trial misses one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, commit_all

pytestmark = pytest.mark.slow

TASK = '''
import json
import os
from pathlib import Path


def train(cfg):
    here = Path(__file__).parent
    if cfg.task.where == "beside":  # next to the task's own file: the snapshot's copy of the folder
        w = json.loads((here / "weights.local.json").read_text())["w"]
    elif cfg.task.where == "relative":  # relative to the working directory: the trial's mirror of the snapshot
        w = json.loads(Path("wtask/weights.local.json").read_text())["w"]
    else:
        w = 1.0
    # function tasks run in their trial's own mirror of the code snapshot, its files links to the snapshot's
    in_mirror = float(Path.cwd() == Path(os.environ["ABLATE_TRIAL_DIR"]) / "work"
                      and Path("wtask/task.py").resolve() == Path(__file__).resolve())
    return {"val_acc": 0.5 + 0.01 * cfg.seed * w, "in_mirror": in_mirror}
'''


@pytest.fixture
def ign_project(project: Path) -> Path:
    pkg = project / "wtask"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text(TASK)
    (project / "conf" / "task" / "wtask.yaml").write_text(
        "fn: wtask.task:train\nmetric: val_acc\ngoal: maximize\nwhere: none\n")
    (project / "conf" / "variable" / "where.yaml").write_text("key: task.where\nvalues: [beside]\n")
    with open(project / ".gitignore", "a") as fh:
        fh.write("weights.local.json\nwtask/cache/\nstarts.log\n")
    commit_all(project, "task with local files")
    (pkg / "weights.local.json").write_text(json.dumps({"w": 2.0}))
    (pkg / "cache").mkdir()
    (pkg / "cache" / "a.bin").write_bytes(b"x")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "task.cpython-311.pyc").write_bytes(b"x")
    return project


def test_dry_run_lists_ignored_files_of_the_task_tree(ign_project: Path) -> None:
    res = ablate_in(ign_project, "-m", "variable=where", "task=wtask", "dry_run=true")
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if "git-ignored" in ln)
    assert "the task's directory wtask holds git-ignored files that DVC does not track: wtask/cache/, " \
           "wtask/weights.local.json." in line, line
    assert "__pycache__" not in line


def test_project_root_task_lists_only_unpinned_files(ign_project: Path) -> None:
    (ign_project / "starts.log").write_text("x")
    (ign_project / "rootask.py").write_text(TASK)
    (ign_project / "conf" / "task" / "rootask.yaml").write_text(
        "fn: rootask:train\nmetric: val_acc\ngoal: maximize\nwhere: none\n")
    commit_all(ign_project, "root task")
    res = ablate_in(ign_project, "-m", "variable=where", "task=rootask", "dry_run=true")
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if "git-ignored" in ln)
    listed = line.split("does not track: ")[1].split(". The code")[0].split(", ")
    # data/ is DVC-tracked, outputs/ is where ablate writes, __pycache__ is noise
    assert listed == ["starts.log", "wtask/cache/", "wtask/weights.local.json"], line


def test_no_warning_when_the_tree_holds_none(project: Path) -> None:
    res = ablate_in(project, "-m", "variable=lr", "dry_run=true")
    assert res.returncode == 0, res.stderr
    assert "git-ignored" not in res.stdout + res.stderr


@pytest.mark.parametrize("launcher", ["inline", "local"])
def test_trial_missing_an_ignored_file_names_the_cause(ign_project: Path, launcher: str) -> None:
    res = ablate_in(ign_project, "-m", "variable=where", "task=wtask", "seeds=3", f"launcher={launcher}",
                    "variable.values=[beside,relative]")
    assert res.returncode == 1, res.stderr  # the whole treatment arm failed: invalid
    assert "holds git-ignored files that DVC does not track" in res.stderr
    (sd,) = [p.parent for p in ign_project.glob("outputs/ablate/*/*/ablation.yaml")]
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    assert plan["pins"]["code"]["ignored_files"] == ["wtask/cache/", "wtask/weights.local.json"]
    for arm in ("where=beside", "where=relative"):
        rec = json.loads((sd / "trials" / arm / "seed=0" / "result.json").read_text())
        assert rec["status"] == "failed"
        assert "FileNotFoundError" in rec["error"] and \
            "wtask/weights.local.json is git-ignored and not tracked by DVC" in rec["error"], rec["error"]
    ok = json.loads((sd / "trials" / "control" / "seed=1" / "result.json").read_text())
    assert ok["metrics"]["in_mirror"] == 1.0
    man = json.loads((sd / "trials" / "control" / "seed=1" / "manifest.json").read_text())
    assert Path(man["cwd"]) == sd / "trials" / "control" / "seed=1" / "work"
    md = (sd / "verdict.md").read_text()
    assert "- unpinned: `wtask/weights.local.json` is git-ignored and not tracked by DVC" in md


def test_folders_of_earlier_runs_are_outputs_not_unpinned_inputs(ign_project: Path) -> None:
    """An earlier ablation's `outputs/`, Hydra's `multirun/` and a Lightning-Hydra-template app's own
    `logs/train/runs/<time>/` hold runs' records (`ablation.yaml`, `.hydra/`), not task inputs: never named as
    unpinned, in the dry run or the run, wherever this ablation's sweep dir is; an ignored folder of real inputs
    beside them still is."""
    (ign_project / "rootask.py").write_text(TASK)
    (ign_project / "conf" / "task" / "rootask.yaml").write_text(
        "fn: rootask:train\nmetric: val_acc\ngoal: maximize\nwhere: none\n")
    with open(ign_project / ".gitignore", "a") as fh:
        fh.write("logs/\nmultirun/\nweights/\nsweeps/\n")
    commit_all(ign_project, "root task")
    # the console script (this file's proof of it); the other ablations here run in this process
    first = ablate_cli(ign_project, "-m", "variable=where", "task=rootask", "seeds=3", "launcher=inline")
    assert first.returncode == 1, first.stderr  # its treatment reads the ignored weights file: that arm fails
    assert list(ign_project.glob("outputs/ablate/*/*/ablation.yaml"))
    for run in ("logs/train/runs/2026-12-01_10-00-00/.hydra", "multirun/2026-12-01/10-00-00/0/.hydra"):
        (ign_project / run).mkdir(parents=True)
        (ign_project / run / "config.yaml").write_text("seed: 0\n")
    (ign_project / "weights").mkdir()
    (ign_project / "weights" / "w.bin").write_bytes(b"x")
    for args in (["dry_run=true"], ["seeds=3", "launcher=inline"]):  # the dry run and the run, in this process
        res = ablate_in(ign_project, "-m", "variable=where", "task=rootask", "hydra.sweep.dir=sweeps/b", *args)
        assert res.returncode == (0 if args == ["dry_run=true"] else 1), res.stderr
        line = next(ln for ln in (res.stdout + res.stderr).splitlines() if "git-ignored" in ln)
        listed = line.split("does not track: ")[1].split(". The code")[0].split(", ")
        assert listed == ["weights/", "wtask/cache/", "wtask/weights.local.json"], line
