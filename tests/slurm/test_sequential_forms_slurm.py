"""Sequential stops (issue 39: futility and efficacy) on launcher=slurm, for each task form: the cells of
tests/integration/test_sequential_forms.py (the same task with known effects, the same assertions) with the looks run
as job arrays. The fn suite is submitted detached (``wait=false``) and finished by ``ablate collect``, which replays
look 1 from the records and submits nothing more; the command and app runs wait for their jobs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import ablate_cli
from tests.integration.test_sequential_forms import EFFECT, GAMMA, LOOKS, Run, check_run, setup, variables
from tests.slurm.helpers import jobs

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize(("form", "shape", "wait"), [("fn", "suite", False), ("command", "single", True),
                                                     ("app", "suite", True)])
def test_futility_and_efficacy_stops_on_slurm(project_template: Path, tmp_path: Path, form: str, shape: str,
                                              wait: bool) -> None:
    root = tmp_path / "proj"
    shutil.copytree(project_template, root, symlinks=True)
    setup(root, form)
    res = ablate_cli(root, "-m", "task=known", variables(shape), "sequential=group",
                     f"looks=[{','.join(map(str, LOOKS))}]", f"effect={EFFECT}", f"futility={GAMMA}",
                     "launcher=slurm", f"wait={str(wait).lower()}", timeout=300)
    assert res.returncode == 0, res.stderr
    (sd,) = [p.parent for p in root.glob("outputs/ablate/*/*/ablation.yaml")]
    stderr = res.stderr
    if not wait:
        assert not (sd / "verdict.json").exists()
        col = ablate_cli(root, "collect", str(sd), timeout=300)
        assert col.returncode == 0, col.stderr
        stderr += col.stderr
    r, submitted = Run(sd, stderr), jobs(sd)
    assert sorted({seed for _, seed in submitted}) == r.plan["seeds"][:LOOKS[0]]  # look 1's seeds only
    check_run(r, shape, ran=len(submitted))
