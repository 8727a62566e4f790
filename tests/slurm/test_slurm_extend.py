"""``ablate extend`` through launcher=slurm (issue 39): the new seeds only, as SLURM jobs, into the same sweep dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, add_pure_task
from tests.slurm.helpers import jobs, sweep_dir

pytestmark = pytest.mark.slurm


@pytest.fixture(autouse=True)
def _need_cluster() -> None:
    from tests.slurm.conftest import no_cluster_reason

    if why := no_cluster_reason():
        pytest.skip(why)


def test_extend_submits_only_the_new_seeds(project: Path) -> None:
    add_pure_task(project)
    res = ablate_cli(project, "-m", "task=pure", "variable=lr", "variable.values=[0.2]", "seeds=3", "launcher=slurm",
                     timeout=300)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(project)
    first = jobs(sd)
    assert len(first) == 6
    res = ablate_cli(project, "extend", str(sd), "seeds=5", timeout=300)
    assert res.returncode == 0, res.stderr
    after = jobs(sd)
    assert {k: after[k] for k in first} == first  # stage 1's jobs kept, never submitted again
    assert sorted(set(after) - set(first)) == sorted((a, s) for a in ("control", "lr=0.2") for s in (3, 4))
    v = json.loads((sd / "verdict.json").read_text())
    assert v["extension"]["stage2_seeds"] == [3, 4] and v["comparisons"][0]["extension"]["stage2"]["tested"]
