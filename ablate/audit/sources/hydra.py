"""Hydra run and multirun dirs: ``.hydra/config.yaml`` (the composed config), ``overrides.yaml``, ``hydra.yaml``.

Hydra records the config, the command-line overrides, its own version and the working dir; not the code
commit, the data, the libraries, the hardware or whether the job finished. The metrics are what the app wrote
into its run dir, read with the readers ablate uses for its own trials (Lightning CSV, TensorBoard,
``*.json`` / ``*.jsonl``). When the working dir is a git repo, the commit is inferred from its history at the
run's start (the time Hydra wrote ``config.yaml``) and marked inferred: uncommitted edits or a checkout of
another branch are invisible.

The config is compared as written. An interpolation naming another key of the same config (``${data.mix}``,
``${.mix}``) takes that key's recorded value; every other one (``${oc.env:...}``, ``${now:...}``, any resolver)
stays text: a record is never resolved in the auditor's environment. The YAML is read with PyYAML's safe
loader (C-accelerated: a read of 10,000 run dirs stays within a minute), which builds no objects but plain data.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ablate.audit.arms import CHOICE
from ablate.audit.runs import GitHistory, Run, flatten
from ablate.audit.sources.base import progress
from ablate.errors import ConfigError
from ablate.metrics import read_csv, read_json, read_tensorboard

#: A node interpolation: ``${a.b}`` (absolute) or ``${.b}`` / ``${..b}`` (relative); nothing else is resolved.
_NODE = re.compile(r"\$\{(\.*)([A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*)\}")


def run_dirs(root: Path) -> list[Path]:
    """The run dirs under ``root`` (``root`` itself for a single run), in path order."""
    if (root / ".hydra" / "config.yaml").is_file():
        return [root]
    return sorted(p.parent.parent for p in root.glob("**/.hydra/config.yaml"))


def _load(path: Path) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.load(fh, Loader=loader)  # a safe loader: plain data only
    except Exception as exc:  # a truncated or hand-edited file, bytes that are not UTF-8
        first = str(exc).splitlines()[0][:160] if str(exc) else ""
        raise ConfigError(f"{path} is not readable YAML ({type(exc).__name__}: {first})", where="ablate audit SOURCE",
                          fix="restore the file, or leave that run dir out of the sources") from None


def _target(key: str, dots: str, name: str) -> str:
    """The absolute key an interpolation in ``key`` names (relative ones from ``key``'s parent)."""
    if not dots:
        return name
    parent = key.split(".")[:-1]
    up = len(dots) - 1
    base = parent[:len(parent) - up] if up <= len(parent) else []
    return ".".join([*base, name])


def resolve_nodes(flat: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``flat`` with each node interpolation replaced by the value the same config records for that key (a whole
    ``${key}`` keeps the value's type); every other interpolation, and one naming a key the config lacks or a
    cycle, stays as written. Returns the config and the interpolations as written."""
    texts = {k: v for k, v in flat.items() if isinstance(v, str) and "${" in v}
    out = dict(flat)

    def value(key: str, seen: tuple[str, ...]) -> Any:
        v = flat.get(key)
        if not (isinstance(v, str) and "${" in v) or key in seen:
            return v
        whole = _NODE.fullmatch(v)
        if whole:
            target = _target(key, *whole.groups())
            got = value(target, (*seen, key)) if target in flat else v
            return v if isinstance(got, str) and "${" in got else got

        def sub(m: re.Match[str]) -> str:
            target = _target(key, *m.groups())
            got = value(target, (*seen, key)) if target in flat else m.group(0)
            return m.group(0) if isinstance(got, (dict, list)) or (isinstance(got, str) and "${" in got) else str(got)

        text = _NODE.sub(sub, v)
        return v if "${" in text else text

    for k in texts:
        out[k] = value(k, ())
    return out, texts


@lru_cache(maxsize=1024)
def _program(cwd: str, job: str) -> str | None:
    p = Path(cwd) / f"{job}.py"
    return str(p) if p.is_file() else None


def _metrics(run_dir: Path) -> dict[str, list[tuple[int | None, float]]]:
    for reader in (read_csv, read_tensorboard, read_json):
        found, _ = reader(run_dir)
        if found:
            return found
    return {}


def _run(d: Path, git: GitHistory) -> Run:
    cfg = _load(d / ".hydra" / "config.yaml")
    hydra = ((_load(d / ".hydra" / "hydra.yaml") or {}).get("hydra", {}) if (d / ".hydra" / "hydra.yaml").is_file()
             else {})
    runtime = (hydra.get("runtime") or {}) if isinstance(hydra, dict) else {}
    started = (d / ".hydra" / "config.yaml").stat().st_mtime
    context: dict[str, Any] = {}
    if runtime.get("version"):
        context["hydra"] = str(runtime["version"])  # Hydra's own version: no other library's
    choices = runtime.get("choices") or {}
    config, interpolations = resolve_nodes(flatten(cfg or {}))
    config.update({f"{CHOICE}{k}": v for k, v in choices.items() if not str(k).startswith("hydra/")})
    cwd = runtime.get("cwd") if isinstance(runtime.get("cwd"), str) else None
    repo = git.toplevel(cwd)
    job = (hydra.get("job") or {}).get("name") if isinstance(hydra, dict) else None
    if job and cwd and _program(cwd, str(job)):
        context["program"] = _program(cwd, str(job))
    commit = git.commit_at(repo, started) if repo else None
    return Run(source="hydra", id=str(d), config=config, metrics=_metrics(d), commit=commit,
               commit_how="inferred from the git history at the run's start (Hydra records no commit)"
               if commit else "", context=context, started=started, repo=repo, interpolations=interpolations)


def read(source: str, left_out: list[str] | None = None, selection: Any = None) -> list[Run]:
    """Every run dir under ``source`` as a :class:`Run` (with no status: Hydra records none), a progress line on
    stderr every thousand run dirs of a long read."""
    dirs = run_dirs(Path(source))
    say = progress(source, "run dirs")
    git = GitHistory()
    runs = []
    for i, d in enumerate(dirs, 1):
        runs.append(_run(d, git))
        say(i, len(dirs))
    return runs
