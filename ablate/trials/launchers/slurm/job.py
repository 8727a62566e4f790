"""What runs inside a SLURM job of ``launcher=slurm``: one trial, checkpointable.

:class:`SlurmTrial` is the callable submitit pickles into ``<sweep>/slurm/<job id>/`` and runs in the
job. It calls :func:`ablate.trials.trial.run_trial`, which reads everything from the sweep dir, imports the
task from the sweep's code snapshot and verifies the data hashes at every start, so a requeued trial
runs the pinned commit and data, never newer ones.

Preemption and time limits: SLURM signals the job (``USR2``, ``signal_delay_s`` before its time limit,
or when it is preempted); submitit then calls :meth:`SlurmTrial.checkpoint`, requeues the job with the
same arguments (same sweep dir, arm, seed, attempt) and exits. The requeued job runs the trial again,
up to ``max_requeues`` times; after that the trial is recorded as ``timeout`` or ``killed``.

A task that can save and restore its own state reads ``ABLATE_CHECKPOINT_DIR`` (a directory kept
across requeues of one attempt, empty at a trial's first start) and ``ABLATE_REQUEUES`` (how many times
this attempt was requeued); see docs/slurm.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import submitit

from ablate.record import trial_lock
from ablate.record.sweepdir import SweepDir
from ablate.trials import proctree
from ablate.trials.trial import run_trial, write_result

#: Environment variable naming the trial's checkpoint directory (kept across requeues).
CHECKPOINT_ENV = "ABLATE_CHECKPOINT_DIR"
#: Environment variable with the number of times this attempt was requeued so far.
REQUEUES_ENV = "ABLATE_REQUEUES"
#: SLURM sends its warning signal up to about a minute early or late (it checks every ~30 s).
SIGNAL_SLACK_S = 60


def job_info(requeues: int = 0) -> dict[str, Any]:
    """The SLURM job this process runs in, for the trial's record (empty values outside SLURM)."""
    env = os.environ
    array = env.get("SLURM_ARRAY_JOB_ID")
    job_id = f"{array}_{env.get('SLURM_ARRAY_TASK_ID')}" if array else env.get("SLURM_JOB_ID")
    return {"job_id": job_id, "node": env.get("SLURMD_NODENAME"), "requeues": requeues,
            "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES")}


def job_log() -> str | None:
    """Path of this job's stderr log (submitit's), or None outside a submitit job."""
    try:
        return str(submitit.JobEnvironment().paths.stderr)
    except (KeyError, RuntimeError):
        return None


def requeue(job_id: str) -> None:
    """``scontrol requeue`` this job from inside it, immune to the job step being stopped.

    The requeue makes SLURM send SIGTERM to every process of the job step, so a ``scontrol`` that has
    not exited yet dies with it; submitit's own call then raises inside the task and the trial would be
    recorded as failed although the job was requeued. Here scontrol runs with SIGTERM ignored.
    """
    subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=60, stdin=subprocess.DEVNULL,
                   preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))


def _use_safe_requeue() -> None:
    """Make submitit's preemption handler (installed before the trial runs) requeue with :func:`requeue`."""
    handler = signal.getsignal(submitit.JobEnvironment._usr_sig())
    env = getattr(getattr(handler, "__self__", None), "env", None)
    if env is not None and hasattr(env, "_requeue"):
        env._requeue = lambda countdown: requeue(env.job_id)


class SlurmTrial(submitit.helpers.Checkpointable):
    """One trial (``arm`` at ``seed``, attempt ``attempt``) of the sweep dir ``sweep_root``, as a
    submitit checkpointable callable.

    Parameters
    ----------
    sweep_root : str
        The sweep dir (visible from the compute node).
    arm, seed, attempt
        The trial.
    max_requeues : int
        Requeues allowed after preemption or a time limit before the trial is recorded as failed.
    timeout_min : int
        The job's time limit in minutes (to tell a time limit from a preemption).
    signal_delay_s : int
        Seconds before the time limit that SLURM sends the warning signal.
    """

    def __init__(self, sweep_root: str, arm: str, seed: int, attempt: int, *, max_requeues: int,
                 timeout_min: int, signal_delay_s: int) -> None:
        self.sweep_root = str(sweep_root)
        self.arm = arm
        self.seed = int(seed)
        self.attempt = int(attempt)
        self.max_requeues = int(max_requeues)
        self.timeout_min = int(timeout_min)
        self.signal_delay_s = int(signal_delay_s)
        self.requeues = 0
        self._started = 0.0
        self._final: dict[str, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        """Run the trial; returns ``{"status": ...}`` (the full record is in ``result.json``)."""
        self._started = time.time()
        self._final = None
        # The job starts in the submission directory: never import the task from the live tree.
        sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
        sd = SweepDir(self.sweep_root)
        tp = sd.trial(self.arm, self.seed)
        previous = sd.read_result(self.arm, self.seed)
        if previous is not None and int(previous.get("attempt", 1)) >= self.attempt:
            # recorded already (a job requeued from outside after it ended): a result once written is final,
            # so a late run never overwrites one a verdict may have used
            return {"status": previous.get("status")}
        _use_safe_requeue()
        ckpt = sd.mkdir(tp.dir / "checkpoint")
        os.environ[CHECKPOINT_ENV] = str(ckpt)
        os.environ[REQUEUES_ENV] = str(self.requeues)

        proctree.become_subreaper()  # what the task leaves behind (setsid too) ends with the trial
        try:
            rec = run_trial(self.sweep_root, self.arm, self.seed, attempt=self.attempt)
        except trial_lock.StrayTrial as exc:  # a resume decides about this sweep dir: this job runs nothing
            print(f"ablate: {exc}", file=sys.stderr, flush=True)
            return {"status": None}
        except Exception:
            if self._final is None:
                raise
            rec = self._final
        finally:
            proctree.kill_descendants()
        if self._final is not None:  # gave up after max_requeues: run_trial saw submitit's exception
            rec = self._final
        rec = write_result(tp, {**rec, "slurm": job_info(self.requeues), "log": job_log()})
        return {"status": rec.get("status")}

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission | None:
        """Called by submitit on the warning signal: requeue this trial, or give up after ``max_requeues``."""
        elapsed = time.time() - self._started
        timed_out = elapsed >= self.timeout_min * 60 - self.signal_delay_s - SIGNAL_SLACK_S
        why = "reached its time limit" if timed_out else "was preempted"
        if self.requeues >= self.max_requeues:
            tp = SweepDir(self.sweep_root).trial(self.arm, self.seed)
            fix = ("raise `launcher.timeout_min`, or save state in $ABLATE_CHECKPOINT_DIR so requeues resume"
                   if timed_out else "`ablate collect DIR --resubmit` runs it again")
            self._final = write_result(tp, {
                "arm": self.arm, "seed": self.seed, "attempt": self.attempt,
                "status": "timeout" if timed_out else "killed", "metrics": {},
                "error": f"the SLURM job {why} after {elapsed:.0f} s and was already requeued "
                         f"{self.requeues} time(s) (launcher.max_requeues={self.max_requeues}). Fix: {fix}",
                "duration_s": elapsed, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "slurm": job_info(self.requeues), "log": job_log(),
            })
            return None
        self.requeues += 1
        print(f"ablate: trial {self.arm} seed={self.seed} {why} after {elapsed:.0f} s: requeued "
              f"({self.requeues}/{self.max_requeues})", file=sys.stderr, flush=True)
        return super().checkpoint(*args, **kwargs)
