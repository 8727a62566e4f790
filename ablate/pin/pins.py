"""Pins: the code commit, the data hashes and the environment an ablation runs with.

Before any trial starts, the launching process records (in ``ablation.yaml``):

- **code**: the git commit of the project (the git work tree holding the current directory). A dirty
  tree (a tracked file modified, staged, added or deleted) is refused unless ``allow_dirty=true``; then
  the patch is stored in the sweep dir and the verdict is marked dirty. The code is snapshotted into
  ``<sweep>/code/`` (tracked files only) and every trial imports the task from there, so edits made
  after launch never reach a trial. Files git does not track (a notebook, scratch notes) are outside
  the snapshot and cannot reach a trial, so they do not make the tree dirty: they are listed in the
  plan (``untracked_files``), and a trial that imports one (an ``fn`` task, or a script's log ending in
  its ``ModuleNotFoundError``) fails naming it and ``git add`` as the fix.
  DVC's own working files (``dvc_plots/``, ``.dvc/tmp/``) never count as changes.
- **data**: for each path the task declares (``task.data``), its DVC hash, computed with DVC's own
  hashing from the bytes, and proof that it matches what ``dvc.lock`` / the ``.dvc`` file recorded. A file
  that is itself a ``dvc.yaml`` stage's output, with DVC 3's md5 of its bytes in ``dvc.lock``, is checked
  against that record without importing DVC (:func:`_lock_pin`: the same pin, 0.6-0.9 s less CPU per
  ablation); every other case, and every refusal, is DVC's.
- **environment**: python, ablate, torch, numpy, CUDA and cuDNN versions, GPUs and driver, host,
  CPU, and the environment variables that change numerics. Only an allowlist of variables is
  recorded, never the whole environment (it holds tokens).

Every trial records what *it* saw in ``manifest.json`` and refuses to run when its code or data
differ from the pins (status ``pin_mismatch``).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ablate.errors import PinError
from ablate.pin import digest, ignored
from ablate.record.sweepdir import SweepDir, write_atomic

#: Environment variables that change numerics; recorded in every manifest.
NUMERIC_ENV_VARS = (
    "CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "CUDA_VISIBLE_DEVICES",
    "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "CUDA_LAUNCH_BLOCKING",
    "XLA_FLAGS", "TF_DETERMINISTIC_OPS", "KMP_DETERMINISTIC_REDUCTION",
)
COMMIT_FILE = ".ablate_commit"
#: The code snapshot's files as listed at launch (one path per line, beside ``code/``): what its digest covers.
CODE_FILES = "code_files.txt"
#: Recorded name -> distribution name, where they differ: ablate's distribution is ``hydra-ablate`` (the
#: index's ``ablate`` is an unrelated project, whose version must never be pinned as ablate's).
DISTRIBUTIONS = {"ablate": "hydra-ablate"}
#: Packages whose versions are pinned (when installed), by the name they are recorded under.
PACKAGES = ("ablate", "torch", "numpy", "scipy", "pandas", "scikit-learn", "hydra-core", "omegaconf",
            "submitit", "dvc", "jax", "tensorflow", "transformers", "lightning", "pytorch-lightning")


# -- git ---------------------------------------------------------------------------------------------
def _git(args: Sequence[str], cwd: str | os.PathLike[str], *, binary: bool = False) -> Any:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise PinError("git is not installed", where="code pin", fix="install git (apt-get install git)") from exc
    if out.returncode != 0:
        raise _GitFailed(out.stderr.decode(errors="replace").strip())
    return out.stdout if binary else out.stdout.decode(errors="replace")


class _GitFailed(Exception):
    pass


def git_root(cwd: str | os.PathLike[str]) -> Path:
    """The top of the git work tree holding ``cwd``.

    Raises
    ------
    PinError
        When ``cwd`` is not inside a git repository.
    """
    try:
        return Path(_git(["rev-parse", "--show-toplevel"], cwd).strip())
    except _GitFailed as exc:
        m = re.search(r"detected dubious ownership in repository at '([^']+)'", str(exc))
        if m:  # a repository another user owns: git refuses it until it is marked safe
            raise PinError(
                f"git refuses the repository at {m.group(1)}: another user owns it (git's 'dubious ownership' "
                "check), so the code cannot be pinned to a commit", where="code pin",
                fix=f"git config --global --add safe.directory {shlex.quote(m.group(1))}",
            ) from None
        raise PinError(
            f"{Path(cwd).absolute()} is not inside a git repository, so the code cannot be pinned to a commit",
            where="code pin",
            fix="run `git init && git add -A && git commit -m 'start'` in your project (ablate pins the commit "
            "every trial runs)",
        ) from None


def head_commit(root: str | os.PathLike[str]) -> str:
    """The commit HEAD points at.

    Raises
    ------
    PinError
        When the repository has no commit yet.
    """
    try:
        return _git(["rev-parse", "--verify", "HEAD^{commit}"], root).strip()
    except _GitFailed:
        raise PinError(
            f"the git repository at {root} has no commits yet",
            where="code pin",
            fix="commit your code first: `git add -A && git commit -m 'start'`",
        ) from None


#: DVC's own working files, relative to a DVC repo's root (a folder holding ``.dvc/``): what ``dvc plots
#: show`` writes and DVC's temp dir. They never make the tree dirty, tracked or not.
DVC_WORKING = ("dvc_plots", ".dvc/tmp")
#: At most this many untracked entries are recorded in the plan (a wholly untracked folder is one entry).
UNTRACKED_RECORDED = 200


def dvc_working_file(root: str | os.PathLike[str], rel: str) -> bool:
    """Whether ``rel`` (relative to the git work tree ``root``) lies in DVC's own working files
    (:data:`DVC_WORKING`) of a DVC repo at ``root`` or below it."""
    parts = rel.rstrip("/").split("/")
    for i, part in enumerate(parts):
        for w in DVC_WORKING:
            wp = w.split("/")
            if parts[i:i + len(wp)] == wp and (part == ".dvc" or Path(root, *parts[:i], ".dvc").is_dir()):
                return True
    return False


def dirty_files(root: str | os.PathLike[str]) -> list[str]:
    """Tracked files modified, staged, added or deleted (submodules included), as ``git status --porcelain``
    lines such as ``" M src/train.py"``. Untracked files are not changes to the code a trial runs (the
    snapshot holds tracked files only: :func:`untracked_files`), nor are DVC's working files."""
    out = _git(["status", "--porcelain=v1", "--untracked-files=no", "--ignore-submodules=none"], root)
    lines = [line for line in out.splitlines() if line.strip()]
    lines += [f" M {path}" for path in stat_hidden_edits(root, {line[3:] for line in lines})]
    return [line for line in lines if not dvc_working_file(root, _porcelain_path(line))]


