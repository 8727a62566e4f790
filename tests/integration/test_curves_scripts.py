"""Curve verdicts on script tasks (issue 38): an ``app`` task whose curve is its Lightning ``metrics.csv``
(tests/fixtures/lit_app, ablated as it is: it returns its final val/acc and logs the curve to its CSVLogger), and a
``command`` task whose printed ``step N: ... val loss X`` lines give the curve. Each curve verdict's per-step
values are checked against the trial's own log, parsed here with the csv / re modules.

One ablation per form (module-scoped fixtures), several tests on each.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from ablate.record.sweepdir import SweepDir
from tests.helpers import REPO, ablate_cli, ablate_in, commit_all, results

pytestmark = pytest.mark.slow
FIXTURES = REPO / "tests" / "fixtures"
LIT_TASK = {"app": "src/train.py",
            "overrides": ["trainer=cpu", "trainer.max_epochs=5", "+trainer.limit_train_batches=4",
                          "trainer.log_every_n_steps=2"],
            "metric": "val/acc", "goal": "maximize", "data": ["data/digits.npz"]}
SCRIPT = '''
"""A plain training script: --lr and --seed, printing its losses every 10 steps."""
import argparse
import math
import random

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--seed", type=int, default=0)
a = p.parse_args()
rng = random.Random(a.seed)
for step in range(0, 210, 10):
    val = 1.0 + 2.0 * math.exp(-a.lr * step) + rng.gauss(0.0, 0.02)
    print(f"step {step}: train loss {val + 0.1:.6f} val loss {val:.6f} lr {a.lr}")
'''
PATTERN = r"step (?P<step>\d+): train loss (?P<train_loss>[-+0-9.eE]+) val loss (?P<val_loss>[-+0-9.eE]+)"
CMD_TASK = {"command": "python script.py", "args": "--key value", "params": {"lr": 0.02}, "seed_key": "seed",
            "metric_pattern": PATTERN, "metric": "val_loss", "goal": "minimize"}


def _wait(sd: Path) -> Path:
    lock = SweepDir(sd)  # the PNGs are drawn by a detached process holding the lock: wait for it
    lock.acquire()
    lock.release()
    return sd


def _sweep(root: Path, *args: str) -> Path:
    before = set(root.glob("outputs/ablate/*/*"))
    res = ablate_cli(root, "-m", "curve.enabled=true", *args, timeout=600)
    assert res.returncode == 0, f"{args}\n{res.stdout}\n{res.stderr}"
    (new,) = set(root.glob("outputs/ablate/*/*")) - before
    return _wait(new)


@pytest.fixture(scope="module")
def proj(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("curves_scripts") / "proj"
    shutil.copytree(project_template, dest, symlinks=True)
    for part in ("src", "configs"):
        shutil.copytree(FIXTURES / "lit_app" / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "script.py").write_text(SCRIPT)
    for name, task in (("lit", LIT_TASK), ("printed", CMD_TASK)):
        (dest / "conf" / "task" / f"{name}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    for name, var in (("lit_lr", {"key": "model.optimizer.lr", "values": [0.5]}),
                      ("cmd_lr", {"key": "task.params.lr", "values": [0.05]})):
        (dest / "conf" / "variable" / f"{name}.yaml").write_text(yaml.safe_dump(var))
    commit_all(dest, "an app with a Lightning CSV log, a script printing its losses")
    return dest


@pytest.fixture(scope="module")
def app_sweep(proj: Path) -> Path:
    return _sweep(proj, "task=lit", "variable=lit_lr", "seeds=4", "launcher.max_parallel=2", "curve.x=epoch")


@pytest.fixture(scope="module")
def cmd_sweep(proj: Path) -> Path:
    return _sweep(proj, "task=printed", "variable=cmd_lr", "seeds=4", "launcher=local", "plots=true")  # PNG read


def _csv_rows(path: Path, column: str) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if r[column]]


def test_app_curve_is_its_lightning_csv_against_epoch(app_sweep: Path) -> None:
    v = json.loads((app_sweep / "verdict.json").read_text())
    (cc,) = v["curves"]["comparisons"]
    assert v["curves"]["x"] == "epoch" and not cc["paired"]  # an app task: Welch, relabelling seeds
    assert cc["grid"]["rule"] == "shared" and cc["x"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    own: dict[str, list[list[float]]] = {"control": [], "lr=0.5": []}
    for arm in own:
        for seed in (1, 2, 3, 4):
            t = app_sweep / "trials" / arm / f"seed={seed}"
            (metrics_csv,) = (t / "run").glob("csv/version_0/metrics.csv")
            rows = _csv_rows(metrics_csv, "val/acc")
            rec = json.loads((t / "curve.json").read_text())
            assert rec["source"] == "csv" and rec["path"] == str(metrics_csv)  # the app returned only the last
            assert rec["xs"] == [float(r["epoch"]) for r in rows] == [0.0, 1.0, 2.0, 3.0, 4.0]
            assert rec["ys"] == [float(r["val/acc"]) for r in rows]
            assert rec["ys"][-1] == results(app_sweep)[arm, seed]["metrics"]["val/acc"]
            own[arm].append(rec["ys"])
    for arm, key in (("control", "mean_control"), ("lr=0.5", "mean_treatment")):
        assert cc[key] == pytest.approx([sum(c) / 4 for c in zip(*own[arm], strict=True)], rel=1e-12)
    assert cc["summaries"]["final"]["agrees"]
    assert cc["n_permutations"] == 70 and cc["exact"]  # C(8, 4) relabellings


def test_command_curve_is_its_printed_lines(cmd_sweep: Path) -> None:
    v = json.loads((cmd_sweep / "verdict.json").read_text())
    (cc,) = v["curves"]["comparisons"]
    assert cc["x"] == [float(s) for s in range(0, 210, 10)]
    for (arm, seed), r in results(cmd_sweep).items():
        t = cmd_sweep / "trials" / arm / f"seed={seed}"
        printed = [m for m in map(re.compile(PATTERN).search, (t / "stdout.log").read_text().splitlines()) if m]
        rec = json.loads((t / "curve.json").read_text())
        assert rec["source"] == "stdout" and rec["path"] == str(t / "stdout.log")
        assert rec["xs"] == [float(m["step"]) for m in printed]
        assert rec["ys"] == [float(m["val_loss"]) for m in printed]
        assert r["metrics"]["val_loss"] == rec["ys"][-1]
    # lr 0.05 decays faster than 0.02: lower loss early, the same plateau later
    assert cc["regions"][0] == {"word": "indistinguishable", "from": 0.0, "to": 0.0, "points": 1}
    assert cc["regions"][1]["word"] == "better"
    md = (cmd_sweep / "verdict.md").read_text()
    assert "## Curves" in md and "](verdict_curve_lr=0.05.png)" in md


def _copy(sd: Path, tmp_path: Path) -> Path:
    """The sweep dir copied elsewhere (the module's own stays as it ran; a moved sweep dir is read as well)."""
    dest = tmp_path / "moved" / sd.name
    shutil.copytree(sd, dest, symlinks=True)
    return dest


def test_command_curve_after_the_run_is_read_from_its_printed_lines(cmd_sweep: Path, tmp_path: Path) -> None:
    """`ablate verdict DIR --curve metric=train_loss`: no trial recorded that curve, its stdout.log has it."""
    sd = _copy(cmd_sweep, tmp_path)
    res = ablate_in(tmp_path, "verdict", str(sd), "--curve", "metric=train_loss", "--no-plots")
    assert res.returncode == 0, res.stderr
    cv = json.loads((sd / "verdict.json").read_text())["curves"]
    assert cv["metric"] == "train_loss" and cv["asked"] == "after the run" and cv["sources"] == {"stdout": 8}
    (cc,) = cv["comparisons"]
    assert cc["x"] == [float(s) for s in range(0, 210, 10)]
    own: dict[str, list[list[float]]] = {"control": [], "lr=0.05": []}
    for arm in own:
        for seed in range(1, 5):
            printed = (sd / "trials" / arm / f"seed={seed}" / "stdout.log").read_text().splitlines()
            own[arm].append([float(m["train_loss"]) for m in map(re.compile(PATTERN).search, printed) if m])
    for arm, key in (("control", "mean_control"), ("lr=0.05", "mean_treatment")):
        assert cc[key] == pytest.approx([sum(c) / 4 for c in zip(*own[arm], strict=True)], rel=1e-12)
    assert "final" not in cc["summaries"]  # the final verdict's metric is val_loss: no final value of this curve
    assert cc["regions"][1]["word"] == "better"


def test_app_curve_after_the_run_against_another_x_is_read_from_its_csv(app_sweep: Path, tmp_path: Path) -> None:
    """`--curve x=step` on an ablation whose curve.json holds epochs: the Lightning CSV is read again."""
    sd = _copy(app_sweep, tmp_path)
    res = ablate_in(tmp_path, "verdict", str(sd), "--curve", "x=step", "--no-plots")
    assert res.returncode == 0, res.stderr
    cv = json.loads((sd / "verdict.json").read_text())["curves"]
    assert cv["x"] == "step" and cv["sources"] == {"csv": 8}
    (cc,) = cv["comparisons"]
    own: dict[str, list[list[float]]] = {"control": [], "lr=0.5": []}
    for arm in own:
        for seed in (1, 2, 3, 4):
            (metrics_csv,) = (sd / "trials" / arm / f"seed={seed}" / "run").glob("csv/version_0/metrics.csv")
            rows = _csv_rows(metrics_csv, "val/acc")
            assert cc["x"] == [float(r["step"]) for r in rows]
            own[arm].append([float(r["val/acc"]) for r in rows])
    for arm, key in (("control", "mean_control"), ("lr=0.5", "mean_treatment")):
        assert cc[key] == pytest.approx([sum(c) / 4 for c in zip(*own[arm], strict=True)], rel=1e-12)
    assert cc["summaries"]["final"]["agrees"]
