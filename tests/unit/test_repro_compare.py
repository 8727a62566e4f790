"""The pure parts of the reproducibility check and of the determinism confound rules."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from ablate.judge.confounds import check
from ablate.orchestrate.repro import compare_metrics, first_divergence, is_timing_metric


@pytest.mark.parametrize(("name", "timing"), [
    ("samples_per_s", True), ("samples_per_cpu_s", True), ("epoch_time", True), ("train_s", True),
    ("step_ms", True), ("val_loss", False), ("val_acc", False), ("n_params", False), ("loss_s2", False),
])
def test_timing_metrics_are_named_by_their_unit(name: str, timing: bool) -> None:
    assert is_timing_metric(name) is timing


def test_metrics_compared_bitwise() -> None:
    checks = {c.name: c for c in compare_metrics(
        {"val_acc": 0.9611111283302307, "val_loss": 0.1, "zero": 0.0, "nan": "nan", "samples_per_s": 1200.0},
        {"val_acc": 0.9611111283302307, "val_loss": 0.1 + 2**-56, "zero": -0.0, "nan": "nan", "samples_per_s": 900.0,
         "extra": 1.0},
    )}
    assert checks["val_acc"].equal
    assert not checks["val_loss"].equal  # one unit in the last place is a difference
    assert not checks["zero"].equal  # 0.0 and -0.0 differ in their bits
    assert checks["nan"].equal and math.isnan(checks["nan"].original)  # type: ignore[arg-type]
    assert checks["samples_per_s"].timing and not checks["samples_per_s"].equal
    assert checks["extra"].original is None and not checks["extra"].equal


def _steps(n: int, *, change_at: int | None = None, field: str = "params") -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        rec = {"step": i * 10, "loss": (1.0 / (i + 1)).hex(), "params": f"{i:064x}"}
        if change_at is not None and i >= change_at:
            rec[field] = "f" * 64 if field == "params" else (2.0 / (i + 1)).hex()
        out.append(rec)
    return out


def test_first_divergence_names_the_step_and_fields() -> None:
    assert first_divergence(_steps(5), _steps(5)) is None
    d = first_divergence(_steps(5), _steps(5, change_at=3))
    assert d is not None and (d.index, d.step) == (3, 30) and list(d.fields) == ["params"]
    d = first_divergence(_steps(5), _steps(5, change_at=0, field="loss"))
    assert d is not None and (d.index, d.step) == (0, 0) and d.fields["loss"] == ((1.0).hex(), (2.0).hex())


def test_first_divergence_when_one_run_logged_fewer_steps() -> None:
    d = first_divergence(_steps(5), _steps(3))
    assert d is not None and (d.index, d.step) == (3, 30)
    assert d.fields["params"] == (f"{3:064x}", None)


# -- confounds: the determinism mode ---------------------------------------------------------------
def _manifest(mode: str, seed: int, *, configured: str | None = None, benchmark: bool = False) -> dict[str, Any]:
    """A manifest as run_trial writes it (the fields the confound check reads)."""
    flags = {"use_deterministic_algorithms": mode == "strict", "warn_only": False,
             "cudnn.deterministic": mode == "strict", "cudnn.benchmark": False}
    env = {"PYTHONHASHSEED": str(seed)} | ({"CUBLAS_WORKSPACE_CONFIG": ":4096:8"} if mode == "strict" else {})
    return {"code": {"commit": "abc", "state": "clean"}, "data": {},
            "config": {"seed": seed, "determinism": configured or mode, "task": {"lr": 0.1}},
            "determinism": {"mode": mode, "torch_flags": flags, "flags_after": {**flags, "cudnn.benchmark": benchmark}},
            "environment": {"python": "3.11.7", "env": env}}


def _plan(variable_key: str, treatment: str) -> dict[str, Any]:
    changes = {"determinism": ["seeded", treatment]} if variable_key == "determinism" else {"task.lr": [0.1, 0.2]}
    return {"variable": {"key": variable_key}, "arms": [{"name": "control", "changes": {}},
                                                        {"name": "treat", "changes": changes}]}


def test_mode_as_the_variable_is_the_treatment_not_a_confound() -> None:
    manifests = {("control", s): _manifest("seeded", s) for s in (0, 1)}
    manifests |= {("treat", s): _manifest("strict", s) for s in (0, 1)}
    res = check(_plan("determinism", "strict"), manifests, manifests)
    assert res["findings"] == [] and res["invalid"] is False


def test_mode_differing_within_an_arm_is_flagged_even_when_it_is_the_variable() -> None:
    manifests = {("control", 0): _manifest("seeded", 0), ("control", 1): _manifest("off", 1, configured="seeded")}
    manifests |= {("treat", s): _manifest("strict", s) for s in (0, 1)}
    res = check(_plan("determinism", "strict"), manifests, manifests)
    assert res["invalid"] is True
    messages = [f["message"] for f in res["findings"]]
    assert any("not the arm's own value" in m and "control: off (configured seeded) (1)" in m for m in messages)


def test_mode_mismatch_between_arms_is_flagged_when_not_the_variable() -> None:
    manifests = {("control", s): _manifest("seeded", s) for s in (0, 1)}
    manifests |= {("treat", s): _manifest("strict", s, configured="seeded") for s in (0, 1)}
    res = check(_plan("task.lr", ""), manifests, manifests)
    assert res["invalid"] is True
    by_field = {f["field"]: f for f in res["findings"]}
    assert by_field["mode"]["kind"] == "determinism" and by_field["mode"]["aligned"] is True
    assert by_field["mode"]["split"] == {"control": {"seeded": 2}, "treat": {"strict": 2}}
    assert by_field["env.CUBLAS_WORKSPACE_CONFIG"]["severity"] == "invalid"


def test_task_that_flips_a_determinism_flag_in_one_arm_is_flagged() -> None:
    manifests = {("control", s): _manifest("seeded", s) for s in (0, 1)}
    manifests |= {("treat", s): _manifest("seeded", s, benchmark=True) for s in (0, 1)}
    res = check(_plan("task.lr", ""), copy.deepcopy(manifests), manifests)
    (finding,) = res["findings"]
    assert finding["field"] == "flags_after.cudnn.benchmark" and finding["severity"] == "invalid"
