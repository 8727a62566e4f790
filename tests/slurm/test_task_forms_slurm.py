"""The forms x paths contract (tests/integration/test_task_forms_contract.py) on launcher=slurm: a suite of a key and
a group variable is one job array for every form, and each treatment trial receives its own change only."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ablate_cli
from tests.integration.test_task_forms_contract import check_sweep, setup
from tests.slurm.helpers import jobs, sweep_dir

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("form", ["fn", "command", "app"])
def test_suite_is_one_job_array_and_each_treatment_gets_its_own_change(project: Path, form: str) -> None:
    setup(project, form)
    res = ablate_cli(project, "-m", "task=contract", "seeds=3", "variable=vx,vopt", "launcher=slurm", "wait=false",
                     timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(project)
    submitted = jobs(sd)
    assert len(submitted) == 9  # control, x=3.0, opt=b x 3 seeds
    (array,) = {j.split("_")[0] for j in submitted.values()}
    assert f"job(s) {array}" in res.stderr
    col = ablate_cli(project, "collect", str(sd), timeout=300)
    assert col.returncode == 0, col.stderr
    plan = check_sweep(sd, form)
    assert [(a["name"], a.get("variable")) for a in plan["arms"]] == [("control", None), ("x=3.0", "vx"),
                                                                      ("opt=b", "vopt")]
