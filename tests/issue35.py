"""Helpers for the issue-35 tests: a module-scoped copy of the template project with a pure-Python task."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import commit_all

#: A task that needs no torch: its value depends on the seed and the mode only.
PLAIN_TASK = '''
def train(cfg):
    return {"val_acc": 0.5 + cfg.seed * 0.01 + (0.02 if cfg.task.mode == "b" else 0.0)}
'''


def plain_project(template: Path, dest: Path, *, source: str = PLAIN_TASK, name: str = "plain",
                  extra: str = "", values: str = "[b]") -> Path:
    """A committed copy of ``template`` with the ``fn`` task ``<name>:train`` (``conf/task/<name>.yaml``,
    metric ``val_acc``) and the variable ``mode`` (``task.mode``: control ``a``, treatments ``values``)."""
    shutil.copytree(template, dest, symlinks=True)
    (dest / f"{name}.py").write_text(source)
    (dest / "conf" / "task" / f"{name}.yaml").write_text(
        f"fn: {name}:train\nmetric: val_acc\ngoal: maximize\nmode: a\ndata: []\n{extra}")
    (dest / "conf" / "variable" / "mode.yaml").write_text(f"key: task.mode\nvalues: {values}\n")
    commit_all(dest, f"{name} task")
    return dest


@contextmanager
def inside(path: Path) -> Iterator[None]:
    """Run with ``path`` as the working dir (module-scoped fixtures cannot use monkeypatch)."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)
