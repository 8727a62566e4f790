"""``ablate audit`` on records made by the tools (tests/fixtures/audit_app/make_runs.py: Hydra, MLflow, W&B offline,
TensorBoard, DVC; no ablate): a run that crashed, a renamed seed key and metric, a seed run twice, a dir given
twice, corrupt W&B files, run selection, TensorBoard and DVC experiments as sources, and the progress of a long
read. Each expected value comes from the runs' own logs or from the tools' own readers."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablate.audit import run_audit
from ablate.audit.sources import Selection
from ablate.errors import ConfigError
from tests.helpers import REPO

pytestmark = pytest.mark.slow
MAKE = REPO / "tests" / "fixtures" / "audit_app" / "make_runs.py"


def _make(root: Path, *args: str) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "WANDB_", "AUDIT_"))}
    subprocess.run([sys.executable, str(MAKE), str(root), *args], check=True, env=env, timeout=900)
    return root / "repo"


@pytest.fixture(scope="module")
def crash(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """lr=0.1 (seeds 1-3) against lr=0.2 (seeds 1-4), 8 epochs, the run of lr=0.2 at seed 4 crashing after 4: logged
    at once to Hydra dirs, MLflow, W&B offline and TensorBoard."""
    return _make(tmp_path_factory.mktemp("crash"), "--scenario", "crash", "--trackers", "--tensorboard")


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory.mktemp("renamed"), "--scenario", "renamed")


def _own(repo: Path, side: str, metric: str = "val_acc") -> dict[int, list[float]]:
    """The app's own metrics.jsonl of each Hydra run dir of a side: seed -> every logged value."""
    out = {}
    for d in sorted((repo / "multirun" / side).glob("[0-9]*")):
        cfg = yaml.safe_load((d / ".hydra" / "config.yaml").read_text())
        seed = cfg.get("seed", cfg.get("random_seed"))
        out[seed] = [json.loads(x)[metric] for x in (d / "metrics.jsonl").read_text().splitlines()]
    return out


def _audit(tmp: Path, *sources: Path | str, **kw: Any) -> dict[str, Any]:
    return run_audit([str(s) for s in sources], out=tmp / "audit", plots=False, **kw)


def test_a_hydra_run_that_crashed_is_listed_and_left_out(crash: Path, tmp_path: Path) -> None:
    logs = _own(crash, "b")
    assert [len(v) for v in logs.values()] == [8, 8, 8, 4]  # seed 4 crashed after 4 of 8 epochs
    a = _audit(tmp_path, crash / "multirun")
    assert [x["n"] for x in a["arms"]] == [3, 3]
    (line,) = a["left_out"]
    assert line == (f"{crash / 'multirun' / 'b' / '3'}: logged 4 of 8 steps of val_acc (its arm's others logged 8; "
                    "Hydra records no job status): unfinished")
    assert {int(k): v for k, v in a["statistics"]["values"]["treatment"].items()} == {
        s: v[-1] for s, v in logs.items() if s != 4}


