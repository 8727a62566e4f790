"""The working directory a trial's task runs in: links to the code snapshot, and read-only copies of its data.

Every trial, whatever its form (``fn``, ``command``, ``app``) and launcher (inline, local warm or fresh,
SLURM one trial per job or packed), runs in ``<trial dir>/work`` (:func:`trial_workdir`): one link per
top-level entry of the snapshot, so a relative read sees the pinned code and data, and a relative write to a new
path (a checkpoint, ``outputs/``, ``lightning_logs/``, a ``chdir=false`` app's metrics file) stays in its trial's
dir, where the metric readers look too (:func:`own_workdir`). A work dir costs what the trial writes, plus one
link per top-level entry (a deep mirror cost about 460 entries and 1.1 MB per trial on this repository's
snapshot: 11 GB for 10,000 trials; ``benchmarks/workdir_cost.py``). The dirs on the way to each ``task.data``
path are the trial's own (a cache written beside the data stays the trial's). A write into a linked dir of the
snapshot (``src/x``) reaches the snapshot every trial reads: it is detected and named (:func:`guard_snapshot`).

Each ``task.data`` path is placed in the snapshot once per ablation (:func:`task_workdir`) as a read-only copy of
the project's (a reflink where the file system has them: no bytes copied; else a copy up to
:data:`DATA_COPY_MAX_BYTES`), never as a link to the user's working copy: a task that writes its input (through
the trial's data link) gets a permission error, or (as root, whom modes do not stop) changes only the copy,
which the trial's pins then name (``pin_mismatch``); the user's ``data/`` is never written. Larger data on a
file system without reflinks stays a link to the project's copy (copying it per ablation would cost its size in
every sweep dir): the pins still name a write, after it. An ``fn`` task still imports from the snapshot itself
(on ``sys.path``); under ``launcher=inline`` the trial changes into its dir and back. An app with
``hydra.job.chdir=true`` then changes into its run dir, as Hydra does. A single run (``ablate`` without ``-m``)
runs in ``<run dir>/work``, a mirror of the live project (:func:`live_workdir`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
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
    for rel in _data_list(task.get("data")):
        link, target = root / rel, project / rel
        if link.exists() or link.is_symlink() or not target.exists():
            continue
        sd.mkdir(link.parent)  # the sweep dir's mode, never through a planted symlink
        place_data(target, link, sd.mode)
    return root


def _data_list(data: Any) -> list[str]:
    return [data] if isinstance(data, str) else [str(d) for d in data or []]


#: Data up to this size (per ``task.data`` path) is copied into the snapshot, read-only, where no reflink can be
#: made; larger data stays a link to the project's copy. The digits example's file is 475 KB.
DATA_COPY_MAX_BYTES = 256 << 20
_FICLONE = 0x40049409  # linux/fs.h: share the source's extents (btrfs, XFS, bcachefs); EOPNOTSUPP elsewhere


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(os.stat(os.path.join(d, f)).st_size for d, _, files in os.walk(path, followlinks=True) for f in files)


def _clone_or_copy(src: str, dst: str, copy: bool) -> bool:
    """``dst`` made a reflink of ``src`` (no bytes copied), else (``copy``) a copy; False when neither was made."""
    import fcntl  # noqa: PLC0415  # lazy: POSIX only, and only on the first trial of an ablation with data

    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
            return True
        except OSError:
            if not copy:
                return False
        import shutil  # noqa: PLC0415  # lazy: as above

        shutil.copyfileobj(fin, fout, 1 << 20)
    return True


def place_data(target: Path, link: Path, mode: int) -> str:
    """Put the project's ``target`` (a ``task.data`` file or dir) at ``link`` in the snapshot: a read-only copy
    (a reflink where possible, a copy up to :data:`DATA_COPY_MAX_BYTES`), else a symlink to it. Made under a
    temporary name, then moved into place: a trial running at once finds it whole or not at all.

    Returns
    -------
    str
        ``"copy"`` or ``"link"``.
    """
    import shutil  # noqa: PLC0415  # lazy: only the first trial of an ablation with data gets here

    copy = _tree_size(target) <= DATA_COPY_MAX_BYTES
    tmp = link.with_name(f".{link.name}.tmp-{os.getpid()}")
    made = True
    try:
        if target.is_dir():
            os.mkdir(tmp, mode)
            for d, subdirs, files in os.walk(target, followlinks=True):
                out = os.path.join(tmp, os.path.relpath(d, target))
                for sub in subdirs:
                    os.mkdir(os.path.join(out, sub), mode)
                for f in files:
                    made = _clone_or_copy(os.path.join(d, f), os.path.join(out, f), copy)
                    if not made:
                        break
                    os.chmod(os.path.join(out, f), mode & 0o444)
                if not made:
                    break
        else:
            made = _clone_or_copy(str(target), str(tmp), copy)
            os.chmod(tmp, mode & 0o444)
        if made:
            shutil.copystat(target, tmp, follow_symlinks=True)  # its times, as the project's copy has them
            os.chmod(tmp, mode if target.is_dir() else mode & 0o444)
            with contextlib.suppress(FileExistsError, OSError):  # another trial placed it first
                os.rename(tmp, link) if target.is_dir() else os.link(tmp, link)
            return "copy"
    finally:
        if os.path.lexists(tmp):
            shutil.rmtree(tmp) if tmp.is_dir() and not tmp.is_symlink() else tmp.unlink()
    with contextlib.suppress(FileExistsError):  # another trial linked it first
        link.symlink_to(target, target_is_directory=target.is_dir())
    return "link"


#: The trial's own working dir of a script task (``<trial dir>/work``): a mirror of the snapshot.
WORK_DIR_NAME = "work"
_SKIP = ("__pycache__",)


def trial_workdir(sd: SweepDir, plan: Mapping[str, Any], task: Mapping[str, Any],
                  trial_dir: Path) -> tuple[Path, Path | None]:
    """The trial's own working dir (any form: ``fn``, ``command``, ``app``), and the snapshot it runs on.

    ``<trial dir>/work`` holds one symlink per top-level entry of the snapshot (``task.data`` included, see
    :func:`task_workdir`), except the dirs on the way to a ``task.data`` path, which are real dirs holding a link
    per entry (:func:`mirror_listing`). Relative reads see the pinned code and data, as in the snapshot; what the
    task writes to a new path of its working dir (a ``chdir=false`` app's metrics file, a checkpoint,
    ``outputs/``) lands in this trial's dir, never in the snapshot that every trial shares. The snapshot's listing
    is read once per process, so a trial pays for one ``symlink`` per top-level entry; under a warm launch of
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
    base = str(work)
    # relative targets (``../../../../code/src``): short enough to live in the link's inode (an absolute path of
    # 60 bytes or more takes a 4 KB block per link on ext4), and still right when the sweep dir is moved
    up = {rel: os.path.relpath(root, os.path.join(base, rel)) for rel in ["", *dirs]}
    top = {rel: up[os.path.dirname(rel)] for rel in links}
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
            os.symlink(os.path.join(top[rel], rel), os.path.join(base, rel))
    else:  # the trial run again (resume, a requeued SLURM job): what is missing, its own files kept
        for rel in dirs:
            sd.mkdir(work / rel)
        for rel in links:
            if not os.path.lexists(os.path.join(base, rel)):
                os.symlink(os.path.join(top[rel], rel), os.path.join(base, rel))
    return work, root


