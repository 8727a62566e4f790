"""SLURM packing (``launcher.trials_per_job=k``): k trials of a job array inside one SLURM job.

The pure parts (grouping, time limit, what a requeue re-runs, per-trial states) and the
submission live here; what runs inside the job is :mod:`ablate.trials.launchers.slurm.pack_job`.

For short trials the scheduler's start of each job (queueing, the batch script, submitit's unpickling,
``setup`` lines) and each trial's interpreter start plus the task's imports (``import torch``: about
1.6 s of CPU) can cost more than the trial. With ``trials_per_job=k`` each array task is a
``PackedSlurmTrial``: it runs its k trials one after another. With ``launcher.warm=true`` (the default)
it starts one warm parent per job (:mod:`ablate.trials.warm.parent`, as ``launcher=local`` does), which
imports the task once, and each trial is a fresh fork of it with its own process group, environment,
thread count and seeding; ``launcher.warm=false`` runs each trial in a fresh Python process
(``python -m ablate.trials.launchers.slurm.pack_job``). Every trial runs under the ablation's one
``PYTHONHASHSEED`` (:func:`ablate.trials.seeding.ablation_hash_seed`), as under ``launcher=local``.

Preemption and time limits: SLURM signals the job; submitit calls ``PackedSlurmTrial.checkpoint``,
which requeues the job with the list of trials that had *finished* (their process ended) before the
signal. The requeued job skips those and any trial whose ``result.json`` says ``ok``, so it re-runs
exactly the unfinished trials (:func:`ablate.trials.launchers.slurm.pack_job.unfinished`). The trial that was
running when the signal came is re-run, resuming from its ``ABLATE_CHECKPOINT_DIR`` when the task saves state there.

Each trial is still one row of ``<sweep>/slurm/jobs.json`` (several rows share one array task id), so
``ablate status`` and ``ablate collect`` report per trial as without packing.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ablate.errors import ConfigError
from ablate.trials import seeding
from ablate.trials.config import load_plan
from ablate.trials.launchers.base import JobState, TrialRef
from ablate.trials.launchers.slurm import intent
from ablate.trials.launchers.slurm.script import log, setup_lines, split_arrays

if TYPE_CHECKING:
    from ablate.record.sweepdir import SweepDir


def check_trials_per_job(value: Any) -> int:
    """``launcher.trials_per_job`` as an int >= 1.

    Raises
    ------
    ConfigError
        When it is not an integer >= 1 (a bool, a string, a float, 0 or less).
    """
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
    shared: dict[str, int] = {}
    for js in states.values():
        shared[js.job_id] = shared.get(js.job_id, 0) + 1
    out = dict(states)
    for (arm, seed), js in states.items():
        if shared[js.job_id] > 1 and js.state in _UP_STATES and not sd.trial(arm, seed).manifest.exists():
            out[(arm, seed)] = dataclasses.replace(js, state="PENDING", reason=WAITING_REASON)
    return out


def submit_packed(launcher: Any, sd: SweepDir, trials: Sequence[TrialRef]) -> list[str]:
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
    import submitit  # noqa: PLC0415  # lazy: submitit only for SLURM

    # lazy: submitit loads only when SLURM jobs are submitted
    from ablate.trials.launchers.slurm.pack_job import PackedSlurmTrial  # noqa: PLC0415  # lazy: as said above

    plan = load_plan(sd)
    opts = plan.get("options", {})
    per_trial = launcher._job_timeout(opts.get("timeout_min")) if launcher.timeout_min is None else 0
    modes = {a["name"]: seeding.trial_mode(plan, a) for a in plan["arms"]}
    hash_seed = seeding.ablation_hash_seed(plan)  # one per ablation: every trial, every job, as under local
    launcher._adopt_orphans(sd, write=True)  # never submit trials a dead submitter already submitted
    groups = pack(trials, launcher.trials_per_job)
    array_ids: list[str] = []
    for chunk in split_arrays(groups, launcher._max_array_size()):  # type: ignore[arg-type]
        timeout_min = packed_timeout_min(per_trial, max(len(g) for g in chunk), launcher.timeout_min)
        ex = submitit.SlurmExecutor(folder=sd.root / "slurm" / "%j", max_num_timeout=launcher.max_requeues + 1,
                                    python=launcher.python)
        # per-task variables are set per trial process by PackedSlurmTrial; the script sets the job's own
        setup = setup_lines([g[0].seed for g in chunk], determinism="off", cpus_per_task=launcher.cpus_per_task,
                            user_setup=launcher.setup, threads=opts.get("threads"), hash_seed=hash_seed)
        job_name = intent.new_job_name(sd)  # names this ablation and this submission
        ex.update_parameters(**launcher._parameters(job_name=job_name, timeout_min=timeout_min, setup=setup))
        fns = [PackedSlurmTrial(str(sd.root), g, {(r.arm, r.seed): seeding.environment_for(modes[r.arm], r.seed)
                                                  for r in g},
                                max_requeues=launcher.max_requeues, timeout_min=timeout_min,
                                signal_delay_s=launcher.signal_delay_s, python=None, warm=launcher.warm,
                                hash_seed=hash_seed, preload=launcher.preload, learn=launcher.learn_imports)
               for g in chunk]
        t0 = time.perf_counter()
        array_id = launcher.submit_recorded(sd, ex, job_name, fns, chunk)
        array_ids.append(array_id)
        n = sum(len(g) for g in chunk)
        log(f"ablate: submitted {n} trial(s) in {len(chunk)} job(s) of up to {launcher.trials_per_job} as SLURM "
             f"job {array_id} ({time.perf_counter() - t0:.2f} s)")
    return array_ids
