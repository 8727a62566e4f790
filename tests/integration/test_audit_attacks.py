"""Records are input from others: ``ablate audit`` on records an attacker (or an accident) shaped, called in-process.

- git option injection: an MLflow run whose commit tag is ``--output=<file>`` must not make the audit run git with
  that option (git would create or truncate the file);
- environment resolution: a Hydra config holding ``${oc.env:AUDIT_SECRET}`` must not be resolved in the auditor's
  environment (its secret would be printed as a confound and written to audit.md/audit.json);
- input modification: a sqlite file that is no MLflow store, and a file store lacking what MLflow's client
  creates, must not be written to (the client would create its tables, its dirs); a store that is read is left
  byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.audit import run_audit
from ablate.audit.runs import commit_id, git_commit
from ablate.errors import ConfigError
from tests.helpers import REPO

MAKE = REPO / "tests" / "fixtures" / "audit_app" / "make_runs.py"
SECRET = "auditor-secret-7f3a9c"


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the sha256 of its bytes and its mode and mtime (a write of any kind shows)."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        body = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else ""
        out[str(p.relative_to(root))] = f"{body}:{st.st_mode}:{st.st_mtime_ns}"
    return out


def _git_repo(root: Path) -> str:
    root.mkdir(parents=True)
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow sqlite store as MLflow's client creates it: its tables made and migrated once (about 2.6 s
    of CPU), then copied by each test that writes a store (0.06 s) instead of each migrating its own."""
    from mlflow.tracking import MlflowClient

    db = tmp_path_factory.mktemp("migrated") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    return db


def _store(db: Path, commits: tuple[str, str], source_name: str, migrated: Path) -> None:
    """An MLflow store written by MLflow's client (into a copy of ``migrated``): lr 0.1 and 0.2 at seeds 1-3, each
    side's commit tag as given."""
    from mlflow.tracking import MlflowClient

    shutil.copyfile(migrated, db)
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.create_experiment("shared")
    for side, (lr, commit) in enumerate(zip((0.1, 0.2), commits, strict=True)):
        for seed in (1, 2, 3):
            run = client.create_run(exp, tags={"mlflow.source.git.commit": commit, "mlflow.source.name": source_name})
            rid = run.info.run_id
            client.log_param(rid, "seed", seed)
            client.log_param(rid, "lr", lr)
            client.log_metric(rid, "val_acc", 0.7 + 0.05 * side + 0.01 * seed, step=0)
            client.set_terminated(rid, "FINISHED")


def test_a_commit_tag_that_is_a_git_option_never_reaches_git(tmp_path: Path, migrated: Path) -> None:
    repo = tmp_path / "repo"
    real = _git_repo(repo)
    victim = tmp_path / "victim.txt"
    victim.write_text("the auditor's file\n")
    created = tmp_path / "created.txt"
    db = tmp_path / "mlflow.db"
    _store(db, (real, f"--output={victim}"), str(repo / "train.py"), migrated)
    _store(tmp_path / "other.db", (real, f"--output={created}"), str(repo / "train.py"), migrated)
    for store in (db, tmp_path / "other.db"):
        a = run_audit([str(store)], out=tmp_path / f"audit-{store.stem}", repo=str(repo), plots=False)
        assert [x["commit"] for x in a["arms"]] == [real, None]  # taken as not recorded ...
        assert any("which is not a commit id: taken as not recorded" in n for n in a["notes"])  # ... and said
    assert victim.read_text() == "the auditor's file\n" and not created.exists()
    # the git helpers refuse such a value whoever calls them
    assert commit_id(f"--output={victim}") is None and git_commit(str(repo), f"--output={victim}") is None
    assert git_commit(str(repo), real[:12]) == real


def test_an_env_interpolation_in_a_hydra_config_stays_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "WANDB_", "AUDIT_"))}
    subprocess.run([sys.executable, str(MAKE), str(tmp_path / "p"), "--scenario", "secret"], check=True, env=env,
                   timeout=600)
    monkeypatch.setenv("AUDIT_SECRET", SECRET)  # the auditor's own
    out = tmp_path / "audit"
    a = run_audit([str(tmp_path / "p" / "repo" / "multirun")], out=out, variable="lr", plots=False)
    (token,) = [c for c in a["confounds"] if c["field"] == "token"]
    assert (token["a"], token["b"]) == ("${oc.env:AUDIT_SECRET}", "none")  # as written, as Hydra recorded it
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace"), f
    # a node interpolation of the same config still takes the recorded value (data.path follows data.mix)
    assert a["arms"][0]["n"] == 3


