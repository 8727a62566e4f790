"""Shared fixtures: real git + DVC projects built from this repository's example, in temp dirs."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO, clean_env, run


@pytest.hookimpl(wrapper=True)  # around xdist's own, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Group the tests for ``pytest -n 4 --dist loadgroup`` (README's test command, pytest-xdist). Every test that
    uses the SLURM cluster runs in one worker, one job set at a time, as without xdist (the cluster has 2 CPUs:
    a test's wait for its jobs must not depend on another test's jobs). A file whose tests share a module- or
    session-scoped fixture of its own (a sweep run once, then read by each test) runs in one worker, so that
    fixture is built once. Every other test goes to whichever worker is free."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if item.get_closest_marker("slurm") is not None:
            item.add_marker(pytest.mark.xdist_group("slurm"))
        elif _shares_a_fixture_of_its_file(item, path):
            item.add_marker(pytest.mark.xdist_group(path))
    yield
    _groups_reached_xdist(config, items)


def _groups_reached_xdist(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker of ``--dist loadgroup``: every grouped test's id carries its group, or the run stops.

    pytest-xdist 3.8 writes a test's group into ``item._nodeid``, which pytest 9.2 no longer reads
    (pytest-xdist#1386, open), so every group was silently spread over both workers: the SLURM tests ran side by
    side and each module fixture was built once per worker (the Lightning app's two ablations twice: 57 s of CPU
    more). pyproject.toml pins pytest below 9.2, and :func:`pytest_configure` says so in one line; this is the
    backstop for a pair of versions not known there (xdist shows it as an internal error naming a test)."""
    if not getattr(config.option, "loadgroup", False):
        return
    lost = [i.nodeid for i in items if i.get_closest_marker("xdist_group") is not None and "@" not in i.nodeid]
    if lost:
        raise pytest.UsageError(f"{len(lost)} grouped tests lost their xdist group (pytest-xdist#1386): {lost[0]}")


def pytest_configure(config: pytest.Config) -> None:
    """Refuse ``--dist loadgroup`` where pytest-xdist cannot group (:func:`_groups_reached_xdist`), in one line."""
    if getattr(config.option, "dist", "no") != "loadgroup" or getattr(config, "workerinput", None) is not None:
        return
    from importlib.metadata import version

    pyt, xd = version("pytest"), version("pytest-xdist")
    if _release(pyt) >= (9, 2) and _release(xd) <= (3, 8, 0):
        raise pytest.UsageError(
            f"pytest {pyt} with pytest-xdist {xd}: --dist loadgroup would not group (pytest-xdist#1386), so the "
            "SLURM tests would run side by side and module fixtures be built twice. Fix: "
            "`pip install -e '.[dev]'` (pyproject.toml pins pytest<9.2)")


def _release(v: str) -> tuple[int, ...]:
    """The leading numeric release of a version string (``"9.2.0"`` -> ``(9, 2, 0)``; ``"9.2.0rc1"`` -> ``(9, 2)``)."""
    out = []
    for part in v.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def _shares_a_fixture_of_its_file(item: pytest.Item, path: str) -> bool:
    """True when ``item`` uses a fixture scoped wider than a function and defined in its own file."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        fd = defs[-1]
        if fd.scope in ("module", "package", "session") and str(fd.baseid).split("::", 1)[0] == path:
            return True
    return False


#: Files of this repository copied into every test project.
PROJECT_FILES = ("conf", "examples", "dvc.yaml", "dvc.lock", "params.yaml")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the runner's environment out of the tests (:func:`tests.helpers.clean_env`)."""
    clean_env(monkeypatch)


