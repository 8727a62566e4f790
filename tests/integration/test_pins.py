"""Pins and confounds with real git and DVC repositories (issue 3).

The tests about the confound check read, or change a copy of, one ablation of a pure-Python task run once per
module (:func:`clean_run`). Ablations (inline and local trials), resumes and refusals run ablate's CLI entry in this
process (:func:`tests.helpers.ablate_in`); one ablation runs the console script, the proof of it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.helpers import (
    ablate_cli,
    ablate_in,
    add_pure_task,
    commit_all,
    copy_project,
    git,
    only_sweep,
    results,
    run,
    wait_for_plots,
)

pytestmark = pytest.mark.slow
FAST = ["task.epochs=1"]

#: A task that reads the digits data and returns a metric computed from the file's bytes and from a
#: constant in its own source, so tests can see which data and which code a trial actually used.
PROBE = '''
import hashlib
from pathlib import Path

MARK = 1.0


def train(cfg):
    data = Path(cfg.task.data_file).read_bytes()
    if cfg.task.get("tamper") and cfg.seed == 0:
        with open(cfg.task.data_file, "ab") as fh:   # edits the shared data mid-ablation
            fh.write(b"x")
    if cfg.task.get("edit_source") and cfg.seed == 0:
        src = Path(cfg.task.project_dir) / "probe.py"  # the live working tree (the task runs in the snapshot)
        src.write_text(src.read_text().replace("MARK = 1.0", "MARK = 2.0"))
    return {"val_acc": MARK + cfg.task.optim.lr + cfg.seed * 1e-3,
            "data_md5": int(hashlib.md5(data).hexdigest()[:6], 16)}
'''


@pytest.fixture(scope="module")
def clean_run(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project holding one finished ablation of the pure-Python task (lr 0.05 vs 0.2, 3 seeds, launcher=local),
    run once per module in this process; read by tests, copied by those that change it."""
    proj = copy_project(project_template, tmp_path_factory.mktemp("clean") / "proj")
    add_pure_task(proj)
    res = ablate_in(proj, "-m", "task=pure", "variable=lr", "variable.values=[0.2]", "seeds=3", "launcher=local",
                    *FAST)
    assert res.returncode == 0, res.stderr
    wait_for_plots(only_sweep(proj))
    return proj


