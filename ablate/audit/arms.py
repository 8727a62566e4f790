"""Runs grouped into arms, and every difference between the two arms classified.

Runs whose config differs only in the seed key are replicates of one arm. When every run shares one config,
the arms are the runs' data versions (the DVC hash of a file the config names, at the run's commit:
:mod:`ablate.audit.versions`; a digest the source recorded), and when those agree too, their code commits: a
data snapshot or a code change is a difference between arms like a config key. Between the two arms, each
difference is one of: the variable under test (``--variable``, or proposed: the one config key every other
config difference derives from; with no config difference, the data version, else the commit), a derived
change (a key whose recorded interpolation names the variable, or, in a resolved config as trackers log it,
whose value is the control's with the variable's value replaced by the treatment's; a commit that changes
nothing but the DVC record of the data under test), or a confound: another config key, the code commit (with
the files it changed, when the repo is at hand), data versions, library versions, hardware, determinism
settings. A field recorded for some runs and not others is reported as missing, never assumed equal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate.audit.runs import Run, git_commit, git_out
from ablate.errors import ConfigError

#: Context fields compared between arms (:attr:`ablate.audit.runs.Run.context`), and what each is called.
CONTEXT = {"data": "data version", "libraries": "library version", "hydra": "Hydra version",
           "python": "Python version",
           "hardware": "hardware", "host": "host", "platform": "platform", "determinism": "determinism setting"}
#: What a missing context field is called in the "not recorded" lines.
MISSING = {"commit": "commit", "data": "data version", "libraries": "library versions", "hardware": "hardware",
           "determinism": "determinism setting"}


#: The prefix of the keys recording a Hydra config-group choice (``hydra-choice:model`` = ``mlp``).
CHOICE = "hydra-choice:"


@dataclass
class Arm:
    """One arm: the config its replicates share (seed key left out), its runs, and what set it apart from the
    other arm (``config``, ``data`` or ``commit``: :func:`group`)."""

    name: str
    config: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    by: str = "config"


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _split(runs: Sequence[Run], get: Callable[[Run], Any], seed_keys: set[str]) -> list[Arm]:
    by: dict[str, Arm] = {}
    for r in runs:
        cfg = {k: v for k, v in r.config.items() if k not in seed_keys}
        by.setdefault(_key(get(r)), Arm(name="", config=cfg)).runs.append(r)
    return list(by.values())


def group(runs: Sequence[Run], seed_key: str | Collection[str]) -> list[Arm]:
    """Runs grouped by their config without the seed key(s); when that gives one group, by their data versions,
    then by their commits (the first that gives two groups). Arms are ordered by their first run's start (the
    earlier side first: the control of the audit)."""
    keys = {seed_key} if isinstance(seed_key, str) else set(seed_key)
    arms = _split(runs, lambda r: {k: v for k, v in r.config.items() if k not in keys}, keys)
    if len(arms) == 1:
        for level, get in (("data", lambda r: r.context.get("data") or None), ("commit", lambda r: r.commit)):
            parts = _split(runs, get, keys)
            if len(parts) == 2:
                arms = parts
                for arm in arms:
                    arm.by = level
                break
    arms.sort(key=lambda a: min((r.started or 0.0) for r in a.runs))
    for i, a in enumerate(arms):
        a.name = "A" if i == 0 else chr(ord("A") + i)
    return arms


#: A key one arm's config does not have.
_UNSET = object()


def _show(v: Any) -> str:
    return "(not set)" if v is _UNSET else v if isinstance(v, str) else json.dumps(v, default=str)


def config_differences(a: Arm, b: Arm) -> dict[str, tuple[Any, Any]]:
    """Config keys whose values differ between the arms (a key one arm lacks included): key -> (value in
    ``a``, value in ``b``), :data:`_UNSET` where absent."""
    out = {}
    for k in sorted(set(a.config) | set(b.config)):
        va, vb = a.config.get(k, _UNSET), b.config.get(k, _UNSET)
        if (va is _UNSET) != (vb is _UNSET) or (va is not _UNSET and _key(va) != _key(vb)):
            out[k] = (va, vb)
    return out


def _values(runs: Sequence[Run], get: Any) -> tuple[list[Any], int]:
    vals, missing = [], 0
    for r in runs:
        v = get(r)
        if v in (None, "", {}, []):
            missing += 1
        else:
            vals.append(v)
    return vals, missing


def _distinct(vals: list[Any]) -> list[Any]:
    seen, out = set(), []
    for v in vals:
        k = _key(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def changed_files(repo: str | None, old: str, new: str) -> list[str] | None:
    """Files the commits ``old..new`` changed (``git diff --name-status``), or None without the repo or when
    either is not a commit there (each checked as a hex id git resolves, and passed after
    ``--end-of-options``)."""
    if not repo:
        return None
    full = [git_commit(repo, c) for c in (old, new)]
    if None in full:
        return None
    out = git_out(repo, "diff", "--name-status", "--end-of-options", *full)  # type: ignore[arg-type]
    if out is None:
        return None
    return [" ".join(line.split("\t")) for line in out.splitlines() if line.strip()]


def _derived(key: str, va: Any, vb: Any, variable: str | None, var_values: tuple[Any, Any] | None,
             runs: Sequence[Run]) -> str | None:
    """Why ``key`` is a derived change of ``variable`` (None when it is not): its recorded interpolation names
    the variable, or (a resolved config, as trackers log it) its value is the control's with the variable's
    value replaced by the treatment's."""
    if variable is None or var_values is None:
        return None
    if variable.startswith(CHOICE):  # a Hydra config group swapped: its keys come with the option
        prefix = variable.removeprefix(CHOICE).replace("/", ".") + "."
        if key.startswith(prefix) and not key.startswith(CHOICE):
            return f"in config group {variable.removeprefix(CHOICE)}, swapped {var_values[0]} -> {var_values[1]}"
    for r in runs:
        text = r.interpolations.get(key)
        if text and "${" + variable in text:
            return f"interpolates the variable: {text}"
    xa, xb = (str(v) for v in var_values)
    if isinstance(va, str) and isinstance(vb, str) and xa and xa in va and va.replace(xa, xb) == vb:
        return f"follows the variable's value ({xa} -> {xb} in it)"
    return None


