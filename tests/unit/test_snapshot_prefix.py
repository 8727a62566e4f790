"""Paths "inside the code snapshot" are those below it, not those of a sibling sharing its name as a prefix
(``/sw/code2`` beside ``/sw/code``; sweep dirs ``.../1`` and ``.../10``), with real packages on disk."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ablate.trials.isolation import restore, snapshot, within
from ablate.trials.tasks.fn import import_callable


@pytest.mark.parametrize("path, root, expected", [
    ("/sw/code", "/sw/code", True),
    ("/sw/code/pkg/__init__.py", "/sw/code", True),
    ("/sw/code/pkg/__init__.py", "/sw/code/", True),
    ("/sw/code2/pkg/__init__.py", "/sw/code", False),
    ("/sw/codex", "/sw/code", False),
    ("/sw", "/sw/code", False),
    ("/anything", "/", True),
])
def test_within(path: str, root: str, expected: bool) -> None:
    assert within(path, root) is expected


def _package(where: Path, name: str, value: str) -> None:
    (where / name).mkdir(parents=True)
    (where / name / "__init__.py").write_text(f"WHERE = {value!r}\n\ndef f():\n    return WHERE\n")


def test_a_package_from_a_sibling_dir_is_not_taken_for_the_snapshots(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's package was imported from ``code2`` (beside the snapshot ``code``): the trial must import
    the snapshot's copy (before the fix, ``.../code2/...`` started with ``.../code`` and was kept)."""
    name = "ablate_prefix_probe_pkg"
    _package(tmp_path / "code", name, "snapshot")
    _package(tmp_path / "code2", name, "sibling")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "code2"), *sys.path])
    monkeypatch.delitem(sys.modules, name, raising=False)
    __import__(name)
    assert sys.modules[name].WHERE == "sibling"
    fn = import_callable(f"{name}:f", code_root=str(tmp_path / "code"))
    try:
        assert fn() == "snapshot"
        assert sys.modules[name].__file__ == str(tmp_path / "code" / name / "__init__.py")
    finally:
        sys.modules.pop(name, None)


def test_restore_reports_a_sys_path_entry_of_a_sibling_sweep_dir(tmp_path: Path) -> None:
    """Under ``launcher=inline`` the entries ablate put below its own sweep dir are not the task's doing; an
    entry the task added below a sibling dir whose name extends it (``outputs/1`` and ``outputs/10``) is, and is
    reported and undone."""
    own, sibling = tmp_path / "outputs" / "1", tmp_path / "outputs" / "10"
    saved = list(sys.path)
    before = snapshot()
    try:
        sys.path.insert(0, str(own / "code"))  # ablate's: not reported
        baseline = snapshot()
        sys.path.append(str(sibling / "code"))  # the task's
        changed = restore(before, baseline, own_root=str(own))
        assert any("sys.path" in c for c in changed), changed
        assert str(sibling / "code") not in sys.path
    finally:
        sys.path[:] = saved