def _porcelain_path(line: str) -> str:
    path = line[3:]
    return path.split(" -> ", 1)[1] if " -> " in path else path  # a rename: the new path


def untracked_files(root: str | os.PathLike[str]) -> list[str]:
    """Files and folders under ``root`` that git neither tracks nor ignores (a wholly untracked folder is
    one entry ending in ``/``), without DVC's working files and caches (``__pycache__/``,
    ``.ipynb_checkpoints/`` ...: :func:`ablate.pin.ignored.noise`): outside the code snapshot."""
    out = _git(["ls-files", "-z", "--others", "--exclude-standard", "--directory", "--no-empty-directory"], root)
    return sorted(rel for rel in out.split("\0")
                  if rel and not dvc_working_file(root, rel) and not ignored.noise(rel))


def stat_hidden_edits(root: str | os.PathLike[str], listed: Collection[str] = ()) -> list[str]:
    """Tracked files whose content differs from the index although git's stat cache calls them clean.

    ``git status`` trusts an index entry whose size and mtime match the file. An edit that keeps
    both (same-size edits within one second of the last index write by a tool that does not mark
    racy entries, ``rsync --inplace -t``, a restored mtime) is then invisible to it. So every tracked
    regular file not already ``listed`` is hashed as git would (``git hash-object --stdin-paths``,
    one process, the repository's filters applied) and compared with the index's blob id.

    Parameters
    ----------
    root : path-like
        The git work tree.
    listed : collection of str
        Paths (relative to ``root``) ``git status`` already reports; they are not hashed again.

    Returns
    -------
    list of str
        Paths relative to ``root`` whose content is not the index's.
    """
    skip = set(listed)
    entries: list[tuple[str, str]] = []
    for rec in _git(["ls-files", "-s", "-z"], root).split("\0"):
        if not rec or "\t" not in rec:  # "<mode> <blob id> <stage>\t<path>"
            continue
        meta, path = rec.split("\t", 1)
        mode, sha, stage = meta.split()
        # regular files only (no submodules, no symlinks), not in conflict, not reported, on disk
        if mode not in ("100644", "100755") or stage != "0" or path in skip or "\n" in path:
            continue
        if os.path.isfile(Path(root) / path) and not os.path.islink(Path(root) / path):
            entries.append((path, sha))
    if not entries:
        return []
    out = subprocess.run(["git", "hash-object", "--stdin-paths"], cwd=root, capture_output=True, check=False,
                         input="".join(f"{p}\n" for p, _ in entries).encode())
    if out.returncode != 0:
        raise _GitFailed(out.stderr.decode(errors="replace").strip())
    shas = out.stdout.decode().split()
    return [p for (p, want), got in zip(entries, shas, strict=True) if want != got]