def _data_variable(a: Arm, b: Arm) -> dict[str, Any] | None:
    """The data versions that set the arms apart (arms grouped by data): the paths both sides read at other
    versions, each arm's versions, and the config key naming the path (the same on both sides) when one does."""
    va, vb = (_distinct([r.context.get("data") or {} for r in arm.runs]) for arm in (a, b))
    if len(va) != 1 or len(vb) != 1:
        return None
    da, db = va[0], vb[0]
    paths = sorted(p for p in set(da) & set(db) if da[p] != db[p]) or sorted(set(da) ^ set(db))
    if not paths:
        return None
    keys = {r.context.get("data_keys", {}).get(paths[0]) for r in a.runs + b.runs} - {None}
    one = len(paths) == 1
    return {"key": "data:" + ",".join(paths), "kind": "data",
            "a": da.get(paths[0]) if one else {p: da.get(p) for p in paths},
            "b": db.get(paths[0]) if one else {p: db.get(p) for p in paths},
            "config_key": keys.pop() if one and len(keys) == 1 else None}


def _declared(variable: str, diffs: dict[str, tuple[Any, Any]], a: Arm, b: Arm) -> dict[str, Any] | None:
    """``--variable``: a config key the arms differ in, ``commit``, or ``data:PATH`` (a data version); None when
    the arms do not differ in it."""
    if variable in diffs:
        va, vb = diffs[variable]
        return {"key": variable, "kind": "config", "a": None if va is _UNSET else va,
                "b": None if vb is _UNSET else vb}
    if variable == "commit":
        ca, cb = (_distinct([r.commit for r in arm.runs if r.commit]) for arm in (a, b))
        return {"key": "commit", "kind": "code", "a": ca[0], "b": cb[0]} if len(ca) == len(cb) == 1 and ca != cb \
            else None
    if variable.startswith("data:"):
        dv = _data_variable(a, b)
        return dv if dv and dv["key"] == variable else None
    return None


