"""Packed SLURM jobs stopped mid-pack keep the promise of single ones (issue 26, item 3), on the real cluster:
a trial ended by its job's ``scontrol requeue``, ``scancel`` or the death of its warm parent is recorded with
that cause (or, while the job will still run it, not at all) and stays runnable; a trial that never started
stays pending; ``collect`` never writes a verdict while a requeued job still holds trials; and a job name is
looked up exactly whatever the sweep dir's name holds."""

from __future__ import annotations

import csv
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, commit_all
from tests.slurm.helpers import release, release_file, release_when_restarted, result, slurm, sweep_dir, wait_for
from tests.slurm.test_slurm_intent import DIE_AFTER_SBATCH, _arrays_named, _env

pytestmark = pytest.mark.slurm


def _rows(sd: Path) -> list[dict]:
    return json.loads((sd / "slurm" / "jobs.json").read_text())["jobs"]


def _trial(sd: Path, t: tuple[str, int]) -> Path:
    return sd / "trials" / t[0] / f"seed={t[1]}"


def _start_packed(proj: Path) -> tuple[Path, list[tuple[str, int]], str]:
    """Submit 6 probe trials (8 steps of 0.5 s each) as one packed job; return once the first has finished
    and the second is past step 2. Returns the sweep dir, the trials in running order and the job id. Once the test
    has stopped the job it calls ``release(release_file(proj)[0])``: the remaining steps then take no time."""
    res = ablate_cli(proj, "-m", "variable=bonus", "seeds=3", "task=probe", "task.steps=8", "task.step_s=0.5",
                     "launcher=slurm", "launcher.trials_per_job=6", "launcher.timeout_min=20", "wait=false",
                     release_file(proj)[1], timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(proj)
    rows = _rows(sd)
    assert len({r["job_id"] for r in rows}) == 1, rows
    order = [(r["arm"], r["seed"]) for r in rows]
    state = _trial(sd, order[1]) / "checkpoint" / "state.json"
    wait_for(lambda: (_trial(sd, order[0]) / "result.json").exists() and state.exists()
             and json.loads(state.read_text())["step"] >= 2, 600, "one trial done and the second at step 2")
    return sd, order, rows[0]["job_id"]


def _results_csv(sd: Path) -> dict[tuple[str, int], dict[str, str]]:
    with (sd / "results.csv").open() as fh:
        return {(r["arm"], int(r["seed"])): r for r in csv.DictReader(fh)}


def test_requeued_packed_job_records_nothing_false_and_collect_waits_for_it(probe_project: Path) -> None:
    proj = probe_project
    sd, order, job_id = _start_packed(proj)
    first = result(sd, *order[0])
    slurm("scontrol", "requeue", job_id)  # SIGTERM to every process of the job, then back to the queue
    # requeued and started again: the resumed trial and the later ones only have to finish
    release_when_restarted(release_file(proj)[0], job_id, sd / "slurm" / job_id / f"{job_id}_0_log.out")

    col = ablate_cli(proj, "collect", str(sd), timeout=400)
    assert col.returncode == 0, col.stderr
    assert result(sd, *order[0]) == first  # finished before the requeue: never run again, never overwritten
    second = result(sd, *order[1])  # running at the requeue: not recorded then, run again by the requeued job
    assert second["status"] == "ok" and second["metrics"]["resumed_from"] >= 2, second
    log = Path(second["log"]).read_text()
    assert "SLURM stopped this packed job (SIGTERM" in log and f"trial {order[1][0]} seed={order[1][1]} ran" in log, \
        log[-3000:]
    assert "warm parent" not in log.split("SLURM stopped this packed job")[1].split("\n")[0]
    rows = _results_csv(sd)
    for t in order:  # the verdict was written from the final results: results.csv agrees with every record
        rec = result(sd, *t)
        assert rec["status"] == "ok" and rows[t]["status"] == "ok", (t, rec)
        assert float(rows[t]["score"]) == rec["metrics"]["score"], (t, rows[t], rec)
    verdict = json.loads((sd / "verdict.json").read_text())
    assert not verdict.get("invalid"), verdict
    assert len(_rows(sd)) == 6  # the requeue ran them: nothing submitted again


def test_cancelled_packed_job_records_its_running_trial_and_the_unstarted_stay_pending(probe_project: Path) -> None:
    proj = probe_project
    sd, order, job_id = _start_packed(proj)
    first = result(sd, *order[0])
    slurm("scancel", job_id)
    wait_for(lambda: "CANCELLED" in slurm("sacct", "-X", "-n", "-P", "-o", "State", "-j", job_id), 60,
             "the job to be cancelled")
    # SLURM has cleaned the job up (no longer COMPLETING: every process of it is gone), so no trial of it can
    # finish now: the unstarted trials the collect below runs again, and the one the fix runs, only have to finish
    wait_for(lambda: _cleaned_up(job_id), 120, "the cancelled job to be cleaned up")
    release(release_file(proj)[0])
    st = ablate_in(proj, "status", str(sd))
    assert st.returncode == 0, st.stderr

    col = ablate_cli(proj, "collect", str(sd), timeout=400)
    assert col.returncode == 0, col.stderr
    assert result(sd, *order[0]) == first
    killed = result(sd, *order[1])  # the running one: SLURM's cause, and a fix that runs it again
    assert killed["status"] == "killed" and killed["slurm"]["state"] == "CANCELLED", killed
    assert "ended CANCELLED" in killed["error"] and "it was forked from died" not in killed["error"], killed
    for t in order[2:]:  # never started in the cancelled job: left pending, then run by the same collect
        rec = result(sd, *t)
        assert rec["status"] == "ok" and rec["attempt"] == 1 and rec["slurm"]["job_id"] != job_id, rec
        assert rec["metrics"]["resumed_from"] == 0, rec
    assert sorted((r["arm"], r["seed"]) for r in _rows(sd)[6:]) == sorted(order[2:])  # submitted once more
    assert f"never started (its packed SLURM job {job_id} was cancelled" in col.stderr, col.stderr

    _run_the_fix(proj, sd, killed, order[1])
    assert all(result(sd, *t)["status"] == "ok" for t in order)


def _cleaned_up(job_id: str) -> bool:
    """True once squeue shows the ended job no longer COMPLETING (or has forgotten it)."""
    sq = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%T", "-j", job_id], capture_output=True, text=True,
                        timeout=60, check=False)
    return sq.stdout.strip() not in ("COMPLETING", "RUNNING", "PENDING", "SUSPENDED", "REQUEUED", "CONFIGURING")


