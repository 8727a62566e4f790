"""The example ablation as a DVC pipeline stage: `dvc repro ablate_lr` runs it, `dvc metrics show` and
`dvc plots show` read its verdict and per-seed values, and it leaves the git tree clean but for dvc.lock."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import commit_all, git, run

pytestmark = pytest.mark.slow


def dvc(project: Path, *args: str) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # `ablate` in the stage
    env.pop("PYTHONPATH", None)
    return run([sys.executable, "-m", "dvc", *args], project, env=env).stdout


def test_dvc_repro_runs_the_ablation_stage_and_dvc_reads_its_verdict(project: Path) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["ablate_lr"].update(seeds=3, epochs=1, launcher="inline")
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    commit_all(project, "small ablation for the test")

    dvc(project, "repro", "ablate_lr")
    sd = project / "outputs" / "dvc" / "lr"
    verdict = json.loads((sd / "verdict.json").read_text())
    assert [c["arm"] for c in verdict["comparisons"]] == ["lr=0.005", "lr=0.2"]
    assert git(project, "status", "--porcelain").split() == ["M", "dvc.lock"]  # outputs are git-ignored

    (workspace,) = json.loads(dvc(project, "metrics", "show", "--json")).values()  # keyed "" or "workspace"
    metrics = workspace["data"]
    assert metrics[str(Path("outputs/dvc/lr/verdict.json"))]["data"]["metric"] == "val_acc"
    summary = metrics[str(Path("outputs/dvc/lr/summary.json"))]["data"]
    assert summary["arms"]["control"]["n"] == 3
    assert summary["comparisons"]["lr=0.2"]["verdict"] == verdict["comparisons"][1]["verdict"]
    assert summary["arms"]["lr=0.005"]["mean"] == pytest.approx(verdict["arms"][1]["mean"])

    plots = json.loads(dvc(project, "plots", "show", "--json"))["data"]["per-seed val_acc"][0]["content"]
    points = {(p["field"], p["seed"]): float(p["dvc_inferred_y_value"]) for p in plots["data"]["values"]}
    for arm in ("control", "lr=0.005", "lr=0.2"):
        for seed in (0, 1, 2):
            result = json.loads((sd / "trials" / arm / f"seed={seed}" / "result.json").read_text())
            assert points[arm, str(seed)] == pytest.approx(result["metrics"]["val_acc"])

    commit_all(project, "ablate_lr results")  # as after any `dvc repro`
    assert "up to date" in dvc(project, "status", "ablate_lr")
    task = project / "examples" / "digits" / "task.py"
    task.write_text(task.read_text() + "\n# a code change\n")
    commit_all(project, "edit the task")
    assert "modified:" in dvc(project, "status", "ablate_lr")  # so `dvc repro` would run the ablation again
