"""Tuned ablations (issue 40) on launcher=slurm: the tuning trials are packed jobs of one array, submitted without
waiting; ``ablate collect`` waits for them, records the choice, then runs each arm's evaluation trials, and every
trial received its arm's change and its setting. A packed tuning job cancelled mid-trial blocks the choice until
``ablate collect --resubmit`` re-ran what it stopped; nothing that ended is run again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, commit_all
from tests.integration.test_task_forms_contract import APP, setup
from tests.slurm.helpers import jobs, slurm, sweep_dir, wait_for

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


#: The contract app, one of whose tuning trials (the control at y=0.0, tuning seed 4) waits for a gate file, so its
#: packed job is surely running when the test cancels it.
GATE = """
    import os, time
    if cfg.x == 1.0 and cfg.y == 0.0 and cfg.seed == 4 and not os.path.exists(GATE):
        Path(GATE + ".waiting").write_text(str(os.getpid()))
        while not os.path.exists(GATE):
            time.sleep(0.2)
"""


def test_cancelled_tuning_job_blocks_the_choice_until_resubmitted(project: Path, tmp_path: Path) -> None:
    setup(project, "app")
    gate = tmp_path / "gate"
    app = APP.replace('    seen = {"x"', GATE.replace("GATE", repr(str(gate))).lstrip("\n") + '    seen = {"x"', 1)
    (project / "contract_app" / "app.py").write_text(app)
    commit_all(project, "a gated app")
    res = ablate_cli(project, "-m", "task=contract", "seeds=3", "variable=vx", "launcher=slurm", "wait=false",
                     "launcher.trials_per_job=2", "tune.key=y", "tune.values=[0.0,0.5]", "tune.seeds=2", timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(project)
    submitted = jobs(sd)
    assert len(submitted) == 8  # 2 arms x 2 settings x 2 tuning seeds
    wait_for(lambda: Path(str(gate) + ".waiting").exists(), 120, "the gated tuning trial to start")
    slurm("scancel", submitted[("control+y=0.0", 4)])
    gate.write_text("open")  # a re-run passes
    col = ablate_cli(project, "collect", str(sd), timeout=400)
    assert col.returncode == 0, col.stderr
    assert not (sd / "tuning.json").exists(), col.stderr  # no choice without the stopped trial
    assert "a tuning trial was stopped (killed or timed out)" in col.stderr and "--resubmit" in col.stderr
    killed = json.loads((sd / "trials" / "control+y=0.0" / "seed=4" / "result.json").read_text())
    assert killed["status"] == "killed", killed
    ended = {p.parent: p.read_text() for p in sd.glob("trials/*/seed=*/result.json")
             if json.loads(p.read_text())["status"] == "ok"}
    assert len(ended) >= 6  # the other tuning jobs ran; the cancelled job's other trial may not have
    fix = ablate_cli(project, "collect", str(sd), "--resubmit", timeout=400)
    assert fix.returncode == 0, fix.stderr
    for t, text in ended.items():  # nothing that ended ran again
        assert (t / "result.json").read_text() == text
    rec = json.loads((sd / "tuning.json").read_text())
    assert rec["own"] == {"control": "control+y=0.5", "x=3.0": "x=3.0+y=0.5"}
    rows = [json.loads(p.read_text()) for p in sd.glob("trials/*/seed=*/result.json")]
    assert len(rows) == 8 + 6 and all(r["status"] == "ok" for r in rows), [r["status"] for r in rows]
    v = json.loads((sd / "verdict.json").read_text())
    assert [a["n"] for a in v["arms"]] == [3, 3]
