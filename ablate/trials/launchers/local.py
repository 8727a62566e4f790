"""``launcher=local``: each trial in its own process on this machine, our own scheduling.

Why not submitit's LocalExecutor here: it gives every job the same GPUs, starts every job at once,
and costs about 0.3 s of CPU per job plus a 0.2 s pause per submission and a 1 s polling tick. This
launcher keeps ``max_parallel`` slots busy: each slot is a thread that starts
``python -m ablate.trials.trial SWEEP ARM SEED`` with the slot's own ``CUDA_VISIBLE_DEVICES`` and thread
count, blocks on the process (no polling), and starts the next trial the moment it exits.

Child processes die with the ablate process (``PR_SET_PDEATHSIG``, set by the child), so a killed
orchestrator leaves no orphan trial writing into the sweep dir; ``ablate resume`` re-runs what was
interrupted. A trial over ``timeout_min`` is killed (its whole process group) and recorded as
``timeout``; one killed by a signal (the OOM killer, say) as ``killed``, with its log tail.

Warm trials (``launcher.warm=true``, the default): a fresh interpreter plus the task's imports (torch:
about 1.6 s of CPU) used to come before every trial's first step. Now one warm parent per launch
(:mod:`ablate.trials.warm.parent`) imports the task once and each trial is a fresh fork of it, with its
own pid and process group, ``CUDA_VISIBLE_DEVICES``, thread count, seeding and manifest; a trial
that crashes or calls ``os._exit`` touches no other. ``PYTHONHASHSEED`` is one per ablation
(:func:`ablate.trials.seeding.ablation_hash_seed`, recorded in every manifest), warm or not, and the same
under ``launcher=slurm``. ``launcher.warm=false`` starts a fresh ``python -m ablate.trials.trial`` per trial,
for tasks that cannot be forked (the launcher says when). If the warm parent dies mid-run, the trials
it was running are recorded ``killed`` with that cause, the ones it had not forked get no result (they
stay pending: ``ablate resume`` runs them), and the launch stops forking and says so (:meth:`Monitor.halt`).

A trial's log files are removed when it wrote nothing to them.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from ablate.errors import ConfigError
from ablate.record.sweepdir import O_NOFOLLOW, SweepDir, TrialPaths, open_log
from ablate.trials import proctree, seeding
from ablate.trials.config import load_plan, plain_config
from ablate.trials.launchers.base import Launcher, Monitor, TrialRef
from ablate.trials.proctree import PARENT_ENV
from ablate.trials.trial import write_result
from ablate.trials.warm import early
from ablate.trials.warm.starter import WarmParent, check_preload
from ablate.trials.workdir import WORK_DIR_NAME, trial_workdir


def visible_gpus() -> list[str]:
    """GPU ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set, else what ``nvidia-smi -L``
    lists (without importing torch); empty on a machine without GPUs."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return [g.strip() for g in cvd.split(",") if g.strip() and g.strip() != "-1"]
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def tail(path: os.PathLike[str] | str, n_lines: int = 20, max_bytes: int = 8192) -> str:
    """The last ``n_lines`` lines (at most ``max_bytes``) of a text file; empty if unreadable."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | O_NOFOLLOW), "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-n_lines:])


class LocalLauncher(Launcher):
    """Runs each trial in its own child process, at most ``max_parallel`` at once.

    Parameters
    ----------
    max_parallel : int or None
        Trials at once; None: one per visible GPU (``gpus_per_trial`` each), else one per CPU core.
    gpus_per_trial : int
        GPUs given to each trial when GPUs are visible (its own ``CUDA_VISIBLE_DEVICES``).
    warm : bool
        True: fork each trial from a warm parent that imported the task once (see the module doc);
        False: a fresh interpreter per trial.
    preload : list of str
        Modules the warm parent imports after the task (``launcher.preload=[torch._dynamo]``).
    learn_imports : bool
        True: the warm parent also imports, before its next fork, what each trial imported and it had not
        (when a probe finds that safe); see :class:`ablate.trials.warm.parent.Learner`.
    """

    name = "local"
    OPTIONS: ClassVar[dict[str, Any]] = {"max_parallel": None, "gpus_per_trial": 1, "warm": True, "preload": [],
                                         "learn_imports": True}

    def __init__(self, max_parallel: int | None = None, gpus_per_trial: int = 1, warm: bool = True,
                 preload: Sequence[str] | None = None, learn_imports: bool = True) -> None:
        if max_parallel is not None and (not isinstance(max_parallel, int) or isinstance(max_parallel, bool)
                                         or max_parallel < 1):
            raise ConfigError(f"must be a positive integer or null, got {max_parallel!r}",
                              where="launcher.max_parallel", fix="e.g. `launcher.max_parallel=2`")
        if not isinstance(gpus_per_trial, int) or gpus_per_trial < 0:
            raise ConfigError(f"must be a non-negative integer, got {gpus_per_trial!r}",
                              where="launcher.gpus_per_trial", fix="e.g. `launcher.gpus_per_trial=1` (0: CPU only)")
        if not isinstance(warm, bool):
            raise ConfigError(f"must be true or false, got {warm!r}", where="launcher.warm",
                              fix="`launcher.warm=false` starts a fresh process per trial")
        self.warm = warm
        self.preload, self.learn_imports = check_preload(preload, learn_imports)
        self.gpus = visible_gpus()
        g = max(1, gpus_per_trial)
        gpu_slots = len(self.gpus) // g if self.gpus and gpus_per_trial > 0 else 0
        if max_parallel is None:
            max_parallel = gpu_slots or (os.cpu_count() or 1)
        self.max_parallel = max_parallel
        self.slot_gpus: list[str | None] = []
        for i in range(max_parallel):
            if gpu_slots:
                k = i % gpu_slots
                self.slot_gpus.append(",".join(self.gpus[k * g:(k + 1) * g]))
            else:
                self.slot_gpus.append(None)
        self._procs: dict[int, Any] = {}  # slot -> running trial (Popen or WarmTrial)
        self._procs_lock = threading.Lock()
        self._stopping = threading.Event()  # set when we kill running trials ourselves (Ctrl-C, abort)
        self._stop_reason = "ablate stopped"  # why, in a few words: each trial it stops records it
        self._warm: Any = None  # this launch's warm parent (launcher.warm=true)
        self._died_with_parent: set[TrialRef] = set()  # trials of this launch that died with their warm parent
        self._hash_seed = "0"  # this launch's PYTHONHASHSEED (seeding.ablation_hash_seed), set by launch
        self._seeds_rngs: set[str] = set()  # arms whose trials seed numpy and torch themselves, set by launch

    def describe(self) -> str:
        gpu = f", GPUs {self.gpus}" if self.gpus else ""
        warm = "" if self.warm else ", a fresh process per trial"
        return f"local, {self.max_parallel} trial(s) at a time{gpu}{warm}"

    # -- running -----------------------------------------------------------------------------------
    def launch(self, sd: SweepDir, trials: Sequence[TrialRef], monitor: Monitor) -> None:
        plan = load_plan(sd)
        opts = plan.get("options", {})
        cwd = (plan.get("project") or {}).get("cwd") or os.getcwd()
        timeout_s = float(opts["timeout_min"]) * 60 if opts.get("timeout_min") else None
        work: queue.SimpleQueue[TrialRef] = queue.SimpleQueue()
        for ref in trials:
            work.put(ref)
        n_slots = min(self.max_parallel, len(trials))
        threads_per_trial = opts.get("threads")  # the plan's: the same in every launcher, resume and repro
        errors: list[BaseException] = []

        modes = {a["name"]: seeding.trial_mode(plan, a) for a in plan["arms"]}  # per arm: it can be the variable
        # arms whose trials seed numpy and torch from the trial seed before the task runs: an fn task, seeded
        self._seeds_rngs = {a["name"] for a in plan["arms"] if modes[a["name"]] in ("seeded", "strict")
                            and ((a.get("config") or {}).get("task") or {}).get("fn")}
        self._hash_seed = seeding.ablation_hash_seed(plan)  # one per ablation, warm or not (as under slurm)
        any_seed = set(modes.values()) <= {"off"}  # then it is a draw per launch: an early parent's is as good
        self._warm = (self._start_warm(sd, cwd, self._hash_seed, monitor.idle, any_seed,
                                       until_ready=_workdirs_ahead(sd, plan, trials)) if self.warm and trials
                      else None)

        unstarted: list[TrialRef] = []  # taken from the queue, then never forked: the warm parent had died
        killed: list[TrialRef] = []  # running when the warm parent died, and died with it

        def slot(i: int) -> None:
            try:
                while not monitor.should_stop() and not (self._warm is not None and self._warm.death):
                    try:
                        ref = work.get_nowait()
                    except queue.Empty:
                        return
                    monitor.started(ref)
                    rec = self._run_one(sd, ref, i, cwd, opts, timeout_s, threads_per_trial, modes[ref.arm])
                    if rec is None:  # never forked: no result, it stays pending
                        unstarted.append(ref)
                        monitor.not_started(ref)
                        continue
                    if ref in self._died_with_parent:
                        killed.append(ref)
                    monitor.finished_trial(ref, rec)
            except BaseException as exc:  # surfaced in the main thread
                errors.append(exc)
                monitor.stop(f"an error in ablate ({type(exc).__name__})")

        threads = [threading.Thread(target=slot, args=(i,), name=f"ablate-slot-{i}", daemon=True)
                   for i in range(n_slots)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.5)
                    if monitor.should_stop():
                        self._kill_all(monitor.stop_reason)
        except BaseException as exc:
            why = "Ctrl-C" if isinstance(exc, KeyboardInterrupt) else f"an error in ablate ({type(exc).__name__})"
            monitor.stop(why)
            self._kill_all(monitor.stop_reason)
            for t in threads:
                t.join(timeout=10)
            raise
        finally:
            warm, self._warm = self._warm, None
            if warm is not None:
                warm.close()
                _drop_if_empty(warm.log)
        if errors:
            raise errors[0]
        if warm is not None and warm.death:
            left = len(unstarted) + work.qsize()
            monitor.halt(warm_death_message(sd, warm, len(killed), left))

    def start_early(self, task: Mapping[str, Any], seeds: Sequence[int], determinism: str, cwd: str) -> None:
        """Start the warm parent now, before the plan and pins exist, importing the task's installed packages
        meanwhile (:mod:`ablate.trials.warm.early`: only within its ``scope``, and only with
        ``launcher.warm=true``); the launch takes it over. Its ``PYTHONHASHSEED`` follows the ablation's rule
        on the options (:func:`ablate.trials.seeding.ablation_hash_seed`); a plan whose rule gives another is
        served by a warm parent started then."""
        if not self.warm or not early.active():
            return
        names = early.task_imports(task, cwd)
        if names:
            rule = {"seeds": list(seeds), "arms": [{"name": "control"}], "options": {"determinism": determinism}}
            early.start(cwd, self._warm_env(seeding.ablation_hash_seed(rule)), names)

    def _warm_env(self, hash_seed: str) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONHASHSEED"] = hash_seed
        env["PYTHONUNBUFFERED"] = "1"
        env[PARENT_ENV] = str(os.getpid())
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = "1"  # no pool before the fork; each trial sets its own count (warm.parent._fresh_process_state)
        return env

    def _start_warm(self, sd: SweepDir, cwd: str, hash_seed: str, meanwhile: Callable[[], None] | None = None,
                    any_seed: bool = False, until_ready: Iterable[Any] = ()) -> Any:
        """Start this launch's warm parent, or take the one started early (:meth:`start_early`) when it fits:
        the same environment and working dir, and ``hash_seed`` (any, with ``any_seed``: the rule draws one).
        Raises UserError when the task cannot be forked safely; ``meanwhile`` runs here while it imports the task
        (:meth:`Monitor.idle`)."""
        env = self._warm_env(hash_seed)
        taken = early.claim(cwd, env, lambda seed: any_seed or seed == hash_seed)
        if taken is not None:
            env = taken.env
            self._hash_seed = env["PYTHONHASHSEED"]  # the same value, or (any_seed) its draw: every trial's
        return WarmParent(str(sd.root), cwd, env, str(sd.root / "warm-parent.log"), preload=self.preload,
                          learn=self.learn_imports, meanwhile=meanwhile, early=taken, until_ready=until_ready)

    def _kill_all(self, reason: str | None = None) -> None:
        if not self._stopping.is_set():
            self._stop_reason = reason or "ablate stopped"
        self._stopping.set()  # before the lock: a trial registered after the copy below sees it (_run_one)
        with self._procs_lock:
            procs = list(self._procs.values())
        for p in procs:
            proctree.end_tree(p)

    def _run_one(self, sd: SweepDir, ref: TrialRef, slot: int, cwd: str, opts: dict[str, Any],
                 timeout_s: float | None, threads: int | None, mode: str) -> dict[str, Any] | None:
        """Run one trial and return its record; None when it never ran (its warm parent died first)."""
        tp = sd.trial(ref.arm, ref.seed)
        sd.mkdir(tp.dir)
        t0 = time.time()
        proc = self._start_trial(sd, ref, tp, slot, cwd, threads, mode)
        with self._procs_lock:
            self._procs[slot] = proc
            stopped = self._stopping.is_set()
        if stopped:  # stopped (Ctrl-C, abort) while this one was being started: _kill_all did not see it
            proctree.end_tree(proc)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            proctree.end_tree(proc)
        finally:
            with self._procs_lock:
                self._procs.pop(slot, None)
        text_tail = log_tail(tp)
        for log in (tp.stdout, tp.stderr):
            _drop_if_empty(log)
        rec = sd.read_result(ref.arm, ref.seed)
        fresh = rec is not None and rec.get("attempt", 1) == ref.attempt
        base = {"arm": ref.arm, "seed": ref.seed, "attempt": ref.attempt, "metrics": {},
                "duration_s": time.time() - t0, "returncode": proc.returncode}
        if timed_out:
            return write_result(tp, {**base, "status": "timeout",
                                     "error": f"exceeded timeout_min={opts.get('timeout_min')} and was killed; "
                                     f"{text_tail}"})
        if fresh:
            return rec  # type: ignore[return-value]
        if rec is not None and rec.get("status") == "ok" and proc.returncode == 0:
            # the trial found a finished result already there (run_trial never runs an `ok` trial again):
            # it ran nothing, so nothing is recorded in its name; the result stays as its writer left it
            return rec
        return self._no_result(sd, ref, tp, proc, base, text_tail)

    def _start_trial(self, sd: SweepDir, ref: TrialRef, tp: TrialPaths, slot: int, cwd: str, threads: int | None,
                     mode: str) -> Any:
        """Start one trial's process (a fork of the warm parent, or ``python -m ablate.trials.trial``), its output
        to the trial's logs and its environment seeded, threaded and given its slot's GPUs; the process."""
        env = dict(os.environ)
        env.update(seeding.environment_for(mode, ref.seed))  # before the child's Python and CUDA start
        env["PYTHONHASHSEED"] = self._hash_seed  # the ablation's, not the seed's: the same rule warm or not
        env["PYTHONUNBUFFERED"] = "1"
        env[PARENT_ENV] = str(os.getpid())  # the child asks to die with us (proctree.die_with_parent)
        env.update(seeding.thread_env(threads))
        gpus = self.slot_gpus[slot]
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpus
        if self._warm is not None:  # a fork of the warm parent: only what differs from it travels
            delta = {k: v for k, v in env.items() if self._warm.env.get(k) != v and k != PARENT_ENV}
            omp = str(env.get("OMP_NUM_THREADS") or "")
            return self._warm.start([str(sd.root), ref.arm, str(ref.seed), str(ref.attempt)], delta,
                                    int(omp) if omp.isdigit() else (threads or 1), str(tp.stdout), str(tp.stderr),
                                    reseed=ref.arm not in self._seeds_rngs)
        cmd = [sys.executable, "-m", "ablate.trials.trial", str(sd.root), ref.arm, str(ref.seed), str(ref.attempt)]
        out_fd = open_log(tp.stdout)  # never through a symlink planted in the trial dir
        err_fd = open_log(tp.stderr)
        try:
            return subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out_fd,
                                    stderr=err_fd, start_new_session=True)
        finally:
            os.close(out_fd)
            os.close(err_fd)

    def _no_result(self, sd: SweepDir, ref: TrialRef, tp: TrialPaths, proc: Any, base: dict[str, Any],
                   text_tail: str) -> dict[str, Any] | None:
        """The record of a trial that ended without writing its own: stopped by ablate, died with its warm parent,
        killed by a signal or exited without a result (None: never forked, so it stays pending)."""
        if self._stopping.is_set():  # we stopped it (Ctrl-C, on_failure=abort, a broken task): not the trial's fault
            return write_result(tp, {**base, "status": "interrupted",
                                     "error": f"stopped by ablate before it finished ({self._stop_reason}); "
                                     "`ablate resume` re-runs it"})
        rc = proc.returncode
        if rc is None and self._warm is not None:  # a warm trial whose warm parent died
            if not proc.forked:
                return None  # it was never forked: it did not run, so it gets no result (it stays pending)
            proctree.kill_group(proc.pid)  # it dies with its parent (PR_SET_PDEATHSIG); make sure
            self._died_with_parent.add(ref)
            return write_result(tp, {**base, "status": "killed",
                                     "error": f"{self._warm.death_note()} while the trial ran, and the trial "
                                     f"died with it; `ablate resume {sd.root} --resubmit` re-runs it; {text_tail}"})
        if rc is None:
            status, msg = "killed", "the trial process ended without an exit status"
        elif rc < 0:
            sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            hint = " (SIGKILL: often the out-of-memory killer)" if -rc == signal.SIGKILL else ""
            status, msg = "killed", f"the trial process was killed by {sig}{hint}"
        else:
            status, msg = "failed", f"the trial process exited with code {rc} without recording a result"
        return write_result(tp, {**base, "status": status, "error": f"{msg}; {text_tail}"})


def _workdirs_ahead(sd: SweepDir, plan: Mapping[str, Any], trials: Sequence[TrialRef]) -> Iterator[bool]:
    """Build each ``fn`` trial's working dir (:func:`ablate.trials.workdir.trial_workdir`), one per step, while
    the warm parent imports the task (:class:`WarmParent`'s ``until_ready``: this process is idle then, and the
    trials' dirs were each 5-6 ms of a trial's own start on a 2-core machine). Only for a trial whose dir has no
    working dir yet, of an arm whose config has nothing to resolve (its ``task`` is then the trial's own); the
    trial finds it made and adds only what is missing, as a trial run again does. A dir that cannot be made here
    is left to the trial, which reports what fails."""
    arms = {a["name"]: a.get("config") or {} for a in plan["arms"]}
    for ref in trials:
        config = arms.get(ref.arm) or {}
        task = config.get("task") or {}
        if not task.get("fn") or not plain_config(config):
            continue
        tp = sd.trial(ref.arm, ref.seed)
        if os.path.lexists(tp.dir / WORK_DIR_NAME):
            continue
        with contextlib.suppress(Exception):
            sd.mkdir(tp.dir)
            trial_workdir(sd, plan, task, tp.dir)
        yield True


def warm_death_message(sd: SweepDir, warm: WarmParent, n_killed: int, n_unstarted: int) -> str:
    """What to tell the user when the warm parent died during a launch: how it died, what became of the
    running trials (recorded ``killed``) and of the ones not started yet (no result, pending), and the
    commands that run them."""
    what = warm.death_note().replace(" it was forked from", " every trial is forked from")
    parts = [f"{what} during the run"]
    if n_killed:
        parts.append(f"{n_killed} trial(s) running then died with it and are recorded `killed`")
    if n_unstarted:
        parts.append(f"{n_unstarted} trial(s) had not started and stay pending (no result)")
    fix = (f"`ablate resume {sd.root}` runs the pending ones" if n_unstarted else "")
    if n_killed:
        fix += ("; " if fix else "") + f"`ablate resume {sd.root} --resubmit` also re-runs the killed ones"
    return "; ".join(parts) + (f". Fix: {fix}" if fix else "")


def log_tail(tp: Any) -> str:
    """``log tail:`` and the end of the trial's stderr (else stdout), or a note that it wrote nothing."""
    text = tail(tp.stderr) or tail(tp.stdout)
    return f"log tail:\n{text}" if text.strip() else "the trial wrote no output to stdout or stderr"


def _drop_if_empty(path: os.PathLike[str] | str) -> None:
    """Remove a log file the process wrote nothing to (fewer files per trial)."""
    try:
        if os.path.getsize(path) == 0:
            os.unlink(path)
    except OSError:
        pass
