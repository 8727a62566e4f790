"""Data versions of the files a run's config names, from the repo at the run's commit: the hash DVC recorded
for a DVC-tracked file (through DVC's own index of that commit, :meth:`dvc.repo.Repo.brancher`), else git's blob
id for a file git tracks. Stored in each run's ``context["data"]`` (path -> ``md5:<hex>`` or ``git:<blob>``)
beside the digests a source recorded itself (MLflow datasets, W&B artifacts, ablate's DVC pins), so a data
change no config key shows is a difference between arms like any other (:mod:`ablate.audit.arms`).

Commits and paths come from records: a commit is used only as a validated hex id that git resolves
(:func:`ablate.audit.runs.git_commit`), a path only when it is relative, inside the repo, and names what DVC or
git tracks at that commit.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ablate.audit.runs import Run, git_commit, git_out


def _paths(config: dict[str, Any]) -> dict[str, str]:
    """Config values that may name a file in the repo (relative, no interpolation, no ``..``): path -> key."""
    out: dict[str, str] = {}
    for k, v in config.items():
        if not isinstance(v, str) or not v or "${" in v or "\n" in v or v.startswith(("/", "-", "~")):
            continue
        p = os.path.normpath(v)
        if p.startswith("..") or p == "." or ("/" not in p and "." not in p):
            continue
        out.setdefault(p, k)
    return out


def dvc_outputs(root: str, commits: Sequence[str]) -> dict[str, dict[str, str]]:
    """commit -> {output path relative to ``root``: ``<hash name>:<hex>``} of every DVC-tracked output at each
    commit, as DVC's own index of that commit records them; {} when ``root`` is no DVC project."""
    if not commits or not (Path(root) / ".dvc").is_dir():
        return {}
    try:
        from dvc.repo import Repo  # noqa: PLC0415  # lazy: DVC is heavy, and only a DVC project needs it
    except ImportError:
        return {}
    out: dict[str, dict[str, str]] = {}
    try:
        with Repo(root) as repo:
            for rev in repo.brancher(revs=list(commits), workspace=False):
                try:
                    outs = repo.index.outs
                except Exception:  # a dvc.yaml that does not parse at that commit: nothing DVC-tracked there
                    continue
                out[rev] = {str(o.fs_path).lstrip("/"): f"{o.hash_info.name}:{o.hash_info.value}"
                            for o in outs if o.hash_info and o.hash_info.value}
    except Exception:  # DVC cannot open the project (another DVC version, a broken config)
        return out
    return out


def _tracked(path: str, outs: dict[str, str]) -> tuple[str, str] | None:
    """The DVC output holding ``path`` (itself, or a tracked dir above it) and its hash."""
    for o, h in outs.items():
        if path == o or path.startswith(o.rstrip("/") + "/"):
            return o, h
    return None


@lru_cache(maxsize=4096)
def _blob(repo: str, commit: str, path: str) -> str | None:
    out = git_out(repo, "rev-parse", "--verify", "-q", "--end-of-options", f"{commit}:{path}")
    return "git:" + out.strip()[:12] if out and out.strip() else None


def add_data_versions(runs: Sequence[Run], repo: str | None = None) -> None:
    """Record in each run's ``context["data"]`` the version of every file its config names, at its commit
    (DVC's hash, else git's blob), and in ``context["data_keys"]`` which config key named it; runs with no
    commit or no repo at hand are left as they are (their data version is then said to be missing)."""
    by_repo: dict[str, dict[str, str]] = {}
    for r in runs:
        root = repo or r.repo
        if root and r.commit:
            by_repo.setdefault(root, {})
    for root in by_repo:
        wanted = {r.commit for r in runs if (repo or r.repo) == root and r.commit}
        full = {c: git_commit(root, c) for c in wanted}
        outs = dvc_outputs(root, sorted({f for f in full.values() if f}))
        for r in runs:
            if (repo or r.repo) != root or not r.commit or not full.get(r.commit):
                continue
            commit = full[r.commit]
            found: dict[str, str] = {}
            keys: dict[str, str] = {}
            for path, key in _paths(r.config).items():
                dvc = _tracked(path, outs.get(commit, {}))
                version = dvc[1] if dvc else _blob(root, commit, path)
                if version:
                    found[path], keys[path] = version, key
            if found:
                r.context["data"] = {**found, **(r.context.get("data") or {})}
                r.context["data_keys"] = keys
