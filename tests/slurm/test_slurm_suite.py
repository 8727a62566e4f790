"""A suite through launcher=slurm: one job array for every arm of every variable, detach, then collect.

The pure-Python task (tests.helpers.PURE_TASK): the test is about the job array, not training (9 digits trials
would each import torch in their job)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, add_pure_task, commit_all
from tests.slurm.helpers import jobs, status_counts, sweep_dir

pytestmark = pytest.mark.slurm


@pytest.fixture(autouse=True)
def _need_cluster() -> None:
    from tests.slurm.conftest import no_cluster_reason

    if why := no_cluster_reason():
        pytest.skip(why)


def test_suite_is_one_job_array(project: Path) -> None:
    add_pure_task(project)
    (project / "conf" / "variable" / "momentum.yaml").write_text("key: task.optim.momentum\nvalues: [0.5]\n")
    commit_all(project, "second variable")
    res = ablate_cli(project, "-m", "task=pure", "variable=lr,momentum", "variable.values=[0.2]", "seeds=3",
                     "launcher=slurm", "wait=false", timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(project)
    submitted = jobs(sd)
    # control + lr=0.2 + momentum=0.2 ... each variable's values are overridden to [0.2]: 3 arms x 3 seeds
    assert len(submitted) == 9
    (array,) = {j.split("_")[0] for j in submitted.values()}  # one SLURM job array for the whole suite
    assert f"job(s) {array}" in res.stderr
    col = ablate_cli(project, "collect", str(sd), timeout=300)
    assert col.returncode == 0, col.stderr
    st = ablate_in(project, "status", str(sd))
    assert status_counts(st.stdout) == {"control": [0, 0, 3, 0], "lr=0.2": [0, 0, 3, 0],
                                        "momentum=0.2": [0, 0, 3, 0]}, st.stdout
    v = json.loads((sd / "verdict.json").read_text())
    assert [c["variable"] for c in v["comparisons"]] == ["lr", "momentum"]
