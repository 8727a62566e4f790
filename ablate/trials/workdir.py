"""The working directory a trial's task runs in: the code snapshot, with the declared data linked in.

Both task forms run there (a function task through :func:`contextlib.chdir`, a command as its
process's cwd), so a relative path means the same in every trial and never reaches the live
project: code comes from the pinned commit, and each ``task.data`` path is a symlink to the project's
copy, which every trial verifies against its DVC pin.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablate.pin import pins
from ablate.record.sweepdir import SweepDir


def task_workdir(sd: SweepDir, plan: Mapping[str, Any], task: Mapping[str, Any]) -> Path:
    """The snapshot dir to run ``task`` in, with ``task.data`` linked into it from the project.

    Parameters
    ----------
    sd : SweepDir
    plan : mapping
        The plan record (``ablation.yaml``): ``pins.code`` names the snapshot, ``project.cwd`` the project.
    task : mapping
        The trial's resolved ``task`` config (``data``: a path or a list of paths, relative to the project).

    Returns
    -------
    Path
        ``<sweep>/code/<project subdir>``; the project directory when the plan has no code snapshot.
    """
    root = pins.trial_code_root(sd, plan)
    project = Path((plan.get("project") or {}).get("cwd") or os.getcwd())
    if root is None or not root.is_dir():
        return project
    data = task.get("data") or []
    for rel in [data] if isinstance(data, str) else data:
        link, target = root / rel, project / rel
        if link.exists() or link.is_symlink() or not target.exists():
            continue
        sd.mkdir(link.parent)  # the sweep dir's mode, never through a planted symlink
        with contextlib.suppress(FileExistsError):  # another trial linked it first
            link.symlink_to(target, target_is_directory=target.is_dir())
    return root
