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
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ablate.errors import AblateError, PinError, UserError
from ablate.pin import pins as pins_mod
from ablate.pin.ignored import explain_missing
from ablate.plan.hydra_semantics import trial_hydra
from ablate.record.errorline import exception_line, failure_line
from ablate.record.sweepdir import SweepDir, TrialPaths, with_digest_json, write_atomic, write_json
from ablate.trials import fingerprint, isolation, proctree, seeding
from ablate.trials.config import arm_record, config_yaml, load_plan, reads_hydra_state, resolve_config
from ablate.trials.curve import record_curve
from ablate.trials.proctree import die_with_parent, own_process_tree
from ablate.trials.seeding import clear_import_hooks
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

#: Statuses that mean the trial produced no usable metric.
FAILED_STATUSES = ("failed", "diverged", "killed", "timeout", "pin_mismatch", "interrupted")


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
    import threading

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
        SIGALRM and process-level environment variables are restored afterwards.
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
    sd.mkdir(tp.dir)
    previous = sd.read_result(arm, seed) if trial_dir is None else None
    if previous is not None and previous.get("status") == "ok":
        return previous
    plan = load_plan(sd)
    rec = arm_record(plan, arm)
    task_cfg = (rec["config"].get("task") or {})
    metric = plan.get("metric")
    opts = plan.get("options", {})
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
    saved_env = dict(os.environ) if in_process else None
    inline_before = isolation.snapshot() if in_process else None  # put back after the trial (isolation.restore)
    inline_baseline: dict[str, Any] | None = None  # the same just before the task runs: what it changed

    stack = contextlib.ExitStack()  # inline: sys.exit / os._exit / KeyboardInterrupt of the task end the trial only
    guard = stack.enter_context(isolation.contained()) if in_process else isolation.Guard()

    def done(status: str, **fields: Any) -> dict[str, Any]:
        """Write this trial's result.json with ``status`` and the common fields (inline: with what the task
        changed of the process-global state, which is restored now, before any later trial)."""
        nonlocal inline_before
        if inline_before is not None:
            restored = isolation.restore(inline_before, inline_baseline, own_root=str(sd.root))
            inline_before = None
            if restored:
                fields["inline_restored"] = restored
                fields["notes"] = [*fields.get("notes", []), "under launcher=inline the task changed process-global "
                                   f"state, restored after it so no later trial saw it: {'; '.join(restored)}"]
        rec_out = {**base, "status": status, "metrics": {}, **fields,
                   "duration_s": time.perf_counter() - t0, "finished_at": _now()}
        return write_result(tp, rec_out)

    try:
        code_root = pins_mod.trial_code_root(sd, plan)
        manifest["code"] = pins_mod.code_seen(sd, plan, code_root)
        manifest["environment"] = pins_mod.capture_environment(light=True)
        manifest["data"] = pins_mod.data_seen(plan, code_root)

        form = get_form(form_of(task_cfg))
        if hasattr(form, "register_resolvers"):  # resolvers the app registers when imported
            form.register_resolvers(task_cfg, code_root)
        per_trial = reads_hydra_state(rec["config"])
        if per_trial:  # the config reads ${hydra:runtime.output_dir}: the dir exists, as in a Hydra run
            sd.mkdir(tp.dir / "run")
        with trial_hydra(tp.dir / "run", task_cfg) if per_trial else contextlib.nullcontext():  # no Hydra import
            cfg = resolve_config(rec["config"], seed)
        manifest["config"] = cfg

        mode = seeding.check_mode(determinism) if determinism is not None else seeding.trial_mode(plan, rec)
        threads = opts.get("threads")  # fixed in the plan: the same for every launcher, resume and repro
        os.environ.update(seeding.thread_env(threads))  # inline: restored when the trial ends
        manifest["determinism"] = {"mode": mode}
        write_atomic(tp.config, config_yaml(rec["config"], cfg))
        mismatch = pins_mod.mismatches(plan.get("pins", {}), manifest)
        if mismatch:
            write_json(tp.manifest, manifest)
            return done("pin_mismatch", error="; ".join(mismatch))
        hash_seed = seeding.effective_hash_seed()  # before seeding: string hashing was fixed at start
        sd.mkdir(tp.dir / "run")  # every form's run dir, with the sweep dir's mode (the forms find it made)
        workdir = snapshot = None
        if form.name == "fn":  # run in the trial's own mirror of the snapshot (task.data linked in), as scripts do
            workdir, snapshot = trial_workdir(sd, plan, cfg.get("task") or {}, tp.dir)
            manifest["cwd"] = str(workdir)
            # where it logs, as a script's trial is told (ablate's setting, set before the baseline of what the
            # task changes; inline: restored when the trial ends)
            os.environ.update({"ABLATE_RUN_DIR": str(tp.dir / "run"), "ABLATE_TRIAL_DIR": str(tp.dir),
                               **seeding.seed_environment(seed)})
        warm_fn = warm_app(cfg.get("task") or {}, code_root) if form.name == "app" else None
        if warm_fn is not None:  # a fork of a warm parent that imported the app: its @hydra.main runs here
            manifest["determinism"] = {"mode": mode, "seed": int(seed), "seeded": [],
                                       "via": f"the app's overrides, called as {warm_fn}() in this process"}
            manifest.setdefault("warm", {})["app"] = {"function": warm_fn, "in_process": True}
        elif form.name != "fn":  # this process runs no task code; the script gets the seed (ablate.trials.tasks)
            manifest["determinism"] = {"mode": mode, "seed": int(seed), "seeded": [],
                                       "via": "command overrides and environment"}
            hash_seed = os.environ.get(seeding.APP_HASH_SEED_ENV) if form.name == "app" and \
                os.environ.get(seeding.APP_HASH_SEED_ENV) else \
                seeding.environment_for(mode, seed).get("PYTHONHASHSEED", hash_seed)  # what the script gets
        else:
            manifest["determinism"] = seeding.seed_everything(seed, mode, threads=threads)
        if form.name != "fn" and threads is not None:
            manifest["determinism"]["threads"] = int(threads)
        manifest["determinism"]["hash_seed"] = hash_seed
        write_json(tp.manifest, manifest)
        run_opts = {**opts, "determinism": mode}

        def runner() -> Any:
            with contextlib.chdir(workdir) if workdir is not None else contextlib.nullcontext(), \
                    guard_snapshot(snapshot, (cfg.get("task") or {}).get("data")):  # a write there is named
                return form.run(cfg, tp, run_opts, plan=plan, arm=rec, code_root=code_root)

        timeout_s = float(opts["timeout_min"]) * 60 if opts.get("timeout_min") else None
        if inline_before is not None:
            inline_baseline = isolation.snapshot()
        t_task = time.perf_counter()

        # launcher=slurm: a requeued attempt whose task left a checkpoint continues its step log
        ckpt = os.environ.get("ABLATE_CHECKPOINT_DIR")
        resumed = os.environ.get("ABLATE_REQUEUES", "0") not in ("", "0") and bool(ckpt) and \
            Path(ckpt).is_dir() and any(Path(ckpt).iterdir())
        with fingerprint.recording(tp.steps, resume=resumed), \
                (_alarm(timeout_s) if in_process else contextlib.nullcontext()):
            out = runner()
        if guard.user_interrupt:  # the task swallowed the user's Ctrl-C: stop anyway
            raise KeyboardInterrupt
        task_s = time.perf_counter() - t_task
        if "warm" in manifest:
            manifest["warm"]["imported"] = fork.new_roots()
        if "torch" in sys.modules:  # what torch itself reports (cuDNN, GPUs, threads), once the task loaded it
            manifest["environment"] = pins_mod.capture_environment(light=True, runtime=True)
            if form.name == "fn":  # threads and flags are this process's: only an fn task runs in it
                manifest["determinism"]["flags_after"] = seeding.torch_flags()  # a task that flips them shows
                manifest["determinism"]["threads_after"] = sys.modules["torch"].get_num_threads()
            else:  # a command or app ran in its own process (this one may hold torch from composing the app)
                manifest["environment"].pop("torch_threads", None)
        out = record_curve(tp, plan, out)  # curve.json when the ablation compares curves (a returned history out)
        source, seen_recorded = None, False
        if isinstance(out, TaskOutput):
            if out.seen:  # what the app saw, resolved in its own process: recorded instead of ablate's resolution
                manifest["config"] = {**cfg, "task": {**(cfg.get("task") or {}), "params": out.seen["config"]}}
                manifest["seen"] = {"by": "the task's own process", "hydra": out.seen.get("hydra") or {}}
                torch_seen = out.seen.get("torch")
                if torch_seen:  # torch as the app's own process had it
                    manifest["environment"] = {**manifest["environment"], "torch_threads": torch_seen["threads"]}
                    manifest["determinism"]["flags_after"] = torch_seen["flags"]
                    manifest["determinism"]["threads_after"] = torch_seen["threads"]
                seen_recorded = True  # written below, with what the trial saw after the task
            out, source = out.metrics, out.source
        metrics = coerce_metrics(out, metric)
        as_bool = bool_metrics(out)
        changed = _pins_after(sd, plan, manifest)
        if seen_recorded or "torch" in sys.modules or "warm" in manifest \
                or "data_after" in manifest or "code_after" in manifest:
            write_json(tp.manifest, manifest)  # what the trial saw after the task, in one write
        if changed:  # the task ran on data (or code) that changed under it: its metrics are kept, not used
            return done("pin_mismatch", metrics=metrics, task_s=task_s,
                        error="changed while the trial ran, so its metrics describe other inputs: "
                        + "; ".join(changed))
        status, error, missing = "ok", None, False
        if metric and metric not in metrics:  # this trial only: the monitor stops when no trial returns it
            status, missing = "failed", True
            error = (f"`task.metric`: the task did not return the metric {metric!r} in this trial (arm {arm}, seed "
                     f"{seed}); it returned: {', '.join(sorted(metrics)) or 'nothing'}. Fix: if no trial returns "
                     f"it, set `task.metric` to one of those; if only some do, the task skips {metric!r} on some "
                     "path (this trial failed alone, the others ran)")
        bad = sorted(k for k, v in metrics.items() if not math.isfinite(v))
        if status == "ok" and metric in bad:
            status, error = "diverged", f"metric {metric!r} is {metrics[metric]} (NaN or inf)"
        extra: dict[str, Any] = {"metric_source": source} if source else {}
        if missing:
            extra["metric_missing"] = True
        if as_bool:
            extra["bool_metrics"] = as_bool
            extra["notes"] = [f"metric {k!r} was returned as a bool: counted as 1 (True) / 0 (False), a 0/1 metric"
                              for k in as_bool]
        return done(status, metrics=metrics, error=error, task_s=task_s, **extra)
    except TrialTimeout as exc:
        return done("timeout", error=str(exc))
    except (KeyboardInterrupt, SystemExit, isolation.TaskExit) as exc:
        if guard.user_interrupt:  # the user's Ctrl-C: leave the trial unfinished, `ablate resume` re-runs it
            raise KeyboardInterrupt from None
        if isinstance(exc, SystemExit) and not in_process and os.environ.get("SUBMITIT_EXECUTOR") == "slurm":
            raise  # submitit's preemption / time-limit handler requeued the job and ends it with sys.exit(-1)
        import traceback

        if isinstance(exc, KeyboardInterrupt) and not in_process:
            error = "KeyboardInterrupt raised inside the trial's process (by the task, or a SIGINT sent to it)"
        else:
            error = isolation.exit_cause(exc)
            if in_process:
                error += "; under launcher=inline it would have ended ablate, so it was recorded as a failed trial"
        return done("failed", traceback=traceback.format_exc(limit=-8), error=error)
    except TaskContractError as exc:
        return done("failed", contract_error=True,
                    error=f"`task.fn`: {exc}. Fix: return a dict such as {{'{metric}': value}}.")
    except PinError as exc:
        return done("pin_mismatch", error=str(exc))
    except Exception as exc:
        import traceback

        tb = traceback.format_exc(limit=-8)
        msg = str(exc) if isinstance(exc, AblateError | ScriptFailed) else f"{type(exc).__name__}: {exc}"
        msg = _explain(exc, msg)

        code_pin = (plan.get("pins") or {}).get("code") or {}
        untracked = pins_mod.untracked_import(exc, code_pin)
        script_why = None if untracked or not isinstance(exc, ScriptFailed) else \
            pins_mod.untracked_script_import(msg, code_pin, task_cfg)
        if untracked and isinstance(exc, UserError):  # the task's import: its cause replaces the generic fix
            msg = (f"`{exc.where}`: " if exc.where else "") + f"{exc.what.rstrip('.')}: {untracked}"
        elif script_why:  # the script's log ends in the import error: the cause heads the message, the log follows
            msg = f"{exception_line(msg)}: {script_why}\n{msg}"
        elif why := explain_missing(exc, code_pin.get("ignored_files") or []) or untracked:
            msg = f"{msg.rstrip('.')}. {why}"
        before = getattr(exc, "before_first_step", None)  # a script tells by what it printed; else steps logged
        if before is None:
            before = not (tp.steps.is_file() and tp.steps.stat().st_size > 0)
        return done("failed", error=msg, traceback=tb, contract_error=isinstance(exc, UserError),
                    failure_line=failure_line(msg), before_first_step=bool(before))
    finally:
        stack.close()
        if inline_before is not None:  # no result was written (a Ctrl-C): restore all the same
            isolation.restore(inline_before)
        if saved_env is not None:
            clear_import_hooks()
            isolation.set_environ(saved_env)


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
    finally:
        proctree.kill_descendants()  # whatever the task started (setsid grandchildren too) ends with it
    sys.stdout.flush()
    return 0 if rec.get("status") in ("ok", "failed", "diverged", "pin_mismatch") else 1


if __name__ == "__main__":
    sys.exit(main())
