"""Sweep-dir safety (issue 13): symlinks, modes, the lock, remembered options, OS errors, process trees.

Real files, real processes and real signals; no mocks. One finished ablation of a pure-Python task (no torch:
these tests are about the sweep dir, not training) is run once per module; a test that changes it gets its own
copy (:func:`done_sweep`). Commands, the resume that runs a trial and the process-tree runs (inline and local
trials) run ablate's CLI entry in this process (:func:`tests.helpers.ablate_in`); that one ablation (the proof of the
console script) and the writes under a file-size limit (a limit of ablate's own process) go through the console
script.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, add_pure_task, commit_all, copy_project, only_sweep, wait_for_plots

pytestmark = pytest.mark.slow
ONE = ["-m", "variable=lr", "variable.values=[0.5]", "seeds=3", "task.epochs=1"]
ABLATE = str(Path(sys.executable).with_name("ablate"))


def ablate(cwd: Path, *args: str, env: dict[str, str] | None = None,
           preexec: object = None) -> subprocess.CompletedProcess[str]:
    """The console script as a process of its own: ``preexec`` sets a limit (RLIMIT_FSIZE) on ablate's process."""
    return subprocess.run([ABLATE, *args], cwd=cwd, capture_output=True, text=True, env=env or dict(os.environ),
                          preexec_fn=preexec, timeout=600)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def done_template(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project holding one finished ablation (the pure-Python task, inline, ``sweep_dir_mode="0750"``), run once
    per module through the console script. Tests read it; a test that changes it takes :func:`done_sweep`."""
    proj = copy_project(project_template, tmp_path_factory.mktemp("done") / "proj")
    add_pure_task(proj)
    # the console script (this file's proof of it); the other ablations here run in this process
    res = ablate_cli(proj, *ONE, "task=pure", "launcher=inline", 'sweep_dir_mode="0750"')
    assert res.returncode == 0, res.stderr
    wait_for_plots(only_sweep(proj))  # `ablate -m` returns before its plots: the drawer rewrites, then lets go
    return proj


@pytest.fixture
def done_sweep(done_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own copy of :func:`done_template`'s sweep dir (in a copy of its project, the working dir)."""
    proj = copy_project(done_template, tmp_path / "proj")
    monkeypatch.chdir(proj)
    return only_sweep(proj)


def test_planted_symlinks_are_never_followed(done_sweep: Path, tmp_path: Path) -> None:
    """Fault 4: a `.lock` symlink (resume used to truncate its target) and symlinked records and dirs."""
    from ablate.errors import SweepDirError
    from ablate.record.sweepdir import SweepDir, open_log, read_json, write_atomic

    sd = done_sweep
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (sd / ".lock").unlink()
    (sd / ".lock").symlink_to(victim)
    (sd / "trials/control/seed=1/result.json").unlink()  # something left to run
    res = ablate_in(sd.parent, "resume", str(sd))
    assert res.returncode == 2, res.stderr
    assert ".lock is a symbolic link" in res.stderr and f"rm {sd / '.lock'}" in res.stderr
    assert "Traceback" not in res.stderr
    assert victim.read_text() == "precious\n"
    # the fix it names works
    subprocess.run(["rm", str(sd / ".lock")], check=True)
    assert ablate_in(sd.parent, "resume", str(sd)).returncode == 0  # runs the trial left (inline)
    # a log planted as a link: appending to it is refused, the target untouched
    log = sd / "trials/control/seed=0/stdout.log"
    log.unlink(missing_ok=True)
    log.symlink_to(victim)
    with pytest.raises(SweepDirError, match="is a symbolic link"):
        open_log(log)
    # a record planted as a link: read refused; an atomic write replaces the link, not its target
    with pytest.raises(SweepDirError, match="is a symbolic link"):
        read_json(log)
    write_atomic(log, "new\n")
    assert not log.is_symlink() and log.read_text() == "new\n" and victim.read_text() == "precious\n"
    # a trial dir planted as a link to a directory elsewhere: refused, nothing created there
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (sd / "trials/lr=0.5").rename(tmp_path / "moved")
    (sd / "trials/lr=0.5").symlink_to(outside, target_is_directory=True)
    with pytest.raises(SweepDirError, match="symbolic link"):
        SweepDir.open(sd).mkdir(sd / "trials/lr=0.5/seed=0")
    assert list(outside.iterdir()) == []


def test_group_writable_sweep_dir_refused_and_inner_modes_follow(done_template: Path, done_sweep: Path) -> None:
    """Fault 5: an existing sweep dir others can write is refused (fix tested); every inner dir has the
    sweep dir's mode and no file in the code snapshot is writable by others."""
    made = only_sweep(done_template)  # as the run left it (read only here)
    dirs = [made, *(p for p in made.rglob("*") if p.is_dir() and not p.is_symlink())]
    assert {d.relative_to(made).as_posix(): stat.S_IMODE(d.stat().st_mode) for d in dirs if
            stat.S_IMODE(d.stat().st_mode) != 0o750} == {}
    assert any(d.name == "seed=0" for d in dirs) and any("code" in d.parts for d in dirs)
    writable = [p for p in made.rglob("*") if p.is_file() and p.stat().st_mode & 0o022]
    assert writable == []
    sd, project = done_sweep, done_sweep.parents[3]
    os.chmod(sd, 0o777)
    for cmd in ("status", "verdict", "resume"):
        r = ablate_in(project, cmd, str(sd))
        assert r.returncode == 2, (cmd, r.stderr)
        assert "other users can write into it" in r.stderr and f"chmod -R go-w {sd}" in r.stderr
        assert "Traceback" not in r.stderr
    subprocess.run(["chmod", "-R", "go-w", str(sd)], check=True)
    assert ablate_in(project, "status", str(sd)).returncode == 0


def test_group_writable_inner_dirs_refused_like_the_top_one(done_sweep: Path) -> None:
    """Issue 26 item 8: an inner dir others can write (code/ or a dir in the snapshot, trials/, trials/<arm>/,
    a trial's dir) is refused as the top one is, naming that dir; the fix given (`chmod -R go-w DIR`) works."""
    sd, project = done_sweep, done_sweep.parents[3]
    snapshot_dir = next(p for p in (sd / "code").rglob("*") if p.is_dir() and not p.is_symlink())
    inner = [sd / "code", snapshot_dir, sd / "trials", sd / "trials" / "lr=0.5", sd / "trials" / "control" / "seed=1"]
    for d in inner:
        os.chmod(d, 0o770)
        for cmd in ("status", "verdict", "resume"):
            r = ablate_in(project, cmd, str(sd))
            assert r.returncode == 2, (d, cmd, r.stderr)
            assert "Traceback" not in r.stderr
            (line,) = r.stderr.strip().splitlines()
            assert f"{d} has mode drwxrwx---: other users can write into it" in line, line
            assert f"chmod -R go-w {sd}`" in line
        subprocess.run(["chmod", "-R", "go-w", str(sd)], check=True)  # the fix the message gives
        assert ablate_in(project, "status", str(sd)).returncode == 0


def _hold_lock(sd: Path) -> subprocess.Popen[str]:
    code = ("import sys, time; from ablate.record.sweepdir import SweepDir; SweepDir(sys.argv[1]).acquire(); "
            "print('held', flush=True); time.sleep(600)")
    p = subprocess.Popen([sys.executable, "-c", code, str(sd)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def test_verdict_during_a_run_never_writes(done_sweep: Path) -> None:
    """Fault 6: `ablate verdict DIR` while another process holds the sweep dir prints, writes nothing."""
    sd = done_sweep
    (sd / "trials/lr=0.5/seed=1/result.json").unlink()  # the verdict so far differs from the final one
    final = (sd / "verdict.json").read_bytes()
    holder = _hold_lock(sd)
    try:
        r = ablate_in(sd.parent, "verdict", str(sd))
        assert r.returncode == 0, r.stderr
        assert "# " in r.stdout and "printed and not written" in r.stderr and f"pid {holder.pid}" in r.stderr
        assert (sd / "verdict.json").read_bytes() == final
        r = ablate_in(sd.parent, "verdict", str(sd), "--alpha", "0.01")
        assert r.returncode == 2 and "options cannot be remembered now" in r.stderr
        assert not (sd / "verdict_options.json").exists()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # type: ignore[union-attr]
    r = ablate_in(sd.parent, "verdict", str(sd))  # the lock is free again: the verdict is written
    assert r.returncode == 0, r.stderr
    v = json.loads((sd / "verdict.json").read_text())
    assert {a["arm"]: a["pending"] for a in v["arms"]} == {"control": 0, "lr=0.5": 1}


@pytest.mark.parametrize("content", ['{"alpha": 0.0', '[0.01]', '{"alfa": 0.01}', '{"alpha": 2}', ""])
def test_corrupt_remembered_options_is_an_error(done_sweep: Path, content: str) -> None:
    """Fault 8: a corrupt verdict_options.json is never ignored; the fix it names (rm) works."""
    sd = done_sweep
    r = ablate_in(sd.parent, "verdict", str(sd), "--alpha", "0.01", "--no-plots")
    assert r.returncode == 0, r.stderr
    assert json.loads((sd / "verdict.json").read_text())["options"]["alpha"] == 0.01
    opts = sd / "verdict_options.json"
    opts.write_text(content)
    before = (sd / "verdict.json").read_bytes()
    r = ablate_in(sd.parent, "verdict", str(sd), "--no-plots")
    assert r.returncode == 2, r.stderr
    assert str(opts) in r.stderr and f"rm {opts}" in r.stderr and "Traceback" not in r.stderr
    assert (sd / "verdict.json").read_bytes() == before
    subprocess.run(["rm", str(opts)], check=True)
    r = ablate_in(sd.parent, "verdict", str(sd), "--no-plots")
    assert r.returncode == 0, r.stderr
    assert json.loads((sd / "verdict.json").read_text())["options"]["alpha"] == 0.05


def _limit_file_size(n_bytes: int) -> object:
    def pre() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (n_bytes, n_bytes))
    return pre


def test_os_error_on_write_is_one_line_and_loses_nothing(done_sweep: Path) -> None:
    """Fault 11: a write the OS refuses (EFBIG from RLIMIT_FSIZE, a real limit) is one line with the fix;
    the old verdict stays whole and no temp file is left."""
    sd = done_sweep
    before = (sd / "verdict.json").read_bytes()
    r = ablate(sd.parent, "verdict", str(sd), "--no-plots", "--recompute",  # an unchanged verdict is reused
               preexec=_limit_file_size(2000))
    assert r.returncode == 2, r.stderr
    assert "cannot write" in r.stderr and "File too large" in r.stderr and f"ablate resume {sd}" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (sd / "verdict.json").read_bytes() == before
    assert list(sd.rglob(".*.tmp-*")) == []
    # the fix it names; every trial is done, so it starts none: in this process
    res = ablate_in(sd.parent, "resume", str(sd))
    assert res.returncode == 0, res.stderr
    assert json.loads((sd / "verdict.json").read_text())["arms"][0]["arm"] == "control"  # written whole again


def test_full_disk_error_names_df_and_resume(tmp_path: Path) -> None:
    """ENOSPC, from a real write to /dev/full, becomes the one-line error with the fix."""
    from ablate.record.sweepdir import os_error

    fd = os.open("/dev/full", os.O_WRONLY)
    try:
        with pytest.raises(OSError) as info:
            os.write(fd, b"x")
    finally:
        os.close(fd)
    msg = str(os_error(info.value, tmp_path / "result.json"))
    assert "No space left on device" in msg and "df -h" in msg and "ablate resume" in msg


def test_temp_debris_of_a_killed_writer_is_cleaned(done_sweep: Path) -> None:
    """Fault 11: a writer killed by a signal in the middle of a write (SIGXFSZ) leaves a temp file;
    the next command that takes the lock removes it."""
    sd = done_sweep
    code = ("import signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_DFL); "
            "from ablate.record.sweepdir import write_atomic; write_atomic(sys.argv[1], b'x' * 100000)")
    p = subprocess.run([sys.executable, "-c", code, str(sd / "trials/control/seed=0/result.json")],
                       preexec_fn=_limit_file_size(5000), capture_output=True, text=True)
    assert p.returncode == -signal.SIGXFSZ
    debris = list(sd.rglob(".*.tmp-*"))
    assert len(debris) == 1 and debris[0].parent.name == "seed=0"
    assert ablate_in(sd.parent, "verdict", str(sd), "--no-plots").returncode == 0
    assert list(sd.rglob(".*.tmp-*")) == []
    assert json.loads((sd / "trials/control/seed=0/result.json").read_text())["status"] == "ok"


TREE_TASK = '''
import subprocess, time
from pathlib import Path


def train(cfg):
    out = Path(cfg.task.pid_dir) / f"{cfg.task.optim.lr}-{cfg.seed}.pid"
    subprocess.run(["sh", "-c", f"setsid sleep 300 & echo $! > {out}"], check=True)  # an orphan in its own session
    if cfg.task.get("hang"):
        time.sleep(300)
    return {"val_acc": 0.5}
'''


def _gone(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return raw[raw.rfind(")") + 2] == "Z"


@pytest.mark.parametrize("launcher", ["local", "inline"])
@pytest.mark.parametrize("hang", [False, True], ids=["finish", "timeout"])
def test_trial_process_tree_ends_with_the_trial(project: Path, tmp_path: Path, launcher: str, hang: bool) -> None:
    """Fault 9: a setsid grandchild of the task is gone when the trial ends, normally or by timeout."""
    (project / "treetask.py").write_text(TREE_TASK)
    commit_all(project, "tree task")
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    args = [*ONE, f"launcher={launcher}", "task.fn=treetask:train", f"+task.pid_dir={pid_dir}"]
    if hang:
        args += ["+task.hang=true", "timeout_min=0.05"]
    res = ablate_in(project, *args)
    pids = [int(p.read_text()) for p in pid_dir.glob("*.pid")]
    try:
        assert len(pids) == 6, res.stderr
        if hang:
            sd = only_sweep(project)
            statuses = {json.loads(p.read_text())["status"] for p in sd.glob("trials/*/seed=*/result.json")}
            assert statuses == {"timeout"}
        assert [p for p in pids if not _gone(p)] == []
    finally:
        for p in pids:
            if not _gone(p):
                os.kill(p, signal.SIGKILL)


def test_a_record_edited_after_its_trial_is_reported_by_the_verdict(done_sweep: Path) -> None:
    """Issue 26 item 8: each result.json carries a digest written when its trial ended; `ablate verdict`
    reports (verdict.json finding, verdict.md) a record whose content no longer matches it."""
    import json

    from ablate.record.sweepdir import record_digest

    sd, project = done_sweep, done_sweep.parents[3]
    for p in sd.glob("trials/*/seed=*/result.json"):  # every record, as written at the end of its trial
        rec = json.loads(p.read_text())
        assert rec["digest"] == record_digest(rec), p
    clean = json.loads((sd / "verdict.json").read_text())
    assert not [f for f in clean["confounds"]["findings"] if f["kind"] == "record"]
    path = sd / "trials" / "lr=0.5" / "seed=1" / "result.json"
    rec = json.loads(path.read_text())
    rec["metrics"] = {k: v + 0.25 for k, v in rec["metrics"].items()}  # an accidental edit
    path.write_text(json.dumps(rec, indent=2))
    r = ablate_in(project, "verdict", str(sd), "--no-plots")
    assert r.returncode == 0, r.stderr
    verdict = json.loads((sd / "verdict.json").read_text())
    (finding,) = [f for f in verdict["confounds"]["findings"] if f["kind"] == "record"]
    assert finding["trials"] == ["lr=0.5/seed=1"]
    assert "no longer match the digest" in finding["message"]
    assert "lr=0.5/seed=1" in (sd / "verdict.md").read_text()
