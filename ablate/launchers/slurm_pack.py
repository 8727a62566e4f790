"""SLURM packing (``launcher.trials_per_job=k``): k trials of a job array inside one SLURM job.

For short trials the scheduler's start of each job (queueing, the batch script, submitit's unpickling,
``setup`` lines) can cost more than the trial. With ``trials_per_job=k`` each array task is a
:class:`PackedSlurmTrial`: it runs its k trials one after another, each in its own fresh Python process
(``python -m ablate.launchers.slurm_pack``), so every trial keeps today's isolation and its own
``PYTHONHASHSEED`` (a per-seed variable that must be set before the interpreter starts, which a fork
of one warm parent cannot give). What is amortised is the scheduler's start per job.

Preemption and time limits: SLURM signals the job; submitit calls :meth:`PackedSlurmTrial.checkpoint`,
which requeues the job with the list of trials that had *finished* (their process ended) before the
signal. The requeued job skips those and any trial whose ``result.json`` says ``ok``, so it re-runs
exactly the unfinished trials (:func:`unfinished`). The trial that was running when the signal came is
re-run, resuming from its ``ABLATE_CHECKPOINT_DIR`` when the task saves state there.

Each trial is still one row of ``<sweep>/slurm/jobs.json`` (several rows share one array task id), so
``ablate status`` and ``ablate collect`` report per trial as without packing.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import submitit
from submitit.core.utils import UncompletedJobError

from ablate.launchers.base import JobState, TrialRef
from ablate.launchers.slurm_job import (
    CHECKPOINT_ENV,
    REQUEUES_ENV,
    SIGNAL_SLACK_S,
    _use_safe_requeue,
    job_info,
    job_log,
)

if TYPE_CHECKING:
    from ablate.launchers.slurm import SlurmLauncher
    from ablate.sweepdir import SweepDir

#: Variables of a trial's environment that the packed job sets per trial (the rest is the job's).
TRIAL_ENV_KEYS = ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG")


def check_trials_per_job(value: Any) -> int:
    """``launcher.trials_per_job`` as an int >= 1.

    Raises
    ------
    ConfigError
        When it is not an integer >= 1 (a bool, a string, a float, 0 or less).
    """
    from ablate.errors import ConfigError

    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"must be an integer >= 1, got {value!r}", where="launcher.trials_per_job",
                          fix="e.g. `launcher.trials_per_job=4` runs 4 trials one after another in each job; "
                          "1 runs one trial per job")
    return value


def pack(trials: Sequence[TrialRef], trials_per_job: int) -> list[list[TrialRef]]:
    """Group ``trials`` into array tasks of at most ``trials_per_job`` consecutive trials.

    Parameters
    ----------
    trials : sequence of TrialRef
        The trials to submit, in submission order.
    trials_per_job : int
        Trials per SLURM job (>= 1); 1 gives one trial per task, as without packing.

    Returns
    -------
    list of list of TrialRef
        ``ceil(len(trials) / trials_per_job)`` groups; only the last may be shorter.
    """
    k = max(1, int(trials_per_job))
    return [list(trials[i:i + k]) for i in range(0, len(trials), k)]


def packed_timeout_min(per_trial_min: int, n_trials: int, job_timeout_min: int | None) -> int:
    """The time limit (minutes) of a job running ``n_trials`` trials one after another.

    ``job_timeout_min`` (``launcher.timeout_min``, the limit of each job) wins when set; otherwise each
    trial keeps its own limit ``per_trial_min``, so the job gets ``n_trials * per_trial_min``.
    """
    if job_timeout_min is not None:
        return int(job_timeout_min)
    return math.ceil(per_trial_min) * max(1, int(n_trials))


def unfinished(sd: SweepDir, group: Sequence[TrialRef], finished: set[tuple[str, int]]) -> list[TrialRef]:
    """The trials of ``group`` a (re)started packed job still has to run.

    A trial is done when its process ended in an earlier start of this job (``finished``: its result,
    whatever its status, is final) or when its ``result.json`` for this attempt says ``ok``. Every other
    trial, including the one that was running when the job was preempted, runs (again).
    """
    out = []
    for ref in group:
        if (ref.arm, ref.seed) in finished:
            continue
        rec = sd.read_result(ref.arm, ref.seed)
        if rec is not None and rec.get("status") == "ok" and int(rec.get("attempt", 1)) >= ref.attempt:
            continue
        out.append(ref)
    return out


#: SLURM states of a job whose process is up (as ``ablate status`` counts running).
_UP_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"})
#: Reason shown for a trial that waits inside its running packed job.
WAITING_REASON = "waits for the trials before it in its packed job"


def per_trial_states(sd: SweepDir, states: Mapping[tuple[str, int], JobState]) -> dict[tuple[str, int], JobState]:
    """SLURM's per-job states turned into per-trial ones: a trial whose running job is shared with other
    unfinished trials and that has not started yet (no ``manifest.json``) is ``PENDING``, so
    ``ablate status`` shows one trial running per packed job, not k.

    Parameters
    ----------
    sd : SweepDir
    states : mapping
        ``(arm, seed)`` -> :class:`JobState` of the trials still without a result (as from
        :meth:`SlurmLauncher.job_states`); several trials may share one ``job_id``.

    Returns
    -------
    dict
        The same keys; unchanged when no job is shared (``trials_per_job=1``).
    """
    import dataclasses

    shared: dict[str, int] = {}
    for js in states.values():
        shared[js.job_id] = shared.get(js.job_id, 0) + 1
    out = dict(states)
    for (arm, seed), js in states.items():
        if shared[js.job_id] > 1 and js.state in _UP_STATES and not sd.trial(arm, seed).manifest.exists():
            out[(arm, seed)] = dataclasses.replace(js, state="PENDING", reason=WAITING_REASON)
    return out


def _no_usr2() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The packed job's process decides on preemption; its trial process keeps running until the requeue
    stops the job (or, on the last allowed requeue, until the packed job kills it)."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


class PackedSlurmTrial(submitit.helpers.Checkpointable):
    """k trials of the sweep dir ``sweep_root``, run one after another in one SLURM array task.

    Parameters
    ----------
    sweep_root : str
        The sweep dir (visible from the compute node).
    trials : sequence of TrialRef
        The trials of this task, in running order.
    envs : mapping
        ``(arm, seed)`` -> variables to set for that trial's process (``PYTHONHASHSEED`` ...).
    max_requeues : int
        Requeues allowed after preemption or a time limit before the unfinished trials are recorded
        as ``killed`` / ``timeout``.
    timeout_min : int
        The job's time limit in minutes (to tell a time limit from a preemption).
    signal_delay_s : int
        Seconds before the time limit that SLURM sends the warning signal.
    python : str, optional
        The interpreter for the trial processes; default this job's.
    """

    def __init__(self, sweep_root: str, trials: Sequence[TrialRef], envs: Mapping[tuple[str, int], Mapping[str, str]],
                 *, max_requeues: int, timeout_min: int, signal_delay_s: int, python: str | None = None) -> None:
        self.sweep_root = str(sweep_root)
        self.trials = [TrialRef(t.arm, int(t.seed), int(t.attempt)) for t in trials]
        self.envs = {(a, int(s)): dict(e) for (a, s), e in envs.items()}
        self.max_requeues = int(max_requeues)
        self.timeout_min = int(timeout_min)
        self.signal_delay_s = int(signal_delay_s)
        self.python = python
        self.requeues = 0
        self.finished: set[tuple[str, int]] = set()
        self._started = 0.0
        self._current: TrialRef | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_proc"] = None
        state["_current"] = None
        return state

    def __call__(self) -> dict[str, Any]:
        """Run the unfinished trials; returns ``{"statuses": {"arm/seed": status}}`` (records are in
        each trial's ``result.json``)."""
        from ablate.sweepdir import SweepDir

        self._started = time.time()
        sd = SweepDir(self.sweep_root)
        _use_safe_requeue()
        log = job_log()
        try:
            for ref in unfinished(sd, self.trials, self.finished):
                self._run_one(sd, ref, log)
                self.finished.add((ref.arm, ref.seed))
        except Exception as exc:  # submitit's "not requeued" on the last allowed requeue, or our own fault
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
            self._record_rest(sd, log, None if isinstance(exc, UncompletedJobError) else exc)
            raise
        statuses = {}
        for ref in self.trials:
            rec = sd.read_result(ref.arm, ref.seed) or {}
            statuses[f"{ref.arm}/{ref.seed}"] = rec.get("status")
        return {"statuses": statuses}

    def _run_one(self, sd: SweepDir, ref: TrialRef, log: str | None) -> None:
        tp = sd.trial(ref.arm, ref.seed)
        ckpt = sd.mkdir(tp.dir / "checkpoint")
        env = {**os.environ, **self.envs.get((ref.arm, ref.seed), {}), CHECKPOINT_ENV: str(ckpt),
               REQUEUES_ENV: str(self.requeues)}
        for key in TRIAL_ENV_KEYS:
            if key not in self.envs.get((ref.arm, ref.seed), {}):
                env.pop(key, None)
        cmd = [self.python or sys.executable, "-m", "ablate.launchers.slurm_pack", self.sweep_root, ref.arm,
               str(ref.seed), str(ref.attempt), str(self.requeues), log or ""]
        print(f"ablate: packed job runs trial {ref.arm} seed={ref.seed}", file=sys.stderr, flush=True)
        self._current = ref
        self._proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, preexec_fn=_no_usr2)
        while True:
            try:
                code = self._proc.wait()
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for old interpreters
                continue
        self._proc = None
        self._current = None
        if sd.read_result(ref.arm, ref.seed) is None or int((sd.read_result(ref.arm, ref.seed) or {}).get(
                "attempt", 1)) < ref.attempt:
            from ablate.trial import write_result

            write_result(tp, {"arm": ref.arm, "seed": ref.seed, "attempt": ref.attempt, "status": "failed",
                              "metrics": {}, "error": f"the trial process ended with code {code} without a "
                              f"result; log {log}", "duration_s": None,
                              "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                              "slurm": job_info(self.requeues), "log": log})

    def _record_rest(self, sd: SweepDir, log: str | None, error: BaseException | None = None) -> None:
        """On giving up after ``max_requeues`` (``error`` None) or a fault of this job's own process
        (``error``): record every unfinished trial, so none is lost; a trial already ``ok`` is kept."""
        from ablate.trial import write_result

        elapsed = time.time() - self._started
        timed_out = error is None and elapsed >= self.timeout_min * 60 - self.signal_delay_s - SIGNAL_SLACK_S
        why = "reached its time limit" if timed_out else "was preempted"
        fix = ("raise `launcher.timeout_min` or lower `launcher.trials_per_job`" if timed_out
               else "`ablate collect DIR --resubmit` runs it again")
        for ref in unfinished(sd, self.trials, self.finished):
            if error is not None:
                status, msg = "failed", (f"the packed SLURM job failed before this trial finished: "
                                         f"{type(error).__name__}: {error}; log {log}")
            else:
                status = "timeout" if timed_out else "killed"
                msg = (f"the packed SLURM job {why} after {elapsed:.0f} s and was already requeued "
                       f"{self.requeues} time(s) (launcher.max_requeues={self.max_requeues}) before this "
                       f"trial finished. Fix: {fix}")
            write_result(sd.trial(ref.arm, ref.seed), {
                "arm": ref.arm, "seed": ref.seed, "attempt": ref.attempt, "status": status, "metrics": {},
                "error": msg,
                "duration_s": None, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "slurm": job_info(self.requeues), "log": log,
            })

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission | None:
        """Called by submitit on the warning signal: requeue with the finished trials remembered, or
        give up after ``max_requeues`` (the unfinished trials are then recorded in :meth:`__call__`)."""
        elapsed = time.time() - self._started
        why = ("reached its time limit"
               if elapsed >= self.timeout_min * 60 - self.signal_delay_s - SIGNAL_SLACK_S else "was preempted")
        if self.requeues >= self.max_requeues:
            return None
        self.requeues += 1
        running = f" while running {self._current.arm} seed={self._current.seed}" if self._current else ""
        print(f"ablate: packed job {why} after {elapsed:.0f} s{running}; {len(self.finished)} of "
              f"{len(self.trials)} trial(s) finished: requeued ({self.requeues}/{self.max_requeues})",
              file=sys.stderr, flush=True)
        return super().checkpoint(*args, **kwargs)


def submit_packed(launcher: SlurmLauncher, sd: SweepDir, trials: Sequence[TrialRef]) -> list[str]:
    """Submit ``trials`` as job array(s) of ``launcher.trials_per_job`` trials per task and record each
    trial with its array task id in ``<sweep>/slurm/jobs.json`` (several trials share one id).

    Returns
    -------
    list of str
        The job ids of the arrays (one per ``MaxArraySize`` tasks).

    Raises
    ------
    SchedulerError
        When SLURM refuses the submission (the trials submitted before stay recorded).
    """
    from ablate import seeding
    from ablate.launchers.slurm import _log, setup_lines, split_arrays
    from ablate.sweepdir import write_json
    from ablate.trial import load_plan

    plan = load_plan(sd)
    opts = plan.get("options", {})
    per_trial = launcher._job_timeout(opts.get("timeout_min")) if launcher.timeout_min is None else 0
    modes = {a["name"]: seeding.trial_mode(plan, a) for a in plan["arms"]}
    job_name = f"ablate-{sd.root.name}"[:64]
    groups = pack(trials, launcher.trials_per_job)
    array_ids: list[str] = []
    for chunk in split_arrays(groups, launcher._max_array_size()):  # type: ignore[arg-type]
        timeout_min = packed_timeout_min(per_trial, max(len(g) for g in chunk), launcher.timeout_min)
        ex = submitit.SlurmExecutor(folder=sd.root / "slurm" / "%j", max_num_timeout=launcher.max_requeues + 1,
                                    python=launcher.python)
        # per-task variables are set per trial process by PackedSlurmTrial; the script sets the job's own
        setup = [line for line in setup_lines([g[0].seed for g in chunk], determinism="off",
                                              cpus_per_task=launcher.cpus_per_task, user_setup=launcher.setup)]
        ex.update_parameters(**launcher._parameters(job_name=job_name, timeout_min=timeout_min, setup=setup))
        fns = [PackedSlurmTrial(str(sd.root), g, {(r.arm, r.seed): seeding.environment_for(modes[r.arm], r.seed)
                                                  for r in g},
                                max_requeues=launcher.max_requeues, timeout_min=timeout_min,
                                signal_delay_s=launcher.signal_delay_s, python=None)
               for g in chunk]
        t0 = time.perf_counter()
        try:
            jobs = ex.submit_array(fns)
        except Exception as exc:  # submitit wraps sbatch's stderr in its own exception types
            raise launcher._refusal(str(exc)) from exc
        array_id = jobs[0].job_id.split("_")[0]
        array_ids.append(array_id)
        records = launcher._read_jobs(sd)
        records.extend({"job_id": job.job_id, "arm": r.arm, "seed": r.seed, "attempt": r.attempt}
                       for job, g in zip(jobs, chunk, strict=True) for r in g)
        sd.mkdir(launcher._jobs_file(sd).parent)
        write_json(launcher._jobs_file(sd), {"jobs": records})
        n = sum(len(g) for g in chunk)
        _log(f"ablate: submitted {n} trial(s) in {len(chunk)} job(s) of up to {launcher.trials_per_job} as SLURM "
             f"job {array_id} ({time.perf_counter() - t0:.2f} s)")
    return array_ids


def _trial_main(argv: list[str]) -> int:
    """``python -m ablate.launchers.slurm_pack SWEEP ARM SEED ATTEMPT REQUEUES LOG``: one trial of a
    packed job, recorded with the SLURM job it ran in."""
    from ablate.sweepdir import SweepDir
    from ablate.trial import run_trial, write_result

    if len(argv) != 6:
        print("usage: python -m ablate.launchers.slurm_pack SWEEP_DIR ARM SEED ATTEMPT REQUEUES LOG",
              file=sys.stderr)
        return 2
    sweep, arm, seed, attempt, requeues, log = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4]), argv[5]
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]  # never import from the live tree
    rec = run_trial(sweep, arm, seed, attempt=attempt)
    write_result(SweepDir(sweep).trial(arm, seed), {**rec, "slurm": job_info(requeues), "log": log or None})
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_trial_main(sys.argv[1:]))
