"""Metric sources of an app trial: real files written the way the tools write them, reduced by a declared rule."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.metrics import collect, read_stdout, reduce_series

VAL_ACC = [(10, 0.5), (20, 0.8), (30, 0.7)]


def write_lightning_csv(run: Path) -> Path:
    """metrics.csv as Lightning's CSVLogger writes it: blanks where a row lacks a metric."""
    path = run / "csv" / "version_0" / "metrics.csv"
    path.parent.mkdir(parents=True)
    rows = []
    for i, (step, acc) in enumerate(VAL_ACC):
        rows.append({"epoch": i, "step": step - 5, "train/loss": 2.0 - i, "val/acc": "", "val/loss": ""})
        rows.append({"epoch": i, "step": step, "train/loss": "", "val/acc": acc, "val/loss": 1.0 - acc})
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["epoch", "step", "train/loss", "val/acc", "val/loss"])
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.mark.parametrize(("rule", "value", "step"), [("last", 0.7, 30), ("max", 0.8, 20), ("min", 0.5, 10)])
def test_lightning_csv_reduced_by_rule(tmp_path: Path, rule: str, value: float, step: int) -> None:
    path = write_lightning_csv(tmp_path)
    metrics, rec = collect(tmp_path, [], "val/acc", reduce=rule)
    assert metrics["val/acc"] == value
    assert rec == {"kind": "csv", "path": str(path), "step": step, "reduce": rule, "n_logged": 3,
                   "match": f"row with step {step}: val/acc = {value!r}"}
    # other metrics of the source are reduced by the same rule (val/loss = 1 - acc)
    assert metrics["val/loss"] == pytest.approx({"last": 0.3, "max": 0.5, "min": 0.2}[rule])


def test_tensorboard_events_read_with_tensorboards_reader(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path / "tensorboard" / "version_0"))
    for step, acc in VAL_ACC:
        w.add_scalar("val/acc", acc, step)
    w.close()
    metrics, rec = collect(tmp_path, [], "val/acc", source="tensorboard", reduce="max")
    assert metrics["val/acc"] == pytest.approx(0.8)  # event files store float32
    assert rec["kind"] == "tensorboard" and rec["step"] == 20 and rec["n_logged"] == 3
    last, _ = collect(tmp_path, [], "val/acc", source="auto")
    assert last["val/acc"] == pytest.approx(0.7)


