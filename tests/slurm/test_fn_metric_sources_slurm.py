"""An fn task's printed metric lines under launcher=slurm (tests/integration/test_fn_metric_sources.py): a job's
output goes to the job's log, so the trial tees it into its own stdout.log, where the pattern reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_cli
from tests.integration.test_fn_metric_sources import check_printed, setup
from tests.slurm.helpers import sweep_dir

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("launcher", [("launcher=slurm",), ("launcher=slurm", "launcher.trials_per_job=3")],
                         ids=["one-per-job", "packed-warm"])
def test_printed_lines_reach_the_trials_own_log_on_slurm(project: Path, launcher: tuple[str, ...]) -> None:
    setup(project)
    res = ablate_cli(project, "-m", "variable=fnlr", "seeds=3", "task=fnsrc_print", *launcher, "wait=false",
                     timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(project)
    col = ablate_cli(project, "collect", str(sd), timeout=300)
    assert col.returncode == 0, col.stdout + col.stderr
    check_printed(sd)
    for r in sd.glob("trials/*/seed=*/result.json"):  # and the job's own log still has them, as before
        rec = json.loads(r.read_text())
        out = Path(rec["log"][:-len(".err")] + ".out").read_text()
        assert "epoch 4 val loss" in out and f"val loss {rec['metrics']['val_loss']:.6f}" in out