@pytest.fixture
def clean_copy(clean_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own copy of :func:`clean_run`'s project (the working dir)."""
    proj = copy_project(clean_run, tmp_path / "proj")
    monkeypatch.chdir(proj)
    return proj


@pytest.fixture
def probe_project(project: Path) -> Path:
    (project / "probe.py").write_text(PROBE)
    commit_all(project, "probe task")
    return project


def test_dirty_tree_refused_naming_files(project: Path) -> None:
    (project / "conf" / "task" / "digits_mlp.yaml").write_text(
        (project / "conf" / "task" / "digits_mlp.yaml").read_text() + "\n# edited\n")
    (project / "notes.txt").write_text("scratch")  # untracked: outside the snapshot, not a change (issue 23)
    res = ablate_in(project, "-m", "variable=lr", "seeds=3", "launcher=inline", *FAST)
    assert res.returncode == 2
    assert "uncommitted changes (conf/task/digits_mlp.yaml)" in res.stderr
    assert "notes.txt" not in res.stderr
    assert "allow_dirty=true" in res.stderr
    assert "Traceback" not in res.stderr
    assert not list(project.glob("outputs/ablate/*/*"))


def test_allow_dirty_records_patch_and_leaves_untracked_out(project: Path) -> None:
    add_pure_task(project)  # the records of a dirty tree are the point, not training (issue 34: no torch)
    task = project / "conf" / "task" / "pure.yaml"
    task.write_text(task.read_text().replace("epochs: 15", "epochs: 1"))
    (project / "notes.txt").write_text("scratch notes")
    # the console script (this file's proof of it); the other ablations here run in this process
    res = ablate_cli(project, "-m", "task=pure", "variable=lr", "variable.values=[0.2]", "seeds=3",
                     "launcher=inline", "allow_dirty=true")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    patch = (sd / "dirty.patch").read_text()
    assert "-epochs: 15" in patch and "+epochs: 1" in patch
    snap = (sd / "code" / "conf" / "task" / "pure.yaml").read_text()
    assert "epochs: 1\n" in snap and "epochs: 15" not in snap  # the working tree's content
    assert not (sd / "code" / "notes.txt").exists() and not (sd / "dirty_untracked").exists()  # untracked: never
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    assert plan["pins"]["code"]["dirty"] is True
    assert plan["pins"]["code"]["dirty_files"] == ["conf/task/pure.yaml"]
    assert plan["pins"]["code"]["untracked_files"] == ["notes.txt"]
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["dirty"] is True
    assert "dirty" in (sd / "verdict.md").read_text().lower()


def test_data_modified_mid_ablation_caught_in_trial(probe_project: Path) -> None:
    before = (probe_project / "data" / "digits.npz").read_bytes()
    res = ablate_in(probe_project, "-m", "variable=lr", "variable.values=[0.2]", "seeds=3", "launcher=inline",
                    "+task.tamper=true", "task.fn=probe:train", "allow_dirty=false")
    assert (probe_project / "data" / "digits.npz").read_bytes() == before  # the user's copy is never written
    sd = only_sweep(probe_project)
    rs = results(sd)
    first = rs[("control", 0)]  # it tried to change its input, a read-only copy of the pinned data (issue 35)
    assert first["status"] == "failed", first
    if os.geteuid() == 0:  # root writes a read-only file: the copy changed; the task is wrong, so it stops
        assert res.returncode == 2, res.stderr
        assert "the trial's task wrote to its input data/digits.npz (`task.data`)" in res.stderr
        assert "wrote to its input data/digits.npz" in first["error"]
        assert len(rs) == 1  # stopped at once: every later trial would read other data
    else:  # anyone else cannot write it: that trial fails, the others run on the pinned data
        assert "Permission denied" in first["error"] and "data/digits.npz" in first["error"]
        assert {r["status"] for k, r in rs.items() if k != ("control", 0)} == {"ok"}


def test_source_edit_after_launch_not_seen_by_queued_trials(probe_project: Path) -> None:
    res = ablate_in(probe_project, "-m", "variable=lr", "seeds=3", "launcher=local", "launcher.max_parallel=1",
                    "+task.edit_source=true", "task.fn=probe:train", f"+task.project_dir={probe_project}")
    assert res.returncode == 0, res.stderr
    assert "MARK = 2.0" in (probe_project / "probe.py").read_text()  # the live tree was edited ...
    sd = only_sweep(probe_project)
    for (arm, seed), r in results(sd).items():
        assert r["status"] == "ok", r
        lr = {"control": 0.05, "lr=0.005": 0.005, "lr=0.2": 0.2}[arm]
        assert r["metrics"]["val_acc"] == pytest.approx(1.0 + lr + seed * 1e-3)  # ... but every trial ran MARK = 1.0
    commit = yaml.safe_load((sd / "ablation.yaml").read_text())["pins"]["code"]["commit"]
    for m in sd.glob("trials/*/seed=*/manifest.json"):
        assert json.loads(m.read_text())["code"]["commit"] == commit


def test_environment_difference_aligned_with_arms_is_invalid(clean_copy: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    project = clean_copy
    sd = only_sweep(project)
    # re-run the whole lr=0.2 arm under a different numeric environment (as if resumed elsewhere)
    import shutil

    shutil.rmtree(sd / "trials" / "lr=0.2")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "7")  # the resume's environment: its local trials inherit it
    proc = ablate_in(project, "resume", str(sd))
    assert proc.returncode == 1, proc.stderr  # an invalid verdict is a failed ablation
    assert "the verdict is invalid" in proc.stderr and "NVIDIA_TF32_OVERRIDE" in proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == str(sd / "verdict.md")
    v = json.loads((sd / "verdict.json").read_text())
    finding = next(f for f in v["confounds"]["findings"] if f["field"] == "env.NVIDIA_TF32_OVERRIDE")
    assert finding["kind"] == "environment" and finding["aligned"] is True and finding["severity"] == "invalid"
    assert finding["split"]["lr=0.2"] == {"7": 3}
    assert v["invalid"] is True
    md = (sd / "verdict.md").read_text()
    assert "NVIDIA_TF32_OVERRIDE" in md


def test_environment_difference_spread_across_arms_is_a_warning(clean_copy: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    project = clean_copy
    sd = only_sweep(project)
    import shutil

    for arm in ("control", "lr=0.2"):
        shutil.rmtree(sd / "trials" / arm / "seed=1")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "7")  # the resume's environment: its local trials inherit it
    proc = ablate_in(project, "resume", str(sd))
    assert proc.returncode == 0, proc.stderr
    v = json.loads((sd / "verdict.json").read_text())
    finding = next(f for f in v["confounds"]["findings"] if f["field"] == "env.NVIDIA_TF32_OVERRIDE")
    assert finding["aligned"] is False and finding["severity"] == "warning"
    assert v["confounds"]["invalid"] is False


def test_verdict_json_carries_pins_and_no_confounds(clean_run: Path) -> None:
    project = clean_run  # read only
    sd = only_sweep(project)
    v = json.loads((sd / "verdict.json").read_text())
    assert v["pins"]["code"]["commit"] == git(project, "rev-parse", "HEAD").strip()
    assert v["pins"]["code"]["dirty"] is False
    assert v["pins"]["data"]["data/digits.npz"]["hash"].startswith("md5:")
    assert v["pins"]["environment"]["python"]
    assert "torch" in v["pins"]["environment"]["packages"]
    assert v["confounds"]["complete"] is True
    assert v["confounds"]["findings"] == []
    assert v["confounds"]["checked"] == 6
    assert "None found" in (sd / "verdict.md").read_text()


def test_config_drift_noted_by_verdict(project: Path) -> None:
    add_pure_task(project)  # the config files are recorded by absolute path: this test's own run, not a copy
    res = ablate_in(project, "-m", "task=pure", "variable=lr", "variable.values=[0.005]", "seeds=3",
                    "launcher=inline", *FAST)
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    var = project / "conf" / "variable" / "lr.yaml"
    var.write_text(var.read_text().replace("0.005", "0.001"))
    res = ablate_in(project, "verdict", str(sd))
    assert res.returncode == 0, res.stderr
    v = json.loads((sd / "verdict.json").read_text())
    assert v["config_drift"] == [f"{var} (modified)"]
    assert [a["label"] for a in v["arms"]][1] == "0.005"  # the verdict still describes what ran


@pytest.mark.parametrize(
    ("setup", "pattern"),
    [
        pytest.param("nogit", "is not inside a git repository", id="not-a-git-repo"),
        pytest.param("nocommit", "has no commits yet", id="no-commits"),
        pytest.param("nodvc", "is not in a DVC repository", id="dvc-not-initialised"),
        pytest.param("untracked", "is not tracked by DVC", id="data-not-tracked"),
        pytest.param("modified", "differs from what dvc.lock records", id="data-modified"),
        pytest.param("missing", "missing from the workspace", id="data-missing"),
    ],
)
def test_pin_errors(project: Path, setup: str, pattern: str) -> None:
    import shutil

    if setup in ("nogit", "nocommit"):
        shutil.rmtree(project / ".git")
        if setup == "nocommit":
            run(["git", "init", "-q"], project)
    elif setup == "nodvc":
        shutil.rmtree(project / ".dvc")
        commit_all(project, "drop dvc")
    elif setup == "untracked":
        (project / "data" / "extra.npz").write_bytes(b"123")
        args = ["task.data=[data/extra.npz]"]
    elif setup == "modified":
        with open(project / "data" / "digits.npz", "ab") as fh:
            fh.write(b"x")
    elif setup == "missing":
        (project / "data" / "digits.npz").unlink()
    args = ["task.data=[data/extra.npz]"] if setup == "untracked" else []
    res = ablate_in(project, "-m", "variable=lr", "seeds=3", "launcher=inline", *FAST, *args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert pattern in res.stderr
    assert "Fix:" in res.stderr
    assert "Traceback" not in res.stderr
    assert not list(project.glob("outputs/ablate/*/*"))


@pytest.mark.parametrize("edit", [b"seeds: 3\n", b"seeds: 9\n"])
def test_code_edit_hidden_from_gits_stat_cache_is_dirty(tmp_path: Path, edit: bytes) -> None:
    """A same-size edit whose mtime is restored: `git status` trusts its stat cache and says clean
    (core.checkStat=minimal and core.trustctime=false make the trap deterministic; within one second,
    without racy-entry marking, it happens with the default settings too), ablate hashes and sees it."""
    from ablate.errors import PinError
    from ablate.pin.pins import dirty_files, pin_code

    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "core.checkStat", "minimal")
    git(root, "config", "core.trustctime", "false")
    params = root / "params.yaml"
    params.write_bytes(b"seeds: 2\n")
    (root / "train.py").write_text("print('train')\n")
    past = 1_700_000_000
    os.utime(params, (past, past))
    commit_all(root, "params")
    with open(params, "r+b") as fh:  # in place: same inode, same size
        fh.write(edit)
    os.utime(params, (past, past))
    assert git(root, "status", "--porcelain").strip() == ""  # git's own status is fooled
    assert dirty_files(root) == [" M params.yaml"]
    with pytest.raises(PinError, match=r"uncommitted changes \(params\.yaml\)"):
        pin_code(root, allow_dirty=False)
    params.write_bytes(b"seeds: 2\n")  # restored content: clean again, nothing else hashed as changed
    os.utime(params, (past, past))
    assert dirty_files(root) == []
