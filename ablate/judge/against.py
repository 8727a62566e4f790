"""``ablate verdict DIR --against OTHER_DIR``: what differs between the ablation and a target run.

An ablation is often run on a proxy (less data, a smaller model, an older commit) and its verdict applied
to a target run. This compares the two sweep dirs' pins, as recorded in their ``ablation.yaml`` before
any trial ran: the data hashes, the code commit, the resolved control config and the environment, and
says in the verdict what differs, e.g. "this verdict was obtained on data md5:…; the target uses
md5:… (different data)". Reads both plans only; no trial is touched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ablate.errors import SweepDirError
from ablate.plan.arms import flatten, format_value
from ablate.record.sweepdir import SweepDir

#: Control-config keys that belong to ablate, not to what was trained; left out of the config diff: every
#: top-level setting of ablate_base.yaml (a unit test holds them equal) but ``determinism`` and ``threads``,
#: which change the numbers a run computes, plus the groups ``variable``, ``launcher`` and ``tracker``.
_SKIP_PREFIXES = ("variable", "seeds", "seed", "launcher", "tracker", "hydra", "progress", "plots", "wait", "dry_run",
                  "sweep_dir_mode", "timeout_min", "on_failure", "max_retries", "alpha", "margin", "pairing",
                  "multiplicity", "sequential", "looks", "effect", "futility", "family", "metrics", "allow_dirty",
                  "scale", "curve", "tune")


def _plan(path: str | os.PathLike[str]) -> tuple[str, Mapping[str, Any]]:
    sd = SweepDir.open(path)
    return str(sd.root), sd.plan()


def _short(v: Any) -> str:
    s = format_value(v)
    return s if len(s) <= 60 else s[:57] + "..."


def compare_plans(this: Mapping[str, Any], target: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Differences between two plan records' pins: data, code, control config, environment.

    Parameters
    ----------
    this, target : mapping
        ``ablation.yaml`` contents of the ablation and of the target run.

    Returns
    -------
    list of dict
        ``{kind, field, this, target, message}`` per difference; ``kind`` is ``data``, ``code``, ``config`` or
        ``environment``. Empty when the pins agree.
    """
    out: list[dict[str, Any]] = []
    p1, p2 = this.get("pins") or {}, target.get("pins") or {}
    d1, d2 = p1.get("data") or {}, p2.get("data") or {}
    for path in sorted(set(d1) | set(d2)):
        h1 = (d1.get(path) or {}).get("hash")
        h2 = (d2.get(path) or {}).get("hash")
        if h1 != h2:
            what = "different data" if h1 and h2 else ("data the target does not declare" if h1
                                                          else "data this ablation did not use")
            out.append({"kind": "data", "field": path, "this": h1, "target": h2,
                        "message": f"this verdict was obtained on `{path}` {h1 or '(not used)'}; the target uses "
                                   f"{h2 or '(not declared)'} ({what})"})
    c1, c2 = p1.get("code") or {}, p2.get("code") or {}
    if c1.get("commit") != c2.get("commit"):
        out.append({"kind": "code", "field": "commit", "this": c1.get("commit"), "target": c2.get("commit"),
                    "message": f"this verdict was obtained at commit {str(c1.get('commit'))[:12]}; the target ran "
                               f"{str(c2.get('commit'))[:12]} (different code)"})
    if bool(c1.get("dirty")) != bool(c2.get("dirty")):
        out.append({"kind": "code", "field": "dirty", "this": bool(c1.get("dirty")), "target": bool(c2.get("dirty")),
                    "message": f"the ablation's tree was {'dirty' if c1.get('dirty') else 'clean'}, the target's "
                               f"{'dirty' if c2.get('dirty') else 'clean'}"})
    r1 = flatten(((this.get("arms") or [{}])[0]).get("resolved") or {})
    r2 = flatten(((target.get("arms") or [{}])[0]).get("resolved") or {})
    for k in sorted(set(r1) | set(r2)):
        if k.split(".")[0] in _SKIP_PREFIXES:
            continue
        a, b = r1.get(k, "(absent)"), r2.get(k, "(absent)")
        if a != b:
            out.append({"kind": "config", "field": k, "this": a, "target": b,
                        "message": f"`{k}` is {_short(a)} in this ablation's control and {_short(b)} in the "
                                   "target's"})
    e1, e2 = p1.get("environment") or {}, p2.get("environment") or {}
    for k in ("python", "cuda", "torch"):
        a = e1.get(k) if k != "torch" else (e1.get("packages") or {}).get("torch")
        b = e2.get(k) if k != "torch" else (e2.get("packages") or {}).get("torch")
        if a != b:
            out.append({"kind": "environment", "field": k, "this": a, "target": b,
                        "message": f"{k} {a or 'none'} here, {b or 'none'} in the target"})
    return out


def compare_sweeps(sd: Any, other: str | os.PathLike[str], *, missing_ok: bool = False) -> dict[str, Any]:
    """The ``against`` entry of verdict.json: the target's sweep dir and what differs from this ablation.

    Parameters
    ----------
    sd : SweepDir
        This ablation.
    other : path-like
        The target run's sweep dir.
    missing_ok : bool
        When the target can no longer be read (a remembered ``--against`` whose dir was removed), return
        ``{"target", "error"}`` instead of raising, so the verdict is still written.

    Raises
    ------
    SweepDirError
        When ``other`` is not an ablate sweep dir (the message names it and the fix) and not ``missing_ok``.
    """
    try:
        root, target = _plan(other)
    except SweepDirError as exc:
        if not missing_ok:
            raise
        return {"target": str(other), "error": str(exc), "differences": [], "same": False}
    diffs = compare_plans(sd.plan(), target)
    return {"target": root, "differences": diffs, "same": not diffs}


def against_markdown(v: Mapping[str, Any]) -> list[str]:
    """verdict.md lines for ``--against``: one per difference, or a line saying the pins agree."""
    ag = v.get("against")
    if not ag:
        return []
    L = ["## Against the target run", "", f"Target: `{ag['target']}`.", ""]
    if ag.get("error"):
        L.append(f"Not compared: the target cannot be read ({ag['error']}).")
    elif ag["same"]:
        L.append("The target's data, code, control config and environment match this ablation's pins.")
    for d in ag["differences"]:
        L.append(f"- **{d['kind']}**: {d['message']}")
    return [*L, ""]
