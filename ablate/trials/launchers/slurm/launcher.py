"""``launcher=slurm``: trials as SLURM job arrays, through submitit.

One launch submits one job array (split into several when it has more tasks than the cluster's
``MaxArraySize``); each array task runs one trial (:class:`ablate.trials.launchers.slurm.job.SlurmTrial`),
which writes its own ``manifest.json`` and ``result.json``. What the collector needs is on disk:

::

    <sweep dir>/slurm/jobs.json          which job runs which trial: [{job_id, arm, seed, attempt}, ...]
    <sweep dir>/slurm/<job id>/          submitit's pickles and the job's logs (<job id>_0_log.out/.err)

so ``wait=false`` can exit right after submitting, and ``ablate status`` / ``ablate collect`` pick up
from any process later. The collector asks SLURM (``squeue``, then ``sacct`` for jobs squeue has
forgotten) and records a result for every job that ended without writing one (cancelled, OOM-killed,
node failure, killed by a signal), with SLURM's state and the log tail, so it never waits forever.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ablate.errors import ConfigError, SchedulerError
from ablate.record.sweepdir import SweepDir, read_json, write_json
from ablate.trials import seeding
from ablate.trials.config import load_plan
from ablate.trials.launchers.base import JobState, Launcher, Monitor, TrialRef
from ablate.trials.launchers.local import tail
from ablate.trials.launchers.slurm import intent
from ablate.trials.launchers.slurm.pack import check_trials_per_job, per_trial_states, submit_packed
from ablate.trials.launchers.slurm.script import log, setup_lines, split_arrays
from ablate.trials.trial import write_result
from ablate.trials.warm.starter import check_preload

SLURM_DIR = "slurm"
JOBS_FILE = "jobs.json"
#: Job states after which a job never writes again (sacct and squeue names).
TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                             "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED"})
#: Terminal states recorded as ``killed`` (the job was stopped from outside) rather than ``failed``.
KILLED_STATES = frozenset({"CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
                           "REVOKED"})
#: Seconds a job may sit in a terminal state without a result.json before the collector records it
#: (the file system may show the result a little later than SLURM shows the state). Counted from the job's
#: end as SLURM's accounting records it (``sacct`` End), so a job that ended long before ``collect`` is
#: recorded at once; from the first poll that saw it ended when accounting is off.
RESULT_GRACE_S = 10.0
#: Seconds a job may be unknown to both squeue and sacct before it is recorded as lost.
LOST_AFTER_S = 60.0
#: Seconds SLURM may stay unreachable while the collector waits before it gives up (the jobs go on).
UNREACHABLE_AFTER_S = 300.0
#: Longest pause between two polls of SLURM while waiting (results are checked every second).
MAX_POLL_S = 15.0
_CMD_TIMEOUT_S = 60


# -- options ---------------------------------------------------------------------------------------
def _opt_str(value: Any, where: str, *, allow_list: bool = False) -> str | None:
    if value is None:
        return None
    if allow_list and isinstance(value, list | tuple) and all(isinstance(v, str) and v for v in value):
        return ",".join(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    kind = "a string or a list of strings" if allow_list else "a string"
    raise ConfigError(f"must be {kind} or null, got {value!r}", where=where, fix=f"e.g. `{where}=null`")


def _opt_int(value: Any, where: str, lo: int, *, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ConfigError(f"must be an integer >= {lo}{' or null' if allow_none else ''}, got {value!r}",
                          where=where, fix=f"e.g. `{where}={max(lo, 1)}`")
    return value


def _opt_number(value: Any, where: str, *, allow_none: bool = True) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"must be a positive number{' or null' if allow_none else ''}, got {value!r}",
                          where=where, fix=f"e.g. `{where}=4`")
    return float(value)


def mem_string(mem_gb: float) -> str:
    """``--mem`` value for ``mem_gb`` gigabytes: whole GB as ``4GB``, else megabytes (``1536MB``)."""
    return f"{int(mem_gb)}GB" if float(mem_gb).is_integer() else f"{math.ceil(mem_gb * 1024)}MB"


def check_signal_delay(timeout_min: int, signal_delay_s: int) -> None:
    """Refuse a job time limit no longer than the warning signal's delay: SLURM would signal the job to checkpoint
    and requeue as soon as it starts (a 1-minute limit against the default 90 s: every trial stopped at once,
    then reported as having reached its time limit after seconds).

    Raises
    ------
    ConfigError
        With both fixes: a longer limit, or a shorter delay.
    """
    limit_s = int(timeout_min) * 60
    if int(signal_delay_s) < limit_s:
        return
    longer = max(2, math.ceil(signal_delay_s / 60) * 2)
    raise ConfigError(f"the job time limit ({timeout_min} min = {limit_s} s) is not longer than "
                      f"`launcher.signal_delay_s` ({signal_delay_s} s), the warning SLURM sends before the limit: "
                      "each job would be told to checkpoint and requeue as soon as it starts",
                      where="launcher.timeout_min",
                      fix=f"give the jobs more time (`launcher.timeout_min={longer}`), or warn later "
                      f"(`launcher.signal_delay_s={max(limit_s // 4, 1)}`)")


def sbatch_parameters(*, job_name: str, timeout_min: int, cpus_per_task: int, mem_gb: float | None,
                      gpus_per_trial: int, array_parallelism: int, signal_delay_s: int,
                      setup: Sequence[str], partition: str | None = None, account: str | None = None,
                      qos: str | None = None, constraint: str | None = None, exclude: str | None = None,
                      sbatch: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The submitit ``SlurmExecutor`` parameters for one job array (pure: no SLURM, no I/O).

    Parameters
    ----------
    job_name : str
    timeout_min : int
        Time limit of each job, in minutes (``--time``).
    cpus_per_task : int
    mem_gb : float or None
        Memory per job in GB (``--mem``); None leaves the cluster default.
    gpus_per_trial : int
        GPUs per job, requested as ``--gres=gpu:N`` (0: none).
    array_parallelism : int
        Array tasks running at once (``--array=0-N%P``).
    signal_delay_s : int
        Seconds before the time limit that SLURM sends ``USR2`` (checkpoint and requeue).
    setup : sequence of str
        Shell lines run in the batch script before the trial.
    partition, account, qos, constraint, exclude : str or None
        The sbatch options of the same names.
    sbatch : mapping, optional
        Further sbatch options, name (as in ``sbatch --name``) to value; ``true`` for a bare flag.

    Returns
    -------
    dict
        Keyword arguments for ``SlurmExecutor.update_parameters``.
    """
    params: dict[str, Any] = {
        "job_name": job_name, "time": int(timeout_min), "cpus_per_task": int(cpus_per_task),
        "array_parallelism": int(array_parallelism), "signal_delay_s": int(signal_delay_s),
        "setup": list(setup),
    }
    if mem_gb is not None:
        params["mem"] = mem_string(mem_gb)
    if gpus_per_trial:
        params["gres"] = f"gpu:{int(gpus_per_trial)}"
    for key, value in (("partition", partition), ("account", account), ("qos", qos),
                       ("constraint", constraint), ("exclude", exclude)):
        if value is not None:
            params[key] = value
    if sbatch:
        params["additional_parameters"] = {str(k): v for k, v in sbatch.items()}
    return params


