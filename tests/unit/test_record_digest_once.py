"""A trial's result.json, its digest added to a record encoded once (:func:`ablate.record.sweepdir.with_digest_json`),
is byte for byte what encoding the record with its digest gives."""

from __future__ import annotations


def test_a_record_encoded_once_with_its_digest_is_what_two_encodings_give() -> None:
    from ablate.record.sweepdir import to_json, with_digest, with_digest_json

    for rec in ({"a": 1}, {"arm": "x", "metrics": {"m": float("nan"), "n": [1, 2]}, "digest": "old", "notes": ["é"]},
                {"x": {}}, {}):
        out, text = with_digest_json(rec)
        assert out == with_digest(rec) and text == to_json(with_digest(rec))
