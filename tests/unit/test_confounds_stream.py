"""The confound check reads manifests in one pass and keeps counts only (issue 15): its findings are
those of the per-trial algorithm it replaced (kept here as the reference), for several kinds of input."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

from ablate.judge.confounds import MODE_KEY, _fingerprint, _hashable, _mode_derived, _show, check


def reference(plan: dict, manifests: dict, used: list) -> dict[str, Any]:
    """The previous implementation: every used trial's fingerprint held, then compared field by field."""
    vary: set[str] = set()
    for arm in plan["arms"]:
        vary |= set((arm.get("changes") or {}).keys())
    mode_is_variable = MODE_KEY in vary
    per_trial = {ref: _fingerprint(m, vary) for ref, m in manifests.items() if ref in set(used)}
    findings = []
    arm_order = [a["name"] for a in plan["arms"]]
    wrong: dict[str, Counter] = defaultdict(Counter)
    if mode_is_variable:
        for (arm, _s), m in manifests.items():
            configured, applied = (m.get("config") or {}).get(MODE_KEY), (m.get("determinism") or {}).get("mode")
            if configured is not None and applied != configured:
                wrong[arm][f"{applied} (configured {configured})"] += 1
    if wrong:
        findings.append(("determinism", "mode", "invalid", {a: dict(wrong[a]) for a in arm_order if a in wrong}))
    for f in sorted({f for fp in per_trial.values() for f in fp}):
        values = {ref: _hashable(fp.get(f)) for ref, fp in per_trial.items()}
        if len(set(values.values())) <= 1:
            continue
        kind, key = f.split(":", 1)
        split: dict[str, Counter] = defaultdict(Counter)
        for (arm, _s), v in values.items():
            split[arm][v] += 1
        single = all(len(c) == 1 for c in split.values())
        if mode_is_variable and single and _mode_derived(f):
            continue
        aligned = single and len({next(iter(c)) for c in split.values()}) > 1
        severity = "invalid" if kind != "environment" or aligned else "warning"
        findings.append((kind, key, severity, {a: {_show(v): n for v, n in split[a].items()}
                                               for a in arm_order if a in split}))
    missing = [r for r in used if r not in manifests]
    return {"checked": len(per_trial), "complete": not missing, "findings": findings,
            "dirty": any(str((m.get("code") or {}).get("state", "")).startswith("dirty") for m in manifests.values())}


def manifest(seed: int, **over: Any) -> dict[str, Any]:
    m = {"code": {"commit": "a" * 40, "state": "clean"}, "data": {"d.npz": {"hash": "md5:1"}},
         "config": {"seed": seed, "task": {"lr": 0.1, "epochs": 2}, MODE_KEY: "seeded"},
         "determinism": {"mode": "seeded"},
         "environment": {"python": "3.11", "host": "h1", "env": {"OMP_NUM_THREADS": "1"}}}
    for path, v in over.items():
        *head, last = path.split("__")
        d = m
        for k in head:
            d = d.setdefault(k, {})
        if v is None:
            d.pop(last, None)
        else:
            d[last] = v
    return m


PLAN = {"arms": [{"name": "control", "changes": {}}, {"name": "lr=0.2", "changes": {"task.lr": [0.1, 0.2]}}],
        "variable": {"key": "task.lr"}}
MODE_PLAN = {"arms": [{"name": "control", "changes": {}},
                      {"name": "determinism=strict", "changes": {MODE_KEY: ["seeded", "strict"]}}],
             "variable": {"key": MODE_KEY}}


def _cases() -> dict[str, tuple[dict, dict]]:
    def arms(ctrl, treat):
        out = {("control", s): ctrl(s) for s in range(4)}
        out.update({("lr=0.2", s): treat(s) for s in range(4)})
        return out

    return {
        "clean": (PLAN, arms(manifest, lambda s: manifest(s, config__task__lr=0.2))),
        "host-aligned": (PLAN, arms(manifest, lambda s: manifest(s, config__task__lr=0.2, environment__host="h2"))),
        "host-spread": (PLAN, arms(lambda s: manifest(s, environment__host=f"h{s % 2}"),
                                   lambda s: manifest(s, config__task__lr=0.2, environment__host=f"h{s % 2}"))),
        "config-differs-within-arm": (PLAN, arms(lambda s: manifest(s, config__task__epochs=2 + (s == 3)),
                                                 lambda s: manifest(s, config__task__lr=0.2))),
        "field-missing-first-and-later": (PLAN, arms(
            lambda s: manifest(s, environment__gpu=None if s in (0, 2) else "A100"),
            lambda s: manifest(s, config__task__lr=0.2, environment__gpu="A100"))),
        "field-only-in-one-arm": (PLAN, arms(manifest, lambda s: manifest(s, config__task__lr=0.2,
                                                                         environment__cpu="EPYC 7763"))),
        "dirty-and-data": (PLAN, arms(lambda s: manifest(s, code__state="dirty: x.py" if s == 1 else "clean"),
                                      lambda s: manifest(s, config__task__lr=0.2, data={"d.npz": {"hash": "md5:2"}}))),
        "per-trial-by-design": (PLAN, arms(  # seed, hash seed, torch_error differ per trial: not confounds
            lambda s: manifest(s, environment__env__PYTHONHASHSEED=str(s), determinism__seed=s,
                               environment__torch_error=f"err {s}"),
            lambda s: manifest(s, config__task__lr=0.2, environment__env__PYTHONHASHSEED=str(s),
                               environment__env__OMP_NUM_THREADS=str(1 + s % 2)))),
        "mode-is-variable": (MODE_PLAN, {
            **{("control", s): manifest(s) for s in range(3)},
            **{("determinism=strict", s): manifest(s, config__determinism="strict",
                                                   determinism__mode="strict" if s else "seeded",
                                                   environment__env__CUBLAS_WORKSPACE_CONFIG=":4096:8")
               for s in range(3)}}),
    }


@pytest.mark.parametrize("case", sorted(_cases()))
def test_streamed_check_matches_the_per_trial_algorithm(case: str) -> None:
    plan, manifests = _cases()[case]
    refs = list(manifests)
    used = [r for r in refs if r[1] != 3] + [("control", 9)]  # a failed trial left out, one without a manifest
    got = check(plan, ((r, manifests[r]) for r in refs), used)  # a generator: one pass
    ref = reference(plan, manifests, used)
    assert [(f["kind"], f["field"], f["severity"], f["split"]) for f in got["findings"]] == ref["findings"]
    assert (got["checked"], got["complete"], got["dirty"]) == (ref["checked"], ref["complete"], ref["dirty"])
    assert got["missing"] == ["control/seed=9"]


def test_streamed_check_finds_what_it_should() -> None:
    """Hand-checked expectations, independent of the reference above."""
    plan, manifests = _cases()["host-aligned"]
    got = check(plan, manifests, list(manifests))
    (f,) = got["findings"]
    assert (f["kind"], f["field"], f["severity"], f["aligned"]) == ("environment", "host", "invalid", True)
    assert f["split"] == {"control": {"h1": 4}, "lr=0.2": {"h2": 4}}
    plan, manifests = _cases()["field-missing-first-and-later"]
    (f,) = check(plan, manifests, list(manifests))["findings"]
    assert f["split"] == {"control": {"null": 2, "A100": 2}, "lr=0.2": {"A100": 4}} and f["severity"] == "warning"