def submodules(root: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """(path, commit) of every checked-out submodule, recursively."""
    try:
        out = _git(["submodule", "status", "--recursive"], root)
    except _GitFailed:
        return []
    subs = []
    for line in out.splitlines():
        parts = line[1:].split()
        if len(parts) >= 2 and line[:1] != "-":
            subs.append((parts[1], parts[0]))
    return subs


def pin_code(cwd: str | os.PathLike[str], *, allow_dirty: bool) -> dict[str, Any]:
    """Pin the project's code: its commit and dirty state (see :func:`snapshot_code` for the copy).

    Parameters
    ----------
    cwd : path-like
        Where ablate was started; the git work tree holding it is the project.
    allow_dirty : bool
        Accept a dirty tree (the snapshot is then the working tree, and the patch is kept).

    Returns
    -------
    dict
        ``commit``, ``root``, ``subdir`` (cwd relative to root), ``dirty`` (bool), ``dirty_files``,
        ``submodules`` (path -> commit).

    Raises
    ------
    PinError
        Not a git repository, no commits, or a dirty tree without ``allow_dirty``.
    """
    root = git_root(cwd)
    commit = head_commit(root)
    dirty = dirty_files(root)
    subdir = os.path.relpath(Path(cwd).resolve(), root.resolve())
    pin: dict[str, Any] = {"commit": commit, "root": str(root), "subdir": "" if subdir == "." else subdir,
                           "dirty": bool(dirty), "submodules": dict(submodules(root))}
    experiment = dvc_experiment()
    if experiment:
        pin["dvc_experiment"] = experiment
    if dirty and experiment.get("stage"):
        params = dvc_params_change(root, experiment["stage"], dirty)
        if params:  # only the running stage's params files changed (`dvc exp run -S`, an edited params.yaml)
            pin["dvc_params"] = params
            pin["dirty"] = False
            dirty = []
    if dirty and not allow_dirty:
        shown = ", ".join(line[3:] for line in dirty[:15]) + (f" and {len(dirty) - 15} more" if len(dirty) > 15 else "")
        raise PinError(
            f"the git tree has uncommitted changes ({shown}); trials would run code that no commit records",
            where="code pin",
            fix="commit or stash them, or pass `allow_dirty=true` to run anyway (the patch is stored in the "
            "sweep dir and the verdict is marked dirty)",
        )
    pin["dirty_files"] = [line[3:] for line in dirty]
    untracked = untracked_files(root)
    if untracked:
        pin["untracked_files"] = untracked[:UNTRACKED_RECORDED]
        pin["untracked_count"] = len(untracked)
    return pin


def untracked_summary(files: Sequence[str], count: int | None = None, shown: int = 5) -> str:
    """``a.ipynb, notes/ and 3 more``: the first ``shown`` of ``files`` (``count`` in all)."""
    count = len(files) if count is None else int(count)
    head = ", ".join(f"`{f}`" for f in files[:shown])
    return head + (f" and {count - min(shown, len(files))} more" if count > shown else "")


def _under_untracked(rel: str, untracked: Iterable[str]) -> str | None:
    """The entry of ``untracked`` that is ``rel`` or a folder holding it; None when there is none."""
    for entry in untracked:
        if rel == entry or (entry.endswith("/") and rel.startswith(entry)):
            return entry.rstrip("/")
    return None


def untracked_task_file(task: Mapping[str, Any], cwd: str | os.PathLike[str], code: Mapping[str, Any]
                        ) -> tuple[str, str] | None:
    """The task's own file when git does not track it (``task.fn``'s module, ``task.app``, a ``.py`` of
    ``task.command``): ``(setting, path relative to the git root)``, or None. Trials run from the code
    snapshot, which holds tracked files only, so such a task could not start in any trial."""
    untracked = code.get("untracked_files") or []
    if not untracked:
        return None
    root = Path(code["root"]).resolve()
    cands: list[tuple[str, Path]] = []
    fn = str(task.get("fn") or "")
    if fn:
        mod = fn.split(":", 1)[0] if ":" in fn else fn.rsplit(".", 1)[0]
        base = Path(cwd, *mod.split("."))
        cands += [("task.fn", base.with_suffix(".py")), ("task.fn", base / "__init__.py")]
    if task.get("app"):
        cands.append(("task.app", Path(cwd, str(task["app"]))))
    command = task.get("command")
    words = command if isinstance(command, list) else str(command or "").split()
    cands += [("task.command", Path(cwd, str(w))) for w in words if str(w).endswith(".py")]
    for setting, path in cands:
        if not path.is_file():
            continue
        try:
            rel = path.resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        entry = _under_untracked(rel, untracked)
        if entry:
            return setting, entry
    return None


_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def _script_dirs(task: Mapping[str, Any]) -> list[str]:
    """The dirs of a ``command`` or ``app`` task's script (relative to the task's dir): ``python dir/x.py`` puts
    its script's dir first on ``sys.path``, so a module beside it is imported from there."""
    words: list[Any] = [task["app"]] if task.get("app") else []
    command = task.get("command")
    words += command if isinstance(command, list) else str(command or "").split()
    return list(dict.fromkeys(Path(str(w)).parent.as_posix() for w in words if str(w).endswith(".py")))


def untracked_import(exc: BaseException, code: Mapping[str, Any]) -> str | None:
    """Why a trial's ModuleNotFoundError happened, when the missing module is a file or folder that was
    untracked at launch (``code["untracked_files"]``, relative to the git root; the task's modules are
    imported relative to ``code["subdir"]``); None otherwise. A script's failure:
    :func:`untracked_script_import`."""
    for _ in range(8):  # the task's import raises a ConfigError from the ModuleNotFoundError
        if exc is None or isinstance(exc, ModuleNotFoundError):
            break
        exc = exc.__cause__  # type: ignore[assignment]
    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    return _untracked_module(name, code, [""]) if name else None


def untracked_script_import(text: str, code: Mapping[str, Any], task: Mapping[str, Any]) -> str | None:
    """:func:`untracked_import` for a script's failure: the module its log's last ``ModuleNotFoundError`` names
    (``text``: the trial's recorded error, quoting the end of the log), looked for beside the task's script
    and in the task's dir."""
    found = _NO_MODULE.findall(text)
    return _untracked_module(found[-1], code, [*_script_dirs(task), ""]) if found else None


def _untracked_module(name: str, code: Mapping[str, Any], dirs: Sequence[str]) -> str | None:
    untracked = code.get("untracked_files") or []
    subdir = str(code.get("subdir") or "")
    for d in dirs:
        base = "/".join([p for p in (subdir, d if d != "." else "", name.replace(".", "/")) if p])
        for c in (f"{base}.py", f"{base}/", f"{base}/__init__.py"):
            shown = _under_untracked(c, untracked)
            if shown:
                return (f"{shown} exists in the live tree but is not committed, so the trial's code snapshot lacks "
                        f"it. Fix: `git add {shown} && git commit`, then run again.")
    return None


def snapshot_skip(pin: Mapping[str, Any]) -> frozenset[str]:
    """Paths of the code snapshot its content digest leaves out: the commit marker, and the task's
    data paths, which the command form links into the snapshot (``pin["snapshot_skip"]``)."""
    return frozenset({COMMIT_FILE, *(pin.get("snapshot_skip") or [])})


def dvc_experiment() -> dict[str, str]:
    """What DVC says about the run ablate is part of, from the variables DVC sets for a stage's command:
    ``stage`` (``DVC_STAGE``), ``baseline`` (``DVC_EXP_BASELINE_REV``: the commit a ``dvc exp run``
    starts from) and ``name`` (``DVC_EXP_NAME``); empty outside DVC."""
    keys = {"stage": "DVC_STAGE", "baseline": "DVC_EXP_BASELINE_REV", "name": "DVC_EXP_NAME"}
    return {k: os.environ[v] for k, v in keys.items() if os.environ.get(v)}


def _dvc_root(root: Path) -> Path:
    """The DVC repo this process runs in, inside the git work tree ``root``: ``DVC_ROOT`` when it lies there, else
    the nearest dir holding ``.dvc`` from the working dir up to ``root``. ``dvc exp run --temp`` runs the stage in
    a copy of the workspace (``.dvc/tmp/exps/...``) while its ``DVC_ROOT`` still names the original: that
    repo's params files are not the ones the experiment changed."""
    top = root.resolve()
    env = os.environ.get("DVC_ROOT")
    if env and (Path(env).resolve() == top or top in Path(env).resolve().parents):
        return Path(env)
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / ".dvc").is_dir():
            return d
        if d == top:
            break
    return root