def _run_the_fix(project: Path, sd: Path, killed: dict, trial: tuple[str, int]) -> dict:
    """Run the `ablate collect ... --resubmit` a killed trial's error names; that trial's new record (ok, attempt 2)."""
    fix = re.search(r"`(ablate collect \S+ --resubmit)`", killed["error"])
    assert fix, killed["error"]
    again = ablate_cli(project, *shlex.split(fix.group(1))[1:], timeout=400)
    assert again.returncode == 0, again.stderr
    rec = result(sd, *trial)
    assert rec["status"] == "ok" and rec["attempt"] == 2, rec
    return rec


#: Its first trial SIGKILLs the warm parent it was forked from (once: a marker file remembers).
KILLER = '''
import os
import signal
import time
from pathlib import Path


def train(cfg):
    marker = Path(os.environ["KILLER_OUT"]) / "killed-parent"
    if not marker.exists():
        marker.write_text(str(os.getppid()))
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(120)  # dies with its parent (PR_SET_PDEATHSIG) long before this ends
    return {"val_acc": 0.5 + 0.01 * cfg.seed, "parent": float(os.getppid())}
'''


def test_warm_parent_killed_inside_a_packed_job_loses_no_trial(project: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILLER_OUT", str(tmp_path))  # the job inherits the submitting environment
    (project / "killer.py").write_text(KILLER)
    (project / "conf" / "task" / "killer.yaml").write_text("fn: killer:train\nmetric: val_acc\nk: 1\n")
    (project / "conf" / "variable" / "k.yaml").write_text("key: task.k\nvalues: [2]\n")
    commit_all(project, "a task that kills its warm parent")
    res = ablate_cli(project, "-m", "variable=k", "task=killer", "seeds=3", "launcher=slurm",
                     "launcher.trials_per_job=6", timeout=600)
    sd = sweep_dir(project)
    dead_parent = int((tmp_path / "killed-parent").read_text())
    order = [(r["arm"], r["seed"]) for r in _rows(sd)]
    killed = result(sd, *order[0])  # running when its warm parent died: the real cause, and runnable
    assert killed["status"] == "killed", killed
    assert f"the warm parent (pid {dead_parent}) it was forked from died (killed by SIGKILL" in killed["error"], killed
    later = [result(sd, *t) for t in order[1:]]  # the rest (never started then): run from a new warm parent
    assert all(r["status"] == "ok" for r in later), later
    parents = {int(r["metrics"]["parent"]) for r in later}
    assert len(parents) == 1 and dead_parent not in parents, (dead_parent, parents)  # one new warm parent
    assert res.returncode == 0 and "1 trial(s) were killed or timed out" in res.stderr, res.stderr

    _run_the_fix(project, sd, killed, order[0])
    assert [result(sd, *t) for t in order[1:]] == later  # the others are not run again


def test_sweep_dir_with_a_comma_is_found_by_its_exact_job_name(probe_project: Path) -> None:
    """The submitter dies right after sbatch; the sweep dir's name holds a comma, which SLURM's ``--name``
    lists split at: `ablate collect` still finds the array and never submits its trials again."""
    # 0.1 s steps: what is under test is finding the array by its name, not how long the trials run
    args = ["-m", "variable=bonus", "seeds=3", "task=probe", "task.steps=2", "task.step_s=0.1", "launcher=slurm",
            "wait=false", "launcher.trials_per_job=2", "hydra.sweep.dir='outputs/ablate/day/run,1'"]
    died = subprocess.run([sys.executable, "-c", DIE_AFTER_SBATCH, *args], cwd=probe_project, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert died.returncode == -9, died.stderr
    sd = sweep_dir(probe_project)
    assert sd.name == "run,1"
    (intent,) = json.loads((sd / "slurm" / "intents.json").read_text())["intents"]
    assert "," not in intent["name"] and "|" not in intent["name"]
    assert len(_arrays_named(intent["name"])) == 1
    col = subprocess.run([str(Path(sys.executable).with_name("ablate")), "collect", str(sd)], cwd=probe_project,
                         env=_env(), capture_output=True, text=True, timeout=600)
    assert col.returncode == 0, col.stderr
    assert "already submitted" in col.stderr and "submitted 6 trial(s)" not in col.stderr, col.stderr
    assert len(_arrays_named(intent["name"])) == 1
    assert len(_rows(sd)) == 6


def test_a_job_requeued_after_its_trial_was_recorded_never_overwrites_it(project: Path) -> None:
    """One trial per job: a job whose trial recorded its failure is requeued from outside after it ended; the
    requeued run leaves the record (which the verdict used) as it was, byte for byte."""
    (project / "flaky.py").write_text("import os\n\n\ndef train(cfg):\n    if cfg.seed == 0 and cfg.task.k == 1:\n"
                                      "        raise RuntimeError('seed 0 of the control fails')\n"
                                      "    return {'val_acc': 0.5 + 0.01 * cfg.seed}\n")
    (project / "conf" / "task" / "flaky.yaml").write_text("fn: flaky:train\nmetric: val_acc\nk: 1\n")
    (project / "conf" / "variable" / "k.yaml").write_text("key: task.k\nvalues: [2]\n")
    commit_all(project, "a task whose first control trial fails")
    res = ablate_cli(project, "-m", "variable=k", "task=flaky", "seeds=3", "launcher=slurm", timeout=600)
    assert res.returncode in (0, 1), res.stderr
    sd = sweep_dir(project)
    path = _trial(sd, ("control", 0)) / "result.json"
    before = path.read_bytes()
    assert json.loads(before)["status"] == "failed" and "seed 0 of the control fails" in json.loads(before)["error"]
    job_id = next(r["job_id"] for r in _rows(sd) if (r["arm"], r["seed"]) == ("control", 0))
    out = sd / "slurm" / job_id / f"{job_id}_0_log.out"  # submitit's own lines
    ends = out.read_text().count("Exiting after successful completion")
    slurm("scontrol", "requeue", job_id)
    wait_for(lambda: out.read_text().count("Exiting after successful completion") > ends, 240,
             "the requeued job to run again and end")
    assert out.read_text().count("Starting with JobEnvironment") == ends + 1  # it did run again
    assert path.read_bytes() == before
