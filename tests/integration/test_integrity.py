"""Integrity without holes (issue 13): content pins, threads in the plan, with real git, DVC, processes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, commit_all, only_sweep, results, run

pytestmark = pytest.mark.slow
ONE = ["-m", "variable=lr", "variable.values=[0.5]", "seeds=3", "task.epochs=1"]

#: Rewrites a file in place (same inode, same size) and puts its mtime back: what `rsync --inplace -t`
#: does, and what DVC's state cache (keyed on inode, mtime, size) cannot see.
SAME_META_EDIT = '''
import os, sys
path, offset, arg = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = open(arg[1:], "rb").read() if arg.startswith("@") else bytes.fromhex(arg)
st = os.stat(path)
with open(path, "r+b") as fh:
    fh.seek(offset)
    fh.write(data)
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
'''

PROBE = '''
import subprocess, sys
from pathlib import Path

MARK = 1.0


def train(cfg):
    data = Path(cfg.task.data_file).read_bytes()
    if cfg.task.get("edit_data") and cfg.seed == 0:   # another process edits the data while this trial runs
        flipped = bytes([data[len(data) // 2] ^ 0xFF]).hex()
        subprocess.run([sys.executable, cfg.task.edit_data, cfg.task.data_file, str(len(data) // 2), flipped],
                       check=True)
    if cfg.task.get("edit_code") and cfg.seed == 0:   # a user fixing the snapshot where a traceback pointed
        src = Path(__file__)
        st = src.stat()
        src.write_text(src.read_text().replace("MARK = 1.0", "MARK = 3.0"))
        import os
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    return {"val_acc": MARK + cfg.task.optim.lr + cfg.seed * 1e-3, "dvc_imported": float("dvc" in sys.modules)}
'''


@pytest.fixture
def probe_project(project: Path) -> Path:
    (project / "probe.py").write_text(PROBE)
    (project / "edit_same_meta.py").write_text(SAME_META_EDIT)
    commit_all(project, "probe task")
    return project


def dvc_status(project: Path) -> str:
    """What `dvc status prepare` prints, DVC's CLI entry (:func:`dvc.cli.main`) called in this process: about
    0.1-0.5 s of CPU against 1.5 s for `python -m dvc` (an interpreter start and DVC's imports). The same command
    on the same files and the same state cache, so it is fooled by an edit keeping size, inode and mtime just as
    the console script is; the loggers DVC sets up (bound to the captured streams) are put back after it."""
    from dvc.cli import main

    from tests.helpers import _loggers, _restore_loggers

    out, env, loggers = io.StringIO(), dict(os.environ), _loggers()
    os.environ["DVC_NO_ANALYTICS"] = "1"
    try:
        with contextlib.chdir(project), contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main(["status", "prepare"])
    finally:
        os.environ.clear()
        os.environ.update(env)
        _restore_loggers(loggers)
    return out.getvalue()


def shuffled_val_labels(path: Path) -> bytes:
    """The digits file with its validation labels permuted: same arrays, shapes and dtypes, so the
    same size (np.savez stores them uncompressed)."""
    d = dict(np.load(path))
    d["y_val"] = np.random.default_rng(0).permutation(d["y_val"])
    buf = io.BytesIO()
    np.savez(buf, **d)
    return buf.getvalue()


@pytest.mark.parametrize("edit", ["shuffled_labels", "one_byte"])
def test_data_edit_keeping_size_inode_mtime_refused_at_launch(project: Path, tmp_path: Path, edit: str) -> None:
    """Fault 1: DVC's state cache has the old hash; the edit keeps size, inode and mtime."""
    data = project / "data" / "digits.npz"
    assert "up to date" in dvc_status(project)  # DVC hashed the file and cached it in its state
    before = data.stat()
    original = data.read_bytes()
    new = shuffled_val_labels(data) if edit == "shuffled_labels" else \
        original[:100] + bytes([original[100] ^ 1]) + original[101:]
    assert len(new) == len(original) and new != original
    (tmp_path / "new.bin").write_bytes(new)
    run([sys.executable, "-c", SAME_META_EDIT, str(data), "0", f"@{tmp_path / 'new.bin'}"], project)
    after = data.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert "up to date" in dvc_status(project)  # DVC itself is fooled (its state says unchanged)
    res = ablate_in(project, *ONE, "launcher=inline")
    assert res.returncode == 2, res.stderr
    assert "data/digits.npz differs from what dvc.lock records" in res.stderr
    assert "dvc checkout --force data/digits.npz" in res.stderr and "Traceback" not in res.stderr
    assert "`git add dvc.lock` and commit it" in res.stderr
    assert not list(project.glob("outputs/ablate/*/*/trials"))


def test_data_edited_while_trials_run_is_pin_mismatch(probe_project: Path) -> None:
    """Fault 2: another process rewrites the data in place (mtime restored) while a local trial runs."""
    res = ablate_in(probe_project, *ONE, "launcher=local", "launcher.max_parallel=1", "task.fn=probe:train",
                    "+task.edit_data=edit_same_meta.py")
    assert res.returncode == 1, res.stderr  # the verdict is invalid: no trial ran on the pinned data throughout
    sd = only_sweep(probe_project)
    rs = results(sd)
    first = rs[("control", 0)]
    assert first["status"] == "pin_mismatch" and "changed while the trial ran" in first["error"]
    assert first["metrics"]["val_acc"] == pytest.approx(1.05)  # the result is kept, not used
    manifest = json.loads((sd / "trials/control/seed=0/manifest.json").read_text())
    assert manifest["data"]["data/digits.npz"]["hash"].startswith("md5:")  # before: the pinned content
    assert manifest["data_after"]["data/digits.npz"]["hash"] is None  # after: other content
    later = [r for k, r in rs.items() if k != ("control", 0)]
    assert len(later) == 5 and {r["status"] for r in later} == {"pin_mismatch"}
    assert all("data/digits.npz changed since launch" in r["error"] for r in later)
    v = json.loads((sd / "verdict.json").read_text())
    assert v["invalid"] is True


def test_code_snapshot_edit_seen_in_trial_and_before_launch(probe_project: Path) -> None:
    """Fault 3: editing DIR/code/probe.py (size and mtime kept) after launch, and deleting the snapshot. The
    inline run of this pure task runs ablate's CLI entry in this process (the check is the trial's, the same under
    every launcher; the console script's run is the inline one of the threads test)."""
    res = ablate_in(probe_project, *ONE, "launcher=inline", "task.fn=probe:train", "+task.edit_code=true")
    assert res.returncode == 1, res.stderr
    sd = only_sweep(probe_project)
    assert "MARK = 3.0" in (sd / "code" / "probe.py").read_text()
    rs = results(sd)
    assert rs[("control", 0)]["status"] == "pin_mismatch"
    assert "code: the snapshot" in rs[("control", 0)]["error"]
    later = [r for k, r in rs.items() if k != ("control", 0)]
    assert {r["status"] for r in later} == {"pin_mismatch"} and all("code: the snapshot" in r["error"] for r in later)
    # before launch: `ablate resume` refuses at once and starts no trial
    shutil.rmtree(sd / "trials" / "lr=0.5" / "seed=1")
    resume = ablate_in(probe_project, "resume", str(sd))
    assert resume.returncode == 2, resume.stderr
    assert "the code snapshot no longer matches the pins" in resume.stderr and "Traceback" not in resume.stderr
    assert not (sd / "trials" / "lr=0.5" / "seed=1" / "result.json").exists()
    # a deleted snapshot: refused before launch too, not found per trial
    shutil.rmtree(sd / "code")
    resume = ablate_in(probe_project, "resume", str(sd))
    assert resume.returncode == 2, resume.stderr
    assert "code snapshot marker" in resume.stderr and "is missing" in resume.stderr
    assert not (sd / "trials" / "lr=0.5" / "seed=1" / "result.json").exists()


def test_threads_fixed_in_plan_for_every_launcher_and_resume(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault 10: the shell's thread settings and the slot count never reach a trial; the plan's do."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    # the console script, this file's proof of it (its cheapest ablation): the inline trials run in its own process,
    # torch's threads set there (in this process they would stay set after the call)
    a = ablate_cli(project, *ONE, "launcher=inline")
    b = ablate_in(project, *ONE, "launcher=local", "launcher.max_parallel=1")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    da, db = sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))
    for sd in (da, db):
        assert yaml.safe_load((sd / "ablation.yaml").read_text())["options"]["threads"] == 1
        for m in sd.glob("trials/*/seed=*/manifest.json"):
            man = json.loads(m.read_text())
            assert man["determinism"]["threads"] == 1 and man["determinism"]["threads_after"] == 1
            assert man["environment"]["env"]["OMP_NUM_THREADS"] == "1"
    for arm in ("control", "lr=0.5"):
        for seed in (0, 1, 2):
            ra = json.loads((da / "trials" / arm / f"seed={seed}" / "result.json").read_text())["metrics"]
            rb = json.loads((db / "trials" / arm / f"seed={seed}" / "result.json").read_text())["metrics"]
            assert (ra["val_acc"], ra["val_loss"]) == (rb["val_acc"], rb["val_loss"])
    # resume one trial from a shell with other thread settings: it runs with the plan's, no confound
    shutil.rmtree(db / "trials" / "lr=0.5" / "seed=1")
    with monkeypatch.context() as mp:  # the shell's settings, as the resume's trials inherit them
        mp.setenv("OMP_NUM_THREADS", "3")
        mp.setenv("MKL_NUM_THREADS", "7")
        proc = ablate_in(project, "resume", str(db))
    assert proc.returncode == 0, proc.stderr
    man = json.loads((db / "trials/lr=0.5/seed=1/manifest.json").read_text())
    assert man["environment"]["env"]["MKL_NUM_THREADS"] == "1" and man["determinism"]["threads_after"] == 1
    v = json.loads((db / "verdict.json").read_text())
    assert v["confounds"]["findings"] == [] and v["invalid"] is False
    # threads=2 is applied as asked, and recorded
    c = ablate_in(project, *ONE, "launcher=local", "threads=2")
    assert c.returncode == 0, c.stderr
    dc = max((p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml")), key=lambda p: p.stat().st_mtime)
    for m in dc.glob("trials/*/seed=*/manifest.json"):
        man = json.loads(m.read_text())
        assert man["determinism"]["threads_after"] == 2 and man["environment"]["env"]["OPENBLAS_NUM_THREADS"] == "2"


def test_thread_difference_is_a_confound() -> None:
    from ablate.judge.confounds import check

    plan = {"arms": [{"name": "control", "changes": {}}, {"name": "lr=0.5", "changes": {"task.optim.lr": [0.05, 0.5]}}]}
    manifests = {(arm, s): {"determinism": {"mode": "seeded", "threads": 1 if s else 2}}
                 for arm in ("control", "lr=0.5") for s in (0, 1)}
    out = check(plan, manifests, list(manifests))
    (finding,) = out["findings"]
    assert finding["field"] == "threads" and finding["severity"] == "invalid" and out["invalid"] is True


@pytest.mark.parametrize("mode", ["0777", "0770", "0702"])
def test_sweep_dir_mode_with_group_or_world_write_refused(project: Path, mode: str) -> None:
    """Fault 5: a mode letting others write the sweep dir is refused before anything is created."""
    res = ablate_in(project, *ONE, "launcher=inline", f'sweep_dir_mode="{mode}"')
    assert res.returncode == 2, res.stderr
    assert "sweep_dir_mode" in res.stderr and "lets other users write" in res.stderr
    assert "Traceback" not in res.stderr and not list(project.glob("outputs/ablate/*/*"))


@pytest.mark.parametrize("where", ["first", "last"])
def test_directory_output_edit_keeping_metadata_is_seen(project: Path, where: str) -> None:
    """Fault 1 and 2 for a DVC-tracked directory: one file inside rewritten in place (size, inode and
    mtime kept) is seen at launch, and, after launch, by the trial's check (which imports no DVC)."""
    from ablate.errors import PinError
    from ablate.pin import pins

    d = project / "shards"
    d.mkdir()
    for i in range(3):
        (d / f"{i}.bin").write_bytes(bytes(range(256)) * (i + 1))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    run([sys.executable, "-m", "dvc", "add", "shards"], project, env=env)
    commit_all(project, "shards")
    target = d / ("0.bin" if where == "first" else "2.bin")
    plan = {"arms": [{"config": {"task": {"data": ["shards"]}}}], "project": {"cwd": str(project)},
            "pins": {"data": pins.pin_data(["shards"], project)}}  # pinned; DVC's state now caches it
    assert pins.mismatches(plan["pins"], {"data": pins.data_seen(plan)}) == []
    run([sys.executable, "-c", SAME_META_EDIT, str(target), "7", "ff"], project)
    seen = pins.data_seen(plan)
    assert seen["shards"]["hash"] is None
    (problem,) = pins.mismatches(plan["pins"], {"data": seen})
    assert "shards changed since launch" in problem and "dvc checkout --force shards" in problem
    with pytest.raises(PinError, match=re.escape("shards differs from what shards.dvc records")) as err:
        pins.pin_data(["shards"], project)
    assert "`git add shards.dvc` and commit it" in str(err.value)  # the file DVC records it in, by name


def test_trial_processes_check_data_without_importing_dvc(probe_project: Path) -> None:
    """Issue 15, item 4: a trial reuses the launch's work (the content digest) and imports no DVC."""
    res = ablate_in(probe_project, *ONE, "launcher=local", "launcher.max_parallel=1", "task.fn=probe:train")
    assert res.returncode == 0, res.stderr
    rs = results(only_sweep(probe_project))
    assert len(rs) == 6 and all(r["status"] == "ok" and r["metrics"]["dvc_imported"] == 0.0 for r in rs.values())
    man = json.loads((only_sweep(probe_project) / "trials/control/seed=0/manifest.json").read_text())
    pinned = yaml.safe_load((only_sweep(probe_project) / "ablation.yaml").read_text())["pins"]["data"]
    assert man["data"]["data/digits.npz"] == {"hash": pinned["data/digits.npz"]["hash"],
                                              "content": pinned["data/digits.npz"]["content"]}
