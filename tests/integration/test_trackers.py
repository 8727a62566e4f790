"""Trackers, for real: an ablation logs to a local SQLite-backed MLflow store and to W&B in offline
mode; both are read back with the library's own client (W&B: its protobuf records of the offline run
files, as no public reader of them ships with wandb)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ablate_cli, ablate_in, add_pure_task, only_sweep

pytestmark = pytest.mark.slow
FAST = ["-m", "variable=lr", "variable.values=[0.5]", "seeds=3", "launcher=inline", "task.epochs=1"]
#: The runs: the pure-Python task (tests.helpers.PURE_TASK; what is logged is under test, not training).
RUN = [*FAST, "task=pure"]
SECRET = "tok-3f9a1c-never-on-disk"


def assert_no_secret_on_disk(*roots: Path) -> None:
    for root in roots:
        for p in root.rglob("*"):
            if p.is_file() and not p.is_symlink():
                assert SECRET.encode() not in p.read_bytes(), f"a credential was written to {p}"


# -- MLflow -------------------------------------------------------------------------------------------
@pytest.fixture
def mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed (pip install -e '.[mlflow]')")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", SECRET)  # must never reach a file
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", SECRET)
    return f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "mlartifacts"


def test_mlflow_one_run_per_trial_under_a_parent(project: Path, mlflow_store: tuple[str, Path]) -> None:
    from mlflow import MlflowClient

    uri, artifacts = mlflow_store
    add_pure_task(project)
    res = ablate_in(project, *RUN, "tracker=mlflow", f"tracker.tracking_uri={uri}",
                    f"tracker.artifact_location={artifacts}", "tracker.experiment=digits")
    assert res.returncode == 0, res.stderr
    assert "mlflow: 6 trial run(s) logged (0 already there)" in res.stderr
    sd = only_sweep(project)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("digits")
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags["ablate.role"] == "ablation"]
    trials = [r for r in runs if r.data.tags["ablate.role"] == "trial"]
    assert len(trials) == 6
    aid = parent.data.tags["ablate.ablation_id"]
    assert aid.startswith(sd.name + "-")
    plan_commit = json.loads(json.dumps(__import__("yaml").safe_load((sd / "ablation.yaml").read_text())))
    commit = plan_commit["pins"]["code"]["commit"]
    data_hash = plan_commit["pins"]["data"]["data/digits.npz"]["hash"]
    seen = set()
    for r in trials:
        tags, params, metrics = r.data.tags, r.data.params, r.data.metrics
        seen.add((tags["ablate.arm"], tags["ablate.seed"]))
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert tags["ablate.ablation_id"] == aid and tags["ablate.commit"] == commit
        assert tags["ablate.data.data/digits.npz"] == data_hash and tags["ablate.status"] == "ok"
        assert tags["ablate.variable"] == "task.optim.lr" and tags["ablate.dirty"] == "false"
        assert r.info.run_name == f"{tags['ablate.arm']} seed={tags['ablate.seed']}"
        assert r.info.status == "FINISHED"
        assert params["task.optim.lr"] == {"control": "0.05", "lr=0.5": "0.5"}[tags["ablate.arm"]]
        assert params["seed"] == tags["ablate.seed"] and params["task.epochs"] == "1"
        result = json.loads((sd / "trials" / tags["ablate.arm"] / f"seed={tags['ablate.seed']}" / "result.json")
                            .read_text())
        assert metrics["val_acc"] == pytest.approx(result["metrics"]["val_acc"])
        assert metrics["ablate.duration_s"] > 0
    assert seen == {(a, str(s)) for a in ("control", "lr=0.5") for s in range(3)}
    verdict = json.loads((sd / "verdict.json").read_text())
    c = verdict["comparisons"][0]
    assert parent.data.tags["ablate.verdict.lr_0.5"] == c["verdict"] + (" (indicative)" if c["firm"] is False else "")
    md = (sd / "verdict.md").read_text()  # verdict.md's bottom line, in the same words, markdown left out
    said = next(x for x in md.splitlines() if x.startswith("- **lr=0.5**")).removeprefix("- ").replace("**", "")
    assert parent.data.tags["ablate.bottom_line.lr_0.5"] == said
    nxt = next(x for x in md.splitlines() if x.startswith("Next: ")).replace("`", "")
    assert parent.data.tags["ablate.next"] == nxt
    assert parent.data.tags["ablate.direction"] == "higher is better"
    assert parent.data.metrics["lr_0.5.diff"] == pytest.approx(c["diff_raw"])  # the metric's own sign
    assert parent.data.params["variable.key"] == "task.optim.lr"
    names = {f.path for f in client.list_artifacts(parent.info.run_id)}
    assert {"verdict.md", "verdict.json", "results.csv", "ablation.yaml"} <= names

    # Logging again (e.g. after `ablate resume`) adds nothing twice
    again = ablate_in(project, "track", str(sd))
    assert again.returncode == 0, again.stderr
    assert "0 trial run(s) logged (6 already there)" in again.stdout
    assert len(client.search_runs([exp.experiment_id])) == 7
    assert_no_secret_on_disk(sd, Path(uri.removeprefix("sqlite:///")).parent)


def test_unreachable_tracker_does_not_fail_the_ablation(project: Path, mlflow_store: tuple[str, Path]) -> None:
    add_pure_task(project)
    # the console script, this file's proof of it (its cheapest ablation: nothing logged)
    res = ablate_cli(project, *RUN, "tracker=mlflow", "tracker.tracking_uri=nosuchscheme://x")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    assert "ablate: warning: tracker=mlflow failed" in res.stderr and f"ablate track {sd}" in res.stderr
    assert (sd / "verdict.json").is_file()


# -- W&B ----------------------------------------------------------------------------------------------
def wandb_records(path: Path) -> Iterator[Any]:
    """The protobuf records of an offline run file (``run-<id>.wandb``): W&B's own ``Record`` messages, un-framed
    by the audit's reader (``tests/integration/test_audit.py`` holds it to what wandb itself logged)."""
    from wandb.proto import wandb_internal_pb2

    from ablate.audit.sources.wandb import records

    for data in records(path):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(data)
        yield rec


