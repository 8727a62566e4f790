"""The launcher interface and the monitor launchers report progress to."""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ablate.record.sweepdir import SweepDir


@dataclass(frozen=True)
class JobState:
    """What a scheduler says about the job running one trial (launchers whose trials outlive ablate).

    Attributes
    ----------
    job_id : str
        The scheduler's id of the trial's job (``12_3`` for task 3 of job array 12).
    state : str
        The scheduler's state: ``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ``CANCELLED``,
        ``TIMEOUT``, ``OUT_OF_MEMORY``, ``NODE_FAIL`` ... or ``UNKNOWN`` when it has no record of the job.
    active : bool
        True while the job is queued or running (it may still write the trial's result).
    attempt : int
        The trial attempt the job runs.
    reason : str
        The scheduler's reason or exit code, when it gives one.
    log : str or None
        Path of the job's log (stderr), when there is one.
    """

    job_id: str
    state: str
    active: bool
    attempt: int = 1
    reason: str = ""
    log: str | None = None


@dataclass(frozen=True)
class TrialRef:
    """One trial to run: ``arm`` at ``seed``, as attempt number ``attempt`` (1 = first run)."""

    arm: str
    seed: int
    attempt: int = 1


#: Trials without the verdict's metric, and none with it yet, that stop an ablation (``task.metric`` names a
#: key the task never returns); fewer, or any trial that returned it, and each such trial only fails alone.
MISSING_METRIC_STOP = 2
#: Trials of this many arms failing with the same line before their first step, none ok, stop the ablation.
SAME_FAILURE_ARMS = 2


