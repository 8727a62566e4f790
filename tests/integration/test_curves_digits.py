"""Curve verdict of the digits example (issue 38): its per-epoch validation curve, logged with
``ablate.log_step(epoch, ..., val_acc=..., val_loss=...)`` (examples/digits/task.py), compared epoch by epoch.
One real ablation (6 seeds, 8 epochs, one treatment), several checks on it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ablate.record.sweepdir import SweepDir
from tests.helpers import ablate_cli, only_sweep, results

pytestmark = pytest.mark.slow
EPOCHS = 8


@pytest.fixture(scope="module")
def sweep(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    proj = tmp_path_factory.mktemp("curves_digits") / "proj"
    shutil.copytree(project_template, proj, symlinks=True)
    res = ablate_cli(proj, "-m", "variable=lr", "variable.values=[0.005]", "seeds=6", f"task.epochs={EPOCHS}",
                     "curve.enabled=true", "curve.threshold=0.9", "curve.summary=time_to", "plots=true", timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    sd = only_sweep(proj)
    lock = SweepDir(sd)  # wait for the detached plot drawer
    lock.acquire()
    lock.release()
    return sd


def test_per_epoch_values_equal_the_trials_own_log(sweep: Path) -> None:
    v = json.loads((sweep / "verdict.json").read_text())
    (cc,) = v["curves"]["comparisons"]
    assert v["curves"]["metric"] == "val_acc" and cc["paired"]  # a fn task under determinism=seeded
    assert cc["x"] == [float(e) for e in range(EPOCHS)] and cc["grid"]["rule"] == "shared"
    for (arm, seed), r in results(sweep).items():
        t = sweep / "trials" / arm / f"seed={seed}"
        steps = [json.loads(line) for line in (t / "steps.jsonl").read_text().splitlines()]
        rec = json.loads((t / "curve.json").read_text())
        assert rec["source"] == "log_step"
        assert rec["ys"] == [float.fromhex(s["val_acc"]) for s in steps]
        assert rec["ys"][-1] == r["metrics"]["val_acc"]  # the last epoch's value is the returned final metric


def test_the_final_value_agrees_with_the_final_verdict(sweep: Path) -> None:
    v = json.loads((sweep / "verdict.json").read_text())
    (comp,) = v["comparisons"]
    (cc,) = v["curves"]["comparisons"]
    final = cc["summaries"]["final"]
    assert final["agrees"] and final["verdict"] == comp["verdict"]
    assert final["diff"] == pytest.approx(comp["diff_raw"], rel=1e-12)
    assert cc["summaries"]["time_to"]["threshold"] == 0.9
    md = (sweep / "verdict.md").read_text()
    assert "## Curves" in md and "time to 0.9 Δ [CI]" in md
    assert (sweep / "verdict_curve_lr=0.005.png").stat().st_size > 1000
