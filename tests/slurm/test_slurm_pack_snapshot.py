"""A packed SLURM job's warm parent imports in the code snapshot, and its trials get their own seed variables
(issue 35, items 3 and 7): the task module reads a git-ignored file at import (the live project has one, the
snapshot has not), the task function imports a module that reads a file relative to its working dir (learned by
the warm parent) and one that reads ``$ABLATE_SEED`` at import (each trial's own), and returns
``$PL_GLOBAL_SEED``. Every trial of the one job sees what a fresh trial sees: no live copy, its own seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ablate_cli, commit_all, only_sweep, results
from tests.integration.test_warm_snapshot_cwd import LAZY_ENV, LAZY_FILE, TASK

pytestmark = pytest.mark.slurm
PL = TASK.replace('"lazy_seed": lazy_env.SEED}',
                  '"lazy_seed": lazy_env.SEED, "pl_seed": float(__import__("os").environ["PL_GLOBAL_SEED"])}')


def test_a_packed_jobs_trials_see_the_snapshot_and_their_own_seed(project: Path) -> None:
    for name, text in (("readimport.py", PL), ("lazy_file.py", LAZY_FILE), ("lazy_env.py", LAZY_ENV)):
        (project / name).write_text(text)
    (project / ".gitignore").write_text((project / ".gitignore").read_text() + "local.cfg\n")
    (project / "conf" / "task" / "ri.yaml").write_text(
        "fn: readimport:train\nmetric: val_acc\ngoal: maximize\nlr: 0.1\ndata: [data/digits.npz]\n")
    (project / "conf" / "variable" / "ri_lr.yaml").write_text("key: task.lr\nvalues: [0.2]\n")
    commit_all(project, "a task that reads files and its seed at import")
    (project / "local.cfg").write_text("the live project's own copy, git-ignored\n")
    res = ablate_cli(project, "-m", "task=ri", "variable=ri_lr", "seeds=3", "launcher=slurm",
                     "launcher.trials_per_job=6", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = results(only_sweep(project))
    assert len(recs) == 6
    for (arm, seed), rec in recs.items():
        m = rec["metrics"]
        assert rec["status"] == "ok" and m["val_acc"] == 0.5 + 0.01 * seed + {"control": 0.1, "lr=0.2": 0.2}[arm]
        assert m["local_len"] == 0.0 and m["lazy_file_len"] == 0.0 and m["lazy_data"] == 1.0, (arm, seed, m)
        assert m["lazy_seed"] == seed and m["pl_seed"] == seed, (arm, seed, m)