def dvc_params_change(root: Path, stage: str, dirty: list[str]) -> dict[str, str]:
    """Pin a change confined to the params files that ``stage`` tracks: file -> sha256 of its content.

    DVC writes ``dvc exp run -S key=value`` into the stage's params file before running the stage, so
    the tree is dirty by design; that change is config, not code. Returns an empty dict when any
    other file changed, a params file was added or deleted, or the stage cannot be read (the caller
    then treats the tree as dirty).

    Parameters
    ----------
    root : Path
        The git work tree (the DVC repo root, or a parent of it).
    stage : str
        The stage's address as DVC gives it in ``DVC_STAGE``.
    dirty : list of str
        ``git status --porcelain`` lines (:func:`dirty_files`).
    """
    if any(line[:2] not in (" M", "M ", "MM") for line in dirty):
        return {}
    changed = {line[3:] for line in dirty}
    try:
        from dvc.repo import Repo  # noqa: PLC0415  # lazy: DVC is heavy, and only a DVC project needs it

        repo = Repo(str(_dvc_root(root)))
        try:
            stages = repo.stage.collect(stage)
            tracked = {os.path.relpath(dep.fs_path, root) for st in stages for dep in st.params}
        finally:
            repo.close()
    except Exception:  # not a readable DVC stage: no exemption, the tree is dirty
        return {}
    if not changed <= tracked:
        return {}
    return {rel: hashlib.sha256((root / rel).read_bytes()).hexdigest() for rel in sorted(changed)}


def snapshot_code(pin: dict[str, Any], sd: SweepDir, data: Iterable[str] = ()) -> dict[str, Any]:
    """Copy the pinned code into ``<sweep>/code`` so trials never import the live working tree.

    A clean tree is extracted from the commit itself (``git archive``, submodules at their pinned
    commits). A dirty one (``allow_dirty``) is copied from the working tree (the tracked files, staged
    new ones included; untracked files are never in a snapshot), and ``dirty.patch`` (``git diff HEAD``)
    keeps a record of the changes.

    data : iterable of str
        The task's data paths (``task.data``), left out of the digest (see :func:`snapshot_skip`).

    Returns
    -------
    dict
        ``pin`` plus ``snapshot`` (the content digest of the copy, :mod:`ablate.pin.digest`; every trial
        and every launch checks it) and ``patch_sha256`` when dirty.

    Raises
    ------
    PinError
        When the pinned commit cannot be read.
    """
    pin = dict(pin)
    root = Path(pin["root"])
    commit = pin["commit"]
    dirty = pin["dirty"]
    dest = sd.code_dir
    if dest.exists():
        shutil.rmtree(dest)
    sd.mkdir(dest)
    if dirty:
        patch = _git(["diff", "HEAD", "--binary", "--submodule=diff"], root, binary=True)
        write_atomic(sd.root / "dirty.patch", patch)
        pin["patch_sha256"] = hashlib.sha256(patch).hexdigest()
        for rel in filter(None, _git(["ls-files", "-z", "--cached"], root).split("\0")):
            src = root / rel
            if src.is_file() or src.is_symlink():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel, follow_symlinks=False)
        for sub in pin.get("submodules") or {}:
            for rel in filter(None, _git(["ls-files", "-z"], root / sub).split("\0")):
                src = root / sub / rel
                if src.is_file():
                    (dest / sub / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dest / sub / rel)
    else:
        _extract_commit(root, commit, dest)
        for sub, sub_commit in (pin.get("submodules") or {}).items():
            _extract_commit(root / sub, sub_commit, dest / sub)
        for rel, sha in (pin.get("dvc_params") or {}).items():  # the params DVC set, pinned by content
            content = (root / rel).read_bytes()
            if hashlib.sha256(content).hexdigest() != sha:
                raise PinError(f"{rel} changed between pinning and the code snapshot", where="code pin",
                               fix="do not edit the params file while ablate starts; run it again")
            write_atomic(dest / rel, content)
    write_atomic(dest / COMMIT_FILE, f"{commit}\n{'dirty ' + pin.get('patch_sha256', '') if dirty else 'clean'}\n")
    _byte_code_dirs(dest)
    sd.restrict_tree(dest)  # git's 0775/0664 must not outlive the sweep dir's owner-only mode
    pin["snapshot_skip"] = sorted(os.path.normpath(os.path.join(pin.get("subdir") or "", rel)) for rel in data)
    files = digest.list_files(dest, skip=snapshot_skip(pin))
    write_atomic(sd.root / CODE_FILES, "".join(f"{rel}\n" for rel in files))
    pin["snapshot_files"] = CODE_FILES
    pin["snapshot"] = digest.digest(dest, follow_symlinks=False, files=files)["digest"]
    return pin


