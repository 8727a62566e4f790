"""What runs inside one trial's process: verify pins -> seed -> run the task -> record.

The trial reads everything it needs from the sweep dir (``ablation.yaml``), so the same function
runs in-process (``launcher=inline``), in a child process (``launcher=local``: ``python -m
ablate.trials.trial SWEEP_DIR ARM SEED``) or in a SLURM job. It writes, in ``trials/<arm>/seed=<k>/``:

- ``manifest.json`` at start: what this process saw (commit of the code it imports, data hashes,
  environment, determinism mode and flags, the config it resolved); rewritten at the end with the
  torch determinism flags as the task left them (``determinism.flags_after``);
- ``config.yaml``: the resolved config handed to the task;
- ``result.json`` at the end: status, metrics (or the error), timings.

A trial whose ``result.json`` says ``ok`` is never run again.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.errors import AblateError, PinError, UserError
from ablate.pin import pins as pins_mod
from ablate.pin.ignored import explain_missing
from ablate.pin.imported import imported_distributions
from ablate.plan.hydra_semantics import trial_hydra
from ablate.record import trial_lock
from ablate.record.errorline import exception_line, failure_line
from ablate.record.sweepdir import SweepDir, TrialPaths, with_digest_json, write_atomic, write_json
from ablate.trials import fingerprint, isolation, proctree, seeding
from ablate.trials.config import arm_record, config_yaml, load_plan, reads_hydra_state, resolve_config
from ablate.trials.curve import record_curve
from ablate.trials.proctree import die_with_parent, own_process_tree
from ablate.trials.tasks.interface import (  # noqa: F401  (benchmarks import import_callable here)
    ScriptFailed,
    TaskOutput,
    TrialTimeout,
    form_of,
    get_form,
    import_callable,
    warm_app,
)
from ablate.trials.warm import fork
from ablate.trials.workdir import guard_snapshot, trial_workdir


class TaskContractError(TypeError):
    """The task broke its contract (returned a non-mapping or a non-number): a user error."""


def coerce_metrics(out: Any, metric: str | None) -> dict[str, float]:
    """A task's return value as metric name -> float, with ``metric`` present (raises TaskContractError)."""
    if not isinstance(out, Mapping):
        raise TaskContractError(
            f"the task returned {type(out).__name__} ({str(out)[:80]!r}); a task must return a mapping "
            "of metric name to number, e.g. {'val_acc': 0.97}"
        )
    metrics: dict[str, float] = {}
    for k, v in out.items():
        if isinstance(v, str) and v.lower() in ("nan", "inf", "-inf"):  # JSON's only spelling of those
            metrics[str(k)] = float(v)
            continue
        if isinstance(v, str | bytes):  # "0.7" is not 0.7: a task that formats its numbers has a bug to fix
            raise TaskContractError(f"metric {k!r} is the string {v!r}, not a number (return the number itself, "
                                    "e.g. a float)")
        try:
            metrics[str(k)] = float(v)
        except (TypeError, ValueError):
            raise TaskContractError(f"metric {k!r} is {v!r} ({type(v).__name__}), not a number") from None
    return metrics


def bool_metrics(out: Any) -> list[str]:
    """Names of the metrics a task returned as booleans (Python, numpy or torch bools): they are counted
    as 1 (True) and 0 (False), a 0/1 metric (the verdict then uses its tests and intervals for proportions,
    :mod:`ablate.stats.binary`), and the trial's record names them so."""
    if not isinstance(out, Mapping):
        return []
    return sorted(str(k) for k, v in out.items()
                  if isinstance(v, bool) or str(getattr(v, "dtype", "")) in ("bool", "torch.bool"))


@contextlib.contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Raise TrialTimeout after ``seconds`` (main thread only; used by in-process trials)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise TrialTimeout(f"exceeded timeout_min ({seconds / 60:g} min)")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def write_result(tp: TrialPaths, record: dict[str, Any]) -> dict[str, Any]:
    """Write ``result.json`` atomically, with its digest (:func:`ablate.record.sweepdir.record_digest`), and
    return the record."""
    tp.dir.mkdir(parents=True, exist_ok=True)
    record, text = with_digest_json(record)
    write_atomic(tp.result, text)
    return record