def _variable(a: Arm, b: Arm, variable: str | None, diffs: dict[str, tuple[Any, Any]]) -> dict[str, Any] | None:
    """The variable under test, declared or proposed (see the module's docstring), with ``how``."""
    if variable is not None:
        var = _declared(variable, diffs, a, b)
        if var is None:
            keys = ", ".join(diffs) or "none"
            raise ConfigError(f"the arms do not differ in {variable!r} (config keys they differ in: {keys})",
                              where="--variable", fix="name a config key that differs between the runs"
                              + (f", e.g. --variable {next(iter(diffs))}" if diffs else "")
                              + ", `commit` or `data:PATH` (a data version)")
        return {**var, "how": "declared"}
    if a.by == "data":
        dv = _data_variable(a, b)
        return {**dv, "how": "proposed"} if dv else None
    if a.by == "commit":
        return {"key": "commit", "kind": "code", "a": a.runs[0].commit, "b": b.runs[0].commit, "how": "proposed"}
    runs_ab = a.runs + b.runs
    fits = [k for k in diffs if all(o == k or _derived(o, *diffs[o], k, diffs[k], runs_ab) for o in diffs)]
    if len(fits) != 1:
        return None
    va, vb = diffs[fits[0]]
    return {"key": fits[0], "a": None if va is _UNSET else va, "b": None if vb is _UNSET else vb, "how": "proposed",
            "kind": "config"}


def _code(a: Arm, b: Arm, var: dict[str, Any] | None, repo: str | None, derived: list[dict[str, Any]]
          ) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """The code commit compared: (confounds, missing lines, within-arm lines); a commit that changes only the DVC
    records of the data under test is a derived change (appended to ``derived``)."""
    runs = a.runs + b.runs
    ca, ma = _values(a.runs, lambda r: r.commit)
    cb, mb = _values(b.runs, lambda r: r.commit)
    missing, within = [], []
    if ma + mb:
        missing.append(f"no commit recorded for {ma + mb} of {len(runs)} runs"
                       + (" (Hydra records no commit)" if all(r.source == "hydra" for r in runs) else ""))
    guessed = sum(1 for r in runs if r.commit_how.startswith("inferred"))
    if guessed:
        missing.append(f"no commit recorded for {guessed} of {len(runs)} runs (Hydra records none): inferred from "
                       "the repo's git history at each run's start, blind to uncommitted edits")
    for arm, vals in ((a, ca), (b, cb)):
        if len(_distinct(vals)) > 1:
            within.append(f"arm {arm.name}'s runs ran at {len(_distinct(vals))} commits: "
                          + ", ".join(str(v)[:10] for v in _distinct(vals)))
    da, db = _distinct(ca), _distinct(cb)
    if not (da and db and set(da) != set(db)) or (var or {}).get("kind") == "code":
        return [], missing, within
    old, new = str(da[0]), str(db[0])
    inferred = any(r.commit_how.startswith("inferred") for r in runs)
    files = changed_files(repo or next((r.repo for r in runs if r.repo), None), old, new)
    if files and (var or {}).get("kind") == "data":
        records = set()
        for path in var["key"].removeprefix("data:").split(","):
            records |= {f"{path}.dvc", os.path.join(os.path.dirname(path), ".gitignore"), "dvc.lock"}
        if all(f.split(" ", 1)[-1] in records for f in files):
            derived.append({"key": "commit", "a": old, "b": new,
                            "why": f"it changes only the DVC record of the data under test ({', '.join(files)})"})
            return [], missing, within
    shown = (f"; changed files: {', '.join(files)}" if files else "; the repo is not at hand (--repo DIR lists "
             "the files changed)" if files is None else "")
    return [{"kind": "code", "field": "commit", "a": old, "b": new, "files": files, "inferred": inferred,
             "message": f"code commit: {old[:10]} in A, {new[:10]} in B"
             + (" (inferred from the git history at the runs' start times, not recorded)" if inferred else "")
             + shown}], missing, within


