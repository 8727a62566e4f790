"""launcher.trials_per_job=k against a real SLURM cluster: k trials per array task, reported per trial,
and a packed job preempted mid-way re-runs only its unfinished trials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, add_pure_task
from tests.slurm.helpers import (
    preempt,
    release,
    release_file,
    release_when_restarted,
    result,
    status_counts,
    sweep_dir,
    wait_for,
)

pytestmark = pytest.mark.slurm


def _rows(sd: Path) -> list[dict]:
    return json.loads((sd / "slurm" / "jobs.json").read_text())["jobs"]


def test_packed_array_runs_three_trials_per_job(project: Path) -> None:
    """The pure-Python task (tests.helpers.PURE_TASK): the test is about packing trials into array tasks, not
    training (it ran the digits task, whose jobs each imported torch and trained 3 models)."""
    add_pure_task(project)
    res = ablate_cli(project, "-m", "task=pure", "variable=lr", "variable.values=[0.2]", "seeds=3",
                     "launcher=slurm", "launcher.trials_per_job=3", timeout=600)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(project)
    assert res.stdout.strip().splitlines()[-1] == str(sd / "verdict.md")
    rows = _rows(sd)
    assert len(rows) == 6
    tasks: dict[str, list[tuple[str, int]]] = {}
    for r in rows:
        tasks.setdefault(r["job_id"], []).append((r["arm"], r["seed"]))
    assert len({j.split("_")[0] for j in tasks}) == 1, "one job array"
    assert sorted(len(v) for v in tasks.values()) == [3, 3], tasks  # 6 trials / 3 per job = 2 array tasks
    for r in rows:
        rec = result(sd, r["arm"], r["seed"])
        assert rec["status"] == "ok", rec
        assert rec["slurm"]["job_id"] == r["job_id"]
        manifest = json.loads((sd / "trials" / r["arm"] / f"seed={r['seed']}" / "manifest.json").read_text())
        assert manifest["environment"]["env"]["PYTHONHASHSEED"] == "0"  # the ablation's (its first seed), as local
        assert manifest["warm_parent"], manifest  # a fork of the job's warm parent (launcher.warm=true)
    st = ablate_in(project, "status", str(sd))
    assert status_counts(st.stdout) == {"control": [0, 0, 3, 0], "lr=0.2": [0, 0, 3, 0]}, st.stdout


@pytest.mark.parametrize("warm", ["true", "false"], ids=["warm", "fresh"])
def test_preempted_packed_job_reruns_only_unfinished_trials(probe_project: Path, warm: str) -> None:
    proj = probe_project
    gate, release_arg = release_file(proj)
    res = ablate_cli(proj, "-m", "variable=bonus", "seeds=3", "task=probe", "task.steps=8", "task.step_s=0.5",
                     "launcher=slurm", "launcher.trials_per_job=6", "launcher.timeout_min=20", "wait=false",
                     f"launcher.warm={warm}", release_arg, timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(proj)
    rows = _rows(sd)
    assert len({r["job_id"] for r in rows}) == 1, rows  # all 6 trials in one job
    order = [(r["arm"], r["seed"]) for r in rows]
    job_id = rows[0]["job_id"]
    first, second, third, *later = order
    fourth = later[0]
    done = [sd / "trials" / a / f"seed={s}" / "result.json" for a, s in (first, second)]
    state = sd / "trials" / third[0] / f"seed={third[1]}" / "checkpoint" / "state.json"
    wait_for(lambda: all(p.exists() for p in done) and state.exists()
             and json.loads(state.read_text())["step"] >= 3, 600, "two trials done and the third at step 3")
    before = {t: result(sd, *t) for t in (first, second)}
    assert not (sd / "trials" / fourth[0] / f"seed={fourth[1]}" / "result.json").exists()
    preempt(job_id, sd / "slurm" / job_id / f"{job_id}_0_log.err")
    # requeued and started again: the resumed trial and the later ones only have to finish
    release_when_restarted(gate, job_id, sd / "slurm" / job_id / f"{job_id}_0_log.out")

    col = ablate_cli(proj, "collect", str(sd), timeout=300)
    assert col.returncode == 0, col.stderr
    for t in (first, second):  # finished before the preemption: not run again
        rec = result(sd, *t)
        assert rec == before[t], (t, rec)
        assert rec["metrics"]["requeues"] == 0 and rec["slurm"]["requeues"] == 0, rec
    rec3 = result(sd, *third)  # running at the preemption: resumed from its checkpoint after the requeue
    assert rec3["status"] == "ok" and rec3["metrics"]["resumed_from"] >= 3, rec3
    assert rec3["metrics"]["requeues"] == 1 and rec3["slurm"]["requeues"] == 1, rec3
    for t in later:  # never started before: runs once, after the requeue
        rec4 = result(sd, *t)
        assert rec4["status"] == "ok" and rec4["metrics"]["resumed_from"] == 0 and rec4["slurm"]["requeues"] == 1, rec4
    assert rec3["slurm"]["job_id"] == rec4["slurm"]["job_id"] == job_id  # requeued: same job
    log = Path(rec4["log"]).read_text()
    assert "2 of 6 trial(s) finished: requeued (1/3)" in log, log[-2000:]
    assert log.count(f"packed job runs trial {first[0]} seed={first[1]}") == 1
    parents = [json.loads((sd / "trials" / a / f"seed={s}" / "manifest.json").read_text()).get("warm_parent")
               for a, s in order]
    if warm == "true":  # one warm parent per start of the job: the requeued start forked the last four
        assert parents[0] == parents[1] and len(set(parents[2:])) == 1 and parents[0] != parents[2], parents
        assert log.count("packed job starts a warm parent") == 2, log[-2000:]
    else:
        assert parents == [None] * 6


def test_packed_job_past_max_requeues_records_every_unfinished_trial_and_resubmit_packs_them(
        probe_project: Path) -> None:
    proj = probe_project
    gate, release_arg = release_file(proj)
    res = ablate_cli(proj, "-m", "variable=bonus", "seeds=3", "task=probe", "task.steps=8", "task.step_s=0.5",
                     "launcher=slurm", "launcher.trials_per_job=6", "launcher.timeout_min=20",
                     "launcher.max_requeues=0", "wait=false", release_arg, timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(proj)
    rows = _rows(sd)
    order = [(r["arm"], r["seed"]) for r in rows]
    job_id = rows[0]["job_id"]
    first_done = sd / "trials" / order[0][0] / f"seed={order[0][1]}" / "result.json"
    state = sd / "trials" / order[1][0] / f"seed={order[1][1]}" / "checkpoint" / "state.json"
    wait_for(lambda: first_done.exists() and state.exists(), 600, "one trial done and the second running")
    preempt(job_id, sd / "slurm" / job_id / f"{job_id}_0_log.err")
    col = ablate_cli(proj, "collect", str(sd), timeout=300)
    # 5 of 6 trials killed: more than half of one arm, so the verdict is invalid (exit 1), never waits
    assert col.returncode == 1 and "the verdict is invalid" in col.stderr, col.stderr
    release(gate)  # the job ended: the resubmitted trials only have to finish
    first = result(sd, *order[0])
    assert first["status"] == "ok", first
    for t in order[1:]:  # the running one and the four never started: none lost, each says why
        rec = result(sd, *t)
        assert rec["status"] == "killed", rec
        assert "was preempted" in rec["error"] and "launcher.max_requeues=0" in rec["error"], rec

    col = ablate_cli(proj, "collect", str(sd), "--resubmit", timeout=300)
    assert col.returncode == 0, col.stderr
    assert result(sd, *order[0]) == first  # the finished trial is not run again
    again = _rows(sd)[6:]
    assert sorted((r["arm"], r["seed"]) for r in again) == sorted(order[1:])
    assert len({r["job_id"] for r in again}) == 1  # the 5 resubmitted trials packed into one job
    for t in order[1:]:
        rec = result(sd, *t)
        assert rec["status"] == "ok" and rec["attempt"] == 2 and rec["metrics"]["resumed_from"] == 0, rec