def run_trial(sweep_root: str | os.PathLike[str], arm: str, seed: int, *, in_process: bool = False,
              attempt: int | None = None, trial_dir: str | os.PathLike[str] | None = None,
              determinism: str | None = None) -> dict[str, Any]:
    """Run one trial (``arm`` at ``seed``) of the ablation in ``sweep_root`` and record it.

    The trial runs in stages, each a function that returns what the next one needs: :func:`_prepare`
    (what the code, data and environment are, the task form, the resolved config, the determinism mode),
    the pins checked against them, :func:`_enter` (the trial's work dir, its environment, seeding, the
    manifest), :func:`_run` (the task, under its timeout and step log), :func:`_observe` (what the task
    left: its manifest after) and :func:`_judge` (its metrics and status). A failure at any stage is
    recorded by :func:`_record` with its cause. Under ``launcher=inline`` the whole trial runs inside one
    :class:`ablate.trials.isolation.TrialIsolation`.

    Parameters
    ----------
    sweep_root : path-like
        The sweep dir (holds ``ablation.yaml``).
    arm : str
        Arm name (``control`` or a treatment such as ``lr=0.1``).
    seed : int
        The trial seed.
    in_process : bool
        True when running inside the orchestrating process (``launcher=inline``): timeouts use
        SIGALRM and process-level state is restored afterwards.
    attempt : int, optional
        Attempt number recorded in the result (1 for the first run).
    trial_dir : path-like, optional
        Write this run's files here instead of ``trials/<arm>/seed=<k>/`` (``ablate repro`` re-runs a
        trial into a scratch dir; the original trial is never touched).
    determinism : {"off", "seeded", "strict"}, optional
        The determinism mode; default :func:`ablate.trials.seeding.trial_mode` (the ablation's setting, or
        the arm's value when ``determinism`` is the variable).

    Returns
    -------
    dict
        The record written to ``result.json``: ``arm``, ``seed``, ``status`` (``ok``, ``failed``,
        ``diverged``, ``timeout``, ``pin_mismatch``), ``metrics``, ``error``, ``duration_s`` ...
        Never raises for a failing task: failures are recorded.
    """
    t0 = time.perf_counter()
    sd = SweepDir(sweep_root)
    tp = TrialPaths(Path(trial_dir).absolute()) if trial_dir is not None else sd.trial(arm, seed)
    # no resume decides about this trial while its process runs (trial_lock.StrayTrial: one does). Not for `ablate
    # repro`'s scratch dir (not the sweep dir's), nor inline, where the trial is the orchestrator's own process (it
    # cannot outlive it, and a worker the task forks would hold the lock into the orchestrator's next decision)
    with contextlib.nullcontext() if trial_dir is not None or in_process else trial_lock.hold(sd.root):
        sd.mkdir(tp.dir)
        previous = sd.read_result(arm, seed) if trial_dir is None else None
        if previous is not None and previous.get("status") == "ok":
            return previous
        trial = _start(sd, tp, arm, seed, attempt=attempt, in_process=in_process, t0=t0)
        # inline: sys.exit / os._exit / KeyboardInterrupt of the task end the trial only, its state changes are
        # undone
        with isolation.TrialIsolation(in_process, own_root=str(sd.root)) as iso:
            try:
                return _record(trial, iso, *_stages(trial, iso, determinism))
            except TrialTimeout as exc:
                return _record(trial, iso, "timeout", {"error": str(exc)})
            except (KeyboardInterrupt, SystemExit, isolation.TaskExit) as exc:
                if iso.guard.user_interrupt:  # the user's Ctrl-C: the trial stays unfinished, a resume re-runs it
                    raise KeyboardInterrupt from None
                if (isinstance(exc, SystemExit) and not in_process
                        and os.environ.get("SUBMITIT_EXECUTOR") == "slurm"):
                    raise  # submitit's preemption / time-limit handler requeued the job, ends it by sys.exit(-1)
                return _record(trial, iso, "failed", _exit_fields(exc, in_process))
            except TaskContractError as exc:
                return _record(trial, iso, "failed", {
                    "contract_error": True,
                    "error": f"`task.fn`: {exc}. Fix: return a dict such as {{'{trial.metric}': value}}."})
            except PinError as exc:
                return _record(trial, iso, "pin_mismatch", {"error": str(exc)})
            except Exception as exc:
                return _record(trial, iso, "failed", _error_fields(trial, exc))


