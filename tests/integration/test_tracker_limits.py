"""Tracker limits (issue 17, item 3): names that clean up to the same text, values over MLflow's length limit,
names over W&B's limits, idempotent retries and one-line errors. Read back through MLflow's client (SQLite
store) and W&B's offline run records."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from ablate.trackers.limits import digest
from tests.helpers import ablate_cli, ablate_in, commit_all, only_sweep
from tests.integration.test_trackers import read_offline_run

pytestmark = pytest.mark.slow

TASK = '''
def train(cfg):
    base = 0.5 + 0.01 * cfg.seed
    return {"acc@1": base, "acc#1": base + 0.1, "acc_1": base + 0.2, "loss/val": 1 - base, "top k": 2 * base}
'''
LONG_A = "a" * 6500 + "CONTROL"
LONG_B = "a" * 6500 + "TREATED"


@pytest.fixture
def limits_project(project: Path) -> Path:
    (project / "lim.py").write_text(TASK)
    (project / "conf" / "task" / "lim.yaml").write_text(yaml.safe_dump(
        {"fn": "lim:train", "metric": "acc@1", "goal": "maximize", "text": LONG_A, "größe": 1}, allow_unicode=True),
        encoding="utf-8")
    (project / "conf" / "variable" / "text.yaml").write_text(yaml.safe_dump({"key": "task.text", "values": [LONG_B]}))
    commit_all(project, "limits task")
    return project


def test_mlflow_names_unique_values_marked_mapping_recorded_retries_idempotent(limits_project: Path,
                                                                                tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    track = ["tracker=mlflow", f"tracker.tracking_uri={uri}", f"tracker.artifact_location={tmp_path / 'art'}"]
    res = ablate_in(limits_project, "-m", "variable=text", "task=lim", "seeds=3", "launcher=inline", *track)
    assert res.returncode == 0, res.stderr
    assert "mlflow: 6 trial run(s) logged (0 already there)" in res.stderr and "names.json" in res.stderr
    sd = only_sweep(limits_project)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ablate")
    runs = client.search_runs([exp.experiment_id])
    trials = [r for r in runs if r.data.tags["ablate.role"] == "trial"]
    assert len(trials) == 6
    want_keys = {"acc@1": f"acc_1:{digest('acc@1', 6)}", "acc#1": f"acc_1:{digest('acc#1', 6)}", "acc_1": "acc_1",
                 "loss/val": "loss/val", "top k": "top k"}
    texts = {}
    for r in trials:
        arm, seed = r.data.tags["ablate.arm"], r.data.tags["ablate.seed"]
        result = json.loads((sd / "trials" / arm / f"seed={seed}" / "result.json").read_text())
        for original, logged in want_keys.items():  # three distinct metrics, each with its own value
            assert r.data.metrics[logged] == pytest.approx(result["metrics"][original])
        full = LONG_A if arm == "control" else LONG_B
        logged = r.data.params["task.text"]
        mark = f"…[cut; sha256 {hashlib.sha256(full.encode()).hexdigest()[:16]}]"
        assert len(logged) == 6000 and logged.endswith(mark)
        texts[arm] = logged
        assert r.data.params["task.gr__e"] == "1"  # cleaned up, unique: readable; the mapping records it
        assert r.data.tags["ablate.names_changed"] == "true"
        local = Path(client.download_artifacts(r.info.run_id, "ablate", str(tmp_path / "dl" / r.info.run_id)))
        names = json.loads((local / "names.json").read_text())
        assert names["renamed"]["metric"] == {"acc@1": want_keys["acc@1"], "acc#1": want_keys["acc#1"]}
        assert names["renamed"]["param"] == {"task.größe": "task.gr__e"}
        assert names["cut"]["param"]["task.text"] == hashlib.sha256(full.encode()).hexdigest()
        config = json.loads((local / "config.json").read_text())
        assert config == yaml.safe_load((sd / "trials" / arm / f"seed={seed}" / "config.yaml").read_text())
        assert config["task"]["text"] == full
    assert len(set(texts.values())) == 2  # two arms, two logged values, although both were cut

    # retry: nothing twice; a trial run left RUNNING by a broken-off attempt is replaced, not duplicated
    broken = trials[0]
    client.update_run(broken.info.run_id, status="RUNNING")
    again = ablate_in(limits_project, "track", str(sd))  # as users retry
    assert again.returncode == 0, again.stderr
    assert "1 trial run(s) logged (5 already there)" in again.stdout
    again = ablate_in(limits_project, "track", str(sd))
    assert "0 trial run(s) logged (6 already there)" in again.stdout
    live = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags["ablate.role"] == "trial"]
    assert len(live) == 6 and {r.info.status for r in live} == {"FINISHED"}


def test_tracker_failure_in_track_is_one_line(limits_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # a closed port fails at once, not after backoff
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    # the console script, this file's proof of it (its cheapest ablation: no tracker)
    res = ablate_cli(limits_project, "-m", "variable=text", "task=lim", "seeds=3", "launcher=inline")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(limits_project)
    for uri in ("nosuchscheme://x", "http://127.0.0.1:9/"):  # in this process: a refusal (tests/helpers.py)
        res = ablate_in(limits_project, "track", str(sd), "tracker=mlflow", f"tracker.tracking_uri={uri}")
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1, res.stderr
        assert "`tracker`: tracker=mlflow failed while logging" in res.stderr and f"ablate track {sd}" in res.stderr


def test_wandb_long_names_fit_and_retries_add_no_offline_runs(limits_project: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    long_name = "text_" + "x" * 140
    (limits_project / "conf" / "variable" / f"{long_name}.yaml").write_text(
        yaml.safe_dump({"key": "task.text", "values": [LONG_B]}))
    commit_all(limits_project, "long variable name")
    wandb_dir = tmp_path / "wandb_runs"
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.setenv("WANDB_SILENT", "true")
    res = ablate_in(limits_project, "-m", f"variable={long_name}", "task=lim", "seeds=3", "launcher=inline",
                    "tracker=wandb")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "wandb: 6 trial run(s) logged (0 already there)" in res.stderr
    dirs = sorted((wandb_dir / "wandb").glob("offline-run-*"))
    assert len(dirs) == 7
    runs = [read_offline_run(d) for d in dirs]
    sd = only_sweep(limits_project)
    for r in runs:
        assert len(r["group"]) == 128 and r["group"].endswith("~" + digest(r["config"]["ablate"]["ablation_id"], 6))
        assert r["config"]["ablate"]["names"]["group"]["original"] == r["config"]["ablate"]["ablation_id"]
        assert r["config"]["ablate"]["ablation_id"].startswith(sd.name + "-") and all(len(t) <= 64 for t in r["tags"])
    for _ in range(2):  # retried twice: no duplicate offline runs, no traceback
        again = ablate_in(limits_project, "track", str(sd))
        assert again.returncode == 0, again.stderr
        assert "0 trial run(s) logged (6 already there), verdict run unchanged" in again.stdout
    assert sorted((wandb_dir / "wandb").glob("offline-run-*")) == dirs
