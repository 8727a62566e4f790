"""The working directory a trial's task runs in: the code snapshot, with the declared data linked in.

A function task runs in the snapshot (through :func:`contextlib.chdir`); a script (``command`` or
``app``) runs in its trial's own mirror of it (:func:`trial_workdir`), so what it writes into its
working dir stays in its trial's dir, and a write into the shared snapshot is detected and named
(:func:`guard_snapshot`). Either way a relative path means the same in every trial and never reaches
the live project: code comes from the pinned commit, and each ``task.data`` path is a symlink to the
project's copy, which every trial verifies against its DVC pin.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
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


#: The trial's own working dir of a script task (``<trial dir>/work``): a mirror of the snapshot.
WORK_DIR_NAME = "work"
_SKIP = ("__pycache__",)


def trial_workdir(sd: SweepDir, plan: Mapping[str, Any], task: Mapping[str, Any],
                  trial_dir: Path) -> tuple[Path, Path | None]:
    """The trial's own working dir for a script (``command`` or ``app``), and the snapshot it mirrors.

    ``<trial dir>/work`` holds the snapshot's dirs as real dirs and its files as symlinks to the
    snapshot's (``task.data`` links included, see :func:`task_workdir`). Relative reads see the pinned
    code and data, as in the snapshot; what the script writes into its working dir (a ``chdir=false``
    app's metrics file, a checkpoint, ``outputs/``) lands in this trial's dir, never in the snapshot
    that every trial shares.

    Returns
    -------
    cwd, snapshot : Path, Path or None
        The dir to run in, and the shared snapshot to guard (:func:`guard_snapshot`); without a code
        snapshot, the project dir and None.
    """
    root = task_workdir(sd, plan, task)
    snap = pins.trial_code_root(sd, plan)
    if snap is None or root != snap:
        return root, None
    work = trial_dir / WORK_DIR_NAME
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP and not os.path.islink(os.path.join(dirpath, d))]
        rel = os.path.relpath(dirpath, root)
        here = work / rel if rel != "." else work
        sd.mkdir(here)
        links = [*filenames, *(d for d in os.listdir(dirpath) if os.path.islink(os.path.join(dirpath, d))
                              and d not in filenames)]
        for name in links:
            link = here / name
            if not link.is_symlink() and not link.exists():
                link.symlink_to(os.path.join(dirpath, name))
    return work, root


def snapshot_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``root`` (symlinks not followed, ``__pycache__`` skipped): relative path -> (size, mtime)."""
    state: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP]
        for name in [*filenames, *dirnames]:
            p = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                st = os.lstat(p)
                state[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return state


@contextlib.contextmanager
def guard_snapshot(root: Path | None) -> Iterator[None]:
    """Detect writes into the shared code snapshot while a trial's script runs.

    Raises
    ------
    ConfigError
        After the script ended, when an entry of the snapshot appeared, changed or vanished: names
        the paths (the first 5). The script wrote outside its trial's dir, where trials running at
        once share the files, so its result could depend on another trial's.
    """
    if root is None:
        yield
        return
    before = snapshot_state(root)
    yield
    after = snapshot_state(root)
    written = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)
                     and not (k in before and k in after and os.path.isdir(root / k)))
    if written:
        shown = ", ".join(str(root / w) for w in written[:5]) + (f" (+{len(written) - 5} more)" if len(written) > 5
                                                                  else "")
        raise ConfigError(
            f"the trial's script wrote into the shared code snapshot, which every trial of the ablation reads: "
            f"{shown}; a result that reads such files could come from another trial's",
            where="task", fix="write under the working dir or the Hydra output dir (${hydra:runtime.output_dir}); "
            "an absolute path built from the project root (e.g. ${oc.env:PROJECT_ROOT}/logs) points into the "
            "snapshot")
