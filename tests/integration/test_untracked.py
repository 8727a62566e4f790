"""Files git does not track (issue 23, item 3): outside the code snapshot, so they cannot reach a trial and
do not make the tree dirty. A notebook in the project root no longer stops `ablate.run`; the dry run and
verdict.md list untracked files; a task that imports an untracked module fails naming it and `git add`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import ablate
from tests.helpers import ablate_cli, ablate_in, add_pure_task, commit_all, git

pytestmark = pytest.mark.slow
FAST = ["task.epochs=1", "launcher=inline", "seeds=3", "variable.values=[0.2]"]

#: A task that imports a helper module only when asked to (the helper is left untracked by the test).
TASK = '''
import os

if os.environ.get("IMPORT_HELPER_AT_TOP"):
    import helper_untracked  # noqa: F401


def train(cfg):
    if cfg.task.get("use_helper"):
        import helper_untracked
        return {"val_acc": helper_untracked.VALUE + cfg.task.optim.lr + cfg.seed * 1e-3}
    return {"val_acc": 0.5 + cfg.task.optim.lr + cfg.seed * 1e-3}
'''


def only_sweep(project: Path) -> Path:
    (sd,) = sorted(p.parent for p in project.glob("outputs/**/ablation.yaml"))
    return sd


def test_an_untracked_notebook_does_not_stop_ablate_run(project: Path) -> None:
    add_pure_task(project)  # untracked files are under test, not training: the pure-Python task (committed)
    (project / "analysis.ipynb").write_text('{"cells": [], "nbformat": 4, "nbformat_minor": 5}')
    (project / ".ipynb_checkpoints").mkdir()  # Jupyter's cache: not even listed
    (project / ".ipynb_checkpoints" / "analysis-checkpoint.ipynb").write_text("{}")
    (project / "scratch").mkdir()
    (project / "scratch" / "notes.txt").write_text("ideas")
    verdict = ablate.run(project / "conf", variable="lr", values=[0.2], seeds=3, launcher="inline",
                         overrides={"task": "pure", "task.epochs": 1}, sweep_dir=project / "outputs" / "nb")
    sd = verdict.sweep_dir
    assert verdict["dirty"] is False
    code = yaml.safe_load((sd / "ablation.yaml").read_text())["pins"]["code"]
    assert code["dirty"] is False and code["dirty_files"] == []
    assert code["untracked_files"] == ["analysis.ipynb", "scratch/"] and code["untracked_count"] == 2
    assert not (sd / "code" / "analysis.ipynb").exists() and not (sd / "code" / "scratch").exists()
    assert (sd / "code" / "examples" / "digits" / "task.py").is_file()
    md = (sd / "verdict.md").read_text()
    assert "(clean tree)" in md
    assert "- untracked: `analysis.ipynb`, `scratch/` (git does not track them" in md


def test_dry_run_lists_untracked_files_and_tracked_edits_are_still_refused(project: Path) -> None:
    for i in range(7):
        (project / f"nb{i}.ipynb").write_text("{}")
    res = ablate_in(project, "-m", "variable=lr", "dry_run=true")
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("untracked:"))
    assert line.strip() == ("untracked: `nb0.ipynb`, `nb1.ipynb`, `nb2.ipynb`, `nb3.ipynb`, `nb4.ipynb` and 2 more "
                            "(git does not track them: outside the code snapshot, so no trial sees them)")
    assert "dirty" not in res.stdout
    task = project / "examples" / "digits" / "task.py"
    task.write_text(task.read_text() + "\n# an edit\n")
    res = ablate_in(project, "-m", "variable=lr", *FAST)
    assert res.returncode == 2
    assert "uncommitted changes (examples/digits/task.py)" in res.stderr and "Traceback" not in res.stderr
    assert "nb0.ipynb" not in res.stderr
    assert not list(project.glob("outputs/ablate/*/*"))


@pytest.mark.parametrize(("launcher", "at_top"), [("inline", False), ("local", True)])
def test_a_task_importing_an_untracked_module_fails_naming_it(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                             launcher: str, at_top: bool) -> None:
    if at_top:  # the task module's own import fails (in the warm parent, then in each trial)
        monkeypatch.setenv("IMPORT_HELPER_AT_TOP", "1")
    (project / "utask.py").write_text(TASK)
    (project / "conf" / "task" / "utask.yaml").write_text(
        "fn: utask:train\nmetric: val_acc\ngoal: maximize\noptim: {lr: 0.05}\n")
    (project / "conf" / "variable" / "ulr.yaml").write_text("key: task.optim.lr\nvalues: [0.2]\n")
    commit_all(project, "a task")
    (project / "helper_untracked.py").write_text("VALUE = 0.25\n")  # importable from the live tree only
    res = ablate_cli(project, "-m", "variable=ulr", "task=utask", "+task.use_helper=true", f"launcher={launcher}",
                     "seeds=3")
    # an import error of the task module itself is the task's contract: the ablation stops (exit 2) at once;
    # one inside the task: the first trial of each arm failed the same way before its first step, so it stops too
    assert res.returncode == 2, res.stderr
    if not at_top:
        assert "the first trials of control, lr=0.2 all failed the same way before the task's first step" in res.stderr
    sd = only_sweep(project)
    rec = json.loads((sd / "trials" / "control" / "seed=0" / "result.json").read_text())
    assert rec["status"] == "failed"
    why = ("helper_untracked.py exists in the live tree but is not committed, so the trial's code snapshot lacks it. "
           "Fix: `git add helper_untracked.py && git commit`, then run again.")
    if at_top:
        assert rec["error"] == f"`task.fn`: cannot import module 'utask' (No module named 'helper_untracked'): {why}"
        assert why in res.stderr and "Traceback" not in res.stderr
    else:
        assert rec["error"].startswith("ModuleNotFoundError: No module named 'helper_untracked'")
        assert why in rec["error"]
    # committed, it reaches the trials
    commit_all(project, "the helper")
    res = ablate_cli(project, "-m", "variable=ulr", "task=utask", "+task.use_helper=true", f"launcher={launcher}",
                     "seeds=3", "hydra.sweep.dir=outputs/second")
    assert res.returncode == 0, res.stderr
    rec = json.loads((project / "outputs" / "second" / "trials" / "control" / "seed=1" / "result.json").read_text())
    assert rec["metrics"]["val_acc"] == pytest.approx(0.25 + 0.05 + 1e-3)


def test_an_untracked_task_module_is_refused_before_any_trial(project: Path) -> None:
    (project / "conf" / "task" / "utask.yaml").write_text(
        "fn: utask:train\nmetric: val_acc\ngoal: maximize\noptim: {lr: 0.05}\n")
    (project / "conf" / "variable" / "ulr.yaml").write_text("key: task.optim.lr\nvalues: [0.2]\n")
    commit_all(project, "the task's config, not its code")
    (project / "utask.py").write_text(TASK)
    for extra in ([], ["dry_run=true"]):
        res = ablate_in(project, "-m", "variable=ulr", "task=utask", "launcher=inline", "seeds=3", *extra)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "`task.fn`" in res.stderr and "utask.py is not tracked by git" in res.stderr
        assert "git add utask.py && git commit" in res.stderr and "Traceback" not in res.stderr
    assert not (project / "outputs").exists()


def test_dvc_working_files_never_make_the_tree_dirty(tmp_path: Path) -> None:
    """Even committed: `dvc plots show`'s dvc_plots/ and DVC's .dvc/tmp/ are DVC's, not code."""
    from ablate.pin.pins import dirty_files, untracked_files

    root = tmp_path / "repo"
    (root / ".dvc").mkdir(parents=True)
    (root / "sub" / ".dvc" / "tmp").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "dvc_plots").mkdir()
    (root / "dvc_plots" / "index.html").write_text("<html>1</html>")
    (root / "sub" / ".dvc" / "tmp" / "lock").write_text("1")
    (root / "train.py").write_text("print(1)\n")
    (root / "other").mkdir()
    (root / "other" / "dvc_plots").mkdir()  # not beside a .dvc/: an ordinary folder of the project
    (root / "other" / "dvc_plots" / "x.py").write_text("x = 1\n")
    commit_all(root, "everything committed")
    (root / "dvc_plots" / "index.html").write_text("<html>2</html>")
    (root / "sub" / ".dvc" / "tmp" / "lock").write_text("2")
    (root / "sub" / "dvc_plots").mkdir()
    (root / "sub" / "dvc_plots" / "index.html").write_text("new")
    assert dirty_files(root) == []
    assert untracked_files(root) == []
    (root / "other" / "dvc_plots" / "x.py").write_text("x = 2\n")
    (root / "train.py").write_text("print(2)\n")
    assert dirty_files(root) == [" M other/dvc_plots/x.py", " M train.py"]
