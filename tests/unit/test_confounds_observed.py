"""Fields a trial records only where its process held torch (or imported a distribution) are compared only between
trials that recorded them: a torch-free task run inline from a notebook that imported torch, then extended from a
shell, is no confound; two trials that both recorded torch and differ still are."""

from __future__ import annotations

from typing import Any

import pytest

from ablate.judge.confounds import check, observed_only
from ablate.orchestrate.repro import manifest_differences

PLAN = {"arms": [{"name": "control", "changes": {}}, {"name": "lr=0.2", "changes": {"task.lr": [0.1, 0.2]}}],
        "variable": {"key": "task.lr"}}
FLAGS = {"use_deterministic_algorithms": False, "warn_only": False, "cudnn.deterministic": False,
         "cudnn.benchmark": False}


def manifest(arm: str, seed: int, *, torch: bool, **env: Any) -> dict[str, Any]:
    """A manifest as an ``fn`` trial writes it; with ``torch`` its process held torch (what the trial records then)."""
    m: dict[str, Any] = {
        "code": {"commit": "a" * 40, "state": "clean"}, "data": {},
        "config": {"seed": seed, "task": {"lr": 0.2 if arm != "control" else 0.1}},
        "determinism": {"mode": "seeded", "seed": seed, "threads": 1, "torch_flags": None},
        "environment": {"python": "3.11", "host": "h1", "imported": {"numpy": "2.1"}, **env}}
    if torch:
        m["determinism"].update(torch_flags=dict(FLAGS), flags_after=dict(FLAGS), threads_after=1)
        m["environment"].update(torch_threads=1, cudnn=None)
        m["environment"]["imported"]["torch"] = "2.13.0"
    return m


def _check(manifests: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    return check(PLAN, manifests, list(manifests))


def test_trials_whose_process_held_torch_beside_ones_that_did_not_are_no_confound() -> None:
    # seeds 0-1 from a notebook holding torch, seeds 2-3 added by `ablate extend` from a shell that never imported it
    ms = {(arm, s): manifest(arm, s, torch=s < 2) for arm in ("control", "lr=0.2") for s in range(4)}
    got = _check(ms)
    assert got["findings"] == [] and got["invalid"] is False and got["checked"] == 8


def test_torch_flags_that_differ_where_both_trials_recorded_them_stay_a_confound() -> None:
    ms = {(arm, s): manifest(arm, s, torch=True) for arm in ("control", "lr=0.2") for s in range(3)}
    ms[("lr=0.2", 2)]["determinism"]["flags_after"]["cudnn.benchmark"] = True  # the task turned benchmark on
    got = _check(ms)
    assert [(f["kind"], f["field"], f["severity"]) for f in got["findings"]] == [
        ("determinism", "flags_after.cudnn.benchmark", "invalid")]
    assert got["findings"][0]["split"] == {"control": {"False": 3}, "lr=0.2": {"False": 2, "True": 1}}


def test_a_recorded_null_is_a_value_not_an_absence() -> None:
    # cuDNN null (torch reports none) against a version: two processes that held torch on different machines
    ms = {(arm, s): manifest(arm, s, torch=True) for arm in ("control", "lr=0.2") for s in range(2)}
    for s in range(2):
        ms[("lr=0.2", s)]["environment"]["cudnn"] = 90100
    got = _check(ms)
    assert [(f["kind"], f["field"], f["severity"], f["aligned"]) for f in got["findings"]] == [
        ("environment", "cudnn", "invalid", True)]


def test_other_fields_missing_in_some_trials_still_count_as_null() -> None:
    ms = {(arm, s): manifest(arm, s, torch=False, gpu="A100") for arm in ("control", "lr=0.2") for s in range(2)}
    del ms[("control", 1)]["environment"]["gpu"]
    assert [f["field"] for f in _check(ms)["findings"]] == ["gpu"]


@pytest.mark.parametrize(("field", "expected"), [
    ("determinism:torch_flags.cudnn.benchmark", True), ("determinism:flags_after.warn_only", True),
    ("determinism:threads_after", True), ("environment:torch_threads", True), ("environment:cudnn", True),
    ("environment:gpus", True), ("environment:imported.torch", True),
    ("determinism:threads", False), ("determinism:mode", False), ("environment:gpu", False),
    ("environment:cudnn_version", False), ("config:task.lr", False)])
def test_observed_only_names_the_fields_recorded_from_a_module_the_process_held(field: str, expected: bool) -> None:
    assert observed_only(field) is expected


def test_repro_compares_torch_fields_only_where_both_runs_recorded_them() -> None:
    with_torch, without = manifest("control", 0, torch=True), manifest("control", 0, torch=False)
    assert manifest_differences(with_torch, without) == ([], [])
    flipped = manifest("control", 0, torch=True)
    flipped["determinism"]["flags_after"]["use_deterministic_algorithms"] = True
    diffs, _ = manifest_differences(with_torch, flipped)
    assert diffs == ["determinism `flags_after.use_deterministic_algorithms`: False (original) -> True (re-run)"]