@dataclass
class _Trial:
    """One trial as it runs: where it writes, what the plan says of it, and its manifest so far."""

    sd: SweepDir
    tp: TrialPaths
    plan: dict[str, Any]
    rec: dict[str, Any]  # the arm's record in the plan (name, value, config)
    arm: str
    seed: int
    in_process: bool
    base: dict[str, Any]  # the fields every result.json of this trial carries
    manifest: dict[str, Any]  # written to manifest.json at start and after the task
    t0: float  # time.perf_counter() when the trial started, s

    @property
    def task_cfg(self) -> dict[str, Any]:
        """The arm's ``task`` node, unresolved."""
        return self.rec["config"].get("task") or {}

    @property
    def opts(self) -> dict[str, Any]:
        """The ablation's options (``timeout_min``, ``threads`` ...)."""
        return self.plan.get("options", {})

    @property
    def metric(self) -> str | None:
        """The metric the ablation compares."""
        return self.plan.get("metric")


@dataclass
class _Prepared:
    """What :func:`_prepare` found: the code the trial imports, its task form, its config and determinism."""

    code_root: Path | None
    form: Any  # the task form (:mod:`ablate.trials.tasks`)
    cfg: dict[str, Any]  # the resolved config handed to the task
    mode: str  # off, seeded or strict
    threads: int | None  # the plan's thread count (None: the library defaults)


@dataclass
class _Entered:
    """What :func:`_enter` set up: the dir the task runs in, the snapshot it must not write, its options."""

    workdir: Path | None  # an fn task's own mirror of the code snapshot (None: the form chooses)
    snapshot: Path | None
    run_opts: dict[str, Any]


def _start(sd: SweepDir, tp: TrialPaths, arm: str, seed: int, *, attempt: int | None, in_process: bool,
           t0: float) -> _Trial:
    """The trial's plan, arm record and first fields (who runs it, where, from which warm parent)."""
    plan = load_plan(sd)
    rec = arm_record(plan, arm)
    base: dict[str, Any] = {
        "arm": arm, "value": rec.get("value"), "seed": int(seed), "attempt": attempt or 1,
        "started_at": _now(), "host": os.uname().nodename, "pid": os.getpid(),
    }
    manifest: dict[str, Any] = {"arm": arm, "seed": int(seed), "started_at": base["started_at"],
                                "host": base["host"], "pid": os.getpid()}
    if os.environ.get("ABLATE_WARM_PARENT") and not in_process:  # launcher=local forked it (trials/warm/parent.py)
        manifest["warm_parent"] = int(os.environ["ABLATE_WARM_PARENT"])
        if fork.is_fork():  # what the warm parent held beyond the task, and what this trial imported anew
            manifest["warm"] = {"parent": manifest["warm_parent"], "preloaded": fork.preloaded()}
    return _Trial(sd=sd, tp=tp, plan=plan, rec=rec, arm=arm, seed=int(seed), in_process=in_process, base=base,
                  manifest=manifest, t0=t0)


def _stages(trial: _Trial, iso: isolation.TrialIsolation, determinism: str | None) -> tuple[str, dict[str, Any]]:
    """Run the trial's stages in turn; the status and fields its result records."""
    prepared = _prepare(trial, determinism)
    mismatch = pins_mod.mismatches(trial.plan.get("pins", {}), trial.manifest)
    if mismatch:
        write_json(trial.tp.manifest, trial.manifest)
        return "pin_mismatch", {"error": "; ".join(mismatch)}
    entered = _enter(trial, prepared)
    out, task_s = _run(trial, prepared, entered, iso)
    out, source = _observe(trial, prepared, out)
    return _judge(trial, prepared, out, source, task_s)


