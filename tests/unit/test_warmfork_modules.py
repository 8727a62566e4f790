"""What a warm fork imported since the fork (:func:`ablate.trials.warm.fork.new_roots`): read from the end of
``sys.modules`` back to the parent's newest module when that can tell, from every module when it cannot; the
two answers agree. Real imports of a package written here."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablate.trials.warm import fork


@pytest.fixture
def pkg(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "wfpkg_i25"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name in ("a", "b", "c"):
        (root / f"{name}.py").write_text(f"X = {name!r}\n")
    sys.path.insert(0, str(tmp_path))
    import wfpkg_i25  # noqa: F401  (the parent holds the package; the "fork" imports its submodules)

    yield "wfpkg_i25"
    sys.path.remove(str(tmp_path))
    for m in [m for m in sys.modules if m.startswith("wfpkg_i25")]:
        del sys.modules[m]
    fork._STATE.clear()


def test_the_modules_added_since_the_fork_are_read_from_the_end(pkg: str) -> None:
    held = fork.ParentModules()
    fork.forked([], [], held.now())
    assert fork._since_fork() == [] and fork.new_roots() == []
    import wfpkg_i25.a
    import wfpkg_i25.b  # noqa: F401

    assert fork._since_fork() == ["wfpkg_i25.a", "wfpkg_i25.b"]
    assert fork.new_roots() == ["wfpkg_i25.a", "wfpkg_i25.b"]
    assert fork.new_roots() == fork.new_roots(before=fork._STATE["modules"])  # every module read


def test_a_parent_module_removed_after_the_fork_makes_it_read_every_module(pkg: str) -> None:
    import wfpkg_i25.c

    fork.forked([], [], fork.ParentModules().now())
    del sys.modules["wfpkg_i25.c"]  # a parent module gone (a task that reloads it) ...
    import wfpkg_i25.a

    assert fork._since_fork() is None  # ... so the tail alone cannot tell
    assert fork.new_roots() == ["wfpkg_i25.a"]
    import wfpkg_i25.c  # noqa: F401  (imported again: held by the parent, so not new)

    assert fork._since_fork() is None and fork.new_roots() == ["wfpkg_i25.a"]


def test_the_parents_names_are_built_again_only_when_its_modules_changed(pkg: str) -> None:
    held = fork.ParentModules()
    first, last = held.now()
    assert held.now()[0] is first and last == next(reversed(sys.modules))
    import wfpkg_i25.b  # noqa: F401

    names, newest = held.now()
    assert names is not first and "wfpkg_i25.b" in names and newest == "wfpkg_i25.b"


def test_a_forks_exit_runs_its_own_finalizers_and_never_the_parents(tmp_path: Path) -> None:
    """A real fork: the parent's finalizer (made before the fork) does not run at the fork's exit, the one the
    fork made does, and one of the parent's that the fork called itself ran then, once."""
    import os
    import weakref

    class Obj:
        pass

    def mark(name: str) -> None:
        with open(tmp_path / name, "a") as fh:
            fh.write("ran\n")

    parent_obj, called_obj = Obj(), Obj()
    parent_fin = weakref.finalize(parent_obj, mark, "parent")
    called_fin = weakref.finalize(called_obj, mark, "called")
    pid = os.fork()
    if pid == 0:  # the fork: what warm.parent._child does around the trial
        try:
            fork.forked([], [])
            own_obj = Obj()
            weakref.finalize(own_obj, mark, "own")
            called_fin()  # the trial finalises one of the parent's objects itself
            fork.leave_parent_finalizers()
            weakref.finalize._exitfunc()  # what the fork's exit runs (atexit)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (tmp_path / "own").read_text() == "ran\n" and (tmp_path / "called").read_text() == "ran\n"
    assert not (tmp_path / "parent").exists()
    assert parent_fin.alive and called_fin.alive  # the parent's own are untouched here
    parent_fin.detach()
    called_fin.detach()
    fork._STATE.clear()
