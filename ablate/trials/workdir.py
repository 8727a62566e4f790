"""The working directory a trial's task runs in: its own mirror of the code snapshot, data linked in.

Every trial, whatever its form (``fn``, ``command``, ``app``) and launcher (inline, local warm or fresh,
SLURM one trial per job or packed), runs in ``<trial dir>/work`` (:func:`trial_workdir`): the
snapshot's dirs as real dirs, its files as links, each ``task.data`` path a link to the project's copy,
which every trial verifies against its DVC pin. A relative read sees the pinned code and data; a
relative write (a checkpoint, a ``chdir=false`` app's metrics file) stays in its trial's dir, where the
metric readers look too (:func:`own_workdir`). An ``fn`` task still imports from the snapshot itself
(on ``sys.path``); under ``launcher=inline`` the trial changes into its dir and back. A write into the
shared snapshot is detected and named (:func:`guard_snapshot`): trials running at once read it. An app
with ``hydra.job.chdir=true`` then changes into its run dir, as Hydra does. A single run (``ablate``
without ``-m``) runs in ``<run dir>/work``, a mirror of the live project (:func:`live_workdir`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.pin import pins
from ablate.record.sweepdir import SweepDir


def task_workdir(sd: SweepDir, plan: Mapping[str, Any], task: Mapping[str, Any]) -> Path:
    """The snapshot dir a trial's working dir mirrors (:func:`trial_workdir`), with ``task.data`` linked into it
    from the project (also the dir a warm parent imports an app from).

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
    """The trial's own working dir (any form: ``fn``, ``command``, ``app``), and the snapshot it mirrors.

    ``<trial dir>/work`` holds the snapshot's dirs as real dirs and its files as symlinks to the
    snapshot's (``task.data`` links included, see :func:`task_workdir`). Relative reads see the pinned
    code and data, as in the snapshot; what the task writes into its working dir (a ``chdir=false``
    app's metrics file, a checkpoint, ``outputs/``) lands in this trial's dir, never in the snapshot
    that every trial shares. The snapshot's listing is read once per process (:func:`mirror_listing`),
    so a trial pays for one ``mkdir`` per dir and one ``symlink`` per file; under a warm launch of
    ``launcher=local`` the orchestrator builds them ahead, while the warm parent imports the task
    (:func:`ablate.trials.launchers.local._workdirs_ahead`), and the trial finds them made.

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
    fresh = not os.path.lexists(work)
    sd.mkdir(work)  # with the sweep dir's mode, never through a planted symlink
    dirs, links = mirror_listing(root, task.get("data"))
    base, top = str(work), str(root)
    if fresh:  # made here and now: nothing in it to check
        exact = None
        for rel in dirs:
            path = os.path.join(base, rel)
            os.mkdir(path, sd.mode)
            if exact is None:
                exact = stat.S_IMODE(os.lstat(path).st_mode) == sd.mode  # else the umask took bits: chmod each
            if not exact:
                os.chmod(path, sd.mode)
        for rel in links:
            os.symlink(os.path.join(top, rel), os.path.join(base, rel))
    else:  # the trial run again (resume, a requeued SLURM job): what is missing, its own files kept
        for rel in dirs:
            sd.mkdir(work / rel)
        for rel in links:
            if not os.path.lexists(os.path.join(base, rel)):
                os.symlink(os.path.join(top, rel), os.path.join(base, rel))
    return work, root


def live_workdir(project: Path, run_dir: Path) -> Path:
    """A single run's working dir (``ablate`` without ``-m``): ``<run dir>/work``, a mirror of the live project.

    A single run runs the live tree's code (as a Hydra run does), so this mirrors the project dir itself: the
    dirs holding files git lists (tracked, or untracked and not ignored) as real dirs, every other entry of
    them as a link to the project's (files, and ignored dirs such as ``data/`` or ``outputs/`` as a whole).
    Relative reads see the project; what the task writes into its working dir (a ``chdir=false`` app's
    metrics file, a checkpoint) lands in the run dir, never in the live tree. Outside a git repository only
    the top level is mirrored.
    """
    import subprocess

    work = run_dir / WORK_DIR_NAME
    own = os.path.relpath(run_dir, project)  # the run dir itself is never mirrored (it is under the project)
    try:
        out = subprocess.run(["git", "ls-files", "-z", "-c", "-o", "--exclude-standard"], cwd=project,
                             capture_output=True, check=False).stdout.decode(errors="replace")
    except OSError:  # no git: the top level only
        out = ""
    real = {""}
    for rel in filter(None, out.split("\0")):
        parent = os.path.dirname(rel)
        while parent not in real:
            real.add(parent)
            parent = os.path.dirname(parent)
    real = {d for d in real if not (d == own or d.startswith(own + os.sep))}
    for rel in sorted(real):  # parents first
        (work / rel).mkdir(parents=True, exist_ok=True)
        with os.scandir(project / rel) as it:
            for e in it:
                r = os.path.join(rel, e.name) if rel else e.name
                if r in real or r == own or e.name in _SKIP or os.path.lexists(work / r):
                    continue
                os.symlink(e.path, work / r)
    return work


def own_workdir(cwd: Path, tp: Any) -> Path | None:
    """``cwd`` when it is the trial's (or single run's) own working dir, ``<dir>/work``, whose files the metric
    readers look at after the run dir's; else None (a cwd shared with others is never read)."""
    return cwd if Path(cwd).resolve() == (Path(tp.dir) / WORK_DIR_NAME).resolve() else None