def _prepare(trial: _Trial, determinism: str | None) -> _Prepared:
    """What the trial runs on (code, environment, data: into the manifest), its task form, its resolved config
    (written to ``config.yaml``) and its determinism mode; the plan's thread count set in the environment."""
    sd, tp, plan, rec, manifest = trial.sd, trial.tp, trial.plan, trial.rec, trial.manifest
    code_root = pins_mod.trial_code_root(sd, plan)
    manifest["code"] = pins_mod.code_seen(sd, plan, code_root)
    manifest["data"] = pins_mod.data_seen(plan, code_root)

    form = get_form(form_of(trial.task_cfg))
    if hasattr(form, "register_resolvers"):  # resolvers the app registers when imported
        form.register_resolvers(trial.task_cfg, code_root)
    per_trial = reads_hydra_state(rec["config"])
    if per_trial:  # the config reads ${hydra:runtime.output_dir}: the dir exists, as in a Hydra run
        sd.mkdir(tp.dir / "run")
    with trial_hydra(tp.dir / "run", trial.task_cfg) if per_trial else contextlib.nullcontext():  # no Hydra import
        cfg = resolve_config(rec["config"], trial.seed)
    manifest["config"] = cfg

    mode = seeding.check_mode(determinism) if determinism is not None else seeding.trial_mode(plan, rec)
    threads = trial.opts.get("threads")  # fixed in the plan: the same for every launcher, resume and repro
    os.environ.update(seeding.thread_env(threads))  # inline: restored when the trial ends
    # the environment once the plan's thread variables are set, as a fresh trial process and a re-capture after
    # a task that loaded torch see it: inline, they were set only after this (a resume on another launcher, or
    # a notebook holding torch, recorded them where the first run had not: a false `env.OMP_NUM_THREADS` warning)
    manifest["environment"] = pins_mod.capture_environment(light=True)
    manifest["determinism"] = {"mode": mode}
    write_atomic(tp.config, config_yaml(rec["config"], cfg))
    return _Prepared(code_root=code_root, form=form, cfg=cfg, mode=mode, threads=threads)


def _enter(trial: _Trial, prepared: _Prepared) -> _Entered:
    """Make the trial's run dir (and an fn task's work dir, with its environment), seed what this process runs,
    and write the manifest with how the trial was seeded."""
    sd, tp, manifest, seed, mode = trial.sd, trial.tp, trial.manifest, trial.seed, prepared.mode
    form, cfg = prepared.form, prepared.cfg
    hash_seed = seeding.effective_hash_seed()  # before seeding: string hashing was fixed at start
    sd.mkdir(tp.dir / "run")  # every form's run dir, with the sweep dir's mode (the forms find it made)
    workdir = snapshot = None
    if form.name == "fn":  # run in the trial's own mirror of the snapshot (task.data linked in), as scripts do
        workdir, snapshot = trial_workdir(sd, trial.plan, cfg.get("task") or {}, tp.dir)
        manifest["cwd"] = str(workdir)
        # where it logs, as a script's trial is told (ablate's setting, set before the baseline of what the
        # task changes; inline: restored when the trial ends)
        os.environ.update({"ABLATE_RUN_DIR": str(tp.dir / "run"), "ABLATE_TRIAL_DIR": str(tp.dir),
                           **seeding.seed_environment(seed)})
    warm_fn = warm_app(cfg.get("task") or {}, prepared.code_root) if form.name == "app" else None
    if warm_fn is not None:  # a fork of a warm parent that imported the app: its @hydra.main runs here
        manifest["determinism"] = {"mode": mode, "seed": seed, "seeded": [],
                                   "via": f"the app's overrides, called as {warm_fn}() in this process"}
        manifest.setdefault("warm", {})["app"] = {"function": warm_fn, "in_process": True}
    elif form.name != "fn":  # this process runs no task code; the script gets the seed (ablate.trials.tasks)
        manifest["determinism"] = {"mode": mode, "seed": seed, "seeded": [],
                                   "via": "command overrides and environment"}
        hash_seed = os.environ.get(seeding.APP_HASH_SEED_ENV) if form.name == "app" and \
            os.environ.get(seeding.APP_HASH_SEED_ENV) else \
            seeding.environment_for(mode, seed).get("PYTHONHASHSEED", hash_seed)  # what the script gets
    else:
        manifest["determinism"] = seeding.seed_everything(seed, mode, threads=prepared.threads)
    if form.name != "fn" and prepared.threads is not None:
        manifest["determinism"]["threads"] = int(prepared.threads)
    manifest["determinism"]["hash_seed"] = hash_seed
    write_json(tp.manifest, manifest)
    return _Entered(workdir=workdir, snapshot=snapshot, run_opts={**trial.opts, "determinism": mode})


