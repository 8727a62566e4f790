"""A warm parent that learns what its trials import (issue 25.2): real forks of a real warm parent.

The task imports a module of its own package only when first called (as ``torch._dynamo`` is imported by
the first ``optimizer.step()``). That module records, when imported, the pid of the process importing it:
the file it appends to is the fixture's own log of who paid for the import.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, commit_all

pytestmark = pytest.mark.slow

TASK = '''
import os


def train(cfg):
    from lazyprobe import heavy  # lazily, at the first call: the warm parent never imported it

    return {"val_acc": 0.5 + 0.01 * cfg.seed + heavy.VALUE, "pid": os.getpid()}
'''

HEAVY = '''
import os

VALUE = 0.001
with open({log!r}, "a") as fh:
    fh.write(f"{{os.getpid()}}\\n")
'''

THREAD = "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"


@pytest.fixture
def lazy_project(project: Path, tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "heavy-imports.txt"
    pkg = project / "lazyprobe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(TASK)
    (pkg / "heavy.py").write_text(HEAVY.format(log=str(log)))
    (project / "conf" / "task" / "lazy.yaml").write_text("fn: lazyprobe:train\nmetric: val_acc\ngoal: maximize\n"
                                                        "mode: plain\n")
    (project / "conf" / "variable" / "mode.yaml").write_text("key: task.mode\nvalues: [other]\n")
    commit_all(project, "lazy task")
    return project, log


def _trials(project: Path) -> list[dict]:
    (sd,) = sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))
    out = []
    for d in sd.glob("trials/*/seed=*"):
        result = json.loads((d / "result.json").read_text())
        out.append({"result": result, "manifest": json.loads((d / "manifest.json").read_text()), "dir": d})
    return sorted(out, key=lambda t: t["result"]["started_at"] + str(t["result"]["metrics"]["pid"]))


def _run(project: Path, *extra: str, console: bool = False):
    """The ablation in this process (ablate's CLI entry), or through the console script when ``console``."""
    args = ("-m", "variable=mode", "task=lazy", "seeds=3", "launcher=local", "launcher.max_parallel=1", *extra)
    return ablate_cli(project, *args) if console else ablate_in(project, *args)


def test_the_warm_parent_preloads_what_the_first_trial_imported(lazy_project: tuple[Path, Path]) -> None:
    project, log = lazy_project
    res = _run(project)
    assert res.returncode == 0, res.stderr
    trials = _trials(project)
    assert len(trials) == 6 and all(t["result"]["status"] == "ok" for t in trials)
    importers = [int(x) for x in log.read_text().split()]
    trial_pids = {int(t["result"]["metrics"]["pid"]) for t in trials}
    (parent,) = {t["manifest"]["warm"]["parent"] for t in trials}
    # one slot: the first trial imported it; every later one found it loaded in the parent it was forked from
    first, *later = sorted(trials, key=lambda t: t["result"]["finished_at"])
    assert "lazyprobe.heavy" in first["manifest"]["warm"]["imported"]
    assert first["manifest"]["warm"]["preloaded"] == {"declared": [], "learned": []}
    assert set(importers) & trial_pids == {int(first["result"]["metrics"]["pid"])}
    # the warm parent imported it itself, after a probe fork imported it alone (no thread, no CUDA, no random draw
    # at import); nothing else did
    probes = [p for p in importers if p not in (parent, int(first["result"]["metrics"]["pid"]))]
    assert sorted(importers) == sorted([parent, int(first["result"]["metrics"]["pid"]), *probes])
    assert len(probes) == 1 and importers.index(probes[0]) < importers.index(parent)
    for t in later:
        assert "lazyprobe.heavy" in t["manifest"]["warm"]["preloaded"]["learned"]
        assert "lazyprobe.heavy" not in t["manifest"]["warm"]["imported"]
    # the metric is the same as when every trial imports the module itself (the fresh run below)
    values = {(t["result"]["arm"], t["result"]["seed"]): t["result"]["metrics"]["val_acc"] for t in trials}
    assert values[("control", 0)] == pytest.approx(0.501)


def test_without_learning_every_trial_imports_it(lazy_project: tuple[Path, Path]) -> None:
    project, log = lazy_project
    res = _run(project, "launcher.learn_imports=false", console=True)  # the console script: this file's proof of it
    assert res.returncode == 0, res.stderr
    trials = _trials(project)
    importers = sorted(int(x) for x in log.read_text().split())
    assert importers == sorted(int(t["result"]["metrics"]["pid"]) for t in trials)
    assert all("lazyprobe.heavy" in t["manifest"]["warm"]["imported"] for t in trials)


def test_a_declared_preload_is_imported_once_by_the_parent(lazy_project: tuple[Path, Path]) -> None:
    project, log = lazy_project
    res = _run(project, "launcher.preload=[lazyprobe.heavy]", "launcher.learn_imports=false")
    assert res.returncode == 0, res.stderr
    trials = _trials(project)
    (parent,) = {t["manifest"]["warm"]["parent"] for t in trials}
    assert [int(x) for x in log.read_text().split()] == [parent]
    for t in trials:
        assert t["manifest"]["warm"]["preloaded"] == {"declared": ["lazyprobe.heavy"], "learned": []}
        assert "lazyprobe.heavy" not in t["manifest"]["warm"]["imported"]


def test_a_preload_that_cannot_be_imported_is_refused_in_one_line(lazy_project: tuple[Path, Path]) -> None:
    project, _ = lazy_project
    res = _run(project, "launcher.preload=[lazyprobe.nothere]")
    assert res.returncode == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("ablate: error:")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "`launcher.preload`" in lines[0] and "lazyprobe.nothere" in lines[0] and "ModuleNotFoundError" in lines[0]
    # not a list: refused while composing the plan, before any process starts (in this process, as the CLI)
    bad = ablate_in(project, "-m", "variable=mode", "task=lazy", "seeds=3", "launcher=local",
                    "launcher.max_parallel=1", "launcher.preload=lazyprobe")
    assert bad.returncode == 2 and "launcher.preload" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def _run_ok(project: Path, log: Path) -> tuple[list[dict], int, list[int]]:
    """Run the ablation; every trial ok, from one warm parent: the trials, that parent's pid, and the pids that
    imported ``lazyprobe.heavy`` (from its import log)."""
    res = _run(project)
    assert res.returncode == 0, res.stderr
    trials = _trials(project)
    assert trials and all(t["result"]["status"] == "ok" for t in trials)
    (parent,) = {t["manifest"]["warm"]["parent"] for t in trials}
    return trials, parent, [int(x) for x in log.read_text().split()]


def test_an_import_that_starts_a_thread_is_never_preloaded(lazy_project: tuple[Path, Path]) -> None:
    project, log = lazy_project
    heavy = project / "lazyprobe" / "heavy.py"
    heavy.write_text(THREAD + heavy.read_text())
    commit_all(project, "heavy starts a thread at import")
    trials, parent, importers = _run_ok(project, log)
    assert parent not in importers  # a probe fork found the thread; the parent never imported it
    assert len(importers) == 7  # every trial, and the one probe
    assert all("lazyprobe.heavy" in t["manifest"]["warm"]["imported"] for t in trials[1:])
    (sd,) = sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))
    text = (sd / "warm-parent.log").read_text()
    assert text.count("not preloading") == 1 and "lazyprobe.heavy" in text and "started 1 thread(s)" in text, text


def test_a_trial_that_ends_with_threads_of_its_own_leaves_the_decision_to_a_probe(
        lazy_project: tuple[Path, Path]) -> None:
    """The task starts a thread when called (not at import): the trial's end cannot tell whether the import
    was safe, so a probe fork imports the module alone, finds one thread, and the parent imports it."""
    project, log = lazy_project
    task = project / "lazyprobe" / "__init__.py"
    task.write_text(task.read_text().replace("    from lazyprobe import heavy", "    import threading, time\n"
                    "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                    "    from lazyprobe import heavy"))
    commit_all(project, "the task starts a thread when called")
    trials, parent, importers = _run_ok(project, log)
    first = min(trials, key=lambda t: t["result"]["finished_at"])
    trial_pids = {int(t["result"]["metrics"]["pid"]) for t in trials}
    probes = set(importers) - {parent} - trial_pids
    assert parent in importers and len(probes) == 1 and len(importers) == 3, importers
    assert set(importers) & trial_pids == {int(first["result"]["metrics"]["pid"])}
