"""DVC experiments, as ``dvc exp show --json --all-commits`` lists them: run in a DVC project given as the source
(DVC's own command, with no value from a record on its command line), or read from a file that command wrote.

Each experiment is a run: its params (every params file's, flattened) the config, its metrics files' values the
metrics (one value each: DVC keeps the last), its baseline commit the code commit, and the hashes DVC recorded
for the data it depended on (``deps``: the files the run read; code files, ``*.py``, left out) its data versions.
An experiment whose run did not succeed is left out and said. The workspace and the commits themselves are no
experiments and are not read as runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from ablate.audit.runs import Run, commit_id, flatten, git_toplevel
from ablate.audit.sources.base import Selection
from ablate.errors import ConfigError

_WHERE = "ablate audit SOURCE"
#: Dependencies that are code, not data (their change is the commit's, not a data version's).
CODE = (".py", ".ipynb", ".sh", ".yaml", ".yml", ".toml", ".cfg")


def show(repo: str) -> Any:
    """``dvc exp show --json --all-commits`` in ``repo``, parsed."""
    cmd = [sys.executable, "-m", "dvc", "exp", "show", "--json", "--all-commits"]
    try:
        out = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=600, check=False,
                             env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"`dvc exp show --json` could not run in {repo} ({exc})", where=_WHERE,
                          fix="install DVC (`pip install dvc`), or give the JSON `dvc exp show --json -A` "
                          "wrote") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no message"])[-1][:200]
        raise ConfigError(f"`dvc exp show --json` failed in {repo}: {last}", where=_WHERE,
                          fix="run it there yourself to see why, or give the JSON it wrote") from None
    return _parse(out.stdout, repo)


def _parse(text: str, where: str) -> Any:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{where} is not the JSON `dvc exp show --json` writes ({exc})", where=_WHERE,
                          fix="give the output of `dvc exp show --json -A`, whole") from None
    if not isinstance(data, list):
        raise ConfigError(f"{where} is not the JSON `dvc exp show --json` writes (not a list of commits)",
                          where=_WHERE, fix="give the output of `dvc exp show --json -A`, whole")
    return data


def _merged(sections: Any) -> dict[str, Any]:
    """Every file's ``data`` of a params / metrics section, flattened into one mapping (the first file wins)."""
    out: dict[str, Any] = {}
    for body in (sections or {}).values():
        for k, v in flatten((body or {}).get("data") or {}).items():
            out.setdefault(k, v)
    return out


def _run(exp: dict[str, Any], baseline: str | None, repo: str | None, source: str) -> Run | None:
    data = exp.get("data") or {}
    metrics = {k: [(None, float(v))] for k, v in _merged(data.get("metrics")).items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    deps = {p: f"md5:{d['hash']}" for p, d in (data.get("deps") or {}).items()
            if isinstance(d, dict) and d.get("hash") and not p.endswith(CODE)}
    started = None
    if data.get("timestamp"):
        try:
            started = datetime.fromisoformat(str(data["timestamp"])).timestamp()
        except ValueError:
            started = None
    rev = str(exp.get("rev") or data.get("rev") or "")
    return Run(source="dvc", id=exp.get("name") or rev[:12], config=_merged(data.get("params")), metrics=metrics,
               commit=baseline, commit_how="the experiment's baseline commit, recorded by DVC" if baseline else "",
               context={"data": deps} if deps else {}, started=started, repo=repo, status="finished",
               names={rev, rev[:7]} - {""})


def read(source: str, left_out: list[str] | None = None, selection: Selection | None = None) -> list[Run]:
    """Every experiment whose run succeeded (the others named in ``left_out``)."""
    p = Path(source)
    if p.is_file():
        data = _parse(p.read_text(encoding="utf-8", errors="replace"), source)
        repo = git_toplevel(str(p.absolute().parent))
    else:
        data = show(source)
        repo = git_toplevel(str(p.absolute()))
    runs = []
    for commit in data:
        if not isinstance(commit, dict):
            continue
        baseline = commit_id(commit.get("rev"))
        for group in commit.get("experiments") or []:
            for exp in (group or {}).get("revs") or []:
                err = exp.get("error") or (exp.get("data") or {}).get("status") not in (None, "Success", "success")
                if err:
                    if left_out is not None:
                        left_out.append(f"DVC experiment {exp.get('name') or exp.get('rev')}: did not succeed")
                    continue
                r = _run(exp, baseline, repo, source)
                if r is not None:
                    runs.append(r)
    return runs