def _byte_code_dirs(dest: Path) -> None:
    """Make ``__pycache__`` beside every ``.py`` file of the snapshot, so that the sweep dir's mode, not the user's
    umask, is the mode of the directory Python writes a trial's byte code into: Python makes a missing one with
    ``0o777 & ~umask`` (group-writable under umask 002), and a ``.pyc`` planted there by a group member would be
    run by every later trial in place of the pinned source (PEP 3147; Python checks only the source's mtime and
    size). ``__pycache__`` is left out of the snapshot's digest and file list (:mod:`ablate.pin.digest`)."""
    for dirpath, dirnames, filenames in os.walk(dest):
        if "__pycache__" in dirnames:
            dirnames.remove("__pycache__")
        elif any(f.endswith(".py") for f in filenames):
            os.mkdir(os.path.join(dirpath, "__pycache__"))


def _extract_commit(repo: Path, commit: str, dest: Path) -> None:
    import tarfile  # noqa: PLC0415  # lazy: tarfile (with grp, pwd) kept off `ablate -m`'s start path

    try:
        data = _git(["archive", "--format=tar", commit], repo, binary=True)
    except _GitFailed as exc:
        raise PinError(f"commit {commit[:12]} cannot be read from {repo} ({exc})", where="code pin",
                       fix="fetch it (`git fetch`) or re-run the ablation from an existing commit") from None
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="tar")


def trial_code_root(sd: SweepDir, plan: Mapping[str, Any]) -> Path | None:
    """Directory a trial imports the task from: the snapshot at the project subdir ablate ran in."""
    code = (plan.get("pins") or {}).get("code")
    if not code:
        return None
    return sd.code_dir / (code.get("subdir") or "")


def code_seen(sd: SweepDir, plan: Mapping[str, Any], code_root: Path | None) -> dict[str, Any]:
    """What code the trial process is about to run: the snapshot's commit marker, its location and,
    when the plan pinned one, the content digest of the snapshot as it is now (``snapshot``)."""
    if code_root is None:
        return {"commit": None, "root": None}
    marker = sd.code_dir / COMMIT_FILE
    try:
        commit, state = marker.read_text().splitlines()[:2]
    except (OSError, ValueError):
        return {"commit": None, "root": str(code_root), "error": f"code snapshot marker {marker} is missing"}
    seen = {"commit": commit, "state": state, "root": str(code_root)}
    pin = (plan.get("pins") or {}).get("code") or {}
    if pin.get("snapshot"):
        files = None
        if pin.get("snapshot_files"):
            try:
                files = [ln for ln in (sd.root / pin["snapshot_files"]).read_text().splitlines() if ln]
            except OSError as exc:
                seen.update(snapshot=None, error=f"{sd.root / pin['snapshot_files']}: {exc.strerror}")
                return seen
        got = digest.try_digest(sd.code_dir, skip=snapshot_skip(pin), follow_symlinks=False, files=files)
        seen["snapshot"] = got.get("digest")
        if "error" in got:
            seen["error"] = got["error"]
    return seen


# -- data --------------------------------------------------------------------------------------------
def _open_dvc(cwd: Path) -> Any:
    try:
        from dvc.exceptions import NotDvcRepoError  # noqa: PLC0415  # lazy: DVC is heavy, and only a DVC project needs it
        from dvc.repo import Repo  # noqa: PLC0415  # lazy: DVC is heavy, and only a DVC project needs it
    except ImportError as exc:  # pragma: no cover - dvc is a dependency
        raise PinError("dvc is not installed", where="task.data", fix="pip install dvc") from exc
    try:
        return Repo(str(cwd), uninitialized=False)
    except NotDvcRepoError:
        raise PinError(
            f"the task declares data (`task.data`) but {cwd} is not in a DVC repository",
            where="task.data",
            fix="run `dvc init` and track the data (`dvc add <path>` or a `dvc.yaml` stage), or remove `task.data`",
        ) from None


def _ignored_dir(cwd: Path, rel: str) -> str | None:
    """The outermost directory above ``rel`` that git ignores (relative to ``cwd``), or None."""
    parts = Path(rel).parts[:-1]
    for i in range(1, len(parts) + 1):
        d = str(Path(*parts[:i]))
        proc = subprocess.run(["git", "check-ignore", "-q", d + "/"], cwd=cwd, capture_output=True, check=False)
        if proc.returncode == 0:
            return d
    return None


def _find_output(repo: Any, abspath: Path) -> Any:
    for out in repo.index.outs:
        p = Path(out.fs_path)
        if abspath == p or p in abspath.parents:
            return out
    return None


def _hash_without_state(out: Any) -> Any:
    """DVC's hash of an output computed from the bytes on disk, never from DVC's state database (which
    is keyed on inode, mtime and size, so an edit that keeps them would return the old hash)."""
    from dvc_data.hashfile.state import StateNoop  # noqa: PLC0415  # lazy: DVC is heavy, and only a DVC project needs it

    odbs = [o for o in (getattr(out, "cache", None), getattr(out, "local_cache", None)) if o is not None]
    saved = [o.state for o in odbs]
    try:
        for o in odbs:
            o.state = StateNoop()
        return out.get_hash()
    finally:
        for o, st in zip(odbs, saved, strict=True):
            o.state = st


def missing_data(rel: str, cwd: str | os.PathLike[str]) -> PinError:
    """The error for a ``task.data`` path that does not exist (a typo, a file not restored): the same from a
    dry run and a real run, naming the nearest existing paths beside it."""
    head, name = os.path.split(rel)
    try:
        siblings = os.listdir(Path(cwd) / head)
    except OSError:
        siblings = []
    # by name, beside it; a high cutoff, since sibling files share extensions (tabel.txt vs other.txt: 0.67)
    near = [os.path.join(head, n) for n in difflib.get_close_matches(name, siblings, n=3, cutoff=0.75)]
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    return PinError(f"{rel} does not exist under {cwd}{hint}", where="task.data",
                    fix="fix the path in `task.data` (relative to the project root), or restore the file")


