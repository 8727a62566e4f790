"""What runs inside a packed SLURM job (``launcher.trials_per_job=k``): k trials, one after another.

:class:`PackedSlurmTrial` is the callable submitit pickles for one array task. With ``launcher.warm=true``
(the default) it starts one warm parent per job start (:mod:`ablate.trials.warm.parent`, the same one
``launcher=local`` uses): it imports the task (and torch) once, and each trial is a fresh fork of it that
runs :func:`main` with its own process group, environment, thread count and seeding. With
``launcher.warm=false`` each trial runs as ``python -m ablate.trials.launchers.slurm.pack_job SWEEP ARM SEED
ATTEMPT REQUEUES LOG`` in a fresh process. Either way every trial runs under the ablation's one
``PYTHONHASHSEED`` (:func:`ablate.trials.seeding.ablation_hash_seed`), and a trial that crashes (``os._exit``,
a signal) is recorded as failed while the job goes on with the next. See :mod:`ablate.trials.launchers.slurm.pack`
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

from ablate.record import trial_lock
from ablate.record.sweepdir import SweepDir
from ablate.trials import proctree, seeding
from ablate.trials.launchers.base import TrialRef
from ablate.trials.launchers.slurm.job import (
    CHECKPOINT_ENV,
    REQUEUES_ENV,
    SIGNAL_SLACK_S,
    _use_safe_requeue,
    job_info,
    job_log,
)
from ablate.trials.proctree import PARENT_ENV, die_with_parent, own_process_tree
from ablate.trials.trial import STRAY_EXIT, run_trial, write_result
from ablate.trials.warm.starter import WarmParent

if TYPE_CHECKING:
    from ablate.record.sweepdir import SweepDir

#: Seconds to wait for SLURM's SIGTERM after a trial (or the warm parent) died of a signal, before taking
#: the death as the trial's own (SLURM signals every process of a job at nearly the same moment).
STOP_GRACE_S = 2.0
#: Variables of a trial's environment that the packed job sets per trial (the rest is the job's;
#: ``PYTHONHASHSEED`` is the ablation's, one for every trial).
TRIAL_ENV_KEYS = ("CUBLAS_WORKSPACE_CONFIG",)


def unfinished(sd: SweepDir, group: Sequence[TrialRef], finished: set[tuple[str, int]]) -> list[TrialRef]:
    """The trials of ``group`` a (re)started packed job still has to run.

    A trial is done when its process ended in an earlier start of this job (``finished``) or when it has
    a ``result.json`` for this attempt, whatever its status: a result once written is final, so a job
    requeued from outside (``scontrol requeue``, which restarts it from its first pickle) never runs a
    recorded trial again, and a late result never overwrites one a verdict may already have used. A trial
    the job was running when SLURM stopped it has no result (:meth:`PackedSlurmTrial._run_one` records
    none), so it runs again, as does every trial not started yet.
    """
    out = []
    for ref in group:
        if (ref.arm, ref.seed) in finished:
            continue
        rec = sd.read_result(ref.arm, ref.seed)
        if rec is not None and int(rec.get("attempt", 1)) >= ref.attempt:
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
        state["_term_at"] = None
        return state

    def __call__(self) -> dict[str, Any]:
        """Run the unfinished trials; returns ``{"statuses": {"arm/seed": status}}`` (records are in
        each trial's ``result.json``).

        When SLURM stops the job (``scancel``, ``scontrol requeue``, preemption: SIGTERM to every process
        of the job), the trial it ended gets no result and no further trial starts: a requeued job runs
        them again, and for a cancelled one ``ablate collect`` records the running trial with SLURM's
        state and leaves the unstarted ones pending. When the warm parent dies on its own, the trial it
        was running is recorded ``killed`` with that cause and a new warm parent runs the rest.
        """
        self._started = time.time()
        self._term_at = None
        sd = SweepDir(self.sweep_root)
        _use_safe_requeue()
        self._watch_sigterm()
        log = job_log()
        warm = None
        try:
            todo = unfinished(sd, self.trials, self.finished)
            if self.warm and todo:
                warm = self._start_warm()  # raises UserError when the task cannot be forked safely
            restarts = 0
            while todo:
                if self._term_at is not None:
                    self._say_stopped(None, len(todo))
                    break
                ref = todo[0]
                outcome = self._run_one(sd, ref, log, warm)
                if outcome == "stopped":
                    self._say_stopped(ref, len(todo) - 1)
                    break
                if outcome in ("unforked", "parent died"):  # never fork from a dead warm parent: start a new one
                    restarts += 1
                    if restarts > len(self.trials):
                        raise RuntimeError(f"the warm parent died {restarts} times ({warm.death_note()})")
                    note = warm.death_note()
                    warm.close()
                    warm = None
                    print(f"ablate: {note}; a new warm parent runs the trial(s) left", file=sys.stderr, flush=True)
                    warm = self._start_warm()
                    if outcome == "unforked":
                        continue  # it never ran: run it now, from the new warm parent
                self.finished.add((ref.arm, ref.seed))
                todo.pop(0)
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

    def _watch_sigterm(self) -> None:
        """Note when SIGTERM arrives (SLURM stopping the job), then let submitit's own handler run."""
        prev = signal.getsignal(signal.SIGTERM)

        def on_term(signum: int, frame: Any) -> None:
            self._term_at = time.time()
            if callable(prev):
                prev(signum, frame)

        signal.signal(signal.SIGTERM, on_term)

    def _stopped_by_slurm(self, grace_s: float = STOP_GRACE_S) -> bool:
        """True when SLURM is stopping this job: its SIGTERM came, or comes within ``grace_s`` (SLURM signals
        every process of the job at once, so the trial or the warm parent may die a moment before we hear)."""
        end = time.monotonic() + grace_s
        while self._term_at is None and time.monotonic() < end:
            time.sleep(0.05)
        return self._term_at is not None

    def _say_stopped(self, ref: TrialRef | None, n_left: int) -> None:
        running = f" while trial {ref.arm} seed={ref.seed} ran; it is not recorded" if ref is not None else ""
        print(f"ablate: SLURM stopped this packed job (SIGTERM: scancel, scontrol requeue or preemption){running}; "
              f"{n_left} more trial(s) not started. A requeued job runs them; for a cancelled one `ablate collect "
              f"{self.sweep_root}` records the running trial with SLURM's state and runs the unstarted ones",
              file=sys.stderr, flush=True)

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
        """Start this job's warm parent (:class:`ablate.trials.warm.starter.WarmParent`), which imports the task
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
        return WarmParent(self.sweep_root, os.getcwd(), env, None, entry="ablate.trials.launchers.slurm.pack_job",
                          preexec_fn=_no_usr2, preload=getattr(self, "preload", ()),
                          learn=getattr(self, "learn", True))

    def _run_one(self, sd: SweepDir, ref: TrialRef, log: str | None, warm: Any = None) -> str:
        """Run one trial and record it; returns ``"done"`` (it has its result), ``"stopped"`` (SLURM stopped
        the job: no result), ``"parent died"`` (recorded ``killed``: its warm parent died while it ran) or
        ``"unforked"`` (the warm parent was dead before it forked the trial: it never ran, no result)."""
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
            cmd = [self.python or sys.executable, "-m", "ablate.trials.launchers.slurm.pack_job", *argv]
            self._proc = subprocess.Popen(cmd, env={**self._job_env(), **own}, stdin=subprocess.DEVNULL,
                                          preexec_fn=_no_usr2)
        code = self._proc.wait()  # a signal's handler (submitit's USR2) still runs while this blocks
        proc = self._proc
        if warm is not None:
            proctree.kill_group(proc.pid)  # what the trial left in its process group (an os._exit, say) ends now
        self._proc = None
        self._current = None
        rec = sd.read_result(ref.arm, ref.seed)
        if rec is not None and int(rec.get("attempt", 1)) >= ref.attempt:
            return "done"
        if (code is None or code < 0) and self._stopped_by_slurm():
            return "stopped"  # SLURM ended it with the job: no result, so it stays runnable (see __call__)
        base = {"arm": ref.arm, "seed": ref.seed, "attempt": ref.attempt, "metrics": {}, "duration_s": None,
                "returncode": code, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "slurm": job_info(self.requeues), "log": log}
        if code is None and warm is not None:  # its warm parent died
            if not proc.forked:
                return "unforked"  # it never ran: no result, it runs from the next warm parent
            write_result(tp, {**base, "status": "killed",
                              "error": f"{warm.death_note()} while the trial ran, and the trial died with it; "
                              f"`ablate collect {self.sweep_root} --resubmit` runs it again; log {log}"})
            return "parent died"
        how = (f"it was killed by signal {-code}" if code is not None and code < 0
               else f"it exited with code {code}")
        write_result(tp, {**base, "status": "failed",
                          "error": f"the trial process ended without a result: {how}; log {log}"})
        return "done"

    def _stop_current(self) -> None:
        """Kill the trial still running (its whole process group), if any."""
        proc = self._proc
        if proc is None or proc.poll() is not None or proc.pid is None:
            return
        if isinstance(proc, subprocess.Popen):
            proc.kill()
        else:
            proctree.kill_group(proc.pid)
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


def main(argv: list[str] | None = None) -> int:
    """``python -m ablate.trials.launchers.slurm.pack_job SWEEP ARM SEED ATTEMPT REQUEUES LOG``: one trial of a
    packed job, recorded with the SLURM job it ran in (in a fresh process, or in a fork of the warm
    parent, which calls this with the same arguments). Whatever the task started (``setsid``
    grandchildren too) ends with the trial."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 6:
        print("usage: python -m ablate.trials.launchers.slurm.pack_job SWEEP_DIR ARM SEED ATTEMPT REQUEUES LOG",
              file=sys.stderr)
        return 2
    sweep, arm, seed, attempt, requeues, log = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4]), argv[5]
    die_with_parent()
    own_process_tree()
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]  # never import from the live tree
    try:
        rec = run_trial(sweep, arm, seed, attempt=attempt)
        write_result(SweepDir(sweep).trial(arm, seed), {**rec, "slurm": job_info(requeues), "log": log or None})
    except trial_lock.StrayTrial as exc:  # a resume decides about this sweep dir: this trial ran nothing
        print(f"ablate: {exc}", file=sys.stderr)
        return STRAY_EXIT
    finally:
        proctree.kill_descendants()
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