def read_offline_run(run_dir: Path) -> dict[str, Any]:
    (path,) = run_dir.glob("run-*.wandb")
    out: dict[str, Any] = {"config": {}, "summary": {}, "history": [], "exit": None}
    for rec in wandb_records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            r = rec.run
            out.update(id=r.run_id, project=r.project, group=r.run_group, job_type=r.job_type, name=r.display_name,
                       tags=list(r.tags))
            out["config"].update({u.key: json.loads(u.value_json) for u in r.config.update})
        elif kind == "config":
            out["config"].update({u.key: json.loads(u.value_json) for u in rec.config.update})
        elif kind == "summary":
            for u in rec.summary.update:
                out["summary"][u.key or "/".join(u.nested_key)] = json.loads(u.value_json)
        elif kind == "history":
            out["history"].append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "exit":
            out["exit"] = rec.exit.exit_code
    return out


def test_wandb_offline_one_run_per_trial_in_a_group(project: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb", reason="the wandb extra is not installed (pip install -e '.[wandb]')")
    wandb_dir = tmp_path / "wandb_runs"
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.setenv("WANDB_API_KEY", SECRET)  # must never reach a file
    monkeypatch.setenv("WANDB_SILENT", "true")
    add_pure_task(project)
    res = ablate_in(project, *RUN, "tracker=wandb", "tracker.project=digits")
    assert res.returncode == 0, res.stderr
    assert "wandb: 6 trial run(s) logged (0 already there), verdict run logged" in res.stderr
    sd = only_sweep(project)
    plan = __import__("yaml").safe_load((sd / "ablation.yaml").read_text())
    commit = plan["pins"]["code"]["commit"]
    runs = [read_offline_run(d) for d in sorted((wandb_dir / "wandb").glob("offline-run-*"))]
    trials = [r for r in runs if r["job_type"] == "trial"]
    (verdict_run,) = [r for r in runs if r["job_type"] == "verdict"]
    assert len(trials) == 6
    group = verdict_run["group"]
    assert group.startswith(sd.name + "-")
    seen = set()
    for r in trials:
        ab = r["config"]["ablate"]
        seen.add((ab["arm"], ab["seed"]))
        assert r["group"] == group and r["project"] == "digits"
        assert ab["ablation_id"] == group and ab["commit"] == commit and ab["status"] == "ok"
        assert ab["data"] == {"data/digits.npz": plan["pins"]["data"]["data/digits.npz"]["hash"]}
        assert r["name"] == f"{ab['arm']} seed={ab['seed']}"
        assert {"ablate", f"arm:{ab['arm']}", f"seed:{ab['seed']}", f"commit:{commit[:12]}", "status:ok"} <= set(
            r["tags"])
        assert r["config"]["task"]["optim"]["lr"] == {"control": 0.05, "lr=0.5": 0.5}[ab["arm"]]
        result = json.loads((sd / "trials" / ab["arm"] / f"seed={ab['seed']}" / "result.json").read_text())
        assert r["summary"]["val_acc"] == pytest.approx(result["metrics"]["val_acc"])
        assert r["exit"] == 0
    assert seen == {(a, str(s)) for a in ("control", "lr=0.5") for s in range(3)}
    verdict = json.loads((sd / "verdict.json").read_text())
    c = verdict["comparisons"][0]
    assert verdict_run["summary"]["verdict/lr=0.5"] == c["verdict"] + (" (indicative)" if c["firm"] is False else "")
    md = (sd / "verdict.md").read_text()
    said = next(x for x in md.splitlines() if x.startswith("- **lr=0.5**")).removeprefix("- ").replace("**", "")
    assert verdict_run["summary"]["bottom_line/lr=0.5"] == said
    assert verdict_run["summary"]["next"] == next(x for x in md.splitlines() if x.startswith("Next: ")).replace("`", "")
    assert_no_secret_on_disk(wandb_dir, sd)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["tracker=neptune"], "`tracker`: there is no tracker named 'neptune'. Available: mlflow, wandb",
                     id="unknown-tracker"),
        pytest.param(["tracker=wandb", "tracker.mode=sometimes"], "`tracker.mode`: must be one of online, offline",
                     id="bad-option-value"),
        pytest.param(["tracker=mlflow", "+tracker.uri=x"], "`tracker.uri`: unknown option(s) uri for tracker=mlflow",
                     id="unknown-option"),
    ],
)
def test_bad_tracker_setting_is_one_line_before_launch(project: Path, args: list[str], message: str) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    res = ablate_in(project, *FAST, *args)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and message in res.stderr, res.stderr
    assert not (project / "outputs").exists()