class Monitor:
    """Receives trial start/finish events from a launcher (thread-safe) and can ask it to stop.

    Parameters
    ----------
    on_event : callable, optional
        Called as ``on_event(kind, ref, record)`` with kind ``"started"`` or ``"finished"``
        (record is the result dict for finished trials); used by the progress display.
    abort_on_failure : bool
        When True, the first trial that does not finish ``ok`` makes :meth:`should_stop` true.
        A trial that breaks the task contract (bad ``task.fn``, a non-mapping result, a metric that is not a
        number) always stops the ablation: every other trial would fail the same way. A trial without the
        verdict's metric fails alone, unless :data:`MISSING_METRIC_STOP` trials lack it and none returned it.
        Trials of :data:`SAME_FAILURE_ARMS` arms failing with the same line before their first step, with none
        finished ok, stop it too (``same_failure``): the task fails whatever the arm.
    meanwhile : callable, optional
        Work of the orchestrating process (the verdict's imports) that a launcher runs, once, through
        :meth:`idle`, while it only waits for its workers to start (a warm parent importing the task).
    """

    def __init__(self, on_event: Callable[[str, TrialRef, dict[str, Any] | None], None] | None = None,
                 abort_on_failure: bool = False, meanwhile: Callable[[], None] | None = None,
                 watch_flags: bool = False) -> None:
        self._meanwhile = meanwhile
        self._watch_flags = watch_flags
        self._flags: dict[str, Any] = {}  # arm -> torch's determinism flags after its first ok trial
        #: arm -> flags, when two arms ran with different determinism flags (the task switched them: stop)
        self.flags_split: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._on_event = on_event
        self._abort_on_failure = abort_on_failure
        self._stop = threading.Event()
        self.finished: dict[TrialRef, dict[str, Any]] = {}
        #: The first record of a trial that broke the task contract (a user error: stop at once).
        self.contract_error: dict[str, Any] | None = None
        self._missing: list[dict[str, Any]] = []  # records of trials that did not return the metric
        self._metric_seen = False  # a trial of this launch finished ok (so it returned the metric)
        #: A record of trials of several arms failing the same way before their first step (stop: the task is broken).
        self.same_failure: dict[str, Any] | None = None
        self._failed_before_start: dict[str, set[str]] = {}
        #: A record of trials of several arms whose metric was NaN or inf, none finished ok (stop: every trial is).
        self.all_diverged: dict[str, Any] | None = None
        self._diverged_arms: set[str] = set()
        #: Why the launcher could run no further trial (its warm parent died), with what to do; None otherwise.
        self.halted: str | None = None
        #: Why ablate stopped the launch, in a few words (what a trial it stopped records); None while it runs.
        self.stop_reason: str | None = None

    def _stop_for(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop.set()

    def idle(self) -> None:
        """Run the ``meanwhile`` work, the first time only (a launcher calls it while it waits, idle)."""
        work, self._meanwhile = self._meanwhile, None
        if work is not None:
            work()

    def started(self, ref: TrialRef) -> None:
        if self._on_event:
            with self._lock:
                self._on_event("started", ref, None)

    def metric_seen(self) -> None:
        """A trial already finished ``ok`` before this launch (a resume): the task does return the metric, so
        a trial without it fails alone."""
        with self._lock:
            self._metric_seen = True

    def not_started(self, ref: TrialRef) -> None:
        """A trial reported :meth:`started` that never ran after all (no process was made for it): it keeps
        no result and stays pending."""
        if self._on_event:
            with self._lock:
                self._on_event("not_started", ref, None)

    def halt(self, reason: str) -> None:
        """The launcher cannot run any further trial (``reason`` says why and what to run): stop."""
        with self._lock:
            if self.halted is None:
                self.halted = reason
        self._stop_for(reason.split(";")[0])

    def finished_trial(self, ref: TrialRef, record: dict[str, Any]) -> None:
        with self._lock:
            self.finished[ref] = record
            if self._abort_on_failure and record.get("status") != "ok":
                self._stop_for(f"on_failure=abort: {_trial(ref)} ended {record.get('status')}")
            if record.get("status") == "ok":
                self._metric_seen = True
            elif record.get("metric_missing"):  # one trial without the metric fails alone; the rest run ...
                self._missing.append(record)
                if len(self._missing) >= MISSING_METRIC_STOP and not self._metric_seen and self.contract_error is None:
                    self.contract_error = self._missing[0]  # ... unless no trial returns it: a wrong task.metric
                    self._stop_for(f"the first {MISSING_METRIC_STOP} trials did not return the metric")
            if record.get("contract_error") and self.contract_error is None:
                self.contract_error = record
                self._stop_for(f"{_trial(ref)} showed the task itself is wrong")
            self._same_failure(ref, record)
            self._all_diverged(ref, record)
            self._flags_differ(ref, record)
            if self._on_event:
                self._on_event("finished", ref, record)

    def _same_failure(self, ref: TrialRef, record: dict[str, Any]) -> None:
        """Stop when trials of :data:`SAME_FAILURE_ARMS` arms failed with the same line before their first step and
        no trial finished ok: the task itself is broken (a failure of one arm alone is that arm's result)."""
        if self._metric_seen or self.same_failure is not None or self.contract_error is not None:
            return
        if record.get("status") != "failed" or not record.get("before_first_step") or not record.get("failure_line"):
            return
        arms = self._failed_before_start.setdefault(str(record["failure_line"]), set())
        arms.add(ref.arm)
        if len(arms) >= SAME_FAILURE_ARMS:
            self.same_failure = {**record, "arms_failed": sorted(arms)}
            self._stop_for(f"trials of {', '.join(sorted(arms))} failed the same way before their first step")

    def _flags_differ(self, ref: TrialRef, record: dict[str, Any]) -> None:
        """Stop when the first trials of two arms ran with different torch determinism flags (``watch_flags``: the
        determinism mode is not the variable): the task switches them itself, so its variable changes the
        determinism mode too, and every trial would end in an invalid verdict."""
        flags = record.get("flags_after")
        if not self._watch_flags or self.flags_split is not None or not isinstance(flags, dict):
            return
        self._flags.setdefault(ref.arm, flags)
        if len({repr(sorted(f.items())) for f in self._flags.values()}) > 1:
            self.flags_split = dict(self._flags)
            self._stop_for("the arms ran with different determinism flags")

    def _all_diverged(self, ref: TrialRef, record: dict[str, Any]) -> None:
        """Stop when trials of :data:`SAME_FAILURE_ARMS` arms all ended ``diverged`` (the metric NaN or inf) and no
        trial finished ok: every trial would (strict determinism's NaN fill of uninitialised memory, a broken loss)."""
        if self._metric_seen or self.all_diverged is not None or self.contract_error is not None:
            return
        if record.get("status") != "diverged":
            return
        self._diverged_arms.add(ref.arm)
        if len(self._diverged_arms) >= SAME_FAILURE_ARMS:
            self.all_diverged = {**record, "arms_failed": sorted(self._diverged_arms)}
            self._stop_for(f"the metric was NaN or inf in every trial of {', '.join(sorted(self._diverged_arms))}")

    def stop(self, reason: str = "ablate stopped") -> None:
        """Ask the launcher to start no further trial (running ones finish or are cancelled); ``reason``: why, in a
        few words (``Ctrl-C``), for the trials it stops."""
        self._stop_for(reason)

    def should_stop(self) -> bool:
        return self._stop.is_set()


def _trial(ref: TrialRef) -> str:
    return f"{ref.arm}/seed={ref.seed}"


class Launcher(abc.ABC):
    """Runs trials of a sweep dir. Subclasses declare their options (name -> default) in ``OPTIONS``.

    Launchers whose trials run in a scheduler's jobs (``slurm``) also set ``detachable`` and implement
    :meth:`submit`, :meth:`wait` and :meth:`job_states`; for the others those are no-ops, because no
    trial outlives the ablate process that launched it.
    """

    name: ClassVar[str]
    OPTIONS: ClassVar[dict[str, Any]] = {}
    #: True when trials outlive the ablate process (``wait=false`` is allowed).
    detachable: ClassVar[bool] = False

    @abc.abstractmethod
    def launch(self, sd: SweepDir, trials: Sequence[TrialRef], monitor: Monitor) -> None:
        """Run ``trials`` and return when all have finished (or, for detached launchers, once they
        are submitted). Each trial writes its own ``result.json``; launchers record a result only
        for trials that died without writing one (killed, timed out)."""

    def describe(self) -> str:
        """One line for the plan printout (e.g. ``local, 2 at a time``)."""
        return self.name

    def start_early(self, task: Mapping[str, Any], seeds: Sequence[int], determinism: str, cwd: str) -> None:
        """Start, before the plan and pins are written, what the launch will need and can begin now (``local``:
        its warm parent, :mod:`ablate.trials.warm.early`); nothing for the others."""
        return None

    def check(self, options: Mapping[str, Any] | None = None) -> None:
        """Check that trials can be launched from here; called before the sweep dir is created.

        ``options`` are the ablation's settings as recorded in ``ablation.yaml`` (``timeout_min`` ...).

        Raises
        ------
        UserError
            When they cannot (a scheduler that is missing, unreachable or refuses the request).
        """
        return None

    def submit(self, sd: SweepDir, trials: Sequence[TrialRef]) -> list[str]:
        """Hand ``trials`` to the scheduler and return at once (``wait=false``): the job ids."""
        raise NotImplementedError(f"launcher={self.name} cannot detach")

    def wait(self, sd: SweepDir, monitor: Monitor) -> None:
        """Wait for every trial of ``sd`` that an earlier submission left queued or running, and record
        a result for each that ended without writing one. After it returns, no trial of ``sd`` is in
        flight, so the trials still without a result can be launched again without running twice."""
        return None

    def job_states(self, sd: SweepDir) -> dict[tuple[str, int], JobState]:
        """The scheduler's state of each (arm, seed) trial still without a result that this launcher
        submitted; empty for launchers without a scheduler."""
        return {}