def live_workdir(project: Path, run_dir: Path) -> Path:
    """A single run's working dir (``ablate`` without ``-m``): ``<run dir>/work``, a mirror of the live project.

    A single run runs the live tree's code (as a Hydra run does), so this mirrors the project dir itself: the
    dirs holding files git lists (tracked, or untracked and not ignored) as real dirs, every other entry of
    them as a link to the project's (files, and ignored dirs such as ``data/`` as a whole). The dirs holding the
    run dir (``outputs/<date>/``, git-ignored) are mirrored too, the run dir left out: linked whole, they would
    put a link to the project's ``outputs/`` (and so to this work dir) inside it, a loop.
    Relative reads see the project; what the task writes into its working dir (a ``chdir=false`` app's
    metrics file, a checkpoint) lands in the run dir, never in the live tree. Outside a git repository only
    the top level is mirrored.
    """
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
    parent = os.path.dirname(own)  # the dirs holding the run dir (an ignored `outputs/`): mirrored, never linked
    while parent and not parent.startswith(".."):  # whole, or the run's own work dir would hold a link to itself
        real.add(parent)
        parent = os.path.dirname(parent)
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
    """What :func:`trial_workdir` makes of the snapshot ``root``: its own dirs (relative, each after its parent:
    the dirs on the way to each ``task.data`` path, so a file written beside the data is the trial's) and the
    entries to link (every other top-level entry, and the entries of those dirs), ``__pycache__`` left out.

    Read once per process and snapshot (and ``task.data``, which :func:`task_workdir` adds): the
    snapshot is the pinned commit's, and a write into it stops the ablation (:func:`guard_snapshot`).
    """
    key = (str(root), repr(data))
    hit = _LISTINGS.get(key)
    if hit is not None:
        return hit
    own: set[str] = set()
    for rel in _data_list(data):
        parent = os.path.dirname(os.path.normpath(rel))
        while parent and parent not in own and not parent.startswith(".."):
            full = os.path.join(root, parent)
            if os.path.isdir(full) and not os.path.islink(full):
                own.add(parent)
            parent = os.path.dirname(parent)
    dirs = sorted(own, key=lambda d: (d.count(os.sep), d))
    links: list[str] = []
    for rel in ["", *dirs]:
        with os.scandir(os.path.join(root, rel)) as it:
            for e in it:
                r = os.path.join(rel, e.name) if rel else e.name
                if r not in own and e.name not in _SKIP:
                    links.append(r)
    _LISTINGS[key] = dirs, sorted(links)
    return dirs, sorted(links)


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
def guard_snapshot(root: Path | None, inputs: Any = None) -> Iterator[None]:
    """Detect writes into the shared code snapshot while a trial's task runs (any form).

    Two scans of the snapshot (:func:`snapshot_state`, one ``lstat`` per file), before and after the task:
    0.3 ms of CPU both for the digits example's snapshot, 4 ms for this repository's 316 files
    (``benchmarks/results/trial_workdir.txt``). ``inputs``: the task's ``task.data`` paths (their read-only
    copies are in the snapshot: a write to one is named as a write to the task's input).

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
    if not written:
        return
    data = [os.path.normpath(d) for d in _data_list(inputs)]
    hit = [w for w in written if any(w == d or w.startswith(d + os.sep) for d in data)]
    if hit:
        raise ConfigError(
            f"the trial's task wrote to its input {hit[0]} (`task.data`): trials read a read-only copy of the "
            f"pinned data in the code snapshot ({root / hit[0]}), so the project's own file was not written, but "
            "this trial and those after it would read other data", where="task.data",
            fix="write what the task derives from its data to a new path (`outputs/...` under the working dir, or "
            "the run dir $ABLATE_RUN_DIR), and open the `task.data` files for reading only")
    shown = ", ".join(str(root / w) for w in written[:5]) + (f" (+{len(written) - 5} more)" if len(written) > 5
                                                              else "")
    raise ConfigError(
        f"the trial's task wrote into the shared code snapshot, which every trial of the ablation reads: "
        f"{shown}; a result that reads such files could come from another trial's",
        where="task", fix="write to a new path under the working dir (`outputs/x`, `ckpt.pt`: the trial's own; "
        "its top-level dirs such as `src/` are links into the snapshot, and `task.data` files are read-only "
        "inputs) or under the run dir ($ABLATE_RUN_DIR, ${hydra:runtime.output_dir}); a path built from the "
        "code's own location (`Path(__file__).parent`, ${oc.env:PROJECT_ROOT}/logs) points into the snapshot")