def test_a_sqlite_file_that_is_no_mlflow_store_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "results.db"  # an app's own sqlite file
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE results (seed INTEGER, acc REAL)")
    con.executemany("INSERT INTO results VALUES (?, ?)", [(1, 0.7), (2, 0.71)])
    con.commit()
    con.close()
    before = _tree(tmp_path)
    with pytest.raises(ConfigError, match="no MLflow store") as e:
        run_audit([str(db)], out=tmp_path / "audit")
    assert "\n" not in str(e.value)
    assert _tree(tmp_path) == before  # not a byte written (MLflow's client would have created its tables)


def test_a_file_store_the_client_would_write_into_is_refused_untouched(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 writes file stores only when asked
    store = tmp_path / "mlruns"
    client = MlflowClient(tracking_uri=store.as_uri())  # a file store, as MLflow writes it
    client.create_experiment("x")
    (store / ".trash").rmdir()  # as a copy that dropped the empty dir would be
    before = _tree(tmp_path)
    with pytest.raises(ConfigError, match=r"lacks the \.trash/ dir"):
        run_audit([str(store)], out=tmp_path / "audit")
    assert _tree(tmp_path) == before


def test_a_store_that_is_read_is_left_as_it_was(tmp_path: Path, migrated: Path) -> None:
    repo = tmp_path / "repo"
    real = _git_repo(repo)
    db = tmp_path / "mlflow.db"
    _store(db, (real, real), str(repo / "train.py"), migrated)
    before = _tree(tmp_path)
    run_audit([str(db)], out=tmp_path / "out" / "audit", plots=False)
    after = {k: v for k, v in _tree(tmp_path).items() if not k.startswith("out")}
    assert after == before


@pytest.fixture(scope="module")
def text_store(migrated: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow store (MLflow's client, into a copy of ``migrated``) whose params are text that YAML would change:
    a time, a date, a value with a newline and a `#`, a mode with a leading 0; arm A and B differ in each, at seeds
    1-3. Written once; each test reads its own copy (six tests each migrating and writing one: about 2 s of CPU
    each, issue 34)."""
    from mlflow.tracking import MlflowClient

    db = tmp_path_factory.mktemp("text") / "mlflow.db"
    shutil.copyfile(migrated, db)
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.create_experiment("text")
    for side, params in enumerate(TEXT_PARAMS):
        for seed in (1, 2, 3):
            rid = client.create_run(exp).info.run_id
            client.log_param(rid, "seed", seed)
            for k, v in params.items():
                client.log_param(rid, k, v)
            client.log_metric(rid, "val_acc", 0.7 + 0.05 * side + 0.01 * seed, step=0)
            client.set_terminated(rid, "FINISHED")
    return db


TEXT_PARAMS = ({"t": "1:30", "day": "2026-01-01", "note": "x\n# a", "mode": "0777", "lr": "1e-05"},
               {"t": "1:45", "day": "2026-01-02", "note": "x\n# b", "mode": "0775", "lr": "2e-05"})


@pytest.mark.parametrize("key", ["t", "day", "note", "mode", "lr"])
def test_an_mlflow_param_is_read_as_the_text_mlflow_logged(tmp_path: Path, text_store: Path, key: str) -> None:
    """MLflow keeps a param as the text ``str(value)`` made: a number's text is that number, any other text stays
    itself. Read as YAML, `1:30` was 90 (base 60), `0777` 511 (octal), `2026-01-01` a date (audit.json's write
    failed: a TypeError traceback), `x\\n# a` and `x\\n# b` both `x` (two configs counted as one), `1e-05` text."""
    db = tmp_path / "mlflow.db"
    shutil.copyfile(text_store, db)
    a = run_audit([str(db)], out=tmp_path / "audit", variable=key, plots=False)
    want = (TEXT_PARAMS[0][key], TEXT_PARAMS[1][key])
    if key == "lr":
        want = (1e-05, 2e-05)  # a number's text is the number
    assert (a["variable"]["key"], a["variable"]["a"], a["variable"]["b"]) == (key, *want), a["variable"]
    assert [x["n"] for x in a["arms"]] == [3, 3]


def test_a_recorded_newline_never_makes_a_line_of_audit_md(tmp_path: Path, text_store: Path) -> None:
    """A param `x\\n# a` printed as it is made a heading `# a in A, x` in audit.md: every recorded text is shown on
    its own line, its line breaks as `\\n`."""
    db = tmp_path / "mlflow.db"
    shutil.copyfile(text_store, db)
    run_audit([str(db)], out=tmp_path / "audit", variable="note", plots=False)
    md = (tmp_path / "audit" / "audit.md").read_text()
    assert "- Variable under test (declared): `note`: x\\n# a in A, x\\n# b in B." in md, md[:800]
    assert not [ln for ln in md.splitlines() if ln.startswith("# ") and not ln.startswith("# Audit of")], md


def test_a_recorded_interpolation_is_never_the_value_of_the_ablation_it_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migrated: Path) -> None:
    """B's `home` recorded as `${oc.env:AUDIT_SECRET}1` (the text MLflow was given) was written as the minimal
    ablation's variable value, so its printed command would resolve it in the auditor's environment. It is said
    instead, as a run to make by hand, and no variable file holding it is written."""
    from mlflow.tracking import MlflowClient

    repo = tmp_path / "repo"
    real = _git_repo(repo)
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated, db)  # MLflow's tables, made once for the module
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.create_experiment("interp")
    for side, home in enumerate(("plain", "${oc.env:AUDIT_SECRET}1")):
        for seed in (1, 2, 3):
            rid = client.create_run(exp, tags={"mlflow.source.git.commit": real,
                                               "mlflow.source.name": str(repo / "train.py")}).info.run_id
            client.log_param(rid, "seed", seed)
            client.log_param(rid, "home", home)
            client.log_param(rid, "bs", 32 * (side + 1))  # a confound: the audit writes the ablation that settles it
            client.log_metric(rid, "val_acc", 0.7 + 0.05 * side + 0.01 * seed, step=0)
            client.set_terminated(rid, "FINISHED")
    monkeypatch.setenv("AUDIT_SECRET", SECRET)
    out = tmp_path / "audit"
    a = run_audit([str(db)], out=out, variable="home", repo=str(repo), plots=False)
    m = a["minimal"]
    assert m["command"] is None and m["config_dir"] is None, m
    assert m["by_hand"].startswith("B's value of `home` is recorded as an interpolation (${oc.env:AUDIT_SECRET}1), "
                                   "which ablate would resolve in this environment, not the runs'"), m["by_hand"]
    assert not (out / "ablation").exists()
    assert "The runs that settle it" in (out / "audit.md").read_text()


def test_an_empty_wandb_log_is_a_run_left_out_not_the_audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed before wandb wrote its log's header leaves a 0-byte ``run-*.wandb``: that run is left out and
    named, as one killed later (a torn tail) is; the other runs are audited. It refused the whole audit, its fix
    "give the run dir wandb wrote" when that is what was given."""
    import wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)
    for side, lr in enumerate((0.1, 0.2)):
        for seed in (1, 2, 3):
            r = wandb.init(project="p", dir=str(tmp_path), config={"lr": lr, "seed": seed}, reinit="finish_previous")
            r.log({"val_acc": 0.7 + 0.05 * side + 0.01 * seed}, step=0)
            r.finish()
    first = sorted((tmp_path / "wandb").glob("offline-run-*"))[0]
    (log,) = first.glob("run-*.wandb")
    log.write_bytes(b"")
    a = run_audit([str(tmp_path / "wandb")], out=tmp_path / "audit", variable="lr", plots=False)
    assert [x["n"] for x in a["arms"]] == [2, 3]
    assert f"W&B run {first.name}: no run record" in a["left_out"]
    garbage = tmp_path / "junk" / first.name
    shutil.copytree(first, garbage)
    (garbage / log.name).write_bytes(b"not a log at all")
    with pytest.raises(ConfigError) as e:
        run_audit([str(garbage)], out=tmp_path / "audit2", plots=False)
    msg = str(e.value)
    assert f"{garbage / log.name} is corrupt: it does not start with W&B's header" in msg, msg
    assert "leave it out" in msg and "give the run dir wandb wrote" not in msg