def refusal_fix(message: str, partitions: Iterable[str] = ()) -> str:
    """The fix to print with SLURM's refusal of a job request."""
    low = message.lower()
    if "node configuration is not available" in low or "gres" in low:
        return ("ask for no more than one node has (`launcher.gpus_per_trial`, `launcher.cpus_per_task`, "
                "`launcher.mem_gb`; `sinfo -o '%P %c %m %G'` shows what nodes have)")
    if "account" in low or "association" in low:
        return "set `launcher.account` to an account you may use (`sacctmgr show assoc user=$USER`)"
    if "partition" in low:
        names = ", ".join(partitions)
        return (f"use a partition this cluster has{f' ({names})' if names else ''}: `launcher.partition=NAME`, "
                "or `launcher.partition=null` for the default")
    if "feature" in low or "constraint" in low:
        return ("ask only for features the nodes have: `launcher.constraint=NAME` with a feature `sinfo -o '%N %f'` "
                "lists, or `launcher.constraint=null` for none")
    if "qos" in low:
        return "set `launcher.qos` to a QOS your account may use (`sacctmgr show assoc user=$USER`)"
    if "time limit" in low:
        return "lower `launcher.timeout_min` to the partition's limit (`sinfo -o '%P %l'`)"
    return "check the launcher options (`launcher.*`) and the extra `launcher.sbatch` options"


# -- talking to SLURM ------------------------------------------------------------------------------
def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=_CMD_TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SchedulerError(f"`{cmd[0]}` is not installed or not on PATH, so SLURM cannot be reached",
                             where="launcher=slurm",
                             fix="run ablate where the SLURM client tools are (a login node), or use "
                             "`launcher=local`") from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"`{' '.join(cmd[:3])}` did not answer within {_CMD_TIMEOUT_S} s",
                             where="launcher=slurm", fix="check that slurmctld is up (`scontrol ping`)") from None


def slurm_config() -> dict[str, str]:
    """``scontrol show config`` as a dict (``MaxArraySize`` -> ``"1001"`` ...).

    Raises
    ------
    SchedulerError
        When ``scontrol`` is missing or slurmctld does not answer.
    """
    proc = _run(["scontrol", "show", "config"])
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["no output"])[0]
        raise SchedulerError(f"SLURM does not answer (scontrol: {first})", where="launcher=slurm",
                             fix="check that slurmctld is up (`scontrol ping`); for the local test cluster run "
                             "`bash ablate/trials/launchers/slurm/cluster.sh start`")
    out: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _parse_rows(text: str, n_fields: int) -> Iterable[list[str]]:
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) >= n_fields and parts[0]:
            yield [p.strip() for p in parts]


