"""The CSV metric source read with the stdlib ``csv`` module (issue 35, items 9 and 15): a ``step`` cell that is
empty or text never fails the trial, other sources are still tried, and reading a CSV does not import pandas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.metrics import collect, read_csv_file


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("bad", ["", "abc", "1.5", "nan", " ", "epoch-end"])
def test_a_step_cell_that_is_not_an_integer_reads_the_rows_in_order(tmp_path: Path, bad: str) -> None:
    path = _write(tmp_path / "metrics.csv", f"step,val_acc,loss\n10,0.5,2.0\n{bad},0.75,1.0\n30,0.7,\n")
    series = read_csv_file(path)
    # the step column cannot number the rows: every row gets its row number (as a file without `step`)
    assert series == {"val_acc": [(1, 0.5), (2, 0.75), (3, 0.7)], "loss": [(1, 2.0), (2, 1.0)]}
    metrics, rec = collect(tmp_path, [], "val_acc", reduce="max")
    assert metrics == {"val_acc": 0.75, "loss": 2.0} and rec["kind"] == "csv" and rec["step"] == 2


@pytest.mark.parametrize("bad", ["", "text"])
def test_a_csv_without_the_metric_and_a_bad_step_lets_later_sources_answer(tmp_path: Path, bad: str) -> None:
    _write(tmp_path / "work" / "log.csv", f"step,other\n{bad},1\n2,2\n")
    _write(tmp_path / "final.json", json.dumps({"val_acc": 0.91}))
    metrics, rec = collect(tmp_path, ["val_acc: 0.1"], "val_acc")
    assert metrics == {"val_acc": 0.91} and rec["kind"] == "json"


def test_integer_steps_sparse_columns_and_text_columns(tmp_path: Path) -> None:
    # Lightning's CSVLogger: blanks where a row lacks a metric; a text column is not a metric; step/epoch neither
    path = _write(tmp_path / "m.csv", "epoch,step,train/loss,val/acc,note\n0,5,2.0,,a\n0,10,,0.5,b\n"
                                      "1,15,1.0,,c\n1,20,,0.8,NA\n")
    assert read_csv_file(path) == {"train/loss": [(5, 2.0), (15, 1.0)], "val/acc": [(10, 0.5), (20, 0.8)]}
    # a step written as a float (a column with blanks, saved by pandas) still numbers the rows
    path = _write(tmp_path / "f.csv", "step,acc\n1.0,0.25\n2.0,0.5\n")
    assert read_csv_file(path) == {"acc": [(1, 0.25), (2, 0.5)]}


@pytest.mark.parametrize("text", ["", "a,b\n1,2,3\n", "\xff\xfe\x00garbage"])
def test_unreadable_files_give_nothing(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(text.encode("latin-1"))
    assert read_csv_file(path) == {}


def test_reading_a_csv_does_not_import_pandas(tmp_path: Path) -> None:
    path = _write(tmp_path / "metrics.csv", "step,val_acc\n1,0.5\n")
    code = ("import sys; from ablate.metrics import read_csv_file; "
            f"print(read_csv_file(__import__('pathlib').Path({str(path)!r}))); print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["{'val_acc': [(1, 0.5)]}", "False"]
