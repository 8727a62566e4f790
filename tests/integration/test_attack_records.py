"""Sweep-dir records are data (the 2026-12-03 attack): a trial's ``result.json`` or ``manifest.json`` that is JSON
but not a trial record (an array, ``metrics`` that is no object) or not UTF-8 is read as an unreadable record, like
a truncated one: that trial counts as not finished (never as a result), ``ablate verdict`` says so and names
``ablate resume``; it never ends in a traceback. Synthetic sweep dirs (:func:`tests.helpers.make_sweep`), ablate's
CLI entry called in this process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_in, make_sweep

VALUES = {"control": [0.80, 0.81, 0.82, 0.83], "lr=0.1": [0.85, 0.86, 0.87, 0.88]}


@pytest.mark.parametrize(("name", "body"), [
    ("array", b"[]"),
    ("number", b"0.9"),
    ("metrics-list", json.dumps({"arm": "control", "seed": 1, "status": "ok", "metrics": [0.9]}).encode()),
    ("metrics-text", json.dumps({"arm": "control", "seed": 1, "status": "ok", "metrics": "0.9"}).encode()),
    ("not-utf8", b'{"arm": "control", "seed": 1, "status": "ok", "host": "\xff\xfe", "metrics": {"val_acc": 0.9}}'),
])
def test_a_result_that_is_no_record_counts_as_not_finished(tmp_path: Path, name: str, body: bytes) -> None:
    sd = make_sweep(tmp_path / "sd", VALUES)
    (sd / "trials" / "control" / "seed=1" / "result.json").write_bytes(body)
    res = ablate_in(tmp_path, "verdict", str(sd))
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    md = (sd / "verdict.md").read_text()
    assert f"Next: `ablate resume {sd}` (1 planned trial(s) have not finished)" in md, md[:600]
    rows = [ln.split(",") for ln in (sd / "results.csv").read_text().splitlines()]
    (row,) = [r for r in rows if r[:3] == ["control", "0.05", "1"]]
    assert row[3] == "running" and "0.9" not in ",".join(row)  # never its value: the record is not read
    v = json.loads((sd / "verdict.json").read_text())
    assert v["comparisons"][0]["n_control"] == 3


@pytest.mark.parametrize("body", [b"[]", b"\xff", b"7"])
def test_a_manifest_that_is_no_record_is_no_traceback(tmp_path: Path, body: bytes) -> None:
    sd = make_sweep(tmp_path / "sd", VALUES)
    (sd / "trials" / "lr=0.1" / "seed=2" / "manifest.json").write_bytes(body)
    res = ablate_in(tmp_path, "verdict", str(sd))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
