"""Several ablations in one process (the Python API, ``launcher=inline``): each trial imports the task's code
from its own ablation's snapshot, including the project modules the task module imports (not only the task's
own package), never a copy an earlier ablation of another commit left in ``sys.modules``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import ablate
from ablate.errors import ConfigError
from tests.helpers import commit_all

pytestmark = pytest.mark.slow

TASK = '''
import helper


def train(cfg):
    return {"val_acc": helper.VALUE + 0.001 * cfg.seed}
'''


def _stale_project(project: Path) -> None:
    (project / "stale_task.py").write_text(TASK)
    (project / "helper.py").write_text("VALUE = 0.1\n")
    (project / "conf" / "task" / "stale.yaml").write_text("fn: stale_task:train\nmetric: val_acc\ngoal: maximize\n"
                                                          "mode: a\n")
    (project / "conf" / "variable" / "mode.yaml").write_text("key: task.mode\nvalues: [b]\n")
    commit_all(project, "a task importing a helper module")


def test_a_second_ablation_imports_the_helpers_of_its_own_commit(project: Path) -> None:
    _stale_project(project)
    try:
        first = ablate.run(project / "conf", variable="mode", seeds=[0, 1, 2], launcher="inline",
                           overrides=["task=stale"], sweep_dir=project / "outputs" / "first")
        (project / "helper.py").write_text("VALUE = 0.9\n")
        commit_all(project, "the helper changed")
        second = ablate.run(project / "conf", variable="mode", seeds=[0, 1, 2], launcher="inline",
                            overrides=["task=stale"], sweep_dir=project / "outputs" / "second")
        got = {sd: sorted(ablate.load(v.sweep_dir)["val_acc"].round(3)) for sd, v in (("1", first), ("2", second))}
        # helper.py of each ablation's commit (VALUE + 0.001 * seed, seeds 0-2, two arms)
        assert got == {"1": [0.1, 0.1, 0.101, 0.101, 0.102, 0.102], "2": [0.9, 0.9, 0.901, 0.901, 0.902, 0.902]}
    finally:
        for name in ("helper", "stale_task"):
            sys.modules.pop(name, None)


def test_a_module_the_new_commit_deleted_is_not_found_in_an_earlier_snapshot(project: Path) -> None:
    """The same kind with another input: the second commit deletes helper.py, which the task still imports. A
    fresh process fails to import it; so must the inline trial, never finding the first snapshot's copy on
    ``sys.path``."""
    _stale_project(project)
    try:
        ablate.run(project / "conf", variable="mode", seeds=[0, 1, 2], launcher="inline", overrides=["task=stale"],
                   sweep_dir=project / "outputs" / "first")
        for name in ("helper", "stale_task"):  # a fresh process's state as far as these are concerned
            sys.modules.pop(name, None)
        (project / "helper.py").unlink()
        commit_all(project, "the helper deleted")
        with pytest.raises(ConfigError, match="No module named 'helper'"):  # the task is wrong: it stops at once
            ablate.run(project / "conf", variable="mode", seeds=[0, 1, 2], launcher="inline",
                       overrides=["task=stale"], sweep_dir=project / "outputs" / "second")
        rows = ablate.load(project / "outputs" / "second")
        assert sorted(rows["status"]) == ["failed", *["pending"] * 5], rows[["arm", "seed", "status"]]  # none "ok"
    finally:
        for name in ("helper", "stale_task"):
            sys.modules.pop(name, None)


def _values(sweep: Path) -> list[float]:
    return sorted(ablate.load(sweep)["val_acc"].round(3))


def test_a_module_the_caller_imported_from_the_live_tree_is_the_snapshots_in_the_trial(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook in the project imported ``helper`` from the live tree, then the file was edited and committed;
    the inline trial imports the new commit's snapshot, as a fresh process would: 0.9, never the caller's 0.1."""
    _stale_project(project)
    monkeypatch.syspath_prepend(str(project))
    try:
        import helper  # type: ignore[import-not-found]  # the caller's own import, from the live tree

        assert helper.VALUE == 0.1 and Path(helper.__file__).parent == project
        (project / "helper.py").write_text("VALUE = 0.9\n")
        commit_all(project, "the helper changed")
        run = ablate.run(project / "conf", variable="mode", seeds=[0, 1, 2], launcher="inline",
                         overrides=["task=stale"], sweep_dir=project / "outputs" / "nb")
        assert _values(run.sweep_dir) == [0.9, 0.9, 0.901, 0.901, 0.902, 0.902]
    finally:
        for name in ("helper", "stale_task"):
            sys.modules.pop(name, None)


def test_a_sweep_dir_path_used_again_in_one_process_imports_its_new_snapshot(project: Path) -> None:
    """The same kind with another input: the first ablation's sweep dir is deleted and a second ablation, of a
    new commit, is run at the same path in the same process: its trials import the new snapshot's helper."""
    import shutil

    from tests.helpers import wait_for_plots

    _stale_project(project)
    sweep = project / "outputs" / "same"
    try:
        ablate.run(project / "conf", variable="mode", seeds=[0, 1, 2], launcher="inline", overrides=["task=stale"],
                   sweep_dir=sweep)
        assert _values(sweep) == [0.1, 0.1, 0.101, 0.101, 0.102, 0.102]
        wait_for_plots(sweep)
        shutil.rmtree(sweep)
        (project / "helper.py").write_text("VALUE = 0.9\n")
        commit_all(project, "the helper changed")
        ablate.run(project / "conf", variable="mode", seeds=[0, 1, 2], launcher="inline", overrides=["task=stale"],
                   sweep_dir=sweep)
        assert _values(sweep) == [0.9, 0.9, 0.901, 0.901, 0.902, 0.902]
    finally:
        for name in ("helper", "stale_task"):
            sys.modules.pop(name, None)
