"""The parts of curve verdicts around the statistics (issue 38), in-process: the settings and their refusals, the
series readers (a returned history, ``ablate.log_step``'s file, an x column from a Lightning CSV), curve.json's
downsampling and reading, the sentence, and the transfer check's matched-x comparison."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.judge.curve_options import CURVE_DEFAULTS, parse_curve
from ablate.judge.curves import regions_sentence
from ablate.judge.curves_transfer import transfer_curves
from ablate.metrics.curve import curve_from, history_series, steps_series
from ablate.record.curves import read_curve, write_curve
from ablate.record.sweepdir import TrialPaths
from ablate.trials.curve import record_curve
from ablate.trials.tasks.contract import TaskOutput

BASE = Path(__file__).resolve().parents[2] / "ablate" / "conf" / "ablate_base.yaml"


# -- settings ------------------------------------------------------------------------------------------------
def test_defaults_are_ablate_bases() -> None:
    import yaml

    assert yaml.safe_load(BASE.read_text())["curve"] == CURVE_DEFAULTS


def test_off_is_none_and_on_fills_the_metric() -> None:
    assert parse_curve(None, "val_acc") is None
    assert parse_curve(dict(CURVE_DEFAULTS), "val_acc") is None
    s = parse_curve({**CURVE_DEFAULTS, "enabled": True}, "val_acc")
    assert s == {**CURVE_DEFAULTS, "enabled": True, "metric": "val_acc"}


@pytest.mark.parametrize(("value", "where", "what"), [
    ({"enabled": False, "summary": "auc"}, "curve.enabled", "curve.summary is set but curve verdicts are off"),
    ({"enabled": True, "summary": "median"}, "curve.summary", "must be one of final, auc, time_to"),
    ({"enabled": True, "summary": "time_to"}, "curve.threshold", "curve.summary=time_to needs the value to time"),
    ({"enabled": True, "points": 1}, "curve.points", "must be an integer >= 2"),
    ({"enabled": True, "width": -1.0}, "curve.width", "must be a positive number"),
    ({"enabled": True, "xaxis": "step"}, "curve.xaxis", "unknown curve setting(s) xaxis"),
    ({"enabled": "yes"}, "curve.enabled", "must be true or false"),
])
def test_refusals_name_the_setting(value: dict, where: str, what: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_curve(value, "val_acc")
    assert exc.value.where == where and what in str(exc.value)


# -- where the series comes from -----------------------------------------------------------------------------------
def test_history_as_lists_or_rows() -> None:
    assert history_series({"step": [0, 10], "val_acc": [0.5, 0.7], "note": "x"}) == {"val_acc": [(0, 0.5), (10, 0.7)]}
    assert history_series({"val_acc": [0.5, 0.7]}) == {"val_acc": [(0, 0.5), (1, 0.7)]}  # Keras: index from 0
    assert history_series([{"step": 5, "val_acc": 0.5, "tokens": 100}, {"step": 9, "val_acc": 0.6, "tokens": 180}]) \
        == {"val_acc": [(5, 0.5), (9, 0.6)], "tokens": [(5, 100.0), (9, 180.0)]}


def test_log_step_values_are_read_exactly(tmp_path: Path) -> None:
    p = tmp_path / "steps.jsonl"
    p.write_text("".join(json.dumps({"step": s, "loss": (0.1 * s).hex(), "val_acc": (1 / 3 + s).hex(),
                                     "params": "abc"}) + "\n" for s in range(3)))
    got = steps_series(p)
    assert got["val_acc"] == [(s, 1 / 3 + s) for s in range(3)] and "params" not in got


def test_x_is_another_column_at_the_same_step(tmp_path: Path) -> None:
    series = {"val_loss": [(10, 2.0), (20, 1.5), (30, 1.2)], "tokens": [(10, 1e4), (20, 2e4)]}
    assert curve_from(series, "val_loss", "tokens")[0][:2] == [1e4, 2e4]
    assert math.isnan(curve_from(series, "val_loss", "tokens")[0][2])  # not logged at step 30: dropped later
    assert "no column 'epoch'" in curve_from(series, "val_loss", "epoch")
    # a Lightning CSV: `epoch` is no metric series, read from the file's own column
    csv = tmp_path / "metrics.csv"
    csv.write_text("epoch,step,train_loss,val_loss\n0,9,1.1,\n0,9,,1.0\n1,19,0.9,\n1,19,,0.8\n")
    xs, ys = curve_from({"val_loss": [(9, 1.0), (19, 0.8)]}, "val_loss", "epoch", kind="csv", path=str(csv))
    assert (xs, ys) == ([0.0, 1.0], [1.0, 0.8])
    assert "without steps" in curve_from({"val_loss": [(None, 1.0)]}, "val_loss", "step")


def test_record_curve_off_writes_nothing_and_takes_a_history_out(tmp_path: Path) -> None:
    tp = TrialPaths(tmp_path)
    out = record_curve(tp, {"options": {}, "metric": "acc"}, {"acc": 0.9, "history": {"acc": [0.1, 0.9]}})
    assert out == {"acc": 0.9} and not tp.curve.exists()
    plan = {"options": {"curve": {"enabled": True, "metric": "acc", "x": "step"}}, "metric": "acc"}
    out = record_curve(tp, plan, TaskOutput(metrics={"acc": 0.9, "history": [{"acc": 0.1}, {"acc": 0.9}]}))
    assert out.metrics == {"acc": 0.9}
    assert read_curve(tp.curve)["source"] == "history"


def test_a_trial_without_a_curve_records_why(tmp_path: Path) -> None:
    tp = TrialPaths(tmp_path)
    plan = {"options": {"curve": {"enabled": True, "metric": "acc", "x": "step"}}, "metric": "acc"}
    record_curve(tp, plan, {"acc": 0.9})
    rec = read_curve(tp.curve)
    assert rec["error"].startswith("no curve of 'acc' against 'step': ") and "ablate.log_step" in rec["error"]


def test_curve_json_downsamples_above_2000_points_keeping_logged_values(tmp_path: Path) -> None:
    path = tmp_path / "curve.json"
    xs = list(range(5001))
    write_curve(path, {"metric": "m", "x": "step"}, xs, [float(x) * 2 for x in xs])
    rec = read_curve(path)
    assert rec["n_logged"] == 5001 and rec["stride"] == 3
    assert rec["xs"][:3].tolist() == [0, 3, 6] and rec["xs"][-1] == 5000 and len(rec["xs"]) == 1668
    assert rec["ys"].tolist() == [x * 2 for x in rec["xs"]]
    write_curve(path, {"metric": "m", "x": "step"}, [0, 1], [float("nan"), 1.0])
    assert math.isnan(read_curve(path)["ys"][0])
    path.write_text('{"xs": [1, 2], "ys": [1]}')
    assert read_curve(path) == {"error": "curve.json has no xs/ys lists of one length"}


# -- reading it --------------------------------------------------------------------------------------------------
def R(word: str, a: float, b: float, n: int) -> dict:
    return {"word": word, "from": a, "to": b, "points": n}


def test_sentence_merges_short_gaps_and_says_how_many_points() -> None:
    assert regions_sentence([R("indistinguishable", 0, 0, 1), R("better", 10, 170, 17),
                             R("indistinguishable", 180, 600, 43)], "step") == \
        "indistinguishable at step 0; better from 10 to 170; indistinguishable after"
    regions = [R("worse", 15, 371, 72), R("indistinguishable", 377, 377, 1), R("worse", 382, 387, 2),
               R("indistinguishable", 392, 600, 40)]
    assert regions_sentence(regions, "step") == \
        "worse between step 15 and 387 (74 of 75 points); indistinguishable after"
    assert regions_sentence(regions, "step", gap=0).startswith("worse from step 15 to 371; indistinguishable at 377")
    assert regions_sentence([R("better", 0, 1200, 100)], "tokens") == "better everywhere (tokens 0 to 1,200)"


def test_transfer_flags_better_at_one_scale_worse_at_another_at_matched_x() -> None:
    def verdict(regions: list[dict], x: list[float]) -> dict:
        return {"curves": {"x": "step", "comparisons": [{"arm": "a", "sentence": "s", "regions": regions, "x": x}]}}

    small = verdict([R("better", 0, 40, 5), R("indistinguishable", 50, 100, 6)], [float(v) for v in range(0, 110, 10)])
    large = verdict([R("worse", 0, 20, 3), R("indistinguishable", 30, 200, 18)], [float(v) for v in range(0, 210, 10)])
    (r,) = transfer_curves([32, 512], [small, large])["results"]
    assert r["matched"] == [0.0, 100.0] and r["contradictions"] == [[0.0, 20.0]]
    assert r["flag"] == "flips along the curve"
    assert transfer_curves([32, 512], [small, {"curves": None}]) is None
