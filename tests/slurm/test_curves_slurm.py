"""Curve verdicts under launcher=slurm (issue 38): a command task whose printed ``step N: ... val loss X`` lines give
the curve (tests/integration/test_curves_scripts.py), one trial per job and packed (warm): each trial's curve.json is
its own printed lines, and the verdict has its curves; a curve asked for after the run (``ablate verdict DIR --curve
metric=train_loss``) is read from each trial's own stdout.log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, commit_all, results
from tests.integration.test_curves_scripts import CMD_TASK, PATTERN, SCRIPT
from tests.slurm.helpers import sweep_dir

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("launcher", [("launcher=slurm",), ("launcher=slurm", "launcher.trials_per_job=3")],
                         ids=["one-per-job", "packed-warm"])
def test_printed_curve_on_slurm(project: Path, launcher: tuple[str, ...]) -> None:
    (project / "script.py").write_text(SCRIPT)
    (project / "conf" / "task" / "printed.yaml").write_text(yaml.safe_dump(CMD_TASK, sort_keys=False))
    (project / "conf" / "variable" / "cmd_lr.yaml").write_text(yaml.safe_dump({"key": "task.params.lr",
                                                                               "values": [0.05]}))
    commit_all(project, "a script printing its losses")
    res = ablate_cli(project, "-m", "task=printed", "variable=cmd_lr", "seeds=3", "curve.enabled=true", *launcher,
                     "wait=false", timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(project)
    col = ablate_cli(project, "collect", str(sd), timeout=300)
    assert col.returncode == 0, col.stdout + col.stderr
    for (arm, seed), r in results(sd).items():
        t = sd / "trials" / arm / f"seed={seed}"
        printed = [m for m in map(re.compile(PATTERN).search, (t / "stdout.log").read_text().splitlines()) if m]
        rec = json.loads((t / "curve.json").read_text())
        assert rec["ys"] == [float(m["val_loss"]) for m in printed] and rec["ys"][-1] == r["metrics"]["val_loss"]
    (cc,) = json.loads((sd / "verdict.json").read_text())["curves"]["comparisons"]
    assert cc["n"] == [3, 3] and cc["x"] == [float(s) for s in range(0, 210, 10)]
    # asked for after the run: another metric of the same printed lines, read from each trial's own stdout.log
    after = ablate_in(project, "verdict", str(sd), "--curve", "metric=train_loss", "--no-plots")
    assert after.returncode == 0, after.stderr
    cv = json.loads((sd / "verdict.json").read_text())["curves"]
    assert cv["sources"] == {"stdout": 6}
    (tc,) = cv["comparisons"]
    for arm, key in (("control", "mean_control"), ("lr=0.05", "mean_treatment")):
        own = []
        for seed in range(1, 4):
            lines = (sd / "trials" / arm / f"seed={seed}" / "stdout.log").read_text().splitlines()
            own.append([float(m["train_loss"]) for m in map(re.compile(PATTERN).search, lines) if m])
        assert tc[key] == pytest.approx([sum(c) / 3 for c in zip(*own, strict=True)], rel=1e-12)