_LISTINGS: dict[tuple[str, str], tuple[list[str], list[str]]] = {}


def mirror_listing(root: Path, data: Any = None) -> tuple[list[str], list[str]]:
    """What :func:`trial_workdir` mirrors of the snapshot ``root``: its dirs (relative, each after its parent)
    and the entries to link (files, and links such as ``task.data``'s), ``__pycache__`` left out.

    Read once per process and snapshot (and ``task.data``, whose links :func:`task_workdir` adds): the
    snapshot is the pinned commit's, and a write into it stops the ablation (:func:`guard_snapshot`).
    """
    key = (str(root), repr(data))
    hit = _LISTINGS.get(key)
    if hit is not None:
        return hit
    dirs: list[str] = []
    links: list[str] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel)) as it:
            for e in it:
                r = os.path.join(rel, e.name) if rel else e.name
                if e.is_dir(follow_symlinks=False):
                    if e.name not in _SKIP:
                        dirs.append(r)
                        stack.append(r)
                else:
                    links.append(r)
    _LISTINGS[key] = dirs, links
    return dirs, links


#: A directory's entry in :func:`snapshot_state` (a dir's own size and mtime change with what it holds).
_DIR = (-1, 0)


def snapshot_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``root`` (symlinks not followed, ``__pycache__`` skipped): relative path -> (size, mtime);
    a directory -> ``(-1, 0)``, so only entries appearing or vanishing in it count."""
    state: dict[str, tuple[int, int]] = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            it = os.scandir(os.path.join(root, rel))
        except OSError:
            continue
        with it:
            for e in it:
                r = os.path.join(rel, e.name) if rel else e.name
                try:
                    if e.is_dir(follow_symlinks=False):
                        if e.name not in _SKIP:
                            state[r] = _DIR
                            stack.append(r)
                        continue
                    st = e.stat(follow_symlinks=False)
                except OSError:  # gone while listed
                    continue
                state[r] = (st.st_size, st.st_mtime_ns)
    return state


@contextlib.contextmanager
def guard_snapshot(root: Path | None) -> Iterator[None]:
    """Detect writes into the shared code snapshot while a trial's task runs (any form).

    Two scans of the snapshot (:func:`snapshot_state`, one ``lstat`` per file), before and after the task:
    0.3 ms of CPU both for the digits example's snapshot, 4 ms for this repository's 316 files
    (``benchmarks/results/trial_workdir.txt``).

    Raises
    ------
    ConfigError
        After the task ended, when an entry of the snapshot appeared, changed or vanished: names
        the paths (the first 5). The task wrote outside its trial's dir, where trials running at
        once share the files, so its result could depend on another trial's.
    """
    if root is None:
        yield
        return
    before = snapshot_state(root)
    yield
    after = snapshot_state(root)
    written = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if written:
        shown = ", ".join(str(root / w) for w in written[:5]) + (f" (+{len(written) - 5} more)" if len(written) > 5
                                                                  else "")
        raise ConfigError(
            f"the trial's task wrote into the shared code snapshot, which every trial of the ablation reads: "
            f"{shown}; a result that reads such files could come from another trial's",
            where="task", fix="write under the working dir (a relative path: the trial's own) or the run dir "
            "($ABLATE_RUN_DIR, ${hydra:runtime.output_dir}); a path built from the code's own location "
            "(`Path(__file__).parent`, ${oc.env:PROJECT_ROOT}/logs) points into the snapshot")
