"""launcher=inline: a task that ends the process (sys.exit, os._exit, KeyboardInterrupt) fails its trial only;
a real Ctrl-C still stops ablate (issue 17, item 1). Real processes and real signals."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, commit_all, ctrl_c_reaches, only_sweep

pytestmark = pytest.mark.slow

TASK = '''
import os
import sys
import time
from pathlib import Path


def train(cfg):
    how = cfg.task.how
    with Path(cfg.task.log).open("a") as fh:
        fh.write(f"{how} {cfg.seed}\\n")
    if cfg.seed == 0:
        if how == "exit0":
            sys.exit(0)
        if how == "exit3":
            sys.exit(3)
        if how == "exitmsg":
            sys.exit("bye")
        if how == "osexit":
            os._exit(0)
        if how == "kbint":
            raise KeyboardInterrupt
        if how == "swallowed":
            try:
                raise SystemExit(5)
            except Exception:  # SystemExit is no Exception: this does not catch it
                return {"val_acc": 0.0}
    if how == "fork":  # a forked child's os._exit must still end the child, not raise in it
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        _, status = os.waitpid(pid, 0)
        return {"val_acc": float(os.waitstatus_to_exitcode(status))}
    if how == "slow":
        time.sleep(float(cfg.task.slow_s))
    return {"val_acc": 0.5 + cfg.seed * 0.01}
'''

CAUSES = {
    "exit0": "sys.exit(0)", "exit3": "sys.exit(3)", "exitmsg": "sys.exit('bye')", "osexit": "os._exit(0)",
    "kbint": "raised KeyboardInterrupt itself", "swallowed": "sys.exit(5)",
}


@pytest.fixture
def exit_project(project: Path) -> Path:
    (project / "exits.py").write_text(TASK)
    (project / "conf" / "task" / "exits.yaml").write_text(  # the task runs in the code snapshot: absolute log
        f"fn: exits:train\nmetric: val_acc\ngoal: maximize\nhow: none\nlog: {project}/starts.log\nslow_s: 1.0\n")
    (project / "conf" / "variable" / "how.yaml").write_text("key: task.how\nvalues: [exit0]\n")
    with open(project / ".gitignore", "a") as fh:
        fh.write("starts.log\n")
    commit_all(project, "exit task")
    return project


def test_task_ending_the_process_fails_its_trial_only(exit_project: Path) -> None:
    values = ",".join([*CAUSES, "fork"])
    # the console script, this file's proof of it: a task ending the process it shares with ablate ends only its trial
    res = ablate_cli(exit_project, "-m", "variable=how", "task=exits", "seeds=3", "launcher=inline",
                     f"variable.values=[{values}]")
    assert res.returncode in (0, 1), res.stderr  # a verdict was reached (not ablate ended by the task)
    sd = only_sweep(exit_project)
    assert (sd / "verdict.json").exists() and (sd / "verdict.md").exists(), res.stderr
    with open(sd / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * (len(CAUSES) + 2)  # every trial ran: control + 7 treatments, 3 seeds each
    by = {(r["arm"], r["seed"]): r for r in rows}
    for how, cause in CAUSES.items():
        assert by[(f"how={how}", "0")]["status"] == "failed"
        assert by[(f"how={how}", "1")]["status"] == "ok"
        rec = json.loads((sd / "trials" / f"how={how}" / "seed=0" / "result.json").read_text())
        assert cause in rec["error"] and "launcher=inline" in rec["error"], rec["error"]
    fork = json.loads((sd / "trials" / "how=fork" / "seed=0" / "result.json").read_text())
    assert fork["status"] == "ok" and fork["metrics"]["val_acc"] == 7.0  # the child's real exit code
    starts = (exit_project / "starts.log").read_text().split("\n")
    assert len([s for s in starts if s]) == 3 * (len(CAUSES) + 2)


def test_same_task_under_local_names_the_cause(exit_project: Path) -> None:
    res = ablate_in(exit_project, "-m", "variable=how", "task=exits", "seeds=3", "launcher=local",
                    "variable.values=[exit3,osexit]")
    assert res.returncode in (0, 1), res.stderr
    sd = only_sweep(exit_project)
    rec = json.loads((sd / "trials" / "how=exit3" / "seed=0" / "result.json").read_text())
    assert rec["status"] == "failed" and "sys.exit(3)" in rec["error"], rec
    rec = json.loads((sd / "trials" / "how=osexit" / "seed=0" / "result.json").read_text())
    assert rec["status"] == "failed", rec  # the child process ended: the launcher records it


def test_real_ctrl_c_still_stops_inline_ablate(exit_project: Path) -> None:
    exe = str(Path(sys.executable).with_name("ablate"))
    proc = subprocess.Popen(
        [exe, "-m", "variable=how", "task=exits", "seeds=3", "launcher=inline", "variable.values=[slow]",
         "task.slow_s=30"],
        cwd=exit_project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=ctrl_c_reaches,
    )
    log = exit_project / "starts.log"
    deadline = time.time() + 120
    while time.time() < deadline and not (log.exists() and "slow" in log.read_text()):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "ablate resume" in err
    sd = only_sweep(exit_project)
    assert not (sd / "verdict.json").exists()
    assert log.read_text().count("slow") == 1  # one slow trial started, then ablate stopped


#: Reports the process-global state it finds, then (in the treatment arm) changes all of it.
GLOBALS_TASK = '''
import os
import sys

import numpy as np
import torch


def train(cfg):
    seen = {
        "float64": float(torch.get_default_dtype() == torch.float64),
        "no_grad": float(not torch.is_grad_enabled()),
        "deterministic": float(torch.are_deterministic_algorithms_enabled()),
        "benchmark": float(torch.backends.cudnn.benchmark),
        "np_raise": float(np.geterr()["divide"] == "raise"),
        "np_precision": float(np.get_printoptions()["precision"]),
        "env": float("LEAKED_BY_TRIAL" in os.environ),
        "cwd_root": float(os.getcwd() == "/"),
        "sys_path": float("/nonexistent-leak" in sys.path),
        "val_acc": 0.5 + 0.01 * cfg.seed,
    }
    if cfg.task.change:
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        np.seterr(divide="raise")
        np.set_printoptions(precision=2)
        os.environ["LEAKED_BY_TRIAL"] = "1"
        os.chdir("/")
        sys.path.insert(0, "/nonexistent-leak")
    return seen
'''


def test_inline_trial_changes_to_process_globals_never_reach_later_trials(project: Path) -> None:
    """A treatment trial under launcher=inline sets torch's default dtype, grad mode, numpy's error and print
    settings, an environment variable, the cwd and sys.path: every later trial (control ones included) starts
    from the state before, and the trial that changed it is flagged. (A task that flips torch's determinism flags
    itself stops the ablation after its first trials: test_own_determinism_switch.py.)"""
    (project / "globals_task.py").write_text(GLOBALS_TASK)
    (project / "conf" / "task" / "globals.yaml").write_text("fn: globals_task:train\nmetric: val_acc\nchange: false\n")
    (project / "conf" / "variable" / "change.yaml").write_text("key: task.change\nvalues: [true]\n")
    commit_all(project, "a task that changes process globals")
    res = ablate_in(project, "-m", "variable=change", "task=globals", "seeds=3", "launcher=inline")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    recs = [json.loads(p.read_text()) for p in sd.glob("trials/*/seed=*/result.json")]
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs), recs
    for r in recs:  # what each trial found when it started: the interpreter's own state, every time
        seen = {k: v for k, v in r["metrics"].items() if k != "val_acc"}
        assert seen == {"float64": 0.0, "no_grad": 0.0, "deterministic": 0.0, "benchmark": 0.0, "np_raise": 0.0,
                        "np_precision": 8.0, "env": 0.0, "cwd_root": 0.0, "sys_path": 0.0}, r
    for r in recs:
        restored = r.get("inline_restored") or []
        if r["arm"] == "control":
            assert restored == [] or restored == ["os.environ (TORCHINDUCTOR_CACHE_DIR)"], r  # importing torch sets it
        else:
            text = "; ".join(restored)
            for what in ("torch default dtype", "torch grad mode", "numpy error settings", "numpy print options",
                         "os.environ (LEAKED_BY_TRIAL", "sys.path (added /nonexistent-leak)"):  # cwd: the trial's chdir
                assert what in text, (what, restored)
            assert any("restored" in n for n in r.get("notes") or []), r


#: Reports the rest of the process-global state ablate restores, then (in the treatment arm) changes it.
MORE_GLOBALS_TASK = '''
import os
import signal
import sys

import torch


def train(cfg):
    mask = os.umask(0o022)
    os.umask(mask)
    seen = {
        "umask": float(mask),
        "reclimit": float(sys.getrecursionlimit()),
        "sigterm": float(signal.getsignal(signal.SIGTERM) is signal.SIG_IGN),
        "anomaly": float(torch.is_anomaly_enabled()),
        "val_acc": 0.5 + 0.01 * cfg.seed,
    }
    if cfg.task.change:
        os.umask(0)
        sys.setrecursionlimit(4321)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        torch.autograd.set_detect_anomaly(True)
    return seen
'''


def test_inline_trial_changes_to_umask_limits_signals_and_anomaly_mode_never_reach_later_trials(project: Path) -> None:
    """The same kind with more of the state: a treatment trial sets umask 0 (which made a later ablation's new
    dirs 0777), the recursion limit, a SIGTERM handler and torch's anomaly mode; every trial starts from the
    interpreter's state, and the changes are named on the trial that made them."""
    (project / "more_globals.py").write_text(MORE_GLOBALS_TASK)
    (project / "conf" / "task" / "more.yaml").write_text("fn: more_globals:train\nmetric: val_acc\nchange: false\n")
    (project / "conf" / "variable" / "change.yaml").write_text("key: task.change\nvalues: [true]\n")
    commit_all(project, "a task that changes more process globals")
    mask = os.umask(0o022)
    os.umask(mask)
    res = ablate_in(project, "-m", "variable=change", "task=more", "seeds=3", "launcher=inline")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    recs = [json.loads(p.read_text()) for p in sd.glob("trials/*/seed=*/result.json")]
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs), recs
    for r in recs:
        seen = {k: v for k, v in r["metrics"].items() if k != "val_acc"}
        assert seen == {"umask": float(mask), "reclimit": 1000.0, "sigterm": 0.0, "anomaly": 0.0}, r
        text = "; ".join(r.get("inline_restored") or [])
        if r["arm"] == "control":
            assert "umask" not in text and "torch" not in text, r
        else:
            for what in (f"umask ({mask:04o} -> 0000)", "recursion limit (1000 -> 4321)", "signal handlers (SIGTERM)",
                         "torch anomaly mode (False -> True)"):  # what the task changed, from -> to
                assert what in text, (what, text)