def _expand_ids(job_id: str) -> list[str]:
    """``12_[0-3%2]`` -> ``12_0 .. 12_3``; other ids unchanged."""
    from submitit.slurm.slurm import read_job_id  # noqa: PLC0415  # lazy: submitit only for SLURM

    if "[" not in job_id:
        return [job_id]
    ids = []
    for part in read_job_id(job_id):
        if len(part) == 3:
            ids.extend(f"{part[0]}_{i}" for i in range(int(part[1]), int(part[2]) + 1))
        else:
            ids.append("_".join(part))
    return ids


def query_states(job_ids: Iterable[str]) -> dict[str, tuple[str, str]] | None:
    """SLURM's state of jobs and array tasks: ``{"12_3": (state, reason), ...}``, or None when SLURM
    does not answer. ``squeue`` first (current, and jobs ended less than ``MinJobAge`` ago), then
    ``sacct`` for the jobs squeue no longer lists and for the exit codes of ended jobs (needs
    accounting; skipped when it is off).

    Raises
    ------
    SchedulerError
        When ``squeue`` is not installed.
    """
    wanted = list(job_ids)
    parents = sorted({j.split("_")[0] for j in wanted})
    if not parents:
        return {}
    if shutil.which("squeue") is None:
        _run(["squeue"])  # raises SchedulerError: not installed
    try:
        sq = _run(["squeue", "-h", "-r", "--states=all", "-o", "%i|%T|%r", "-j", ",".join(parents)])
    except SchedulerError:
        return None
    states: dict[str, tuple[str, str]] = {}
    if sq.returncode == 0:
        for jid, state, reason in _parse_rows(sq.stdout, 3):
            for j in _expand_ids(jid):
                states[j] = (state.split()[0], "" if reason == "None" else reason)
    elif "invalid job id" not in sq.stderr.lower():
        return None
    # sacct for the jobs (and array tasks) squeue has forgotten, and for the exit codes of ended ones
    ask = sorted({j.split("_")[0] for j in wanted if j not in states or states[j][0] in TERMINAL_STATES})
    if ask and shutil.which("sacct"):
        sa = _run(["sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode,Reason", "-j", ",".join(ask)])
        if sa.returncode == 0:
            for jid, state, exit_code, reason in _parse_rows(sa.stdout, 4):
                why = ", ".join(w for w in (_exit_text(exit_code), "" if reason == "None" else reason) if w)
                state = state.split()[0]
                for j in _expand_ids(jid):
                    if j not in states:
                        states[j] = (state, why)
                    elif states[j][0] in TERMINAL_STATES and state in TERMINAL_STATES and why:
                        states[j] = (states[j][0], why)
    # A pending array task cancelled before it ran leaves no record once a sibling took over the array's
    # record; every other task is listed by squeue or sacct (pending ones too), so an unlisted task of a
    # known array was cancelled while pending.
    known = {j.split("_")[0] for j in states}
    for j in wanted:
        if j not in states and "_" in j and j.split("_")[0] in known:
            states[j] = ("CANCELLED", "cancelled while pending: SLURM kept no record of it")
    return states


def ended_ago(job_ids: Iterable[str]) -> dict[str, float]:
    """Seconds since each ended job or array task ended, from ``sacct``'s End (the controller's clock, the
    same as this host's on a cluster with synchronised clocks); jobs with no end yet, and every job when
    accounting is off or SLURM does not answer, are left out. Never negative.

    Raises
    ------
    SchedulerError
        When ``sacct`` is installed but does not answer within the command timeout.
    """
    parents = sorted({j.split("_")[0] for j in job_ids})
    if not parents or shutil.which("sacct") is None:
        return {}
    sa = _run(["sacct", "-X", "-n", "-P", "-o", "JobID,End", "-j", ",".join(parents)])
    if sa.returncode != 0:
        return {}
    now = time.time()
    ago: dict[str, float] = {}
    for jid, end in _parse_rows(sa.stdout, 2):
        try:
            t = time.mktime(time.strptime(end, "%Y-%m-%dT%H:%M:%S"))
        except ValueError:  # "Unknown": still running or pending
            continue
        for j in _expand_ids(jid):
            ago[j] = max(0.0, now - t)
    return ago


def _exit_text(exit_code: str) -> str:
    """sacct's ``ExitCode`` (``3:0`` = exit code 3, ``0:9`` = signal 9) in words; empty for success."""
    code, _, sig = exit_code.partition(":")
    if sig not in ("", "0"):
        return f"killed by signal {sig}"
    return f"exit code {code}" if code not in ("", "0") else ""