def pin_data(paths: Iterable[str], cwd: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Hash each declared data path with DVC and prove the workspace matches what DVC recorded.

    DVC's hash is computed from the bytes (its state cache is bypassed), and a content digest
    (:mod:`ablate.pin.digest`) of each declared path is recorded as ``content``: trials check that one,
    before and after their task, without importing DVC.

    Parameters
    ----------
    paths : iterable of str
        Paths relative to ``cwd`` (files or directories), each a DVC-tracked output or inside one.
    cwd : path-like
        The project directory the paths are relative to.

    Returns
    -------
    dict
        path -> ``{"hash": "md5:<hex>", "output": <tracked output>, "recorded_in": "dvc.lock" | "x.dvc",
        "content": "xxh3_128:<hex>"}``.

    Notes
    -----
    When ``dvc.lock`` answers every path (:func:`_lock_pin`: files that are stage outputs, their md5 recorded
    DVC 3's way and equal to their bytes' md5), DVC is not imported: its import, repo and index cost 0.6-0.9 s
    of CPU, about a fifth of the orchestrator's (issue 42). The pin is the one DVC's check gives.

    Raises
    ------
    PinError
        Not a DVC repo; a path DVC does not track; a file missing or modified relative to what DVC
        recorded (with the ``dvc`` command that fixes it).
    """
    paths = [str(p) for p in paths]
    if not paths:
        return {}
    cwd = Path(cwd).absolute()
    answered = {rel: _lock_pin(cwd, rel) for rel in paths}
    if all(answered.values()):  # dvc.lock's md5s answer every path: DVC (0.6-0.9 s of CPU) is not imported
        return {rel: pin for rel, pin in answered.items() if pin is not None}
    repo = _open_dvc(cwd)
    pins: dict[str, dict[str, Any]] = {}
    try:
        for rel in paths:
            abspath = (cwd / rel).absolute()
            out = _find_output(repo, abspath)
            if out is None and not os.path.lexists(abspath):  # a typo: what the dry run says
                raise missing_data(rel, cwd)
            if out is None:
                tracked = sorted(os.path.relpath(o.fs_path, cwd) for o in repo.index.outs)
                fix = (f"track it with `dvc add {rel}` or as the output of a dvc.yaml stage, then commit the "
                       ".dvc / dvc.lock file")
                ignored = _ignored_dir(cwd, rel)
                if ignored is not None:  # `dvc add <rel>` would write <rel>.dvc inside a git-ignored dir and fail
                    fix = (f"{ignored}/ is git-ignored, so `dvc add {rel}` would fail (its .dvc file would be "
                           f"git-ignored too); track the whole dir from outside it: `dvc add {ignored}` writes "
                           f"{ignored}.dvc next to it, then `git add {ignored}.dvc`")
                raise PinError(f"{rel} is not tracked by DVC (tracked: {', '.join(tracked) or 'nothing'})",
                               where="task.data", fix=fix)
            recorded = out.hash_info.value if out.hash_info else None
            src = os.path.relpath(out.stage.path, cwd) if out.stage.path.endswith(".dvc") else "dvc.lock"
            out_rel = os.path.relpath(out.fs_path, cwd)
            if not Path(out.fs_path).exists():
                raise PinError(
                    f"{out_rel} is declared in {src} but missing from the workspace (dvc status: deleted)",
                    where="task.data",
                    fix=f"restore it with `dvc checkout {out_rel}` (or `dvc pull`, or `dvc repro` for a stage output)",
                )
            if not abspath.exists():  # inside a tracked dir that is there: a typo, or a file not restored
                raise missing_data(rel, cwd)
            if recorded is None:
                raise PinError(f"{out_rel} has no hash recorded in {src} yet (dvc status: new)", where="task.data",
                               fix=f"run `dvc repro` or `dvc commit`, then `git add {src}` and commit it")
            actual = _hash_without_state(out).value
            if actual != recorded:
                raise PinError(
                    f"{out_rel} differs from what {src} records (dvc status: modified; "
                    f"workspace md5 {actual[:12]}, recorded {recorded[:12]})",
                    where="task.data",
                    fix=f"restore it with `dvc checkout --force {out_rel}` (DVC will not overwrite a modified "
                    "file without --force), or if the change is intended, `dvc commit` "
                    f"(or `dvc repro`), then `git add {src}` and commit it",
                )
            pins[rel] = {"hash": _path_hash(abspath, Path(out.fs_path), f"{out.hash_info.name}:{actual}", out_rel),
                         "output": out_rel, "recorded_in": src, "content": digest.digest(abspath)["digest"]}
            if abspath != Path(out.fs_path):  # a path inside a tracked dir: the dir's own hash beside its own
                pins[rel]["output_hash"] = f"{out.hash_info.name}:{actual}"
    finally:
        repo.close()
    return pins


def _lock_pin(cwd: Path, rel: str) -> dict[str, Any] | None:
    """The pin of ``rel`` read from the project's ``dvc.lock`` alone, when that record answers it; else None, and
    :func:`pin_data` asks DVC (which also words every refusal).

    The lock answers only the plain case: ``cwd`` is the DVC repo's root (it holds ``.dvc/``; no ``.dvcignore`` on
    the way to ``rel`` holds a pattern: ``dvc init``'s has comments only),
    ``rel`` is a regular file that is itself the output of a ``dvc.yaml`` stage (no ``foreach``/``matrix``/``wdir``)
    whose ``dvc.lock`` entry records its md5 with DVC 3's ``hash: md5`` (the md5 of the bytes, as DVC computes a
    file's hash), no ``.dvc`` file tracks it or a folder above it, and the file's bytes hash to that md5 now. The
    pin is then what DVC's own check gives: ``{"hash": "md5:<hex>", "output": rel, "recorded_in": "dvc.lock",
    "content": ...}``. Anything else (a ``.dvc`` file, a tracked dir, a legacy or templated entry, an md5 that
    differs, a file missing) is left to DVC.

    Parameters
    ----------
    cwd : Path
        The project directory (absolute).
    rel : str
        A ``task.data`` path relative to ``cwd``.

    Returns
    -------
    dict or None
        The pin, or None when DVC must decide.
    """
    path = Path(rel)
    if path.is_absolute() or ".." in path.parts or not (cwd / ".dvc").is_dir():
        return None
    key = path.as_posix()
    file = cwd / path
    above = path.parents[:-1]
    if not file.is_file() or any((cwd / p).with_name(p.name + ".dvc").exists() for p in (path, *above)) or \
            any(_ignores(cwd / d / ".dvcignore") for d in (Path("."), *above)):
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        stages = (yaml.load((cwd / "dvc.yaml").read_text(), Loader=loader) or {}).get("stages") or {}
        locked = (yaml.load((cwd / "dvc.lock").read_text(), Loader=loader) or {}).get("stages") or {}
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        return None
    for name, stage in stages.items():
        if not isinstance(stage, dict) or {"foreach", "matrix", "wdir"} & stage.keys():
            continue
        outs = [o if isinstance(o, str) else next(iter(o), None) for o in stage.get("outs") or []
                if isinstance(o, str | dict)]
        if key not in outs:
            continue
        entry = next((o for o in ((locked.get(name) or {}).get("outs") or [])
                      if isinstance(o, dict) and o.get("path") == key), None)
        if entry is None or entry.get("hash") != "md5" or not isinstance(entry.get("md5"), str):
            return None
        h = hashlib.md5(usedforsecurity=False)
        with open(file, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        if h.hexdigest() != entry["md5"]:
            return None  # modified: DVC says how, and how to fix it
        return {"hash": f"md5:{entry['md5']}", "output": key, "recorded_in": "dvc.lock",
                "content": digest.digest(file)["digest"]}
    return None


def _ignores(dvcignore: Path) -> bool:
    """Whether a ``.dvcignore`` file exists and holds a pattern (a line that is neither blank nor a comment)."""
    try:
        lines = dvcignore.read_text().splitlines()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return any(line.strip() and not line.startswith("#") for line in lines)


def _path_hash(path: Path, output: Path, output_hash: str, output_rel: str) -> str:
    """The hash shown and compared for a ``task.data`` path: the DVC output's own (a file's md5, a dir's
    ``md5:<hex>.dir``) when the path is the output; for a file inside a tracked dir, that file's md5 (what
    ``md5sum`` and DVC's listing of the dir give it), never the dir's hash under the file's name; for a dir inside
    one, the tracked dir's hash, saying so."""
    if path == output:
        return output_hash
    if path.is_file():
        h = hashlib.md5(usedforsecurity=False)
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        return f"md5:{h.hexdigest()}"
    return f"{output_hash} (of {output_rel}, the DVC-tracked dir holding it)"


