"""Issue 35, item 16: ``dvc exp run --temp`` of the repo's own stage was refused ("uncommitted changes
(params.yaml)") while plain ``dvc exp run`` worked: DVC runs a ``--temp`` experiment in a copy of the workspace
(``.dvc/tmp/exps/...``) with ``DVC_ROOT`` still naming the original, whose params file is not the one changed.
Both run now, and each pins the params file DVC changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import commit_all
from tests.issue35 import plain_project

pytestmark = pytest.mark.slow


def _dvc(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # `ablate` in the stage
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture
def staged(project_template: Path, tmp_path: Path) -> Path:
    proj = plain_project(project_template, tmp_path / "proj")
    stages = yaml.safe_load((proj / "dvc.yaml").read_text())
    stages["stages"]["ablate_plain"] = {
        "cmd": "rm -rf outputs/dvc/plain && ablate -m variable=mode task=plain seeds=${ablate_plain.seeds} "
               "launcher=inline hydra.sweep.dir=outputs/dvc/plain progress=off",
        "deps": ["plain.py", "conf"], "params": ["ablate_plain"],
        "metrics": ["outputs/dvc/plain/summary.json"]}
    (proj / "dvc.yaml").write_text(yaml.safe_dump(stages, sort_keys=False))
    params = yaml.safe_load((proj / "params.yaml").read_text())
    params["ablate_plain"] = {"seeds": 5}
    (proj / "params.yaml").write_text(yaml.safe_dump(params))
    commit_all(proj, "a stage running ablate")
    return proj


@pytest.mark.parametrize("temp", [["--temp"], []], ids=["temp", "workspace"])
def test_dvc_exp_run_of_the_stage_works_in_a_temp_workspace_too(staged: Path, temp: list[str]) -> None:
    res = _dvc(staged, "exp", "run", *temp, "-S", "ablate_plain.seeds=3", "-n", "three", "ablate_plain")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "uncommitted changes" not in res.stdout + res.stderr
    rows = json.loads(_dvc(staged, "exp", "show", "--json").stdout)
    (rev,) = [r for row in rows for e in (row.get("experiments") or []) if e.get("name") == "three"
              for r in e["revs"]]
    summary = rev["data"]["metrics"][str(Path("outputs/dvc/plain/summary.json"))]["data"]
    assert summary["control"]["n"] == 3 and summary["mode=b"]["n"] == 3  # the -S value reached the ablation
