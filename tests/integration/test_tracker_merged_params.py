"""Two config keys that become one tracker param (issue 35, item 5): a nested ``opt: {lr: 0.1}`` beside a literal key
``"opt.lr": 0.5`` both flatten to ``task.opt.lr``. Both values reach a real MLflow store (SQLite, in tmp), each under
its own name, the mapping is in the run's ``ablate/names.json``, and the tracker's line warns. (The W&B tracker logs
the nested config as it is, so nothing of it merges there: it shares no flattener.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, commit_all, only_sweep

pytestmark = pytest.mark.slow
TASK = '''
def train(cfg):
    return {"val_acc": 0.5 + 0.01 * cfg.seed + cfg.task.opt.lr + cfg.task["opt.lr"]}
'''


def test_both_values_are_logged_under_names_of_their_own_and_a_warning(project: Path, tmp_path: Path) -> None:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed (pip install -e '.[mlflow]')")
    from mlflow import MlflowClient

    (project / "dotkeys.py").write_text(TASK)
    (project / "conf" / "task" / "dotkeys.yaml").write_text(
        'fn: dotkeys:train\nmetric: val_acc\ngoal: maximize\nopt:\n  lr: 0.1\n"opt.lr": 0.5\n')
    (project / "conf" / "variable" / "dk_lr.yaml").write_text("key: task.opt.lr\nvalues: [0.2]\n")
    commit_all(project, "a task with a dotted key")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    res = ablate_cli(project, "-m", "task=dotkeys", "variable=dk_lr", "seeds=3", "launcher=inline", "tracker=mlflow",
                     f"tracker.tracking_uri={uri}", f"tracker.artifact_location={tmp_path / 'art'}")
    assert res.returncode == 0, res.stderr
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("ablate: mlflow: ")]
    assert line.endswith("; warning: two config keys flatten to one param name (`task.opt.lr` and "
                         "`task[\"opt.lr\"]`): each value is logged, the literal key with a dot under its quoted name "
                         "(mapping in the runs' ablate/names.json)")
    sd = only_sweep(project)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ablate")
    trials = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags["ablate.role"] == "trial"]
    assert len(trials) == 6
    for r in trials:
        arm = r.data.tags["ablate.arm"]
        assert r.data.params["task.opt.lr"] == {"control": "0.1", "lr=0.2": "0.2"}[arm]  # the nested key's
        assert r.data.params["task__opt.lr__"] == "0.5"  # the literal key's, under its quoted name cleaned for MLflow
        local = Path(client.download_artifacts(r.info.run_id, "ablate", str(tmp_path / "dl" / r.info.run_id)))
        names = json.loads((local / "names.json").read_text())
        assert names["merged"] == {"task.opt.lr": ['task["opt.lr"]']}
        assert names["renamed"]["param"] == {'task["opt.lr"]': "task__opt.lr__"}
        config = json.loads((local / "config.json").read_text())
        assert config["task"]["opt"] == {"lr": float(r.data.params["task.opt.lr"])} and config["task"]["opt.lr"] == 0.5
    assert {r.data.tags["ablate.seed"] for r in trials} == {"0", "1", "2"}
    assert (sd / "verdict.json").is_file()
