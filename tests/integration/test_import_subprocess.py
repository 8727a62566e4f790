"""Attack (issue 35, item 14): a task module that starts a subprocess at import. Under the warm launcher it would
live in the warm parent, shared by every fork, and outlive the ablation: it is refused like a thread (named, with
the import line to move) and ended at once. A fresh trial that starts one ends it with the trial. Checked by the
processes left on the machine after each run (a marker in their command line)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from ablate.errors import UserError
from tests.issue35 import inside, plain_project

pytestmark = pytest.mark.slow

POPEN = '''
import subprocess
import sys

HELPER = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])

def train(cfg):
    return {{"val_acc": 0.5 + cfg.seed * 0.01 + (0.02 if cfg.task.mode == "b" else 0.0)}}
'''

DAEMON = '''
import os
import sys

if os.fork() == 0:  # a daemon: double fork, its own session
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
    os._exit(0)
os.wait()

def train(cfg):
    return {{"val_acc": 0.5 + cfg.seed * 0.01 + (0.02 if cfg.task.mode == "b" else 0.0)}}
'''


def _alive(marker: str) -> list[int]:
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    with open(f"/proc/{pid}/stat") as st:
                        if st.read().rsplit(")", 1)[1].split()[0] != "Z":
                            out.append(int(pid))
        except OSError:
            continue
    return out


def _gone(marker: str) -> bool:
    deadline = time.monotonic() + 10  # SIGKILL is delivered at once; the kernel may take a moment to reap
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(marker)


@pytest.mark.parametrize("source", [POPEN, DAEMON], ids=["popen", "daemon"])
def test_a_subprocess_started_at_import_is_refused_warm_and_ended(project_template: Path, tmp_path: Path,
                                                                  source: str) -> None:
    import ablate

    marker = f"ablate-attack-{uuid.uuid4().hex}"
    proj = plain_project(project_template, tmp_path / "proj", source=source.format(marker=marker), name="spawner")
    try:
        with inside(proj), pytest.raises(UserError) as err:
            ablate.run(proj / "conf", variable="mode", seeds=3, launcher="local", overrides=["task=spawner",
                                                                                             "progress=off"])
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("`launcher.warm`: importing spawner:train started 1 process(es)")
        assert "time.sleep(300)" in msg and "it would outlive the ablation" in msg
        if source is POPEN:  # where it was started (a daemon's grandchild has no such line)
            assert "started at spawner.py line 5" in msg
        assert "launcher.warm=false" in msg
        assert _gone(marker), "the process started at import outlived the refused launch"
        with inside(proj):  # the fix it names: a fresh process per trial, whose own processes end with it
            verdict = ablate.run(proj / "conf", variable="mode", seeds=3, launcher="local",
                                 overrides=["task=spawner", "progress=off", "launcher.warm=false"])
        assert {a["arm"]: a["n"] for a in verdict["arms"]} == {"control": 3, "mode=b": 3}
        assert _gone(marker), "a fresh trial's process outlived it"
    finally:
        for pid in _alive(marker):
            os.kill(pid, 9)
