"""What runs inside a packed SLURM job (``launcher.trials_per_job=k``): k trials, one after another.

:class:`PackedSlurmTrial` is the callable submitit pickles for one array task; each of its trials runs
as ``python -m ablate.launchers.slurm_pack_job SWEEP ARM SEED ATTEMPT REQUEUES LOG`` in a fresh process
with its own environment. See :mod:`ablate.launchers.slurm_pack` for the grouping and docs/slurm.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import submitit
from submitit.core.utils import UncompletedJobError

from ablate.launchers.base import TrialRef
from ablate.launchers.slurm_job import (
    CHECKPOINT_ENV,
    REQUEUES_ENV,
    SIGNAL_SLACK_S,
    _use_safe_requeue,
    job_info,
    job_log,
)
from ablate.launchers.slurm_pack import unfinished

if TYPE_CHECKING:
    from ablate.sweepdir import SweepDir

#: Variables of a trial's environment that the packed job sets per trial (the rest is the job's).
TRIAL_ENV_KEYS = ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG")


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
        cmd = [self.python or sys.executable, "-m", "ablate.launchers.slurm_pack_job", self.sweep_root, ref.arm,
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


def _trial_main(argv: list[str]) -> int:
    """``python -m ablate.launchers.slurm_pack_job SWEEP ARM SEED ATTEMPT REQUEUES LOG``: one trial of a
    packed job, recorded with the SLURM job it ran in."""
    from ablate.sweepdir import SweepDir
    from ablate.trial import run_trial, write_result

    if len(argv) != 6:
        print("usage: python -m ablate.launchers.slurm_pack_job SWEEP_DIR ARM SEED ATTEMPT REQUEUES LOG",
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
