"""launcher=slurm against a real SLURM cluster: job arrays, detach/status/collect, extend, preemption,
jobs dying without a result, fake GPUs, SLURM refusing a request."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ablate.trials.launchers.slurm.launcher import TERMINAL_STATES, ended_ago, query_states
from tests.helpers import ablate_cli, ablate_in, add_pure_task, clean_env, commit_all, copy_project, git
from tests.slurm.helpers import (
    jobs,
    preempt,
    release,
    release_file,
    release_when_restarted,
    result,
    slurm,
    status_counts,
    sweep_dir,
    wait_for,
)

pytestmark = pytest.mark.slurm
#: The pure-Python task (tests.helpers.PURE_TASK): these tests are about the job array, detach and collect, not
#: training (12 digits trials would each import torch in their job).
PURE = ["-m", "task=pure", "variable=lr", "variable.values=[0.2]", "seeds=3", "launcher=slurm"]
#: The digits ablation, for the refusals (checked in-process; nothing runs).
DIGITS = ["-m", "variable=lr", "variable.values=[0.2]", "seeds=3", "launcher=slurm", "task.epochs=2"]


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLURM_") and k not in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH", "HYDRA_FULL_ERROR")}
    env.update(DVC_NO_ANALYTICS="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return env


@pytest.fixture(scope="module")
def pure_waited(project_template: Path, tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The 2-arm x 3-seed pure-task ablation through launcher=slurm with wait=true (run once per module)."""
    from tests.slurm.conftest import no_cluster_reason

    if why := no_cluster_reason():
        pytest.skip(why)
    proj = tmp_path_factory.mktemp("waited") / "proj"
    shutil.copytree(project_template, proj, symlinks=True)
    with pytest.MonkeyPatch.context() as mp:  # commit_all's git identity
        clean_env(mp)
        add_pure_task(proj)
    exe = shutil.which("ablate") or str(Path(sys.executable).with_name("ablate"))
    res = subprocess.run([exe, *PURE], cwd=proj, env=_clean_env(), capture_output=True, text=True, timeout=600,
                         check=False)
    return res, proj


def _comparisons(sd: Path) -> list[dict]:
    return json.loads((sd / "verdict.json").read_text())["comparisons"]