def _run(trial: _Trial, prepared: _Prepared, entered: _Entered,
         iso: isolation.TrialIsolation) -> tuple[Any, float]:
    """Run the task (in its work dir, under its timeout, its steps logged); what it returned, and its time in s."""
    opts, cfg = trial.opts, prepared.cfg
    timeout_s = float(opts["timeout_min"]) * 60 if opts.get("timeout_min") else None
    iso.task_starts()  # inline: what differs from here when the trial ends, the task changed
    t_task = time.perf_counter()
    # launcher=slurm: a requeued attempt whose task left a checkpoint continues its step log
    ckpt = os.environ.get("ABLATE_CHECKPOINT_DIR")
    resumed = os.environ.get("ABLATE_REQUEUES", "0") not in ("", "0") and bool(ckpt) and \
        Path(ckpt).is_dir() and any(Path(ckpt).iterdir())
    with fingerprint.recording(trial.tp.steps, resume=resumed), \
            (_alarm(timeout_s) if trial.in_process else contextlib.nullcontext()), \
            (contextlib.chdir(entered.workdir) if entered.workdir is not None else contextlib.nullcontext()), \
            guard_snapshot(entered.snapshot, (cfg.get("task") or {}).get("data")):  # a write there is named
        out = prepared.form.run(cfg, trial.tp, entered.run_opts, plan=trial.plan, arm=trial.rec,
                                code_root=prepared.code_root)
    if iso.guard.user_interrupt:  # the task swallowed the user's Ctrl-C: stop anyway
        raise KeyboardInterrupt
    return out, time.perf_counter() - t_task


def _observe(trial: _Trial, prepared: _Prepared, out: Any) -> tuple[Any, str | None]:
    """Record in the manifest what the trial saw after the task (torch as it reports itself, the distributions
    imported, what an app saw in its own process) and its curve; the task's metrics mapping and their source."""
    manifest, form_name = trial.manifest, prepared.form.name
    if "warm" in manifest:
        manifest["warm"]["imported"] = fork.new_roots()
    if "torch" in sys.modules:  # what torch itself reports (cuDNN, GPUs, threads), once the task loaded it
        manifest["environment"] = pins_mod.capture_environment(light=True, runtime=True)
        if form_name == "fn":  # threads and flags are this process's: only an fn task runs in it
            manifest["determinism"]["flags_after"] = seeding.torch_flags()  # a task that flips them shows
            manifest["determinism"]["threads_after"] = sys.modules["torch"].get_num_threads()
        else:  # a command or app ran in its own process (this one may hold torch from composing the app)
            manifest["environment"].pop("torch_threads", None)
    if form_name == "fn":  # every installed distribution the task ran on, by version (a confound if it differs)
        code_root = prepared.code_root
        manifest["environment"]["imported"] = imported_distributions(str(code_root) if code_root else None)
    out = record_curve(trial.tp, trial.plan, out)  # curve.json when the ablation compares curves
    if not isinstance(out, TaskOutput):
        return out, None
    if out.seen:  # what the app saw, resolved in its own process: recorded instead of ablate's resolution
        cfg = prepared.cfg
        manifest["config"] = {**cfg, "task": {**(cfg.get("task") or {}), "params": out.seen["config"]}}
        manifest["seen"] = {"by": "the task's own process", "hydra": out.seen.get("hydra") or {}}
        torch_seen = out.seen.get("torch")
        if out.seen.get("packages"):  # the distributions the app's own process imported
            manifest["environment"] = {**manifest["environment"], "imported": out.seen["packages"]}
        if torch_seen:  # torch as the app's own process had it
            manifest["environment"] = {**manifest["environment"], "torch_threads": torch_seen["threads"]}
            manifest["determinism"]["flags_after"] = torch_seen["flags"]
            manifest["determinism"]["threads_after"] = torch_seen["threads"]
    return out.metrics, out.source


