"""The warm parent started early (issue 25): while ablate plans and pins, it imports the task's installed packages.

Real runs of the ``ablate`` command on a real git + DVC project. The task imports, at its top, a small installed
package (a directory on ``PYTHONPATH``, outside the project) that writes one line per import: which process
imported it, with what command line, and whether the task module was being imported then. A refused run is
held, with git's own ``core.fsmonitor`` hook, until the early warm parent has imported that package, so the
refusal always finds it running.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import commit_all, git, only_sweep, run

pytestmark = pytest.mark.slow

#: The installed package: one line per import, then (when asked) it stays importing for a minute.
MARK = '''
import json
import os
import sys
import time

with open(os.environ["EARLYMARK_OUT"], "a") as fh:
    fh.write(json.dumps({"pid": os.getpid(), "argv": sys.argv, "task_loaded": "probe" in sys.modules}) + "\\n")
if os.environ.get("EARLYMARK_HOLD"):
    time.sleep(60)
'''

#: The task: the marker package, and numpy (an installed package with compiled parts, imported early too). Until
#: issue 34 it was torch, which cost each of the fresh trials of the test without the early start seconds of CPU.
TASK = '''
import earlymark
import numpy


def train(cfg):
    return {"val_acc": 0.5 + 0.01 * cfg.seed + float(numpy.zeros(1)[0])}
'''

#: git runs this during `git status` (ablate's dirty-tree check): it waits until the marker's first line.
HOOK = '''#!/bin/sh
i=0
while [ ! -s "{out}" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
exit 1
'''


@pytest.fixture
def early_project(project: Path, tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "earlymark.py").write_text(MARK)
    (project / "probe.py").write_text(TASK)
    (project / "conf" / "task" / "probe.yaml").write_text("fn: probe:train\nmetric: val_acc\ngoal: maximize\nx: 1\n")
    (project / "conf" / "variable" / "x.yaml").write_text("key: task.x\nvalues: [2]\n")
    commit_all(project, "probe task importing an installed package")
    return project


def _ablate(project: Path, tmp_path: Path, *args: str, **env: str):
    exe = shutil.which("ablate") or str(Path(sys.executable).with_name("ablate"))
    full = {**os.environ, "DVC_NO_ANALYTICS": "1", "PYTHONPATH": str(tmp_path / "site"),
            "EARLYMARK_OUT": str(tmp_path / "marks.jsonl"), **env}
    return run([exe, "-m", "task=probe", "variable=x", "progress=off", *args], project, env=full, check=False,
               timeout=600)


def _marks(tmp_path: Path) -> list[dict]:
    path = tmp_path / "marks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _processes_of(pid: int) -> list[int]:
    """Live processes whose environment names ``pid`` as their ablate parent (what ablate started)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"ABLATE_PARENT_PID={pid}".encode() in env:
            found.append(int(entry))
    return found


def test_the_early_warm_parent_imports_installed_packages_before_the_plan_and_serves_the_trials(
        early_project: Path, tmp_path: Path) -> None:
    res = _ablate(early_project, tmp_path, "seeds=3", "launcher=local", "launcher.max_parallel=1")
    assert res.returncode == 0, res.stderr
    (mark,) = _marks(tmp_path)  # imported once, by the warm parent: no trial imported it again
    assert "--early" in mark["argv"] and mark["task_loaded"] is False  # before it knew the sweep dir or the task
    sd = only_sweep(early_project)
    manifests = [json.loads(p.read_text()) for p in sd.glob("trials/*/seed=*/manifest.json")]
    assert len(manifests) == 6
    assert {m["warm"]["parent"] for m in manifests} == {mark["pid"]}  # that process forked every trial
    report = (sd / "warm-parent.log")
    assert not report.exists() or "early start refused" not in report.read_text()


def test_without_the_early_start_the_task_imports_the_package_itself(early_project: Path, tmp_path: Path) -> None:
    """The control of the test above: with ``launcher.warm=false`` nothing starts early; each trial imports it."""
    res = _ablate(early_project, tmp_path, "seeds=3", "launcher=local", "launcher.warm=false")
    assert res.returncode == 0, res.stderr
    marks = _marks(tmp_path)
    assert len(marks) == 6 and all(m["task_loaded"] and "--early" not in m["argv"] for m in marks)


def test_a_refused_run_ends_its_early_warm_parent_with_the_same_one_line_error(early_project: Path,
                                                                                tmp_path: Path) -> None:
    hook = tmp_path / "fsmonitor.sh"
    hook.write_text(HOOK.format(out=tmp_path / "marks.jsonl"))
    hook.chmod(0o755)
    git(early_project, "config", "core.fsmonitor", str(hook))
    (early_project / "probe.py").write_text(TASK + "# an uncommitted edit\n")  # a dirty tree: refused

    exe = shutil.which("ablate") or str(Path(sys.executable).with_name("ablate"))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "PYTHONPATH": str(tmp_path / "site"),
           "EARLYMARK_OUT": str(tmp_path / "marks.jsonl"), "EARLYMARK_HOLD": "1"}
    proc = subprocess.Popen([exe, "-m", "task=probe", "variable=x", "progress=off", "seeds=3"], cwd=early_project,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=300)
    (mark,) = _marks(tmp_path)  # the early warm parent was importing (held there for a minute) when it refused
    assert "--early" in mark["argv"]
    assert proc.returncode == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ablate: error: ") and "probe.py" in lines[0], err
    with pytest.raises(ProcessLookupError):
        os.kill(mark["pid"], 0)  # gone (and reaped) by the time the command returned
    assert _processes_of(proc.pid) == []
    assert not list(early_project.glob("outputs/ablate/*/*"))  # nothing was created

    (tmp_path / "marks.jsonl").unlink()
    git(early_project, "config", "--unset", "core.fsmonitor")  # the hook would wait for a marker no one writes
    cold = _ablate(early_project, tmp_path, "seeds=3", "launcher.warm=false")  # no early start at all
    assert cold.returncode == 2 and cold.stderr.strip() == err.strip()
    assert _marks(tmp_path) == []


def test_an_early_import_that_starts_a_thread_is_refused_as_a_warm_parent_started_afresh_refuses_it(
        early_project: Path, tmp_path: Path) -> None:
    """The early warm parent imports the package, sees its thread, and exits; the launch starts one the ordinary
    way, whose refusal names the task file's own import line (which the early one could not know)."""
    (tmp_path / "site" / "threadmark.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True, name='marked').start()\n")
    (early_project / "probe.py").write_text("import threadmark\n\n\ndef train(cfg):\n    return {'val_acc': 0.5}\n")
    commit_all(early_project, "a task importing a package that starts a thread")
    res = _ablate(early_project, tmp_path, "seeds=3", "launcher=local")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()[-1:]
    assert line.startswith("ablate: error: `launcher.warm`: importing probe"), res.stderr
    assert "started 1 thread(s)" in line
    assert "`marked`" in line and "pulled in by `import threadmark` (probe.py line 1)" in line, line
    assert "launcher.warm=false" in line