def test_ablation_through_slurm_gives_a_verdict(pure_waited: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    res, proj = pure_waited
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(proj)
    assert res.stdout.strip().splitlines()[-1] == str(sd / "verdict.md")
    assert [c["arm"] for c in _comparisons(sd)] == ["lr=0.2"]
    assert _comparisons(sd)[0]["verdict"] in ("better", "worse", "equivalent", "inconclusive")
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    submitted = jobs(sd)
    assert len(submitted) == 6 and len({j.split("_")[0] for j in submitted.values()}) == 1, "one job array"
    for arm in ("control", "lr=0.2"):
        for seed in range(3):
            rec = result(sd, arm, seed)
            assert rec["status"] == "ok", rec
            assert rec["slurm"]["job_id"] == submitted[(arm, seed)]
            manifest = json.loads((sd / "trials" / arm / f"seed={seed}" / "manifest.json").read_text())
            assert manifest["code"]["commit"] == plan["pins"]["code"]["commit"]
            # the ablation's one hash seed (its first seed), as under launcher=local and packed jobs
            assert manifest["environment"]["env"]["PYTHONHASHSEED"] == str(plan["seeds"][0])
            assert manifest["determinism"]["hash_seed"] == str(plan["seeds"][0])
    # the submitit folder lives in the sweep dir, one per array task
    assert (sd / "slurm" / submitted[("control", 0)]).is_dir()


def test_detach_then_status_then_collect_gives_the_same_verdict(
        project: Path, pure_waited: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    add_pure_task(project)
    t0 = time.monotonic()
    res = ablate_cli(project, *PURE, "wait=false", timeout=120)
    submit_s = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(project)
    assert res.stdout.strip().splitlines()[-1] == str(sd)
    (array,) = {j.split("_")[0] for j in jobs(sd).values()}
    assert f"job(s) {array}" in res.stderr
    assert not (sd / "verdict.json").exists()
    assert submit_s < 60

    st = ablate_in(project, "status", str(sd))
    assert st.returncode == 0, st.stderr
    rows = status_counts(st.stdout)
    assert set(rows) == {"control", "lr=0.2"}
    assert all(sum(r[:3]) == 3 and r[3] == 0 for r in rows.values()), st.stdout  # pending+running+done, none failed

    col = ablate_cli(project, "collect", str(sd), timeout=300)
    assert col.returncode == 0, col.stderr
    assert col.stdout.strip().splitlines()[-1] == str(sd / "verdict.md")
    assert len(jobs(sd)) == 6, "collect must not submit trials that were still queued or running"
    st = ablate_in(project, "status", str(sd))
    assert status_counts(st.stdout) == {"control": [0, 0, 3, 0], "lr=0.2": [0, 0, 3, 0]}, st.stdout

    _, waited_proj = pure_waited
    waited = _comparisons(sweep_dir(waited_proj))
    assert _comparisons(sd) == waited


def test_extend_submits_only_the_new_seeds(pure_waited: tuple[subprocess.CompletedProcess[str], Path],
                                          tmp_path: Path) -> None:
    """``ablate extend`` through launcher=slurm (issue 39): the new seeds only, as SLURM jobs, into the same sweep
    dir. It extends a copy of the module's waited ablation (it ran its own, the same 2 arms x 3 seeds, before)."""
    res, waited = pure_waited
    assert res.returncode == 0, res.stderr
    proj = copy_project(waited, tmp_path / "proj")
    sd = sweep_dir(proj)
    first = jobs(sd)
    assert len(first) == 6
    res = ablate_cli(proj, "extend", str(sd), "seeds=5", timeout=300)
    assert res.returncode == 0, res.stderr
    after = jobs(sd)
    assert {k: after[k] for k in first} == first  # stage 1's jobs kept, never submitted again
    assert sorted(set(after) - set(first)) == sorted((a, s) for a in ("control", "lr=0.2") for s in (3, 4))
    v = json.loads((sd / "verdict.json").read_text())
    assert v["extension"]["stage2_seeds"] == [3, 4] and v["comparisons"][0]["extension"]["stage2"]["tested"]


def test_preempted_trial_resumes_and_runs_the_pinned_code(probe_project: Path) -> None:
    proj = probe_project
    pinned = git(proj, "rev-parse", "HEAD").strip()
    gate, release_arg = release_file(proj)
    res = ablate_cli(proj, "-m", "variable=bonus", "seeds=3", "task=probe", "task.steps=16", "task.step_s=0.5",
                     "launcher=slurm", "launcher.timeout_min=20", "wait=false", release_arg, timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(proj)
    state = sd / "trials" / "control" / "seed=0" / "checkpoint" / "state.json"
    wait_for(lambda: state.exists() and json.loads(state.read_text())["step"] >= 3, 120, "the trial to save step 3")
    job_id = jobs(sd)[("control", 0)]
    preempt(job_id, sd / "slurm" / job_id / f"{job_id}_0_log.err")
    # While the trial waits to be requeued the project moves on: the newer commit must not reach it.
    (proj / "slurmprobe.py").write_text("def run(cfg):\n    raise RuntimeError('the newer commit ran')\n")
    commit_all(proj, "break the task")
    # requeued and started again: the resumed trial and the others only have to finish
    release_when_restarted(gate, job_id, sd / "slurm" / job_id / f"{job_id}_0_log.out")

    col = ablate_cli(proj, "collect", str(sd), timeout=300)
    assert col.returncode == 0, col.stderr
    rec = result(sd, "control", 0)
    assert rec["status"] == "ok", (rec.get("error"), rec)
    assert rec["metrics"]["resumed_from"] >= 3, rec  # restored from its checkpoint dir, not from step 0
    assert rec["metrics"]["requeues"] == 1 and rec["slurm"]["requeues"] == 1, rec
    assert rec["slurm"]["job_id"] == jobs(sd)[("control", 0)]  # requeued: same job, not a new submission
    manifest = json.loads((sd / "trials" / "control" / "seed=0" / "manifest.json").read_text())
    assert manifest["code"]["commit"] == pinned != git(proj, "rev-parse", "HEAD").strip()
    assert "requeued (1/3)" in Path(rec["log"]).read_text()
    assert all(result(sd, arm, seed)["status"] == "ok" for arm in ("control", "bonus=1.0") for seed in (0, 1, 2))


def _all_ended(ids: list[str]) -> bool:
    """True when SLURM shows every job or array task of ``ids`` in a state it never leaves (ablate's own query:
    squeue, then sacct; an array task cancelled while pending has no sacct row of its own)."""
    states = query_states(ids) or {}
    return all(states.get(i, ("",))[0] in TERMINAL_STATES for i in ids)


def test_jobs_dying_without_a_result_are_recorded_in_bounded_time(probe_project: Path) -> None:
    proj = probe_project
    # control exits without a result (os._exit); the treatment sleeps until it is cancelled from outside
    res = ablate_cli(proj, "-m", "variable=mode", "seeds=3", "task=probe", "task.mode=exit", "task.steps=600",
                     "launcher=slurm", "wait=false", timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(proj)
    state = sd / "trials" / "mode=sleep" / "seed=0" / "checkpoint" / "state.json"
    wait_for(state.exists, 120, "the treatment trial to run")
    slurm("scancel", *(jobs(sd)[("mode=sleep", s)] for s in (0, 1, 2)))
    ids = sorted(set(jobs(sd).values()))
    # SLURM's states first (squeue and sacct per poll, not a whole `ablate status` every 0.2 s), then ablate's view
    wait_for(lambda: _all_ended(ids), 90, "SLURM to show every job ended")

    def status_shows_all_ended() -> str | None:
        out = ablate_in(proj, "status", str(sd)).stdout
        return out if out.count("ended FAILED") == 3 and out.count("ended CANCELLED") == 3 else None

    st = wait_for(status_shows_all_ended, 90, "`ablate status` to show every job ended")
    assert status_counts(st) == {"control": [0, 0, 0, 3], "mode=sleep": [0, 0, 0, 3]}, st

    t0 = time.monotonic()
    col = ablate_cli(proj, "collect", str(sd), timeout=180)
    collect_s = time.monotonic() - t0
    assert col.returncode in (0, 1), col.stderr
    assert collect_s < 60, f"collect took {collect_s:.0f} s"
    for seed in (0, 1, 2):
        dead = result(sd, "control", seed)
        assert dead["status"] == "failed" and dead["slurm"]["state"] == "FAILED", dead
        assert "without a result" in dead["error"] and "exit code 3" in dead["error"], dead
        cancelled = result(sd, "mode=sleep", seed)
        assert cancelled["status"] == "killed" and cancelled["slurm"]["state"] == "CANCELLED", cancelled
        assert "--resubmit" in cancelled["error"]
    st = ablate_in(proj, "status", str(sd)).stdout
    assert "control seed=0 failed: SLURM job" in st and "mode=sleep seed=1 killed: SLURM job" in st, st


def test_fake_gpu_trials_get_distinct_cuda_visible_devices(probe_project: Path) -> None:
    gres = slurm("sinfo", "-h", "-o", "%G")
    if "gpu:" not in gres:
        pytest.skip(f"the cluster has no GPU GRES ({gres.strip()}); start it with SLURM_LOCAL_GPUS=2")
    res = ablate_cli(probe_project, "-m", "variable=bonus", "seeds=3", "task=probe", "task.steps=6",
                     "launcher=slurm", "launcher.gpus_per_trial=1", timeout=300)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(probe_project)
    trials = []
    for arm in ("control", "bonus=1.0"):
        for seed in (0, 1, 2):
            manifest = json.loads((sd / "trials" / arm / f"seed={seed}" / "manifest.json").read_text())
            rec = result(sd, arm, seed)
            cvd = manifest["environment"]["env"].get("CUDA_VISIBLE_DEVICES")
            assert rec["slurm"]["cuda_visible_devices"] == cvd
            trials.append((rec["metrics"]["t0"], rec["metrics"]["t1"], cvd))
    assert {cvd for *_, cvd in trials} == {"0", "1"}, trials
    overlapping = [(a, b) for i, a in enumerate(trials) for b in trials[i + 1:] if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, f"no two trials ran at once: {trials}"
    assert all(a[2] != b[2] for a, b in overlapping), f"trials running at once shared a GPU: {trials}"


def test_missing_partition_is_refused_before_anything_is_created(project: Path) -> None:
    res = ablate_in(project, *DIGITS, "launcher.partition=nosuchpartition")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("ablate: error: `launcher`: SLURM refuses the job request:"), line
    assert "partition" in line.lower() and "launcher.partition=NAME" in line and "debug" in line, line
    assert not (project / "outputs").exists()


def test_unreachable_slurm_is_a_clear_error(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()
    bad = tmp_path / "slurm.conf"
    bad.write_text(conf.replace("SlurmctldPort=6817", "SlurmctldPort=6899"))
    monkeypatch.setenv("SLURM_CONF", str(bad))
    res = ablate_in(project, *DIGITS)
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "SLURM does not answer" in line and "scontrol ping" in line, line
    assert not (project / "outputs").exists()


def test_preemption_past_max_requeues_is_recorded_and_resubmit_runs_it_again(probe_project: Path) -> None:
    proj = probe_project
    gate, release_arg = release_file(proj)
    res = ablate_cli(proj, "-m", "variable=bonus", "seeds=3", "task=probe", "task.steps=12", "launcher=slurm",
                     "launcher.timeout_min=20", "launcher.max_requeues=0", "wait=false", release_arg, timeout=120)
    assert res.returncode == 0, res.stderr
    sd = sweep_dir(proj)
    state = sd / "trials" / "control" / "seed=0" / "checkpoint" / "state.json"
    wait_for(state.exists, 120, "the trial to run")
    job_id = jobs(sd)[("control", 0)]
    preempt(job_id, sd / "slurm" / job_id / f"{job_id}_0_log.err")
    # the preempted job has ended (its trial recorded as killed): the other trials, and later the resubmitted
    # one, only have to finish
    wait_for(lambda: _all_ended([job_id]), 120, f"job {job_id} to end after its preemption")
    release(gate)
    col = ablate_cli(proj, "collect", str(sd), timeout=300)
    assert col.returncode == 0, col.stderr
    rec = result(sd, "control", 0)
    assert rec["status"] == "killed", rec
    assert "was preempted" in rec["error"] and "launcher.max_requeues=0" in rec["error"], rec

    col = ablate_cli(proj, "collect", str(sd), "--resubmit", timeout=300)
    assert col.returncode == 0, col.stderr
    rec = result(sd, "control", 0)
    assert rec["status"] == "ok" and rec["attempt"] == 2, rec
    assert rec["metrics"]["resumed_from"] == 0  # a new attempt starts clean; the old one is kept aside
    assert (sd / "trials" / "control" / "seed=0" / "attempts" / "1" / "result.json").exists()
    submitted = json.loads((sd / "slurm" / "jobs.json").read_text())["jobs"]
    assert len(submitted) == 7 and jobs(sd)[("control", 0)] != job_id  # only the killed trial went again


def test_ended_ago_is_counted_from_slurms_own_end_time(tmp_path: Path) -> None:
    """The collector's result grace starts at the job's end as sacct records it (a job that ended before
    `collect` started is settled at once): an array whose tasks ended gets one age per task, between 0 and
    the time since it was submitted; a job SLURM does not know gets none."""
    t0 = time.time()
    array = slurm("sbatch", "--parsable", "--array=0-1", "-o", str(tmp_path / "%A_%a.out"), "--wrap", "true").strip()
    tasks = [f"{array}_0", f"{array}_1"]
    wait_for(lambda: _all_ended(tasks), 120, f"array {array} to end")
    # slurmdbd may still hold the array's first record ("<id>", not yet its tasks) just after squeue shows them
    # ended: the collector then counts those tasks' grace from its own poll, as without accounting
    ago = wait_for(lambda: (got := ended_ago([*tasks, "99999999"])) and sorted(got) == tasks and got, 60,
                   f"sacct to record the end of each task of array {array}")
    assert all(0.0 <= a <= time.time() - t0 + 1.0 for a in ago.values()), (ago, time.time() - t0)  # End: whole s
