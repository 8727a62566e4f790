"""A trial's result.json, its digest added to a record encoded once (:func:`ablate.record.sweepdir.with_digest_json`),
is byte for byte what encoding the record with its digest gives."""

from __future__ import annotations


def test_a_record_encoded_once_with_its_digest_is_what_two_encodings_give() -> None:
    from ablate.record.sweepdir import to_json, with_digest, with_digest_json

    for rec in ({"a": 1}, {"arm": "x", "metrics": {"m": float("nan"), "n": [1, 2]}, "digest": "old", "notes": ["é"]},
                {"x": {}}, {}):
        out, text = with_digest_json(rec)
        assert out == with_digest(rec) and text == to_json(with_digest(rec))


def test_json_without_non_finite_floats_is_encoded_as_it_is_and_with_them_sanitised() -> None:
    import json
    from types import MappingProxyType

    from ablate.record.sweepdir import to_json

    plain = {"a": [1, 2.5, (3, 4)], "b": {"c": None, "d": True}}
    assert to_json(plain) == json.dumps({"a": [1, 2.5, [3, 4]], "b": {"c": None, "d": True}}, indent=2) + "\n"
    assert json.loads(to_json({"m": float("nan"), "l": [float("inf"), -float("inf")]})) == {
        "m": "nan", "l": ["inf", "-inf"]}
    assert json.loads(to_json({"p": MappingProxyType({"x": 1})})) == {"p": {"x": 1}}  # a mapping json lacks


def test_set_environ_leaves_exactly_the_wanted_variables(monkeypatch) -> None:
    import os

    from ablate.trials.isolation import set_environ

    monkeypatch.setenv("I25_KEEP", "1")
    monkeypatch.setenv("I25_CHANGE", "old")
    monkeypatch.setenv("I25_DROP", "x")
    want = {k: v for k, v in os.environ.items() if k != "I25_DROP"} | {"I25_CHANGE": "new", "I25_ADD": "2"}
    set_environ(want)
    assert dict(os.environ) == want
    monkeypatch.delenv("I25_ADD")
