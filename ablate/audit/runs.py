"""What the audit knows of one run that ablate did not launch: its config, metrics, code commit and context.

Every source (:mod:`ablate.audit.sources`) reads its own format into :class:`Run`; the rest of the audit never
looks at a source's files again. What a source does not record stays ``None`` (or out of ``context``), so the
audit can say it is missing instead of taking it as equal.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ablate.plan.overrides import flatten_params

#: A metric as logged: (step, value) pairs in logging order (as :data:`ablate.metrics.Series`).
Series = list[tuple[int | None, float]]


@dataclass
class Run:
    """One run read from a source.

    Attributes
    ----------
    source : str
        ``hydra``, ``mlflow``, ``wandb`` or ``ablate`` (a trial of an ablate sweep dir).
    id : str
        Where it was read: a run dir, an MLflow run id, a W&B run id, ``arm/seed``.
    config : dict
        The run's config, flattened to dotted keys (``data.mix``).
    metrics : dict
        Metric name -> logged series.
    commit : str or None
        The git commit the run's code was at, when recorded.
    commit_how : str
        How ``commit`` was found: the source's own record (``recorded by <source>``), or ``inferred ...``.
    context : dict
        What else the source recorded of the run's context, by field: ``python``, ``host``, ``hardware``,
        ``platform``, ``libraries`` (package -> version), ``data`` (path -> version), ``determinism``.
    started : float or None
        Start time (seconds since the epoch).
    repo : str or None
        A git work tree the run ran in, when it is at hand (for the files a commit changed).
    interpolations : dict
        Keys whose recorded value was an interpolation (Hydra's ``${...}``), with the text as recorded;
        ``config`` holds the value another key of the same record gives it, never one of the auditor's
        environment (``${oc.env:...}`` and every other resolver stay text).
    status : str or None
        ``finished`` when the source records that the run ended well; None when it records no status (Hydra,
        TensorBoard without hparams: then the steps it logged tell, :mod:`ablate.audit.identity`).
    names : set of str
        Other names the record gives the run (an MLflow run name, a W&B display name): a run logged to several
        trackers under one name is one run.
    tags : dict
        The record's tags (MLflow tags; W&B tags as ``{tag: ""}``), for ``--tag`` and for ablate's own trials.
    experiment : str or None
        The MLflow experiment or W&B project the run was logged to.
    records : list of str
        Every record the run was seen through (``<source>:<id>``), when it was seen through several.
    origin : str
        The source it was read from, as given (``multirun/``, ``mlflow.db``): runs of one origin are never
        merged (:mod:`ablate.audit.identity`).
    """

    source: str
    id: str
    config: dict[str, Any]
    metrics: dict[str, Series]
    commit: str | None = None
    commit_how: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    started: float | None = None
    repo: str | None = None
    interpolations: dict[str, str] = field(default_factory=dict)
    status: str | None = None
    names: set[str] = field(default_factory=set)
    tags: dict[str, str] = field(default_factory=dict)
    experiment: str | None = None
    records: list[str] = field(default_factory=list)
    origin: str = ""


def flatten(obj: Any) -> dict[str, Any]:
    """A run's nested config as ``{"a.b": value}`` (the plan's own flattening; lists stay values); ``{}`` for
    anything that is not a mapping."""
    return flatten_params(obj) if isinstance(obj, Mapping) else {}


def git_toplevel(path: str | os.PathLike[str] | None) -> str | None:
    """The git work tree holding ``path``, or None (no git, not a repo, gone)."""
    if not path or not os.path.isdir(path):
        return None
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=30, check=False)
    except OSError:
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def git_out(repo: str, *args: str) -> str | None:
    """``git -C repo ARGS`` output, or None when git fails (an unknown commit, a shallow clone)."""
    try:
        out = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return None
    return out.stdout if out.returncode == 0 else None


#: A commit id as git writes it (abbreviated or whole, SHA-1 or SHA-256).
_HEX = re.compile(r"[0-9a-f]{7,64}")


def commit_id(value: Any) -> str | None:
    """``value`` when it reads as a commit id (hex), else None: a record's commit is data, never an option."""
    return value if isinstance(value, str) and _HEX.fullmatch(value) else None


def git_commit(repo: str, commit: str) -> str | None:
    """The whole id of ``commit`` (hex, checked first) in ``repo``, or None when it is not there; the value is
    passed after ``--end-of-options``."""
    if commit_id(commit) is None:
        return None
    out = git_out(repo, "rev-parse", "--verify", "-q", "--end-of-options", f"{commit}^{{commit}}")
    return out.strip() or None if out else None


class GitHistory:
    """What git says of the dirs runs ran in, asked once per dir (a read of many runs starts no process each)."""

    def __init__(self) -> None:
        self.tops: dict[str, str | None] = {}
        self.history: dict[str, tuple[list[int], list[str]]] = {}

    def toplevel(self, cwd: str | None) -> str | None:
        if not cwd:
            return None
        if cwd not in self.tops:
            self.tops[cwd] = git_toplevel(cwd)
        return self.tops[cwd]

    def commit_at(self, repo: str, started: float) -> str | None:
        """The newest commit of ``repo``'s HEAD made at or before ``started`` (``rev-list -1 --before``)."""
        if repo not in self.history:
            out = git_out(repo, "log", "--format=%ct %H", "HEAD") or ""
            pairs = sorted((int(t), h) for t, h in (line.split() for line in out.splitlines() if " " in line))
            self.history[repo] = ([t for t, _ in pairs], [h for _, h in pairs])
        times, shas = self.history[repo]
        i = bisect.bisect_right(times, int(started))
        return shas[i - 1] if i else None