@pytest.fixture(scope="session")
def project_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed git + DVC project holding the digits example and its prepared data (built once)."""
    root = tmp_path_factory.mktemp("template") / "proj"
    root.mkdir()
    for name in PROJECT_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, root / name)
    (root / ".gitignore").write_text("/data/\n/outputs/\n__pycache__/\n")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    run(["git", "init", "-q", "-b", "main"], root)
    run(["git", "config", "user.email", "tests@ablate.local"], root)
    run(["git", "config", "user.name", "ablate tests"], root)
    run([sys.executable, "-m", "dvc", "init", "-q"], root, env=env)
    run([sys.executable, "-m", "dvc", "config", "core.analytics", "false"], root, env=env)
    data = REPO / "data" / "digits.npz"
    if data.exists():
        (root / "data").mkdir()
        shutil.copy2(data, root / "data" / "digits.npz")
    else:
        run([sys.executable, "-m", "examples.digits.prepare", "data/digits.npz"], root)
    run([sys.executable, "-m", "dvc", "commit", "-f", "-q", "prepare"], root, env=env)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-q", "-m", "digits example"], root)
    return root


@pytest.fixture
def project(project_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh copy of the template project; the test runs with it as the current directory."""
    dest = tmp_path / "proj"
    shutil.copytree(project_template, dest, symlinks=True)
    monkeypatch.chdir(dest)
    monkeypatch.syspath_prepend(str(dest))
    yield dest
    for mod in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        del sys.modules[mod]


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[object]:
    """Let pytest keep its assertion-rewritten test modules while it collects, where ``PYTHONDONTWRITEBYTECODE``
    is set (this machine's shells set it): pytest writes them only when ``sys.dont_write_bytecode`` is false, so
    every worker rewrote and compiled all ~190 test modules again, 10.8 s of CPU per worker against 3.3 s with them
    (`--collect-only`, `/usr/bin/time`, second run). Only during collection: a test that imports a project's
    module must leave no ``__pycache__`` in it, as without this."""
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = before


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile ablate's own modules (and its Hydra plugins) to byte code before any test starts a process.

    Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine's shells set it, and issue 34's 1.1-1.3 s of CPU per
    ``ablate`` call is the cost without the files), Python never writes a ``.pyc`` and every process that
    imports ablate from its source tree (an editable install: each ``ablate`` command, warm parent and trial
    started afresh) compiled its 1.7 MB of source again: about 0.3 s
    of CPU of the 1.2 s an ``ablate -m ... dry_run=true`` costs (measured here: 1.20 s user without the
    files, 0.91 s with them; `/usr/bin/time`, 3-4 runs each). The variable only stops Python writing them;
    Python still reads the ones there, so writing them once here (:func:`compileall.compile_dir`, which skips
    files whose ``.pyc`` is current and writes each atomically, so the xdist workers doing it too is safe)
    saves that in every process after. A no-op where Python writes them itself; silent where the tree is read-only
    (``quiet=2``: a file it cannot write is left to compile as before)."""
    import compileall

    for name in ("ablate", "hydra_plugins"):
        compileall.compile_dir(str(REPO / name), quiet=2)


def _cpu_s() -> float:
    """User + system CPU seconds of this process and of its waited-for children (``getrusage``), in s."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Where the suite's CPU goes: with ``ABLATE_TEST_CPU=DIR`` set, each test's setup + call + teardown CPU
    (this worker's and every child process it waited for, in s) and wall time are appended as JSON lines to
    ``DIR/<worker>.jsonl``; ``python -m tests.cpu_report DIR`` sums them per file and per test. Processes no test
    process waits for (SLURM jobs, run by slurmd) are not counted. A module-scoped fixture's cost lands on the
    first test that uses it. Off (and free) without the variable."""
    out = os.environ.get("ABLATE_TEST_CPU")
    if not out:
        yield
        return
    import json
    import time

    cpu, wall = _cpu_s(), time.monotonic()
    yield
    row = {"test": item.nodeid, "cpu_s": round(_cpu_s() - cpu, 3), "wall_s": round(time.monotonic() - wall, 3)}
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(out).mkdir(parents=True, exist_ok=True)  # the DIR of ABLATE_TEST_CPU=DIR need not exist yet
    with open(Path(out) / f"{worker}.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
