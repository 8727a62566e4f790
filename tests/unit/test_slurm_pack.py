"""Packing arithmetic of ``launcher.trials_per_job`` (no cluster needed): which trials go in which array
task, the packed job's time limit, what a requeued packed job re-runs, and the option's validation."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.record.sweepdir import SweepDir
from ablate.trials.launchers import TrialRef, get_launcher
from ablate.trials.launchers.base import JobState
from ablate.trials.launchers.slurm.launcher import SlurmLauncher
from ablate.trials.launchers.slurm.pack import (
    WAITING_REASON,
    pack,
    packed_timeout_min,
    per_trial_states,
)
from ablate.trials.launchers.slurm.pack_job import PackedSlurmTrial, unfinished
from tests.helpers import ablate_in, make_sweep


def _refs(n: int) -> list[TrialRef]:
    return [TrialRef("control" if i % 2 == 0 else "lr=0.2", i // 2) for i in range(n)]


@pytest.mark.parametrize(("n", "k", "sizes"), [
    (7, 3, [3, 3, 1]), (6, 3, [3, 3]), (2, 5, [2]), (4, 1, [1, 1, 1, 1]), (1, 1, [1]), (10, 4, [4, 4, 2]),
    (0, 3, []),
])
def test_pack_groups_consecutive_trials(n: int, k: int, sizes: list[int]) -> None:
    trials = _refs(n)
    groups = pack(trials, k)
    assert [len(g) for g in groups] == sizes
    assert [t for g in groups for t in g] == trials  # every trial once, in submission order


@pytest.mark.parametrize(("per_trial", "n", "job", "want"), [
    (20, 3, None, 60), (60, 1, None, 60), (1, 8, None, 8), (20, 3, 45, 45), (20, 1, 5, 5),
])
def test_packed_job_time_limit(per_trial: int, n: int, job: int | None, want: int) -> None:
    assert packed_timeout_min(per_trial, n, job) == want


def test_unfinished_skips_finished_and_recorded_trials(tmp_path: Path) -> None:
    # control: seed 0 ok, seed 1 failed, seed 2 pending; lr=0.2: seed 0 ok, seed 1 pending, seed 2 failed
    root = make_sweep(tmp_path / "sd", {"control": [0.9, None, "pending"], "lr=0.2": [0.8, "pending", None]})
    sd = SweepDir(root)
    group = [TrialRef("control", 0), TrialRef("control", 1), TrialRef("control", 2), TrialRef("lr=0.2", 1)]
    # nothing finished in an earlier start: every recorded trial is skipped, ok or failed (a result once
    # written is final: a job requeued from outside never overwrites it); the ones without a result run
    assert unfinished(sd, group, set()) == [group[2], group[3]]
    assert unfinished(sd, group, {("control", 1)}) == [group[2], group[3]]
    assert unfinished(sd, group, {("control", 2)}) == [group[3]]
    assert unfinished(sd, group, {("control", 1), ("control", 2), ("lr=0.2", 1)}) == []
    # an ok result of an older attempt does not count for a resubmitted attempt
    assert unfinished(sd, [TrialRef("control", 0, attempt=2)], set()) == [TrialRef("control", 0, attempt=2)]
    rec = json.loads((root / "trials" / "control" / "seed=0" / "result.json").read_text())
    assert rec["status"] == "ok"


def _packed(max_requeues: int = 3) -> PackedSlurmTrial:
    trials = [TrialRef("control", 0), TrialRef("control", 1), TrialRef("lr=0.2", 0)]
    envs = {(t.arm, t.seed): {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"} for t in trials}
    return PackedSlurmTrial("/sweep", trials, envs, max_requeues=max_requeues, timeout_min=20, signal_delay_s=90,
                            hash_seed="7")


def test_requeue_carries_the_finished_trials() -> None:
    job = _packed()
    job.finished.add(("control", 0))
    job._current = TrialRef("control", 1)
    delayed = job.checkpoint()
    assert delayed is not None
    requeued = pickle.loads(pickle.dumps(delayed.function))  # as submitit writes it for the requeued job
    assert requeued.requeues == 1
    assert requeued.finished == {("control", 0)}
    assert requeued._current is None and requeued._proc is None
    assert requeued.envs[("control", 1)] == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}  # each trial keeps its own
    assert requeued.hash_seed == "7" and requeued.warm  # the ablation's hash seed, the warm parent again


def test_no_requeue_past_max_requeues() -> None:
    job = _packed(max_requeues=1)
    assert job.checkpoint() is not None and job.requeues == 1
    assert job.checkpoint() is None and job.requeues == 1


@pytest.mark.parametrize("bad", [0, -2, True, "3", 1.5])
def test_bad_trials_per_job_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"`launcher.trials_per_job`.*integer >= 1"):
        SlurmLauncher(trials_per_job=bad)  # type: ignore[arg-type]


def test_trials_per_job_defaults_to_one() -> None:
    assert get_launcher({"name": "slurm"}).trials_per_job == 1
    assert get_launcher({"name": "slurm", "trials_per_job": 4}).trials_per_job == 4


def test_warm_defaults_to_true_and_is_checked() -> None:
    assert get_launcher({"name": "slurm", "trials_per_job": 4}).warm is True
    assert get_launcher({"name": "slurm", "warm": False}).warm is False
    with pytest.raises(ConfigError, match=r"`launcher.warm`.*true or false"):
        SlurmLauncher(warm="yes")  # type: ignore[arg-type]


def _js(job_id: str, state: str) -> JobState:
    return JobState(job_id=job_id, state=state, active=True, attempt=1, reason="", log="/x.err")


def test_status_shows_one_running_trial_per_packed_job(tmp_path: Path) -> None:
    # no result for any trial; control seed 0 has started (manifest), the others have not
    root = make_sweep(tmp_path / "sd", {"control": ["pending"] * 3, "lr=0.2": ["pending"] * 3})
    sd = SweepDir(root)
    sd.trial("control", 0).dir.mkdir(parents=True)
    sd.trial("control", 0).manifest.write_text("{}")
    states = {("control", 0): _js("7_0", "RUNNING"), ("control", 1): _js("7_0", "RUNNING"),
              ("control", 2): _js("7_0", "RUNNING"),  # one packed task of 3
              ("lr=0.2", 0): _js("7_1", "PENDING"), ("lr=0.2", 1): _js("7_1", "PENDING"),  # a queued task
              ("lr=0.2", 2): _js("7_2", "RUNNING")}  # the only unfinished trial of its task: it is the one running
    got = per_trial_states(sd, states)
    assert {k: v.state for k, v in got.items()} == {
        ("control", 0): "RUNNING", ("control", 1): "PENDING", ("control", 2): "PENDING",
        ("lr=0.2", 0): "PENDING", ("lr=0.2", 1): "PENDING", ("lr=0.2", 2): "RUNNING"}
    assert got[("control", 1)].reason == WAITING_REASON and got[("control", 1)].job_id == "7_0"
    assert got[("lr=0.2", 0)].reason == ""  # queued by SLURM: its own state, untouched
    unpacked = {("control", s): _js(f"8_{s}", "RUNNING") for s in range(3)}  # trials_per_job=1: unchanged
    assert per_trial_states(sd, unpacked) == unpacked


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_bad_trials_per_job_on_the_command_line_is_one_line_and_exit_2(project: Path, bad: str) -> None:
    res = ablate_in(project, "-m", "variable=lr", "launcher=slurm", f"launcher.trials_per_job={bad}", "dry_run=true")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "`launcher.trials_per_job`: must be an integer >= 1" in line and "launcher.trials_per_job=4" in line
    assert "Traceback" not in res.stderr
    assert not list(project.glob("outputs/ablate/*/*/ablation.yaml"))  # nothing created
