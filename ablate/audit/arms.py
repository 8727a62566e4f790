"""Runs grouped into arms, and every difference between the two arms classified.

Runs whose config differs only in the seed key are replicates of one arm. Between the two arms, each
difference is one of: the variable under test (``--variable``, or proposed when exactly one config key
differs but for changes derived from it), a derived change (a key whose recorded interpolation names the
variable, or, in a resolved config as trackers log it, whose value is the control's with the variable's value
replaced by the treatment's), or a confound: another config key, the code commit (with the files it changed,
when the repo is at hand), data versions, library versions, hardware, determinism settings. A field recorded
for some runs and not others is reported as missing, never assumed equal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate.audit.runs import Run, git_out
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
    """One arm: the config its replicates share (seed key left out) and its runs."""

    name: str
    config: dict[str, Any]
    runs: list[Run] = field(default_factory=list)


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def group(runs: Sequence[Run], seed_key: str) -> list[Arm]:
    """Runs grouped by their config without ``seed_key``; arms ordered by their first run's start (the
    earlier side first: the control of the audit)."""
    by: dict[str, Arm] = {}
    for r in runs:
        cfg = {k: v for k, v in r.config.items() if k != seed_key}
        k = _key(cfg)
        by.setdefault(k, Arm(name="", config=cfg)).runs.append(r)
    arms = sorted(by.values(), key=lambda a: min((r.started or 0.0) for r in a.runs))
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
    """Files the commits ``old..new`` changed (``git diff --name-status``), or None without the repo."""
    if not repo:
        return None
    out = git_out(repo, "diff", "--name-status", old, new)
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


def data_versions(a: Arm, b: Arm, commits_a: list[Any], commits_b: list[Any], repo: str | None
                  ) -> list[dict[str, Any]]:
    """Data files the config names by the same path on both sides whose content differs between the two
    sides' commits (git's blob ids of the path at each commit): a data change no config key shows."""
    if not repo or len(commits_a) != 1 or len(commits_b) != 1 or commits_a == commits_b:
        return []
    out = []
    for k, v in sorted(a.config.items()):
        if not isinstance(v, str) or b.config.get(k) != v or "/" not in v or v.startswith(("/", "${")):
            continue
        blobs = [git_out(repo, "rev-parse", "--verify", "-q", f"{c}:{v}") for c in (commits_a[0], commits_b[0])]
        ba, bb = ((x or "").strip()[:10] or "absent" for x in blobs)
        if ba == bb == "absent" or ba == bb:
            continue
        out.append({"kind": "data", "field": v, "a": ba, "b": bb,
                    "message": f"data `{v}` (config `{k}`): same path, other content at B's commit "
                               f"(git blob {ba} in A, {bb} in B)"})
    return out


def classify(a: Arm, b: Arm, variable: str | None, repo: str | None = None) -> dict[str, Any]:
    """Every difference between arms ``a`` (control) and ``b``, classified.

    Returns
    -------
    dict
        ``variable`` (key, control and treatment values, ``how``: declared / proposed / none), ``derived``,
        ``confounds`` (each: ``kind``, ``field``, ``a``, ``b``, ``message``; code ones carry ``files``),
        ``missing`` (one line per field some runs lack), ``within`` (fields that differ inside one arm).

    Raises
    ------
    ConfigError
        When ``variable`` is given and the arms do not differ in it.
    """
    diffs = config_differences(a, b)
    if variable is not None and variable not in diffs:
        keys = ", ".join(diffs) or "none"
        raise ConfigError(f"the arms do not differ in {variable!r} (they differ in: {keys})", where="--variable",
                          fix="name a key that differs between the runs" + (f", e.g. --variable {next(iter(diffs))}"
                                                                            if diffs else ""))
    how = "declared" if variable else "none"
    if variable is None:  # proposed: the one key every other difference derives from
        runs_ab = a.runs + b.runs
        fits = [k for k in diffs if all(o == k or _derived(o, *diffs[o], k, diffs[k], runs_ab) for o in diffs)]
        if len(fits) == 1:
            variable, how = fits[0], "proposed"
    derived, confounds = [], []
    for k, (va, vb) in diffs.items():
        if k == variable:
            continue
        why = _derived(k, va, vb, variable, diffs.get(variable) if variable else None, a.runs + b.runs)
        if why:
            derived.append({"key": k, "a": _show(va), "b": _show(vb), "why": why})
            continue
        confounds.append({"kind": "config", "field": k, "a": _show(va), "b": _show(vb),
                          "message": f"config `{k}`: {_show(va)} in A, {_show(vb)} in B"})
    missing, within = [], []
    runs = a.runs + b.runs
    ca, ma = _values(a.runs, lambda r: r.commit)
    cb, mb = _values(b.runs, lambda r: r.commit)
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
    if da and db and set(da) != set(db):
        old, new = str(da[0]), str(db[0])
        inferred = any(r.commit_how.startswith("inferred") for r in runs)
        files = changed_files(repo or next((r.repo for r in runs if r.repo), None), old, new)
        shown = (f"; changed files: {', '.join(files)}" if files else "; the repo is not at hand (--repo DIR lists "
                 "the files changed)" if files is None else "")
        confounds.append({"kind": "code", "field": "commit", "a": old, "b": new, "files": files,
                          "inferred": inferred,
                          "message": f"code commit: {old[:10]} in A, {new[:10]} in B"
                          + (" (inferred from the git history at the runs' start times, not recorded)"
                             if inferred else "") + shown})
    confounds += data_versions(a, b, da, db, repo or next((r.repo for r in runs if r.repo), None))
    for fld, what in CONTEXT.items():
        va, na = _values(a.runs, lambda r, f=fld: r.context.get(f))
        vb, nb = _values(b.runs, lambda r, f=fld: r.context.get(f))
        if fld in MISSING and na + nb:
            missing.append(f"no {MISSING[fld]} recorded for {na + nb} of {len(runs)} runs")
        if not va or not vb:
            continue
        if isinstance(va[0], dict):
            keys = sorted(set().union(*va, *vb))
            for k in keys:
                xa = _distinct([d.get(k) for d in va])
                xb = _distinct([d.get(k) for d in vb])
                if _key(xa) != _key(xb):
                    sa, sb = "/".join(map(str, xa)), "/".join(map(str, xb))
                    confounds.append({"kind": fld, "field": k, "a": sa, "b": sb,
                                      "message": f"{what} `{k}`: {sa} in A, {sb} in B"})
        elif _key(_distinct(va)) != _key(_distinct(vb)):
            sa, sb = "/".join(map(str, _distinct(va))), "/".join(map(str, _distinct(vb)))
            confounds.append({"kind": fld, "field": fld, "a": sa, "b": sb, "message": f"{what}: {sa} in A, {sb} in B"})
    var = None
    if variable is not None:
        va, vb = diffs[variable]
        var = {"key": variable, "a": va if va is not _UNSET else None, "b": vb if vb is not _UNSET else None,
               "how": how}
    return {"variable": var, "how": how, "config_differences": list(diffs), "derived": derived,
            "confounds": confounds, "missing": missing, "within": within}