def test_mlflow_says_finished_after_a_crash_and_the_short_run_is_still_left_out(crash: Path, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{crash / 'mlflow.db'}")
    (exp,) = [e for e in client.search_experiments() if e.name == "audit-app"]
    short = [r for r in client.search_runs([exp.experiment_id])
             if len(client.get_metric_history(r.info.run_id, "val_acc")) == 4]
    assert [r.info.status for r in short] == ["FINISHED"]  # MLflow's own record of the crashed run
    a = _audit(tmp_path, crash / "mlflow.db")
    assert [x["n"] for x in a["arms"]] == [3, 3]
    assert a["left_out"] == [f"{short[0].info.run_id}: logged 4 of 8 steps of val_acc (its arm's others logged 8; "
                             "its record says finished, as MLflow says of any run whose process exited): unfinished"]


def test_a_wandb_run_that_exited_with_code_1_is_described_as_such(crash: Path, tmp_path: Path) -> None:
    a = _audit(tmp_path, crash / "wandb")
    assert [x["n"] for x in a["arms"]] == [3, 3]
    (line,) = a["left_out"]
    assert line.startswith("W&B run offline-run-") and line.endswith(": ended with exit code 1 (failed)")


def test_tensorboard_runs_with_their_hparams(crash: Path, tmp_path: Path) -> None:
    a = _audit(tmp_path, crash / "runs", metric="val_acc")
    assert a["variable"]["key"] == "lr" and (a["variable"]["a"], a["variable"]["b"]) == (0.1, 0.2)
    assert [x["n"] for x in a["arms"]] == [3, 3]
    (line,) = a["left_out"]
    assert "_seed4: no hparams recorded" in line  # the crashed run never wrote them
    own = _own(crash, "b")
    got = {int(k): v for k, v in a["statistics"]["values"]["treatment"].items()}
    assert got == {s: pytest.approx(v[-1], rel=1e-6) for s, v in own.items() if s != 4}  # TensorBoard keeps float32


def test_all_four_records_at_once_count_each_run_once(crash: Path, tmp_path: Path) -> None:
    a = _audit(tmp_path, crash / "multirun", crash / "mlflow.db", crash / "wandb", crash / "runs", metric="val_acc")
    assert [x["n"] for x in a["arms"]] == [3, 3]
    assert a["merged"]["runs"] == 7  # the crashed run too, through its Hydra dir and its MLflow run
    assert a["sources"] == ["hydra", "mlflow", "tensorboard", "wandb"]
    assert sum("unfinished" in x for x in a["left_out"]) == 1


def test_selection_by_experiment_run_id_tag_and_time(crash: Path, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{crash / 'mlflow.db'}")
    (exp,) = [e for e in client.search_experiments() if e.name == "audit-app"]
    runs = sorted(client.search_runs([exp.experiment_id]), key=lambda r: r.info.start_time)
    ids = [r.info.run_id for r in runs]
    a = _audit(tmp_path / "ids", crash / "mlflow.db", selection=Selection(run_ids=tuple(ids[1:6])))
    assert sorted(a["arms"][0]["runs"] + a["arms"][1]["runs"]) == sorted(ids[1:6])
    cut = (runs[2].info.start_time + runs[3].info.start_time) / 2000  # between the sides' runs, in seconds
    for sel in (Selection(since=cut), Selection(until=cut)):  # one side only
        with pytest.raises(ConfigError, match="all runs share one config"):
            _audit(tmp_path / "time", crash / "mlflow.db", selection=sel)
    first, last = runs[0].info.start_time / 1000, runs[-1].info.start_time / 1000
    a = _audit(tmp_path / "both", crash / "mlflow.db", selection=Selection(since=first, until=last + 1))
    assert [x["n"] for x in a["arms"]] == [3, 3]
    commit = runs[0].data.tags["mlflow.source.git.commit"]
    a = _audit(tmp_path / "tag", crash / "mlflow.db", selection=Selection(tags=(f"mlflow.source.git.commit={commit}",),
                                                                          experiments=("audit-app",)))
    assert [x["n"] for x in a["arms"]] == [3, 3]
    for sel, words in ((Selection(experiments=("other",)), "holds no finished selected run"),
                       (Selection(tags=("mlflow.source.git.commit=0000000",)), "holds no finished selected run")):
        with pytest.raises(ConfigError, match=words):
            _audit(tmp_path / "none", crash / "mlflow.db", selection=sel)
    with pytest.raises(ConfigError, match="--run-id selects runs of mlflow, wandb, dvc, ablate records"):
        _audit(tmp_path / "hydra", crash / "multirun", selection=Selection(run_ids=("x",)))


def test_seed_keys_and_metrics_named_per_side_and_no_silent_switch(renamed: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="form 4 configs") as e:  # B's seeds under another key: 3 arms of B
        _audit(tmp_path, renamed / "multirun")
    assert "--seed-key A=KEY B=KEY" in e.value.fix
    seeds = {"A": "seed", "B": "random_seed"}
    # both sides log learning_rate: the old audit switched to it silently; this one names what each side logged
    with pytest.raises(ConfigError, match="the sides logged other metrics: A val_acc; B val_accuracy") as e:
        _audit(tmp_path, renamed / "multirun", seed_key=seeds)
    assert "--metric A=val_acc B=val_accuracy" in e.value.fix
    a = _audit(tmp_path, renamed / "multirun", seed_key=seeds, metric={"A": "val_acc", "B": "val_accuracy"})
    assert a["metric"] == "val_acc / val_accuracy" and a["goal"] == "maximize"
    assert a["variable"]["key"] == "data.mix"
    vals = a["statistics"]["values"]
    assert {int(k): v for k, v in vals["control"].items()} == {s: v[-1] for s, v in _own(renamed, "a").items()}
    assert {int(k): v for k, v in vals["treatment"].items()} == {
        s: v[-1] for s, v in _own(renamed, "b", "val_accuracy").items()}
    # the minimal ablation runs B's code: B's seed key and metric
    assert (a["minimal"]["task"]["seed_key"], a["minimal"]["task"]["metric"]) == ("random_seed", "val_accuracy")


def test_a_seed_run_twice_is_flagged_and_a_dir_given_twice_is_read_once(tmp_path: Path) -> None:
    repo = _make(tmp_path / "dup", "--scenario", "duplicate")
    a = _audit(tmp_path, repo / "multirun", repo / "multirun" / "a")
    assert [x["n"] for x in a["arms"]] == [4, 3]
    assert a["merged"]["repeated"] == 4 and "4 records given more than once were read once" in a["merged"]["message"]
    (dup,) = a["duplicates"]
    assert dup.startswith("arm A ran seed 1 2 times") and "labelled 1, 1#2" in dup
    own = {d.name: json.loads((d / "metrics.jsonl").read_text().splitlines()[-1])["val_acc"]
           for d in (repo / "multirun" / "a").glob("[0-9]*")}
    assert a["statistics"]["values"]["control"] == {"1": own["0"], "1#2": own["1"], "2": own["2"], "3": own["3"]}
    md = (tmp_path / "audit" / "audit.md").read_text()
    assert "**Duplicate seed**: arm A ran seed 1 2 times" in md


def _framed(chunks: list[tuple[int, bytes]]) -> bytes:
    """LevelDB-log chunks as W&B writes them: CRC-32 of type and payload, length, type."""
    return b"".join(struct.pack("<IHB", zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF, len(data), kind)
                    + data for kind, data in chunks)


def test_corrupt_wandb_files_are_one_line_naming_the_file(crash: Path, tmp_path: Path) -> None:
    from ablate.audit.sources.wandb import records_at

    run = next(p for p in sorted((crash / "wandb").glob("offline-run-*")) if (p / "files").is_dir())
    (log,) = run.glob("run-*.wandb")
    raw = log.read_bytes()
    recs = list(records_at(log))
    assert len(recs) > 4 and len(raw) < 32768 - 1000  # one block: every record a FULL chunk
    pos, data = recs[2]
    for name, body in (("payload", raw[:pos] + _framed([(1, b"\xff" * len(data))]) + raw[pos + 7 + len(data):]),
                       ("crc", raw[:pos + 7] + bytes([data[0] ^ 0x55]) + raw[pos + 8:])):
        bad = tmp_path / name / run.name
        shutil.copytree(run, bad)
        (bad / log.name).write_bytes(body)
        with pytest.raises(ConfigError) as e:
            _audit(tmp_path / name, bad)
        msg = str(e.value)
        assert msg.count("\n") == 0 and str(bad / log.name) in msg, msg
        assert (f"the record at byte {pos} does not parse as a W&B record" if name == "payload" else
                f"the record at byte {pos} fails its CRC check") in msg


def test_dvc_experiments_through_dvc_exp_show(tmp_path: Path) -> None:
    # seeds 1-2 per mix (4 `dvc exp run`, each a DVC process and a Hydra run; the scenario's default is 3): the
    # test is about reading DVC's own records and matching each value to its mix and seed (issue 34)
    repo = _make(tmp_path / "dvcexp", "--scenario", "dvcexp", "--seeds", "2")
    shown = subprocess.run([sys.executable, "-m", "dvc", "exp", "show", "--json", "-A"], cwd=repo, check=True,
                           capture_output=True, text=True).stdout
    exps = [x for c in json.loads(shown) for g in c.get("experiments") or [] for x in g["revs"]]
    own = {(x["data"]["params"]["conf/config.yaml"]["data"]["data"]["mix"],
            x["data"]["params"]["conf/config.yaml"]["data"]["seed"]): x["data"]["metrics"]["metrics.json"]["data"][
        "val_acc"] for x in exps}
    (tmp_path / "exps.json").write_text(shown)
    for source in (repo, tmp_path / "exps.json"):  # the project (ablate runs `dvc exp show`), or its saved output
        a = _audit(tmp_path / f"out-{source.name}", source)
        assert a["sources"] == ["dvc"] and a["variable"]["key"] == "data.mix"
        assert [x["n"] for x in a["arms"]] == [2, 2] and len(own) == 4
        vals = a["statistics"]["values"]
        assert {int(k): v for k, v in vals["control"].items()} == {s: v for (m, s), v in own.items() if m == "old"}
        assert {int(k): v for k, v in vals["treatment"].items()} == {s: v for (m, s), v in own.items() if m == "new"}
        assert a["confounds"] == []  # one baseline commit, the same data hashes (DVC's deps) on both sides


def test_a_long_read_prints_progress_on_stderr(renamed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The 6 run dirs of the module's ``renamed`` runs (a read is a read; a fixture of its own cost two more Hydra
    processes), read with a progress line every 2."""
    import ablate.audit.sources.base as base

    monkeypatch.setattr(base, "PROGRESS_EVERY", 2)
    capsys.readouterr()
    _audit(tmp_path, renamed / "multirun", seed_key={"A": "seed", "B": "random_seed"},
           metric={"A": "val_acc", "B": "val_accuracy"})
    err = capsys.readouterr().err.splitlines()
    assert [x.split(" (")[0] for x in err] == [f"ablate audit: read {k} of 6 run dirs of {renamed / 'multirun'}"
                                              for k in (2, 4, 6)]