def _judge(trial: _Trial, prepared: _Prepared, out: Any, source: str | None,
           task_s: float) -> tuple[str, dict[str, Any]]:
    """The trial's status and result fields from what the task returned (its metrics, checked: a number each,
    the ablation's metric present and finite) and the pins checked again; the manifest after the task written.
    """
    manifest, metric = trial.manifest, trial.metric
    metrics = coerce_metrics(out, metric)
    as_bool = bool_metrics(out)
    changed = _pins_after(trial.sd, trial.plan, manifest)
    if "seen" in manifest or "torch" in sys.modules or "warm" in manifest or prepared.form.name == "fn" \
            or "data_after" in manifest or "code_after" in manifest:
        write_json(trial.tp.manifest, manifest)  # what the trial saw after the task, in one write
    if changed:  # the task ran on data (or code) that changed under it: its metrics are kept, not used
        return "pin_mismatch", {"metrics": metrics, "task_s": task_s,
                                "error": "changed while the trial ran, so its metrics describe other inputs: "
                                + "; ".join(changed)}
    status, error, missing = "ok", None, False
    if metric and metric not in metrics:  # this trial only: the monitor stops when no trial returns it
        status, missing = "failed", True
        error = (f"`task.metric`: the task did not return the metric {metric!r} in this trial (arm {trial.arm}, "
                 f"seed {trial.seed}); it returned: {', '.join(sorted(metrics)) or 'nothing'}. Fix: if no trial "
                 f"returns it, set `task.metric` to one of those; if only some do, the task skips {metric!r} on "
                 "some path (this trial failed alone, the others ran)")
    bad = sorted(k for k, v in metrics.items() if not math.isfinite(v))
    if status == "ok" and metric in bad:
        status = "diverged"
        error = f"metric {metric!r} is {metrics[metric]} (NaN or inf){seeding.nan_fill_note(prepared.mode)}"
    fields: dict[str, Any] = {"metrics": metrics, "error": error, "task_s": task_s}
    if source:
        fields["metric_source"] = source
    if manifest["determinism"].get("flags_after"):  # the launcher compares them across arms as trials end
        fields["flags_after"] = manifest["determinism"]["flags_after"]
    if missing:
        fields["metric_missing"] = True
    if as_bool:
        fields["bool_metrics"] = as_bool
        fields["notes"] = [f"metric {k!r} was returned as a bool: counted as 1 (True) / 0 (False), a 0/1 metric"
                           for k in as_bool]
    return status, fields


