"""Tuned ablations (issue 40) on launcher=slurm: the tuning trials are packed jobs of one array, submitted without
waiting; ``ablate collect`` waits for them, records the choice, then runs each arm's evaluation trials, and every
trial received its arm's change and its setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_cli
from tests.integration.test_task_forms_contract import setup
from tests.slurm.helpers import jobs, sweep_dir

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("form", ["fn", "command", "app"])
def test_packed_tuning_then_collect_runs_the_evaluation(project: Path, form: str) -> None:
    setup(project, form)
    key = {"fn": "task.y", "command": "task.params.y", "app": "y"}[form]  # an app names its own keys
    res = ablate_cli(project, "-m", "task=contract", "seeds=3", "variable=vx", "launcher=slurm", "wait=false",
                     "launcher.trials_per_job=2", f"tune.key={key}", "tune.values=[0.0,0.5]", "tune.seeds=1",
                     timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(project)
    submitted = jobs(sd)
    assert len(submitted) == 4  # 2 arms x 2 settings x 1 tuning seed: the evaluation waits for the choice
    assert len({j.split("_")[0] for j in submitted.values()}) == 1  # one array
    assert len(set(submitted.values())) == 2  # 2 trials per packed job
    assert not (sd / "tuning.json").exists()
    col = ablate_cli(project, "collect", str(sd), timeout=400)
    assert col.returncode == 0, col.stderr
    rec = json.loads((sd / "tuning.json").read_text())
    chosen = rec["chosen"]
    assert chosen == rec["own"] == {"control": "control+y=0.5", "x=3.0": "x=3.0+y=0.5"}
    assert rec["common"]["arms"] == ["control", "x=3.0"]  # one tuning seed: one common setting, here both's own
    seeds = [1, 2, 3]  # a script task's (command, app) evaluation seeds; fn: 0..2
    if form == "fn":
        seeds = [0, 1, 2]
    for arm in chosen.values():
        for seed in seeds:
            t = sd / "trials" / arm / f"seed={seed}"
            assert json.loads((t / "result.json").read_text())["status"] == "ok"
            got = json.loads((t / "run" / "seen.json").read_text())
            assert got["y"] == 0.5 and got["x"] == (3.0 if arm.startswith("x=") else 1.0)
    assert len(jobs(sd)) == 4 + 6
    v = json.loads((sd / "verdict.json").read_text())
    assert [a["n"] for a in v["arms"]] == [3, 3] and v["confounds"]["findings"] == []