def data_paths(plan: Mapping[str, Any]) -> list[str]:
    """Data paths the task declares (``task.data``), from the control arm's config."""
    task = (plan["arms"][0]["config"].get("task") or {})
    data = task.get("data") or []
    return [data] if isinstance(data, str) else list(data)


def data_seen(plan: Mapping[str, Any], code_root: Path | None = None) -> dict[str, Any]:
    """Hash the task's data as this trial process sees it, for the manifest: the read-only copy of a path in the
    code snapshot ``code_root`` where there is one (what the trial's data link reads:
    :func:`ablate.trials.workdir.place_data`), else the project's.

    When the pins carry content digests (every plan since they exist), each path's bytes are digested
    again (:mod:`ablate.pin.digest`; no DVC import, no metadata trusted): equal to the pin, the path is
    recorded with the pinned DVC hash and its ``content``; different, with the new ``content`` only.
    Older plans fall back to DVC's (state-cached) hashing. A path that is missing or cannot be read
    is recorded with an ``error`` instead of raising, so :func:`mismatches` reports it as a pin
    mismatch.
    """
    paths = data_paths(plan)
    if not paths:
        return {}
    cwd = Path((plan.get("project") or {}).get("cwd") or os.getcwd())
    pinned = (plan.get("pins") or {}).get("data") or {}
    if all((pinned.get(p) or {}).get("content") for p in paths):
        seen: dict[str, Any] = {}
        for rel in paths:
            copy = code_root / rel if code_root is not None else None
            got = digest.try_digest(copy if copy is not None and copy.exists() and not copy.is_symlink()
                                    else cwd / rel)
            if "error" in got:
                seen[rel] = {"error": got["error"]}
            elif got["digest"] == pinned[rel]["content"]:
                seen[rel] = {"hash": pinned[rel]["hash"], "content": got["digest"]}
            else:
                seen[rel] = {"hash": None, "content": got["digest"]}
        return seen
    seen = {}
    try:
        repo = _open_dvc(cwd)
    except PinError as exc:
        return {p: {"error": str(exc)} for p in paths}
    try:
        for rel in paths:
            out = _find_output(repo, (cwd / rel).absolute())
            if out is None:
                seen[rel] = {"error": "not tracked by DVC"}
            elif not Path(out.fs_path).exists():
                seen[rel] = {"error": f"{rel} is missing"}
            else:
                h = out.get_hash()
                seen[rel] = {"hash": f"{h.name}:{h.value}"}
    finally:
        repo.close()
    return seen