# -- the launcher ----------------------------------------------------------------------------------
@dataclass
class _Tracked:
    ref: TrialRef
    job_id: str


class SlurmLauncher(Launcher):
    """Runs each trial as a task of a SLURM job array (submitit), ``array_parallelism`` at once.

    Parameters
    ----------
    timeout_min : int or None
        Time limit of each job in minutes; None: the ablation's ``timeout_min``, else 60. A trial that
        reaches it is requeued (it resumes when the task saves state, see docs/slurm.md).
    mem_gb : float or None
        Memory per trial in GB; None: the cluster's default.
    cpus_per_task : int
        CPUs per trial (also the default for ``OMP_NUM_THREADS`` and friends).
    gpus_per_trial : int
        GPUs per trial (``--gres=gpu:N``); the trial records the ``CUDA_VISIBLE_DEVICES`` it got.
    partition, account, qos, constraint : str or None
        The sbatch options of the same names.
    exclude : str, list of str or None
        Nodes not to run on.
    array_parallelism : int
        Trials of one job array running at once.
    max_requeues : int
        Requeues after preemption or a time limit before the trial is recorded as failed.
    signal_delay_s : int
        Seconds before the time limit that SLURM signals the job to checkpoint and requeue.
    sbatch : mapping
        Further sbatch options, e.g. ``{"mail-type": "END"}`` (``true`` for a bare flag).
    setup : list of str
        Shell lines run in each job before the trial (``module load ...``, ``source venv/bin/activate``).
    python : str or None
        Command that starts Python in the job; None: this process's interpreter.
    trials_per_job : int
        Trials run one after another in each job of the array (1: one trial per job). See
        :mod:`ablate.trials.launchers.slurm.pack`.
    warm : bool
        With ``trials_per_job`` > 1: fork each trial of a job from one warm parent that imported the task
        once (as ``launcher=local`` does); False: a fresh process per trial. No effect with one trial per job.
    preload : list of str
        Modules each packed job's warm parent imports after the task (``launcher.preload=[torch._dynamo]``).
    learn_imports : bool
        True: each packed job's warm parent also imports what its trials imported and it had not, before its
        next fork (when safe), as under ``launcher=local``.
    """

    name = "slurm"
    detachable = True
    OPTIONS: ClassVar[dict[str, Any]] = {
        "timeout_min": None, "mem_gb": None, "cpus_per_task": 1, "gpus_per_trial": 0, "partition": None,
        "account": None, "qos": None, "constraint": None, "exclude": None, "array_parallelism": 64,
        "max_requeues": 3, "signal_delay_s": 90, "sbatch": {}, "setup": [], "python": None,
        "trials_per_job": 1, "warm": True, "preload": [], "learn_imports": True,
    }

    def __init__(self, timeout_min: float | None = None, mem_gb: float | None = None, cpus_per_task: int = 1,
                 gpus_per_trial: int = 0, partition: str | None = None, account: str | None = None,
                 qos: str | None = None, constraint: str | None = None, exclude: str | list[str] | None = None,
                 array_parallelism: int = 64, max_requeues: int = 3, signal_delay_s: int = 90,
                 sbatch: Mapping[str, Any] | None = None, setup: Sequence[str] | None = None,
                 python: str | None = None, trials_per_job: int = 1, warm: bool = True,
                 preload: Sequence[str] | None = None, learn_imports: bool = True) -> None:
        t = _opt_number(timeout_min, "launcher.timeout_min")
        self.timeout_min = None if t is None else math.ceil(t)
        self.mem_gb = _opt_number(mem_gb, "launcher.mem_gb")
        self.cpus_per_task = _opt_int(cpus_per_task, "launcher.cpus_per_task", 1)
        self.gpus_per_trial = _opt_int(gpus_per_trial, "launcher.gpus_per_trial", 0)
        self.partition = _opt_str(partition, "launcher.partition")
        self.account = _opt_str(account, "launcher.account")
        self.qos = _opt_str(qos, "launcher.qos")
        self.constraint = _opt_str(constraint, "launcher.constraint")
        self.exclude = _opt_str(exclude, "launcher.exclude", allow_list=True)
        self.array_parallelism = _opt_int(array_parallelism, "launcher.array_parallelism", 1)
        self.max_requeues = _opt_int(max_requeues, "launcher.max_requeues", 0)
        self.signal_delay_s = _opt_int(signal_delay_s, "launcher.signal_delay_s", 0)
        if sbatch is None:
            sbatch = {}
        if not isinstance(sbatch, Mapping) or not all(isinstance(k, str) and k for k in sbatch):
            raise ConfigError(f"must be a mapping of sbatch option names to values, got {sbatch!r}",
                              where="launcher.sbatch", fix="e.g. `+launcher.sbatch.mail-type=END`")
        self.sbatch = {k.lstrip("-"): v for k, v in sbatch.items()}
        setup = [] if setup is None else setup
        if isinstance(setup, str) or not all(isinstance(x, str) for x in setup):
            raise ConfigError(f"must be a list of shell lines, got {setup!r}", where="launcher.setup",
                              fix="e.g. `launcher.setup=['module load cuda']`")
        self.setup = list(setup)
        self.python = _opt_str(python, "launcher.python")

        self.trials_per_job = check_trials_per_job(trials_per_job)
        if not isinstance(warm, bool):
            raise ConfigError(f"must be true or false, got {warm!r}", where="launcher.warm",
                              fix="`launcher.warm=false` runs each trial of a packed job in a fresh process")
        self.warm = warm
        self.preload, self.learn_imports = check_preload(preload, learn_imports)
        self._config: dict[str, str] | None = None
        self._cancelled_by_ablate: set[str] = set()  # job ids this launcher cancelled itself (an early stop)

    def describe(self) -> str:
        where = f" on partition {self.partition}" if self.partition else ""
        gpus = f", {self.gpus_per_trial} GPU(s) per trial" if self.gpus_per_trial else ""
        return f"slurm job array{where}, {self.array_parallelism} trial(s) at a time{gpus}"

    # -- checks ------------------------------------------------------------------------------------
    def _parameters(self, *, job_name: str, timeout_min: int, setup: Sequence[str]) -> dict[str, Any]:
        return sbatch_parameters(
            job_name=job_name, timeout_min=timeout_min, cpus_per_task=self.cpus_per_task, mem_gb=self.mem_gb,
            gpus_per_trial=self.gpus_per_trial, array_parallelism=self.array_parallelism,
            signal_delay_s=self.signal_delay_s, setup=setup, partition=self.partition, account=self.account,
            qos=self.qos, constraint=self.constraint, exclude=self.exclude, sbatch=self.sbatch)

    def _job_timeout(self, plan_timeout_min: Any) -> int:
        if self.timeout_min is not None:
            return self.timeout_min
        return math.ceil(plan_timeout_min) if plan_timeout_min else 60

    def check(self, options: Mapping[str, Any] | None = None) -> None:
        """Check that SLURM answers and accepts this request (``sbatch --test-only``); submits nothing.

        Raises
        ------
        SchedulerError
            ``sbatch``/``srun`` missing, slurmctld unreachable, or SLURM refusing the request (with
            SLURM's own message and the fix).
        """
        check_signal_delay(self._job_timeout((options or {}).get("timeout_min")), self.signal_delay_s)
        for exe in ("sbatch", "srun", "squeue", "scontrol"):
            if shutil.which(exe) is None:
                raise SchedulerError(f"`{exe}` is not installed or not on PATH, so trials cannot be submitted "
                                     "to SLURM", where="launcher=slurm",
                                     fix="run ablate where the SLURM client tools are (a login node), or use "
                                     "`launcher=local`")
        self._config = slurm_config()
        from submitit.slurm.slurm import _make_sbatch_string  # noqa: PLC0415  # lazy: submitit only for SLURM

        timeout_min = self._job_timeout((options or {}).get("timeout_min"))
        params = self._parameters(job_name="ablate-check", timeout_min=timeout_min, setup=[])
        with tempfile.TemporaryDirectory() as tmp:
            script = _make_sbatch_string(command="true", folder=str(Path(tmp) / "%j"), **params)
            try:
                proc = subprocess.run(["sbatch", "--test-only"], input=script, capture_output=True, text=True,
                                      timeout=_CMD_TIMEOUT_S, check=False, cwd=tmp)
            except subprocess.TimeoutExpired:
                raise SchedulerError(f"`sbatch --test-only` did not answer within {_CMD_TIMEOUT_S} s",
                                     where="launcher=slurm", fix="check that slurmctld is up (`scontrol ping`)") \
                    from None
        if proc.returncode != 0:
            raise self._refusal(proc.stderr or proc.stdout)

    def _refusal(self, text: str) -> SchedulerError:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        msg = "; ".join(dict.fromkeys(ln.removeprefix("sbatch: error: ") for ln in lines)) or "no message"
        parts: list[str] = []
        if "partition" in msg.lower():
            with_sinfo = _run(["sinfo", "-h", "-o", "%P"]) if shutil.which("sinfo") else None
            if with_sinfo is not None and with_sinfo.returncode == 0:
                parts = sorted({p.strip() for p in with_sinfo.stdout.split()})
        where = "launcher.constraint" if "feature" in msg.lower() and self.constraint else "launcher"
        return SchedulerError(f"SLURM refuses the job request: {msg}", where=where, fix=refusal_fix(msg, parts))

    def _max_array_size(self) -> int:
        if self._config is None:
            self._config = slurm_config()
        try:
            return int(self._config.get("MaxArraySize", "1001"))
        except ValueError:
            return 1001

    # -- jobs.json ---------------------------------------------------------------------------------
    @staticmethod
    def _jobs_file(sd: SweepDir) -> Path:
        return sd.root / SLURM_DIR / JOBS_FILE

    def _read_jobs(self, sd: SweepDir) -> list[dict[str, Any]]:
        try:
            return list(read_json(self._jobs_file(sd)).get("jobs", []))
        except (FileNotFoundError, json.JSONDecodeError):
            return []

    def _adopt_orphans(self, sd: SweepDir, *, write: bool) -> list[dict[str, Any]]:
        """Arrays submitted by a process that died before recording them (see :mod:`.intent`)."""
        if not intent.pending(sd, SLURM_DIR):
            return []

        def write_jobs(records: list[dict[str, Any]]) -> None:
            write_json(self._jobs_file(sd), {"jobs": records})

        found = intent.resolve(sd, SLURM_DIR, _run, write=write, read_jobs=lambda: self._read_jobs(sd),
                                     write_jobs=write_jobs)
        if found and write:
            log(f"ablate: found {len(found)} trial(s) already submitted as SLURM job "
                 f"{found[0]['job_id'].split('_')[0]} by an ablate process that stopped before recording them; "
                 "waiting for them instead of submitting again")
        return [] if write else found

    def _tracked(self, sd: SweepDir, *, write: bool = False) -> dict[tuple[str, int], _Tracked]:
        """The latest job of every trial submitted from ``sd``, for trials still without their result
        (arrays left behind by a dead submitter included: recorded when ``write``, else only seen)."""
        latest: dict[tuple[str, int], _Tracked] = {}
        orphans = self._adopt_orphans(sd, write=write)
        for j in self._read_jobs(sd) + orphans:
            ref = TrialRef(j["arm"], int(j["seed"]), int(j.get("attempt", 1)))
            latest[(ref.arm, ref.seed)] = _Tracked(ref, str(j["job_id"]))
        return {k: t for k, t in latest.items() if not self._has_result(sd, t.ref)}

    @staticmethod
    def _has_result(sd: SweepDir, ref: TrialRef) -> bool:
        rec = sd.read_result(ref.arm, ref.seed)
        return rec is not None and int(rec.get("attempt", 1)) >= ref.attempt

    @staticmethod
    def _log_paths(sd: SweepDir, job_id: str) -> tuple[Path, Path]:
        folder = sd.root / SLURM_DIR / job_id
        return folder / f"{job_id}_0_log.err", folder / f"{job_id}_0_log.out"

    # -- submitting --------------------------------------------------------------------------------
    def submit(self, sd: SweepDir, trials: Sequence[TrialRef]) -> list[str]:
        """Submit ``trials`` as job array(s) and record them in ``<sweep>/slurm/jobs.json``.

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
        from ablate.trials.launchers.slurm.job import SlurmTrial  # noqa: PLC0415  # lazy: as said above

        if not trials:
            return []
        if self.trials_per_job > 1:
            return submit_packed(self, sd, trials)
        plan = load_plan(sd)
        opts = plan.get("options", {})
        timeout_min = self._job_timeout(opts.get("timeout_min"))

        modes = {a["name"]: seeding.trial_mode(plan, a) for a in plan["arms"]}  # the variable can be the mode
        hash_seed = seeding.ablation_hash_seed(plan)  # one per ablation, as under launcher=local

        self._adopt_orphans(sd, write=True)  # never submit trials a dead submitter already submitted
        ex = submitit.SlurmExecutor(folder=sd.root / SLURM_DIR / "%j", max_num_timeout=self.max_requeues + 1,
                                    python=self.python)
        array_ids: list[str] = []
        for chunk in split_arrays(trials, self._max_array_size()):
            setup = setup_lines([r.seed for r in chunk], determinism=[modes[r.arm] for r in chunk],
                                cpus_per_task=self.cpus_per_task, user_setup=self.setup,
                                threads=opts.get("threads"), hash_seed=hash_seed)
            job_name = intent.new_job_name(sd)  # names this ablation and this submission
            ex.update_parameters(**self._parameters(job_name=job_name, timeout_min=timeout_min, setup=setup))
            fns = [SlurmTrial(str(sd.root), r.arm, r.seed, r.attempt, max_requeues=self.max_requeues,
                              timeout_min=timeout_min, signal_delay_s=self.signal_delay_s) for r in chunk]
            t0 = time.perf_counter()
            array_id = self.submit_recorded(sd, ex, job_name, fns, [[r] for r in chunk])
            array_ids.append(array_id)
            log(f"ablate: submitted {len(chunk)} trial(s) as SLURM job {array_id} "
                 f"({time.perf_counter() - t0:.2f} s)")
        return array_ids

    def submit_recorded(self, sd: SweepDir, ex: Any, job_name: str, fns: Sequence[Any],
                        tasks: Sequence[Sequence[TrialRef]]) -> str:
        """Submit one job array of ``fns`` (task ``i`` runs the trials ``tasks[i]``) so that no death loses it.

        The intent (job name and trials) is recorded before ``sbatch``; the jobs go to jobs.json after
        it, and then the intent is dropped (see :mod:`.intent`). Used by one-trial-per-job and
        packed (``trials_per_job``) submission alike.

        Returns
        -------
        str
            The array's job id.

        Raises
        ------
        SchedulerError
            When SLURM refuses the submission (the intent stays: the next run asks SLURM about it).
        """
        intent.record(sd, SLURM_DIR, job_name, [r for g in tasks for r in g],
                            tasks=[i for i, g in enumerate(tasks) for _ in g])
        try:
            jobs = ex.submit_array(list(fns))
        except Exception as exc:  # submitit wraps sbatch's stderr in its own exception types
            raise self._refusal(str(exc)) from exc
        records = self._read_jobs(sd)
        records.extend({"job_id": job.job_id, "arm": r.arm, "seed": r.seed, "attempt": r.attempt}
                       for job, g in zip(jobs, tasks, strict=True) for r in g)
        sd.mkdir(self._jobs_file(sd).parent)
        write_json(self._jobs_file(sd), {"jobs": records})
        intent.drop(sd, SLURM_DIR, job_name)
        return jobs[0].job_id.split("_")[0]

    def launch(self, sd: SweepDir, trials: Sequence[TrialRef], monitor: Monitor) -> None:
        """Submit ``trials`` and wait for them (see :meth:`wait`)."""
        self.submit(sd, trials)
        self.wait(sd, monitor)

    # -- watching ----------------------------------------------------------------------------------
    def job_states(self, sd: SweepDir) -> dict[tuple[str, int], JobState]:
        """SLURM's state of each submitted trial that has no result yet.

        Raises
        ------
        SchedulerError
            When SLURM does not answer.
        """
        tracked = self._tracked(sd)
        if not tracked:
            return {}
        states = query_states(t.job_id for t in tracked.values())
        if states is None:
            raise SchedulerError("SLURM does not answer (squeue failed)", where="launcher=slurm",
                                 fix="check that slurmctld is up (`scontrol ping`)")

        return per_trial_states(sd, {key: self._job_state(sd, t, states.get(t.job_id)) for key, t in tracked.items()})

    def _job_state(self, sd: SweepDir, t: _Tracked, got: tuple[str, str] | None) -> JobState:
        state, reason = got if got is not None else ("UNKNOWN", "SLURM has no record of this job")
        err, _ = self._log_paths(sd, t.job_id)
        return JobState(job_id=t.job_id, state=state, active=got is not None and state not in TERMINAL_STATES,
                        attempt=t.ref.attempt, reason=reason, log=str(err))

    def wait(self, sd: SweepDir, monitor: Monitor) -> None:
        """Wait until every submitted trial of ``sd`` has a result; record one for each job that ended
        without writing it (SLURM's state, exit code and log tail), so this returns in bounded time
        after the last job ends. When the monitor asks to stop, the remaining jobs are cancelled.

        Raises
        ------
        SchedulerError
            When SLURM stays unreachable for ``UNREACHABLE_AFTER_S`` (the jobs go on; collect later).
        """
        pending = self._tracked(sd, write=True)
        if not pending:
            return
        t0 = time.monotonic()
        started: set[tuple[str, int]] = set()
        ended_since: dict[tuple[str, int], float] = {}
        unknown_since: dict[tuple[str, int], float] = {}
        unreachable_since: float | None = None
        cancelled = False
        next_poll = t0
        while pending:
            now = time.monotonic()
            for key in [k for k, t in pending.items() if self._has_result(sd, t.ref)]:
                t = pending.pop(key)
                ended_since.pop(key, None)
                monitor.finished_trial(t.ref, sd.read_result(*key) or {})
            if not pending:
                break
            if monitor.should_stop() and not cancelled:
                cancelled = True
                ours = sorted({t.job_id for t in pending.values()})
                self._cancelled_by_ablate.update(ours)  # their records say ablate cancelled them, not "outside"
                _run(["scancel", *ours])
            if now >= next_poll:
                next_poll = now + min(MAX_POLL_S, max(1.0, (now - t0) / 10))
                states = query_states(t.job_id for t in pending.values())
                if states is None:
                    unreachable_since = unreachable_since or now
                    if now - unreachable_since > UNREACHABLE_AFTER_S:
                        raise SchedulerError(
                            f"SLURM has not answered for {UNREACHABLE_AFTER_S:.0f} s while waiting for "
                            f"{len(pending)} trial(s)", where="launcher=slurm",
                            fix=f"the jobs go on without ablate; `ablate collect {sd.root}` once SLURM answers")
                else:
                    unreachable_since = None
                    seen_ended = set(ended_since)
                    for key, t in list(pending.items()):
                        if self._settle(sd, t, states.get(t.job_id), now, ended_since, unknown_since, started,
                                        monitor):
                            pending.pop(key)
                    self._backdate(pending, set(ended_since) - seen_ended, ended_since, now)
                    if ended_since:  # look again as soon as a job's grace is over
                        next_poll = min(next_poll, min(ended_since.values()) + RESULT_GRACE_S)
            time.sleep(1.0)

    @staticmethod
    def _backdate(pending: Mapping[tuple[str, int], _Tracked], new: set[tuple[str, int]],
                  ended_since: dict[tuple[str, int], float], now: float) -> None:
        """Start the result grace of the trials first seen ended in this poll (``new``) at their job's end as
        SLURM records it, not at this poll: a job that ended before ``collect`` started is settled at once."""
        new = {k for k in new if k in pending}
        if not new:
            return
        ago = ended_ago(pending[k].job_id for k in new)
        for key in new:
            if (a := ago.get(pending[key].job_id)) is not None:
                ended_since[key] = now - a

    def _settle(self, sd: SweepDir, t: _Tracked, got: tuple[str, str] | None, now: float,
                ended_since: dict[tuple[str, int], float], unknown_since: dict[tuple[str, int], float],
                started: set[tuple[str, int]], monitor: Monitor) -> bool:
        """Act on one polled job state; True when the trial is settled (its failure recorded)."""
        key = (t.ref.arm, t.ref.seed)
        if got is None:  # neither squeue nor sacct knows the job
            ended_since.pop(key, None)
            if now - unknown_since.setdefault(key, now) < LOST_AFTER_S:
                return False
        else:
            unknown_since.pop(key, None)
            if got[0] == "RUNNING" and key not in started:
                started.add(key)
                monitor.started(t.ref)
            if got[0] not in TERMINAL_STATES:
                ended_since.pop(key, None)
                return False
            if now - ended_since.setdefault(key, now) < RESULT_GRACE_S:
                return False
        if self._has_result(sd, t.ref):
            return False  # picked up with the results on the next pass
        if self.trials_per_job > 1 and got is not None and got[0] == "CANCELLED" \
                and not sd.trial(t.ref.arm, t.ref.seed).manifest.exists():
            # its packed job was cancelled before it reached this trial: it never started, so it gets no
            # result and stays pending (the caller's resume or collect submits it again)
            if key in started:
                monitor.not_started(t.ref)
            log(f"ablate: trial {t.ref.arm} seed={t.ref.seed} never started (its packed SLURM job {t.job_id} was "
                "cancelled before it): no result, it stays pending")
            ended_since.pop(key, None)
            return True
        self._record_lost(sd, t, monitor, self._job_state(sd, t, got))
        ended_since.pop(key, None)
        return True

    def _record_lost(self, sd: SweepDir, t: _Tracked, monitor: Monitor, js: JobState) -> None:
        """Write result.json for a trial whose job ended without writing one."""
        err, out = self._log_paths(sd, t.job_id)
        log_tail = tail(err) or tail(out)
        status = "timeout" if js.state == "TIMEOUT" else "killed" if js.state in KILLED_STATES else "failed"
        cancelled = (f" (cancelled by ablate, which stopped the ablation early: `ablate resume {sd.root} --resubmit` "
                     "runs it again)" if t.job_id in self._cancelled_by_ablate
                     else f" (cancelled from outside: `ablate collect {sd.root} --resubmit` runs it again)")
        hint = {"OUT_OF_MEMORY": " (raise `launcher.mem_gb`)", "TIMEOUT": " (raise `launcher.timeout_min`)",
                "CANCELLED": cancelled,
                "NODE_FAIL": " (`ablate collect DIR --resubmit` runs it again)"}.get(js.state, "")
        why = f" ({js.reason})" if js.reason else ""
        tp = sd.trial(t.ref.arm, t.ref.seed)
        sd.mkdir(tp.dir)
        rec = write_result(tp, {
            "arm": t.ref.arm, "seed": t.ref.seed, "attempt": t.ref.attempt, "status": status, "metrics": {},
            "error": f"SLURM job {t.job_id} ended {js.state}{why} without a result{hint}; log {err}"
                     + (f"; log tail:\n{log_tail}" if log_tail else ""),
            "duration_s": None, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "slurm": {"job_id": t.job_id, "state": js.state, "reason": js.reason}, "log": str(err),
        })
        monitor.finished_trial(t.ref, rec)


__all__ = ["SlurmLauncher", "ended_ago", "query_states", "sbatch_parameters", "setup_lines", "split_arrays"]