def _record(trial: _Trial, iso: isolation.TrialIsolation, status: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Write the trial's ``result.json`` with ``status``, ``fields`` and the common fields, and return it.

    Inline, the process-global state the trial changed is restored first (before any later trial), and what
    the task itself changed is named in the record (``inline_restored``, a line in ``notes``).
    """
    restored = iso.restore()
    if restored:
        fields = {**fields, "inline_restored": restored,
                  "notes": [*fields.get("notes", []), "under launcher=inline the task changed process-global "
                            f"state, restored after it so no later trial saw it: {'; '.join(restored)}"]}
    record = {**trial.base, "status": status, "metrics": {}, **fields,
              "duration_s": time.perf_counter() - trial.t0, "finished_at": _now()}
    return write_result(trial.tp, record)


def _exit_fields(exc: BaseException, in_process: bool) -> dict[str, Any]:
    """The result fields of a trial whose task tried to end its process (``sys.exit``, ``os._exit``, a
    ``KeyboardInterrupt`` not from the user); called while ``exc`` is handled (its traceback is recorded)."""
    if isinstance(exc, KeyboardInterrupt) and not in_process:
        error = "KeyboardInterrupt raised inside the trial's process (by the task, or a SIGINT sent to it)"
    else:
        error = isolation.exit_cause(exc)
        if in_process:
            error += "; under launcher=inline it would have ended ablate, so it was recorded as a failed trial"
    return {"traceback": traceback.format_exc(limit=-8), "error": error}


def _error_fields(trial: _Trial, exc: Exception) -> dict[str, Any]:
    """The result fields of a trial that raised ``exc``: the message with its cause and way out where known
    (an import of an untracked file, a nondeterministic op), the traceback, whether any step was logged."""
    tb = traceback.format_exc(limit=-8)
    msg = str(exc) if isinstance(exc, AblateError | ScriptFailed) else f"{type(exc).__name__}: {exc}"
    msg = _explain(exc, msg)

    code_pin = (trial.plan.get("pins") or {}).get("code") or {}
    untracked = pins_mod.untracked_import(exc, code_pin)
    script_why = None if untracked or not isinstance(exc, ScriptFailed) else \
        pins_mod.untracked_script_import(msg, code_pin, trial.task_cfg)
    if untracked and isinstance(exc, UserError):  # the task's import: its cause replaces the generic fix
        msg = (f"`{exc.where}`: " if exc.where else "") + f"{exc.what.rstrip('.')}: {untracked}"
    elif script_why:  # the script's log ends in the import error: the cause heads the message, the log follows
        msg = f"{exception_line(msg)}: {script_why}\n{msg}"
    elif why := explain_missing(exc, code_pin.get("ignored_files") or []) or untracked:
        msg = f"{msg.rstrip('.')}. {why}"
    before = getattr(exc, "before_first_step", None)  # a script tells by what it printed; else steps logged
    if before is None:
        before = not (trial.tp.steps.is_file() and trial.tp.steps.stat().st_size > 0)
    return {"error": msg, "traceback": tb, "contract_error": isinstance(exc, UserError),
            "failure_line": failure_line(msg), "before_first_step": bool(before)}


def _pins_after(sd: SweepDir, plan: Mapping[str, Any], manifest: dict[str, Any]) -> list[str]:
    """Check the data and code pins again once the task has returned (content digests, no DVC).

    Records what was seen in ``manifest`` (``data_after``, ``code_after``; the caller writes it) and returns
    the differences from the pins as sentences (empty: the task ran on the pinned inputs throughout,
    as far as its start and end can show).
    """
    pins = plan.get("pins") or {}
    check: dict[str, Any] = {}
    if pins.get("data"):
        manifest["data_after"] = check["data"] = pins_mod.data_seen(plan, pins_mod.trial_code_root(sd, plan))
    code = manifest.get("code") or {}
    if (pins.get("code") or {}).get("snapshot") and code.get("root"):
        manifest["code_after"] = check["code"] = pins_mod.code_seen(sd, plan, Path(code["root"]))
    if not check:
        return []
    return pins_mod.mismatches({k: pins[k] for k in check}, check)


def _explain(exc: BaseException, msg: str) -> str:
    """Add the way out to errors users hit often (a nondeterministic op under strict mode)."""
    text = str(exc)
    if "does not have a deterministic implementation" in text:
        op = (text.split(" does not have")[0].strip().splitlines() or ["an op"])[-1]
        return (f"`determinism=strict`: the op {op} has no deterministic implementation, so the trial stopped "
                "instead of running it nondeterministically. Ways out: `determinism=seeded` (same final metrics "
                "on the same hardware, not bitwise identical steps), or call "
                "torch.use_deterministic_algorithms(True, warn_only=True) at the start of the task (every other "
                f"op stays deterministic; this one warns and is not). Original error: {msg}")
    if "CUBLAS_WORKSPACE_CONFIG" in text and "use_deterministic_algorithms" in text:
        return ("`determinism=strict`: cuBLAS needs CUBLAS_WORKSPACE_CONFIG=:4096:8 (or :16:8) set before CUDA "
                "initialises; ablate sets it for trials it starts (launcher=local or slurm), but this process "
                "initialised CUDA first (launcher=inline after a CUDA trial, or a task that sets its own "
                "environment). Fix: use launcher=local, or export CUBLAS_WORKSPACE_CONFIG=:4096:8 before running "
                f"ablate. Original error: {msg}")
    return msg


#: Exit code of a trial process that found its ablate process gone and a resume deciding (it ran nothing).
STRAY_EXIT = 3


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m ablate.trials.trial SWEEP_DIR ARM SEED [ATTEMPT]`` (used by the local launcher)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (3, 4):
        print("usage: python -m ablate.trials.trial SWEEP_DIR ARM SEED [ATTEMPT]", file=sys.stderr)
        return 2
    die_with_parent()
    own_process_tree()
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]  # never import from the live tree
    attempt = int(argv[3]) if len(argv) == 4 else None
    try:
        rec = run_trial(Path(argv[0]), argv[1], int(argv[2]), attempt=attempt)
    except trial_lock.StrayTrial as exc:  # its ablate process is gone and a resume decides: nothing recorded
        print(f"ablate: {exc}", file=sys.stderr)
        return STRAY_EXIT
    finally:
        proctree.kill_descendants()  # whatever the task started (setsid grandchildren too) ends with it
    sys.stdout.flush()
    return 0 if rec.get("status") in ("ok", "failed", "diverged", "pin_mismatch") else 1


if __name__ == "__main__":
    sys.exit(main())