def test_json_and_jsonl_files(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text("".join(json.dumps({"step": s, "val": {"acc": a}}) + "\n"
                                                    for s, a in VAL_ACC))
    metrics, rec = collect(tmp_path, [], "val.acc", reduce="min")
    assert (metrics["val.acc"], rec["kind"], rec["step"]) == (0.5, "json", 10)
    (tmp_path / "history.jsonl").unlink()
    (tmp_path / "final.json").write_text(json.dumps({"val_acc": 0.91, "note": "text is skipped"}))
    metrics, rec = collect(tmp_path, [], "val_acc")
    assert metrics == {"val_acc": 0.91} and rec["path"] == str(tmp_path / "final.json")


def test_stdout_key_value_lines() -> None:
    lines = ["epoch 1 done", "val_acc: 0.5", "loss=1.25e-1", "val_acc = 0.75", "lr: 1e-3 (not alone)", "acc: nan"]
    found = read_stdout(lines)
    assert sorted(found) == ["acc", "loss", "lr", "val_acc"]  # a pair inside a line counts (issue 35, item 6)
    assert found["lr"] == [(5, 1e-3)]
    assert found["val_acc"] == [(2, 0.5), (4, 0.75)] and found["loss"] == [(3, 0.125)]
    assert found["acc"][0][0] == 6 and math.isnan(found["acc"][0][1])
    metrics, rec = collect(Path("/nonexistent"), lines, "val_acc", reduce="last")
    assert metrics["val_acc"] == 0.75 and rec["kind"] == "stdout" and rec["step"] == 4


def test_return_value_comes_first_and_a_scalar_is_the_metric(tmp_path: Path) -> None:
    write_lightning_csv(tmp_path)
    (tmp_path / "ablate_return.json").write_text(json.dumps({"value": 0.66, "type": "float"}))
    metrics, rec = collect(tmp_path, [], "val/acc")
    assert metrics == {"val/acc": 0.66} and rec["kind"] == "return"
    metrics, rec = collect(tmp_path, [], "val/acc", source="csv")  # as configured
    assert metrics["val/acc"] == 0.7 and rec["kind"] == "csv"


def test_missing_metric_lists_what_was_found_and_where(tmp_path: Path) -> None:
    path = write_lightning_csv(tmp_path)
    with pytest.raises(ConfigError) as err:
        collect(tmp_path, ["val_acc: 0.9"], "val_accuracy")
    msg = str(err.value)
    assert f"csv ({path}): train/loss, val/acc, val/loss" in msg and "stdout (None): val_acc" in msg
    assert "`task.metric`" in msg


def test_reduce_skips_nan_for_min_and_max_but_last_keeps_it() -> None:
    series = [(1, 0.2), (2, math.nan), (3, 0.1)]
    assert reduce_series(series, "max") == (0.2, 1)
    assert reduce_series([*series, (4, math.nan)], "last")[1] == 4


def test_a_bool_in_a_metrics_json_stays_a_bool_and_a_string_is_skipped(tmp_path: Path) -> None:
    """Issue 26: a bool an app writes is a 0/1 metric (the trial names it), never dropped; "0.7" is no number."""
    from ablate.trials.trial import bool_metrics, coerce_metrics

    (tmp_path / "metrics.json").write_text(json.dumps({"solved": True, "val_acc": 0.9, "note": "0.7"}))
    metrics, rec = collect(tmp_path, [], "val_acc")
    assert metrics == {"solved": True, "val_acc": 0.9} and type(metrics["solved"]) is bool
    assert rec["kind"] == "json"
    assert coerce_metrics(metrics, "val_acc") == {"solved": 1.0, "val_acc": 0.9}
    assert bool_metrics(metrics) == ["solved"]


NANOGPT_LINES = ["Overriding config with config/small.py:", "step 0: train loss 3.2946, val loss 3.2903",
                 "step 50: train loss 2.9080, val loss 2.8597", "step 100: train loss 2.4262, val loss 2.3418",
                 "saving checkpoint to out"]


def test_printed_lines_by_a_pattern_with_named_groups(tmp_path: Path) -> None:
    from ablate.metrics import compile_patterns

    pats = compile_patterns(r"step (?P<step>\d+): train loss (?P<train_loss>[0-9.]+), val loss (?P<val_loss>[0-9.]+)")
    metrics, rec = collect(tmp_path, NANOGPT_LINES, "val_loss", reduce="min", patterns=pats,
                           stdout_path=tmp_path / "stdout.log")
    assert metrics == {"val_loss": 2.3418, "train_loss": 2.4262}
    assert rec["kind"] == "stdout" and rec["step"] == 100 and rec["n_logged"] == 3 and rec["reduce"] == "min"
    assert rec["match"] == "line 4: step 100: train loss 2.4262, val loss 2.3418"


def test_a_pattern_that_matches_nothing_shows_the_closest_lines(tmp_path: Path) -> None:
    from ablate.metrics import compile_patterns

    pats = compile_patterns(r"val_loss: (?P<val_loss>[0-9.]+)")  # the script prints `val loss 2.3418`
    with pytest.raises(ConfigError) as e:
        collect(tmp_path, NANOGPT_LINES, "val_loss", patterns=pats)
    text = str(e.value)
    assert "closest to the pattern" in text and "line 4: step 100: train loss 2.4262, val loss 2.3418" in text
    assert "Overriding config" not in text  # the lines least like the pattern are left out
    assert e.value.where == "task.metric"


def test_json_source_takes_the_newest_file_holding_the_metric(tmp_path: Path) -> None:
    import os

    (tmp_path / "eval_results.json").write_text(json.dumps({"eval_accuracy": 0.86, "eval_runtime": 0.01}))
    (tmp_path / "train_results.json").write_text(json.dumps({"train_runtime": 1.2}))
    os.utime(tmp_path / "eval_results.json", (1, 1))  # older than train_results.json
    metrics, rec = collect(tmp_path, [], "eval_accuracy", source="json")
    assert metrics == {"eval_accuracy": 0.86, "eval_runtime": 0.01}
    assert rec["path"] == str(tmp_path / "eval_results.json")
