"""Warm-fork hazards, named (issue 26, item 5): a real warm parent imports a real task module that starts a
thread (its own library's, or pyarrow's allocator pulled in by ``import sklearn``) or opens a listening
socket; the refusal names the thread or socket, where it came from and the cheapest fix, and each test
runs that fix. The task is test_warm_launcher's probe without torch (:data:`LIGHT_PROBE`): what is checked is what
the task module's import starts, not training, and each warm parent would import torch (seconds of CPU, two warm
parents a test) only because the probe does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, commit_all
from tests.integration.test_warm_launcher import LIGHT_PROBE, probe_project  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow

ARGS = ["-m", "variable=mode", "task=probe", "seeds=3", "launcher=local", "launcher.max_parallel=2"]

HELPERLIB = '''
import threading
import time


def _pump():
    time.sleep(60)


threading.Thread(target=_pump, name="helperlib-pump", daemon=True).start()
'''


def _refusal(project: Path, console: bool = False) -> str:
    """The refusal's one line: from ablate's CLI entry in this process (the warm parent that finds the hazard is
    its own process either way), or from the console script when ``console`` (the proof it says the same)."""
    res = ablate_cli(project, *ARGS, timeout=300) if console else ablate_in(project, *ARGS)
    assert res.returncode == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("ablate: error:")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert not list(project.glob("outputs/ablate/*/*/trials/*/seed=*/result.json"))  # nothing ran
    return lines[0]


def _runs_warm(project: Path, console: bool = False) -> None:
    """The fix runs: six trials in warm forks, from ablate's CLI entry in this process (the warm parent is its own
    process either way), or from the console script when ``console`` (this file's proof of its ablations)."""
    res = ablate_cli(project, *ARGS, timeout=300) if console else ablate_in(project, *ARGS)
    assert res.returncode == 0, res.stderr
    assert "6/6 trials" in res.stderr, res.stderr
    manifests = sorted(project.glob("outputs/ablate/*/*/trials/*/seed=*/manifest.json"))[-6:]
    assert len(manifests) == 6 and all(json.loads(m.read_text()).get("warm_parent") for m in manifests)


def test_thread_a_library_starts_at_import_is_named_with_the_import_to_move(probe_project: Path) -> None:  # noqa: F811
    (probe_project / "helperlib.py").write_text(HELPERLIB)
    (probe_project / "probe.py").write_text("import helperlib  # noqa: F401\n" + LIGHT_PROBE)
    commit_all(probe_project, "a task whose import starts a thread in a library")
    line = _refusal(probe_project, console=True)
    assert "started 1 thread(s)" in line and "`helperlib-pump`" in line, line
    assert "running helperlib._pump" in line and "while importing helperlib" in line, line
    assert "move `import helperlib  # noqa: F401` (probe.py line 1) into the task function" in line, line
    assert "`launcher.warm=false` (each trial then imports the task itself:" in line, line

    # the fix it names: the import moves into the task function
    (probe_project / "probe.py").write_text(LIGHT_PROBE.replace("def train(cfg):\n",
                                                          "def train(cfg):\n    import helperlib  # noqa: F401\n"))
    commit_all(probe_project, "import helperlib inside the task")
    _runs_warm(probe_project, console=True)


def test_pyarrow_allocator_thread_pulled_in_by_sklearn_names_pyarrows_setting(
        probe_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    pytest.importorskip("pyarrow", reason="the mlflow extra brings pyarrow (pip install -e '.[mlflow]')")
    monkeypatch.delenv("JE_ARROW_MALLOC_CONF", raising=False)
    (probe_project / "probe.py").write_text("import sklearn  # noqa: F401\n" + LIGHT_PROBE)
    commit_all(probe_project, "a plain scikit-learn task")
    line = _refusal(probe_project)
    assert "`jemalloc_bg_thd` (a native thread" in line and "while importing pyarrow" in line, line
    assert "pulled in by `import sklearn  # noqa: F401` (probe.py line 1)" in line, line
    assert "`JE_ARROW_MALLOC_CONF=background_thread:false`" in line, line

    monkeypatch.setenv("JE_ARROW_MALLOC_CONF", "background_thread:false")  # the setting it names
    _runs_warm(probe_project)


def test_listening_socket_opened_at_import_is_refused_at_once(probe_project: Path) -> None:  # noqa: F811
    """Before: every fork shared the one socket, and trials hung for minutes, then failed with TimeoutError."""
    server = "import socket\n_SERVER = socket.socket()\n_SERVER.bind(('127.0.0.1', 0))\n_SERVER.listen()\n"
    (probe_project / "probe.py").write_text(server + LIGHT_PROBE)
    commit_all(probe_project, "a task that listens at import")
    line = _refusal(probe_project)
    assert "opened 1 socket(s)" in line and "a TCP socket listening on 127.0.0.1:" in line, line
    assert "started at probe.py line 4" in line, line
    assert "start it inside the task function instead of at import" in line, line

    (probe_project / "probe.py").write_text(LIGHT_PROBE.replace(
        "def train(cfg):\n", "def train(cfg):\n    " + server.replace("\n", "\n    ").rstrip() + "\n"))
    commit_all(probe_project, "listen inside the task")
    _runs_warm(probe_project)