def _context(a: Arm, b: Arm, var: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Every context field compared (:data:`CONTEXT`): (confounds, missing lines, within-arm lines). Data
    versions are compared for the paths both sides read (a path one side alone reads follows its config)."""
    runs = a.runs + b.runs
    confounds, missing, within = [], [], []
    skip = set(var["key"].removeprefix("data:").split(",")) if (var or {}).get("kind") == "data" else set()
    for fld, what in CONTEXT.items():
        va, na = _values(a.runs, lambda r, f=fld: r.context.get(f))
        vb, nb = _values(b.runs, lambda r, f=fld: r.context.get(f))
        if fld in MISSING and na + nb:
            missing.append(f"no {MISSING[fld]} recorded for {na + nb} of {len(runs)} runs")
        if not va or not vb:
            continue
        if not isinstance(va[0], dict):
            if _key(_distinct(va)) != _key(_distinct(vb)):
                sa, sb = "/".join(map(str, _distinct(va))), "/".join(map(str, _distinct(vb)))
                confounds.append({"kind": fld, "field": fld, "a": sa, "b": sb,
                                  "message": f"{what}: {sa} in A, {sb} in B"})
            continue
        keys = sorted(set().union(*va) & set().union(*vb)) if fld == "data" else sorted(set().union(*va, *vb))
        for k in keys:
            if k in skip:
                continue
            xa, xb = _distinct([d.get(k) for d in va]), _distinct([d.get(k) for d in vb])
            if fld == "data":
                within += [f"arm {arm.name}'s runs read {len(x)} versions of `{k}`: {', '.join(map(str, x))}"
                           for arm, x in ((a, xa), (b, xb)) if len(x) > 1]
            if _key(xa) != _key(xb):
                sa, sb = "/".join(map(str, xa)), "/".join(map(str, xb))
                confounds.append({"kind": fld, "field": k, "a": sa, "b": sb,
                                  "message": f"{what} `{k}`: {sa} in A, {sb} in B"})
    return confounds, missing, within


def classify(a: Arm, b: Arm, variable: str | None, repo: str | None = None) -> dict[str, Any]:
    """Every difference between arms ``a`` (control) and ``b``, classified.

    Returns
    -------
    dict
        ``variable`` (key, kind ``config`` / ``data`` / ``code``, control and treatment values, ``how``:
        declared / proposed; None when none can be proposed), ``derived``, ``confounds`` (each: ``kind``,
        ``field``, ``a``, ``b``, ``message``; code ones carry ``files``), ``missing`` (one line per field some
        runs lack), ``within`` (fields that differ inside one arm), ``arms_by`` (what sets the arms apart).

    Raises
    ------
    ConfigError
        When ``variable`` is given and the arms do not differ in it.
    """
    diffs = config_differences(a, b)
    var = _variable(a, b, variable, diffs)
    key = var["key"] if var and var["kind"] == "config" else None
    derived, confounds = [], []
    for k, (va, vb) in diffs.items():
        if k == key:
            continue
        why = _derived(k, va, vb, key, diffs.get(key) if key else None, a.runs + b.runs)
        if why:
            derived.append({"key": k, "a": _show(va), "b": _show(vb), "why": why})
            continue
        confounds.append({"kind": "config", "field": k, "a": _show(va), "b": _show(vb),
                          "message": f"config `{k}`: {_show(va)} in A, {_show(vb)} in B"})
    code, missing, within = _code(a, b, var, repo, derived)
    ctx, missing2, within2 = _context(a, b, var)
    return {"variable": var, "how": var["how"] if var else "none", "config_differences": list(diffs),
            "derived": derived, "confounds": confounds + code + ctx, "missing": missing + missing2,
            "within": within + within2, "arms_by": a.by}
