"""Arm names and value labels (issue 17, item 4): readable for any value, unique, never another value's text."""

from __future__ import annotations

import hashlib
import json

import pytest

from ablate.orchestrate.transfer import child_names
from ablate.record.names import arm_name, safe_name, unique_name, value_hash, value_label


def _names(key: str, values: list) -> list[str]:
    taken: set[str] = set()
    return [arm_name(key, v, taken) for v in values]


def test_hash_is_sha256_of_typed_json() -> None:
    want = hashlib.sha256(json.dumps(["str", "N/A"], ensure_ascii=False).encode()).hexdigest()[:6]
    assert value_hash("N/A") == want
    assert value_hash(1) != value_hash("1")


@pytest.mark.parametrize(("key", "value", "name"), [
    ("task.größe", 3, "größe=3"),                  # unicode key kept (was gr_e=3)
    ("task.prompt", "你好", "prompt=你好"),         # unicode value kept (was prompt=)
    ("task.prompt", "Ωmega", "prompt=Ωmega"),
    ("task.name", "café", "prompt=café".replace("prompt", "name")),
    ("task.optim.lr", 0.1, "lr=0.1"),
    ("model/encoder", "big", "encoder=big"),
    ("task.act", None, "act=null"),
])
def test_safe_values_keep_their_text(key: str, value: object, name: str) -> None:
    assert _names(key, [value]) == [name]


@pytest.mark.parametrize("values", [
    ["N/A", "N_A"], ["N_A", "N/A"], ["a b", "a_b"], ["x\ny", "x_y"], ["A", "a"], ["x" * 90, "x" * 90 + "y"],
    ["", "_"], [" pad", "pad"],
])
def test_values_that_collide_after_clean_up_get_distinct_names(values: list[str]) -> None:
    names = _names("task.v", values)
    assert len({n.casefold() for n in names}) == len(values), names
    for v, n in zip(values, names, strict=True):
        exact = f"v={v}"
        if n != exact:  # a changed text always carries the value's own hash: it never passes for another value
            assert n.endswith("~" + value_hash(v)), (v, n)
        assert len(n) <= 80


def test_changed_text_is_marked_even_without_a_collision() -> None:
    assert _names("task.v", ["N/A"]) == ["v=N_A~" + value_hash("N/A")]
    assert _names("task.v", ["N_A"]) == ["v=N_A"]


def test_control_is_never_a_treatment_name() -> None:
    assert _names("task.x", ["control"])[0] == "x=control"
    assert safe_name("../../etc") == "etc"


@pytest.mark.parametrize(("value", "label"), [
    ("", '""'), (" a", '" a"'), ("a\tb", '"a\\tb"'), ("你好", "你好"), (None, "null"), (True, "true"),
    ([64, 64], "[64, 64]"), (1e-05, "1e-05"),
])
def test_value_label(value: object, label: str) -> None:
    assert value_label(value) == label


@pytest.mark.parametrize("values", [["a/b", "a:b", "a b"], ["Small", "small"], [0.1, "0.1"]])
def test_scale_dirs_of_a_transfer_check_never_collide(values: list[object]) -> None:
    """Scale values whose file-name-safe text (or its case-folded form) collides get distinct sweep dirs."""
    names = child_names("data.name", values)
    assert len({n.casefold() for n in names}) == len(values)
    assert all(n.startswith("name=") for n in names)
    assert child_names("model.width", [64, 128]) == ["width=64", "width=128"]


def test_unique_name_suffixes_a_taken_name_case_insensitively() -> None:
    taken = {"lr=0.1", "LR-lr=0.1"}
    assert unique_name("lr-lr=0.1", taken) == "lr-lr=0.1-2"
    assert unique_name("mom/x", taken) == "mom_x"
    assert {"lr-lr=0.1-2", "mom_x"} <= taken
