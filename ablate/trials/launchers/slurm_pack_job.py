"""What runs inside a packed SLURM job (``launcher.trials_per_job=k``): k trials, one after another.

:class:`PackedSlurmTrial` is the callable submitit pickles for one array task. With ``launcher.warm=true``
(the default) it starts one warm parent per job start (:mod:`ablate.trials.launchers.zygote`, the same one
``launcher=local`` uses): it imports the task (and torch) once, and each trial is a fresh fork of it that
runs :func:`main` with its own process group, environment, thread count and seeding. With
``launcher.warm=false`` each trial runs as ``python -m ablate.trials.launchers.slurm_pack_job SWEEP ARM SEED
ATTEMPT REQUEUES LOG`` in a fresh process. Either way every trial runs under the ablation's one
``PYTHONHASHSEED`` (:func:`ablate.trials.seeding.ablation_hash_seed`), and a trial that crashes (``os._exit``,
a signal) is recorded as failed while the job goes on with the next. See :mod:`ablate.trials.launchers.slurm_pack`
for the grouping and docs/slurm.md.
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

from ablate.record.sweepdir import SweepDir
from ablate.trials import proctree, seeding
from ablate.trials.launchers.base import TrialRef
from ablate.trials.launchers.slurm_job import (
    CHECKPOINT_ENV,
    REQUEUES_ENV,
    SIGNAL_SLACK_S,
    _use_safe_requeue,
    job_info,
    job_log,
)
from ablate.trials.launchers.warm import WarmParent
from ablate.trials.trial import PARENT_ENV, die_with_parent, own_process_tree, run_trial, write_result

if TYPE_CHECKING:
    from ablate.record.sweepdir import SweepDir

#: Variables of a trial's environment that the packed job sets per trial (the rest is the job's;
#: ``PYTHONHASHSEED`` is the ablation's, one for every trial).
TRIAL_ENV_KEYS = ("CUBLAS_WORKSPACE_CONFIG",)


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
        ``(arm, seed)`` -> variables to set for that trial's process (``CUBLAS_WORKSPACE_CONFIG`` under
        ``determinism=strict``); a ``PYTHONHASHSEED`` here is ignored (``hash_seed`` is every trial's).
    max_requeues : int
        Requeues allowed after preemption or a time limit before the unfinished trials are recorded
        as ``killed`` / ``timeout``.
    timeout_min : int
        The job's time limit in minutes (to tell a time limit from a preemption).
    signal_delay_s : int
        Seconds before the time limit that SLURM sends the warning signal.
    python : str, optional
        The interpreter for the trial processes (and the warm parent); default this job's.
    warm : bool
        True: fork each trial from one warm parent per job start; False: a fresh process per trial.
    hash_seed : str, optional
        The ablation's ``PYTHONHASHSEED`` (:func:`ablate.trials.seeding.ablation_hash_seed`); None: the job's own.
    preload : sequence of str
        Modules the warm parent imports after the task (``launcher.preload``).
    learn : bool
        The warm parent imports, before its next fork, what a trial imported and it had not
        (``launcher.learn_imports``).
    """

    def __init__(self, sweep_root: str, trials: Sequence[TrialRef], envs: Mapping[tuple[str, int], Mapping[str, str]],
                 *, max_requeues: int, timeout_min: int, signal_delay_s: int, python: str | None = None,
                 warm: bool = True, hash_seed: str | None = None, preload: Sequence[str] = (),
                 learn: bool = True) -> None:
        self.sweep_root = str(sweep_root)
        self.trials = [TrialRef(t.arm, int(t.seed), int(t.attempt)) for t in trials]
        self.envs = {(a, int(s)): dict(e) for (a, s), e in envs.items()}
        self.max_requeues = int(max_requeues)
        self.timeout_min = int(timeout_min)
        self.signal_delay_s = int(signal_delay_s)
        self.python = python
        self.warm = bool(warm)
        self.hash_seed = None if hash_seed is None else str(hash_seed)
        self.preload = [str(m) for m in preload]
        self.learn = bool(learn)
        self.requeues = 0
        self.finished: set[tuple[str, int]] = set()
        self._started = 0.0
        self._current: TrialRef | None = None
        self._proc: Any = None  # the running trial: a Popen, or a WarmTrial of the warm parent

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_proc"] = None
        state["_current"] = None
        return state

    def __call__(self) -> dict[str, Any]:
        """Run the unfinished trials; returns ``{"statuses": {"arm/seed": status}}`` (records are in
        each trial's ``result.json``)."""
        self._started = time.time()
        sd = SweepDir(self.sweep_root)
        _use_safe_requeue()
        log = job_log()
        warm = None
        try:
            todo = unfinished(sd, self.trials, self.finished)
            if self.warm and todo:
                warm = self._start_warm()  # raises UserError when the task cannot be forked safely
            for ref in todo:
                self._run_one(sd, ref, log, warm)
                self.finished.add((ref.arm, ref.seed))
        except Exception as exc:  # submitit's "not requeued" on the last allowed requeue, or our own fault
            self._stop_current()
            self._record_rest(sd, log, None if isinstance(exc, UncompletedJobError) else exc)
            raise
        finally:
            if warm is not None:  # on a requeue too (SystemExit): it kills a trial still running
                warm.close()
        statuses = {}
        for ref in self.trials:
            rec = sd.read_result(ref.arm, ref.seed) or {}
            statuses[f"{ref.arm}/{ref.seed}"] = rec.get("status")
        return {"statuses": statuses}

    def _job_env(self) -> dict[str, str]:
        """The environment every trial of this job starts from: the job's, without the per-trial variables,
        with the ablation's ``PYTHONHASHSEED``."""
        env = {k: v for k, v in os.environ.items() if k not in TRIAL_ENV_KEYS}
        if self.hash_seed is not None:
            env["PYTHONHASHSEED"] = self.hash_seed
        env["PYTHONUNBUFFERED"] = "1"
        env[PARENT_ENV] = str(os.getpid())  # each trial (or the warm parent) dies with this job's process
        return env

    def _start_warm(self) -> Any:
        """Start this job's warm parent (:class:`ablate.trials.launchers.warm.WarmParent`), which imports the task
        once with one thread per pool (each fork then sets the job's thread count).

        Raises
        ------
        UserError
            When the task cannot be forked safely (CUDA initialised or a thread started at import);
            every unfinished trial is then recorded as failed with that message.
        """
        env = self._job_env()
        env.update({var: "1" for var in seeding.THREAD_ENV_VARS})  # no pool before the fork
        print(f"ablate: packed job starts a warm parent for {len(self.trials)} trial(s)", file=sys.stderr, flush=True)
        return WarmParent(self.sweep_root, os.getcwd(), env, None, entry="ablate.trials.launchers.slurm_pack_job",
                          preexec_fn=_no_usr2, preload=getattr(self, "preload", ()),
                          learn=getattr(self, "learn", True))

    def _run_one(self, sd: SweepDir, ref: TrialRef, log: str | None, warm: Any = None) -> None:
        tp = sd.trial(ref.arm, ref.seed)
        ckpt = sd.mkdir(tp.dir / "checkpoint")
        own = {k: v for k, v in self.envs.get((ref.arm, ref.seed), {}).items() if k != "PYTHONHASHSEED"}
        own.update({CHECKPOINT_ENV: str(ckpt), REQUEUES_ENV: str(self.requeues)})
        argv = [self.sweep_root, ref.arm, str(ref.seed), str(ref.attempt), str(self.requeues), log or ""]
        print(f"ablate: packed job runs trial {ref.arm} seed={ref.seed}", file=sys.stderr, flush=True)
        self._current = ref
        if warm is not None:  # a fork of the warm parent: the job's thread counts, the trial's own variables

            threads = {var: os.environ[var] for var in seeding.THREAD_ENV_VARS if var in os.environ}
            omp = threads.get("OMP_NUM_THREADS", "")
            self._proc = warm.start(argv, {**threads, **own}, int(omp) if omp.isdigit() else 1)
        else:
            cmd = [self.python or sys.executable, "-m", "ablate.trials.launchers.slurm_pack_job", *argv]
            self._proc = subprocess.Popen(cmd, env={**self._job_env(), **own}, stdin=subprocess.DEVNULL,
                                          preexec_fn=_no_usr2)
        code = self._proc.wait()  # a signal's handler (submitit's USR2) still runs while this blocks
        if warm is not None:
            _kill_group(self._proc.pid)  # what the trial left in its process group (an os._exit, say) ends now
        self._proc = None
        self._current = None
        rec = sd.read_result(ref.arm, ref.seed)
        if rec is None or int(rec.get("attempt", 1)) < ref.attempt:
            how = ("the warm parent it was forked from died" if code is None else
                   f"it was killed by signal {-code}" if code < 0 else f"it exited with code {code}")
            write_result(tp, {"arm": ref.arm, "seed": ref.seed, "attempt": ref.attempt, "status": "failed",
                              "metrics": {}, "error": f"the trial process ended without a result: {how}; "
                              f"log {log}", "duration_s": None, "returncode": code,
                              "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                              "slurm": job_info(self.requeues), "log": log})

    def _stop_current(self) -> None:
        """Kill the trial still running (its whole process group), if any."""
        proc = self._proc
        if proc is None or proc.poll() is not None or proc.pid is None:
            return
        if isinstance(proc, subprocess.Popen):
            proc.kill()
        else:
            _kill_group(proc.pid)
        proc.wait()

    def _record_rest(self, sd: SweepDir, log: str | None, error: BaseException | None = None) -> None:
        """On giving up after ``max_requeues`` (``error`` None) or a fault of this job's own process
        (``error``): record every unfinished trial, so none is lost; a trial already ``ok`` is kept."""
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


def _kill_group(pgid: int | None) -> None:
    """SIGKILL every process left in the process group ``pgid`` (a forked trial's own group)."""
    import contextlib

    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    """``python -m ablate.trials.launchers.slurm_pack_job SWEEP ARM SEED ATTEMPT REQUEUES LOG``: one trial of a
    packed job, recorded with the SLURM job it ran in (in a fresh process, or in a fork of the warm
    parent, which calls this with the same arguments). Whatever the task started (``setsid``
    grandchildren too) ends with the trial."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 6:
        print("usage: python -m ablate.trials.launchers.slurm_pack_job SWEEP_DIR ARM SEED ATTEMPT REQUEUES LOG",
              file=sys.stderr)
        return 2
    sweep, arm, seed, attempt, requeues, log = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4]), argv[5]
    die_with_parent()
    own_process_tree()
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]  # never import from the live tree
    try:
        rec = run_trial(sweep, arm, seed, attempt=attempt)
        write_result(SweepDir(sweep).trial(arm, seed), {**rec, "slurm": job_info(requeues), "log": log or None})
    finally:
        proctree.kill_descendants()
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
