"""Files the task's directory holds that neither git nor DVC pins (listed at plan time).

Trials run the code snapshot of the pinned commit, so a git-ignored file next to the task
(``weights.local.json``, a local cache, credentials) is not in the snapshot: a task that opens it by
a path relative to its own file or the snapshot fails with FileNotFoundError, and one that opens it
in the live project reads it unpinned, while the verdict would call the tree clean. Listing these
files before launch names the cause; the plan records them (``pins.code.ignored_files``) and
verdict.md shows them as unpinned.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: Ignored names that are never task inputs (caches, environments, editor and OS files).
_NOISE_PARTS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints",
                          ".git", ".dvc", ".hydra", "wandb", "mlruns", ".venv", "venv", ".tox", ".nox"})
_NOISE_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".egg-info/", ".DS_Store", ".swp")
#: At most this many files are named in the warning (all are recorded).
SHOWN = 10


def task_tree(task: Mapping[str, Any], cwd: str | os.PathLike[str]) -> Path:
    """The directory of the task's code: the module file of ``task.fn``, the script of ``task.command``,
    else ``cwd`` (the project directory ablate runs in). Nothing is imported."""
    cwd = Path(cwd)
    fn = task.get("fn")
    if fn:
        mod = str(fn).split(":", 1)[0] if ":" in str(fn) else str(fn).rsplit(".", 1)[0]
        base = cwd / mod.replace(".", "/")
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                return cand.parent
        return cwd
    command = task.get("command")
    words = command if isinstance(command, list) else str(command or "").split()
    for w in words:
        if str(w).endswith(".py") and (cwd / str(w)).is_file():
            return (cwd / str(w)).parent
    return cwd


def noise(rel: str) -> bool:
    """Whether ``rel`` is a cache, an environment, an editor or OS file: never a task input."""
    parts = Path(rel.rstrip("/")).parts
    return any(p in _NOISE_PARTS for p in parts) or rel.endswith(_NOISE_SUFFIXES) or \
        any(p.endswith(".egg-info") for p in parts)


def ignored_files(root: str | os.PathLike[str], tree: str | os.PathLike[str],
                  pinned: Iterable[str | os.PathLike[str]] = (),
                  outputs: Iterable[str | os.PathLike[str]] = ()) -> list[str]:
    """Git-ignored files and folders under ``tree`` that are not pinned by DVC, relative to ``root``.

    Parameters
    ----------
    root : path-like
        The git work tree.
    tree : path-like
        The task's directory (:func:`task_tree`).
    pinned : iterable of path-like
        DVC-tracked paths (absolute): they and anything under them are left out.
    outputs : iterable of path-like
        Where ablate writes (the sweep dir): folders on the way to it, and it, are left out.

    Returns
    -------
    list of str
        Sorted ``git ls-files --others --ignored --exclude-standard --directory`` entries (an ignored
        folder is one entry ending in ``/``), without caches, environments and the paths above.
    """
    root = Path(root).resolve()
    tree = Path(tree).resolve()
    try:
        rel_tree = tree.relative_to(root)
    except ValueError:
        return []
    proc = subprocess.run(["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory",
                           "--", str(rel_tree) if str(rel_tree) != "." else "."],
                          cwd=root, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return []
    keep_out = [Path(p).resolve() for p in pinned]
    outs = [Path(p).resolve() for p in outputs]
    found = []
    for rel in filter(None, proc.stdout.split("\0")):
        path = (root / rel).resolve()
        if noise(rel):
            continue
        if any(path == k or k in path.parents or path in k.parents for k in keep_out):
            continue
        if any(path == o or path in o.parents or o in path.parents for o in outs):
            continue
        if rel.endswith("/") and run_outputs(path):
            continue
        found.append(rel)
    return sorted(found)


#: How deep below an ignored folder :func:`run_outputs` looks for a run's own records.
OUTPUT_DEPTH = 4


def run_outputs(folder: Path) -> bool:
    """Whether an ignored folder holds the outputs of runs, not task inputs: an ablate sweep dir
    (``ablation.yaml``) or a Hydra run dir (``.hydra/``) within :data:`OUTPUT_DEPTH` levels (``outputs/``,
    ``multirun/``, the Lightning-Hydra template's ``logs/train/runs/<time>/``). A task reads its inputs, not
    earlier runs' outputs, so naming these folders as unpinned inputs is noise."""
    for depth in range(OUTPUT_DEPTH):
        stars = "*/" * depth
        for name in ("ablation.yaml", ".hydra"):
            if next(iter(folder.glob(stars + name)), None) is not None:
                return True
    return False


def dvc_outputs(root: str | os.PathLike[str]) -> list[Path]:
    """Absolute paths of every output DVC tracks in the repo at ``root`` (``.dvc`` files and dvc.yaml
    stages); empty when there is no DVC repo."""
    try:
        from dvc.repo import Repo  # noqa: PLC0415  # lazy: DVC is heavy, and only a DVC project needs it

        repo = Repo(str(root))
    except Exception:  # no DVC repo here: nothing is DVC-tracked
        return []
    try:
        return [Path(o.fs_path) for o in repo.index.outs]
    finally:
        repo.close()


def find(task: Mapping[str, Any], cwd: str | os.PathLike[str], root: str | os.PathLike[str],
         outputs: Iterable[str | os.PathLike[str]] = ()) -> tuple[str, list[str]]:
    """The task's directory (relative to ``root``) and its git-ignored files that DVC does not track."""
    tree = task_tree(task, cwd)
    files = ignored_files(root, tree, (), outputs)
    if files:  # only then is DVC asked which of them it tracks
        files = ignored_files(root, tree, dvc_outputs(root), outputs)
    rel = os.path.relpath(tree, Path(root).resolve())
    return ("." if rel == "." else rel), files


def warning(files: list[str], tree: str) -> str:
    """The one-line plan-time warning naming ``files`` (the first :data:`SHOWN`)."""
    shown = ", ".join(files[:SHOWN]) + (f" and {len(files) - SHOWN} more" if len(files) > SHOWN else "")
    return (f"ablate: warning: the task's directory {tree} holds git-ignored files that DVC does not track: {shown}. "
            "The code snapshot the trials run from lacks them (a task that opens one fails with FileNotFoundError; "
            "one that reads it from the project reads it unpinned). Fix: `dvc add <file>` and list it in task.data, "
            "or commit it")


def explain_missing(exc: BaseException, files: Iterable[str]) -> str | None:
    """Why a trial's FileNotFoundError happened, when the missing path is one of the listed ignored
    ``files`` (or lies under an ignored folder); None otherwise."""
    name = getattr(exc, "filename", None)
    if not isinstance(exc, FileNotFoundError) or not name:
        return None
    missing = Path(str(name))
    for rel in files:
        entry = Path(rel.rstrip("/"))
        if missing.parts[-len(entry.parts):] == entry.parts or \
                (rel.endswith("/") and any(missing.parts[i:i + len(entry.parts)] == entry.parts
                                           for i in range(len(missing.parts)))):
            return (f"{rel} is git-ignored and not tracked by DVC, so the code snapshot the trial runs from lacks it "
                    f"(listed at plan time). Fix: `dvc add {rel.rstrip('/')}` and list it in task.data, or commit it")
    return None