# -- environment ------------------------------------------------------------------------------------
@functools.cache
def _installed_versions() -> dict[str, str]:
    """Installed distribution versions by normalised name, from the ``*.dist-info`` directory names on
    ``sys.path`` (one directory listing each; ``importlib.metadata.version`` costs ~3 ms a call)."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for n in names:
            if n.endswith(".dist-info") and "-" in n:
                dist, _, ver = n[: -len(".dist-info")].rpartition("-")
                found.setdefault(re.sub(r"[-_.]+", "-", dist).lower(), ver)
            elif n.endswith(".egg-info") and "-" in n[: -len(".egg-info")]:  # name-version[-pyX.Y].egg-info
                dist, ver = n[: -len(".egg-info")].split("-")[:2]
                found.setdefault(re.sub(r"[-_.]+", "-", dist).lower(), ver)
    return found


def _pkg_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None when it is not installed."""
    return _installed_versions().get(re.sub(r"[-_.]+", "-", name).lower())


def _torch_build_cuda() -> str | None:
    """torch.version.cuda read from torch's version.py without importing torch (1.6 s)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = Path(next(iter(spec.submodule_search_locations)), "version.py").read_text()
    except OSError:
        return None
    m = re.search(r"^cuda(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return m.group(1) if m else None


@functools.cache
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def _gpus() -> dict[str, Any]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"gpus": [], "driver": None}
    try:
        out = subprocess.run([exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {"gpus": [], "driver": None}
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    return {"gpus": [r[0] for r in rows], "driver": rows[0][1] if rows else None}


def numeric_env() -> dict[str, str]:
    """The allowlisted environment variables that change numerics, as set in this process."""
    return {k: os.environ[k] for k in dict.fromkeys(NUMERIC_ENV_VARS) if k in os.environ}


@functools.cache
def _static_environment() -> dict[str, Any]:
    return {
        "python": ".".join(map(str, sys.version_info[:3])),
        "implementation": sys.implementation.name,
        "packages": {p: v for p in PACKAGES if (v := _pkg_version(DISTRIBUTIONS.get(p, p))) is not None},
        "cuda": _torch_build_cuda(),
        "host": os.uname().nodename,
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": "{0.sysname}-{0.release}-{0.machine}".format(os.uname()),  # no `uname -p` fork
    }


def capture_environment(*, light: bool = False, runtime: bool = False) -> dict[str, Any]:
    """The environment of this process that can change results.

    Parameters
    ----------
    light : bool
        Skip the ``nvidia-smi`` call (GPU models come from torch at runtime instead).
    runtime : bool
        Add what an already-imported torch reports (cuDNN version, GPU names, threads); torch is
        never imported here for it.

    Returns
    -------
    dict
        ``python``, ``packages`` (name -> version), ``cuda`` (torch build), ``cudnn``, ``gpus``,
        ``driver``, ``host``, ``cpu``, ``cpu_count``, ``platform``, ``env`` (allowlisted variables only).
    """
    env: dict[str, Any] = {**_static_environment(), "env": numeric_env()}
    env["packages"] = dict(env["packages"])
    if not light:
        env.update(_gpus())
    if runtime and "torch" in sys.modules:
        torch = sys.modules["torch"]
        try:
            env["torch_threads"] = torch.get_num_threads()
            env["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
            if torch.cuda.is_available():
                env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        except Exception as exc:  # a broken CUDA setup must not stop the record
            env["torch_error"] = str(exc)
    return env


# -- verification -----------------------------------------------------------------------------------
def mismatches(pins: Mapping[str, Any], manifest: Mapping[str, Any]) -> list[str]:
    """Differences between the pins and what a trial saw (code commit, data hashes), as sentences.

    An empty list means the trial may run.
    """
    problems: list[str] = []
    code = pins.get("code") or {}
    seen = manifest.get("code") or {}
    if code.get("commit") and seen.get("commit") != code["commit"]:
        problems.append(f"code: the trial would run commit {str(seen.get('commit'))[:12]} "
                        f"({seen.get('error', 'snapshot')}), pinned {code['commit'][:12]}")
    elif code.get("snapshot") and seen.get("snapshot") != code["snapshot"]:
        problems.append(f"code: the snapshot {_code_where(seen)} was changed after launch "
                        f"({seen.get('error') or 'its files differ from the pinned commit'}); the trial would "
                        f"not run commit {code['commit'][:12]}. Start the ablation again (the snapshot is "
                        "never edited in place), or restore the files")
    for path, pin in (pins.get("data") or {}).items():
        got = (manifest.get("data") or {}).get(path) or {}
        if "error" in got:
            problems.append(f"data: {path}: {got['error']}")
        elif pin.get("content") and got.get("content") and got["content"] != pin["content"]:
            problems.append(f"data: {path} changed since launch (content {got['content'][9:21]}, pinned "
                            f"{pin['content'][9:21]}; DVC pinned {pin.get('hash', '')[:16]}); restore it with "
                            f"`dvc checkout --force {path}`")
        elif got.get("hash") != pin.get("hash"):
            problems.append(f"data: {path} changed since launch (hash {str(got.get('hash'))[:16]}, pinned "
                            f"{pin.get('hash', '')[:16]}); restore it with `dvc checkout --force {path}`")
    return problems


def _code_where(seen: Mapping[str, Any]) -> str:
    """The code snapshot directory named in a mismatch message (the sweep dir's ``code/``)."""
    root = seen.get("root")
    return f"in {root}" if root else "(code/)"
