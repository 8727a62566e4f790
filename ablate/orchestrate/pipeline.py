"""Orchestration: plan -> pin -> launch -> collect -> judge, every step reading and writing the sweep dir.

The orchestrating process holds no state that is not on disk: :func:`execute` works out what is
left to do from the trial records alone, so it serves a fresh ablation, ``ablate resume`` after a
crash, and ``ablate collect`` after a detached SLURM submission alike.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ablate import __version__
from ablate.errors import AblationFailed, ConfigError, PinError
from ablate.judge.confounds import MODE_KEY, hash_config_files
from ablate.orchestrate.options import Options, parse_options
from ablate.orchestrate.progress import Progress
from ablate.orchestrate.tuning import tuning_rounds
from ablate.pin import ignored
from ablate.pin import pins as pins_mod
from ablate.plan.app_config import APP_NODE, app_params
from ablate.plan.arms import Plan, describe, make_plan, parse_variable, resolve
from ablate.plan.hydra_semantics import per_trial_keys, trial_hydra
from ablate.plan.suite import SuitePlan, describe_suite, suite_record
from ablate.plan.trial_resolved import plan_dependent
from ablate.plan.tuning import Tune, expand, parse_tune
from ablate.plan.tuning import describe as describe_tuning
from ablate.record import trial_lock
from ablate.record.results import misplaced_records, misplaced_warning, trial_state, write_results
from ablate.record.sweepdir import TRIALS_DIR, SweepDir, dump_yaml, write_atomic
from ablate.record.verdict_key import TrialDigest
from ablate.trackers import log_after_ablation
from ablate.trials.config import load_plan
from ablate.trials.launchers import TrialRef, get_launcher
from ablate.trials.launchers.base import MISSING_METRIC_STOP, Launcher, Monitor
from ablate.trials.seeding import NAN_FILL
from ablate.trials.tasks.interface import attach, config_dirs, form_of, get_form, is_script_form, seed_route
from ablate.trials.warm.early import scope as early_parents

Composer = Callable[[str], Mapping[str, Any]]
#: The sweep dir this process is working on (for the Ctrl-C message); None before one exists.
CURRENT_SWEEP_DIR: str | None = None


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def prepare(cfg: Mapping[str, Any], *, variable_name: str | None, available_variables: list[str] | None = None,
            compose: Composer | None = None, choices: Mapping[str, Any] | None = None,
            cwd: str | os.PathLike[str] | None = None) -> tuple[Plan, Options]:
    """Validate options and derive the plan from a composed config (plain container, no ``hydra``).

    An ``app`` task's own config is composed and attached first (:func:`ablate.trials.tasks.app.attach`);
    ``${now:}`` is frozen once; ``???`` values are refused, naming the key.

    Raises
    ------
    ConfigError, PlanError
        For any invalid setting or an unprovable treatment; nothing has been written yet.
    """
    cfg = {k: v for k, v in cfg.items() if k != "hydra"}
    cfg, compose, choices = _attach_task(cfg, compose, choices, cwd)
    opts = parse_options(cfg)
    opts.seeds = script_seeds(cfg, opts.seeds)
    launcher = get_launcher(opts.launcher)  # validates launcher options before anything else happens
    if not opts.wait and not launcher.detachable:
        raise ConfigError(f"launcher={launcher.name} runs trials in this process's children, so it cannot detach",
                          where="wait", fix="use `launcher=slurm` to submit and exit, or drop `wait=false`")
    variable = parse_variable(cfg.get("variable"), variable_name, available_variables or [])
    if not opts.dry_run and isinstance(cfg.get("task"), Mapping):  # within start()'s scope: the warm parent
        launcher.start_early(cfg["task"], opts.seeds, opts.determinism, str(Path(cwd or os.getcwd()).absolute()))

    with trial_hydra(PLAN_RUN_DIR, cfg.get("task")):  # `${hydra:...}` as in a trial, its run dir a placeholder
        plan = make_plan(cfg, variable, opts.seeds, compose=compose, choices=choices)
    return plan, opts


#: What ``${hydra:runtime.output_dir}`` reads at plan time (each trial reads its own run dir).
PLAN_RUN_DIR = "<trial dir>/run"
#: The verdict's note on the seed list of an ``fn`` task.
FN_SEED_NOTE = "ablate seeds python, numpy and torch from each seed (0 included) before the task runs"
#: The verdict's note on the seed list of a task that runs a script (it is handed the seed; ablate seeds nothing in it).
SCRIPT_SEED_NOTE = ("seeds start at 1: scripts that seed only `if cfg.get(\"seed\")` treat 0 (like null) as no "
                    "seed")


def _attach_task(cfg: dict[str, Any], compose: Composer | None, choices: Mapping[str, Any] | None,
                 cwd: str | os.PathLike[str] | None) -> tuple[dict[str, Any], Any, Any]:
    """Attach the task's own config (an app's); freeze ``${now:}``; refuse ``???`` values (any task form)."""
    return attach(cfg, compose, choices, cwd)


def script_seeds(cfg: Mapping[str, Any], seeds: list[int]) -> list[int]:
    """The seed list of a task whose script seeds itself (``command``, ``app``): never seed 0.

    ``seeds=N`` means 1..N for these forms (0..N-1 for ``fn``, which ablate seeds itself). An explicit
    list holding 0 is refused.

    Raises
    ------
    ConfigError
        An explicit seed list with 0.
    """
    task = cfg.get("task")
    if not isinstance(task, Mapping) or not is_script_form(task) or 0 not in seeds:
        return seeds
    if isinstance(cfg.get("seeds"), list | tuple):
        raise ConfigError(f"lists seed 0, which scripts that seed only `if cfg.get('seed')` read as no seed, so "
                          f"that trial would run unseeded: {list(seeds)}", where="seeds",
                          fix="start the seed list at 1, e.g. `seeds=[1,2,3]` (or `seeds=3`, which means 1..3 for a "
                          "script task)")
    return [s + 1 for s in seeds]


def plan_record(plan: Plan, opts: Options, pins: Mapping[str, Any], *, cwd: str,
                command: Mapping[str, Any] | None = None, tune: Tune | None = None) -> dict[str, Any]:
    """The content of ``ablation.yaml``; ``command`` is the command line it was planned from
    (:func:`ablate.plan.overrides.command_record`), to run it again. With ``tune``, every arm at every setting
    is an arm of the record (:func:`ablate.plan.tuning.expand`), ``seeds`` are the tuning seeds and ``tuning``
    holds the settings and the evaluation seeds (the ablation's ``seeds``)."""
    record = _plan_record(plan, opts, pins, cwd=cwd, command=command)
    if tune is None:
        return record
    control_task = plan.control.config.get("task") or {}
    arms = expand(record["arms"], tune)
    with trial_hydra(PLAN_RUN_DIR, control_task):  # `${hydra:...}` as in a trial: one context serves every arm
        for arm in arms:
            arm["resolved"] = resolve(arm["config"])
    return {**record, "seeds": list(tune.seeds), "arms": arms,
            "tuning": tune.record(plan.seeds, [a.name for a in plan.arms])}


def _plan_record(plan: Plan, opts: Options, pins: Mapping[str, Any], *, cwd: str,
                 command: Mapping[str, Any] | None = None) -> dict[str, Any]:
    control_task = plan.control.config.get("task") or {}
    resolved = _resolved_arms(plan, control_task)
    return {**suite_record(plan),
        "ablate_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "variable": {"name": plan.variable.name, "key": plan.variable.key,
                     "values": list(plan.variable.values), "is_group": plan.variable.is_group},
        "metric": opts.metric,
        "goal": opts.goal,
        "seeds": plan.seeds,
        "task": {k: control_task.get(k) for k in ("fn", "command", "app", "data") if control_task.get(k) is not None},
        "per_trial": sorted(_per_trial_keys(plan)),
        **_app_notes(plan),
        "seed_note": (f"{SCRIPT_SEED_NOTE}; {seed_route(control_task)}" if is_script_form(control_task)
                      else FN_SEED_NOTE),
        "options": opts.record(),
        "project": {"cwd": cwd},
        **({"command": dict(command)} if command is not None else {}),
        "pins": dict(pins),
        "arms": [
            {"name": a.name, "label": a.label, "value": a.value, **({"variable": a.variable} if a.variable else {}),
             "changes": {k: list(v) for k, v in a.changes.items()}, "derived": a.derived,
             **({"presence": a.presence} if a.presence else {}), "config": a.config,
             "resolved": r}
            for a, r in zip(plan.arms, resolved, strict=True)
        ],
    }


def _resolved_arms(plan: Plan, control_task: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each arm's resolved config for ``ablation.yaml``: the one :func:`ablate.plan.arms.make_plan` resolved in
    the same ``${hydra:...}`` context (copied: the record shares no object with the plan, so its YAML has no
    aliases), else resolved here (a suite's arms, whose config got its ``variable`` node after planning). Issue 42:
    each arm was resolved twice, 15-25 ms of CPU each, plus a Hydra context (13-40 ms)."""
    held = [a.resolved() for a in plan.arms]
    if all(r is not None for r in held):
        return [copy.deepcopy(r) for r in held]  # type: ignore[misc]
    with trial_hydra(PLAN_RUN_DIR, control_task):  # `${hydra:...}` as in a trial: one context serves every arm
        return [copy.deepcopy(r) if r is not None else resolve(a.config) for a, r in zip(plan.arms, held, strict=True)]


def _app_config_dirs(plan: Plan, cwd: str) -> list[str]:
    """An app task's own config dir (hashed with ablate's, so `ablate verdict` reports later edits)."""
    return config_dirs(plan.control.config.get("task") or {}, cwd)


def _app_notes(plan: Plan) -> dict[str, Any]:
    """An app's keys resolved only in the trial (``trial_resolved``) and its own ``hydra.mode`` (``app_mode``)."""
    later = sorted({f"{APP_NODE}.{k}" for a in plan.arms for k in (a.config.get("task") or {}).get("trial_resolved")
                    or []})
    mode = ((plan.control.config.get("task") or {}).get("app_hydra") or {}).get("mode")
    dependent = plan_dependent(plan.arms)  # of those, the keys that depend on an arm's change: the verdict proves them
    return {**({"trial_resolved": later} if later else {}), **({"app_mode": mode} if mode else {}),
            **({"trial_dependent": dependent} if dependent else {})}


def _per_trial_keys(plan: Plan) -> set[str]:
    """Config keys that differ per trial by design: ``${hydra:...}`` readers (in any arm: a treatment's config
    group may bring one the control lacks), an app's seed key."""
    keys: set[str] = set()
    for arm in plan.arms:
        cfg = arm.config
        keys |= per_trial_keys(cfg)
        params = app_params(cfg)
        if params is not None:
            keys |= {f"{APP_NODE}.{k}" for k in per_trial_keys(dict(params))}
            seed_key = (cfg.get("task") or {}).get("seed_key", "seed")
            if seed_key:
                keys.add(f"{APP_NODE}.{seed_key}")
    return keys


def create(cfg: Mapping[str, Any], *, sweep_dir: str | os.PathLike[str], variable_name: str | None,
           available_variables: list[str] | None = None, compose: Composer | None = None,
           cwd: str | os.PathLike[str] | None = None, out: Callable[[str], None] = print,
           config_dirs: list[str] | None = None, choices: Mapping[str, Any] | None = None,
           prepared: tuple[Plan, Options] | None = None, command: Mapping[str, Any] | None = None
           ) -> SweepDir | None:
    """Plan and pin an ablation and write its sweep dir (``ablation.yaml`` + code snapshot); run nothing.

    Parameters
    ----------
    cfg : mapping
        The composed config as a plain container (interpolations unresolved).
    sweep_dir : path-like
        Where to create the sweep dir (made unique with a ``_1`` ... suffix if taken).
    variable_name : str or None
        The chosen ``variable`` option (for messages and the default sweep-dir name).
    available_variables : list of str, optional
        Options of the ``variable`` group, listed when none is chosen.
    compose : callable, optional
        ``compose(override) -> config`` for config-group variables.
    cwd : path-like, optional
        The project directory (default: the current directory).
    out : callable
        Where to print the plan of a dry run (the CLI passes ``print``).
    config_dirs : list of str, optional
        The project's config dirs; their files are hashed so ``ablate verdict`` can report drift.
    choices : mapping, optional
        The chosen option of each config group (names the control of a group variable).
    prepared : (Plan, Options), optional
        An already derived plan (a suite, :func:`ablate.orchestrate.suite.prepare_suite`); ``cfg`` is then not
        planned again.
    command : mapping, optional
        The command line it was planned from (:func:`ablate.plan.overrides.command_record`), recorded in the plan
        (verdict.md's "Next:" command).

    Returns
    -------
    SweepDir or None
        The new sweep dir, or None for ``dry_run`` (the plan is printed instead).

    Raises
    ------
    UserError
        Invalid input, a dirty tree, unpinnable data: nothing is created.
    """
    cwd = str(Path(cwd or os.getcwd()).absolute())
    plan, opts = prepared or prepare(cfg, variable_name=variable_name, available_variables=available_variables,
                                     compose=compose, choices=choices, cwd=cwd)
    launcher = get_launcher(opts.launcher)
    data_paths = _data_paths(plan)
    tune = _tune(cfg, plan, opts)
    if opts.dry_run:
        # Cheap checks only, each shown: the task's function (parsed, not imported), the data paths
        # (present; DVC hashes them when the run starts, so no DVC repo is opened here), the commit.
        _check_task(plan, cwd)
        for path in data_paths:
            if not (Path(cwd) / path).exists():
                raise pins_mod.missing_data(path, cwd)
        code = pins_mod.pin_code(cwd, allow_dirty=True)
        _refuse_untracked_task(plan, cwd, code)
        out(_describe(plan))
        if tune is not None:  # what is tuned, and the trial count: tuning + evaluation
            for line in describe_tuning(tune.record(plan.seeds, [a.name for a in plan.arms]), len(plan.arms)):
                out(line)
        for line in get_form(form_of(plan.control.config.get("task") or {})).dry_run_lines(plan, cwd):
            out(line)
        if opts.sequential == "group":
            out(sequential_plan_line(opts.looks, len(plan.treatments), opts.alpha, opts.effect, opts.futility))
        out(f"  launcher: {launcher.describe()}")
        dirty = ""
        if code["dirty"]:
            dirty = f" (dirty: {', '.join(code['dirty_files'][:5])}"
            dirty += ("; recorded, allow_dirty=true)" if opts.allow_dirty
                      else "; the run will refuse: commit, or allow_dirty=true)")
        out(f"  code: commit {code['commit'][:12]}{dirty}")
        if code.get("untracked_files"):
            out(f"  untracked: {pins_mod.untracked_summary(code['untracked_files'], code.get('untracked_count'))} "
                "(git does not track them: outside the code snapshot, so no trial sees them)")

        tree, unpinned = ignored.find(plan.control.config.get("task") or {}, cwd, code["root"],
                                      outputs=[Path(sweep_dir).absolute()] if str(sweep_dir).strip() else [])
        if unpinned:
            out("  " + ignored.warning(unpinned, tree).removeprefix("ablate: "))
        for path in data_paths:
            out(f"  data: {path} (present; hashed and checked against DVC when the run starts)")
        out("dry run: nothing launched")
        return None
    # Check everything that can fail on the user's input before creating the sweep dir.
    _check_task(plan, cwd)
    if not str(sweep_dir).strip():
        raise ConfigError("is empty", where="hydra.sweep.dir",
                          fix="give a directory, e.g. `hydra.sweep.dir=outputs/run1`")
    launcher.check(opts.record())
    code = pins_mod.pin_code(cwd, allow_dirty=opts.allow_dirty)
    _refuse_untracked_task(plan, cwd, code)
    data = pins_mod.pin_data(data_paths, cwd)
    target = Path(sweep_dir)
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{target} exists and is a file", where="hydra.sweep.dir",
                          fix="give a directory path, e.g. `hydra.sweep.dir=outputs/run1`")
    sd, reused = SweepDir.claim(sweep_dir, opts.sweep_dir_mode)
    if reused:
        _log(f"ablate: {sd.root} was left half-created by an ablate process killed before it wrote the plan; "
             "its code snapshot was removed and this ablation writes there")
    if sd.root.name != target.name:
        _log(f"ablate: {target} already exists; this ablation writes to {sd.root} (nothing is overwritten)")
    _warn_if_tracked(sd, code)

    tree, unpinned = ignored.find(plan.control.config.get("task") or {}, cwd, code["root"], outputs=[sd.root])
    if unpinned:
        code["ignored_files"] = unpinned
        _log(ignored.warning(unpinned, tree))
    code = pins_mod.snapshot_code(code, sd, data_paths)
    env = pins_mod.capture_environment()
    pins = {"code": code, "data": data, "environment": env,
            "config_files": hash_config_files([*(config_dirs or []), *_app_config_dirs(plan, cwd)])}
    record = plan_record(plan, opts, pins, cwd=cwd, command=command, tune=tune)
    write_atomic(sd.plan_file, dump_yaml(record), durable=True)
    sd.finish_creation()
    _log(f"ablate: sweep dir {sd.root}")
    _log(_describe(plan))
    return sd


def _tune(cfg: Mapping[str, Any], plan: Plan, opts: Options) -> Tune | None:
    """The ``tune:`` declaration, validated against the plan (:func:`ablate.plan.tuning.parse_tune`); designs it
    does not combine with are refused.

    Raises
    ------
    ConfigError
        An invalid declaration, or one combined with ``sequential=group`` or curve verdicts (the transfer check
        refuses ``tune`` in :func:`ablate.orchestrate.transfer.parse_scale`).
    """
    changed = sorted({k for a in plan.arms for k in a.changes}) or [plan.variable.key]
    tune = parse_tune(cfg.get("tune"), plan.seeds, plan.control.config, changed)
    if tune is None:
        return None
    if opts.sequential == "group":
        raise ConfigError("cannot run in looks (sequential=group) while tuning: a look would judge arms whose "
                          "choice of setting is not made yet", where="tune",
                          fix="drop `sequential=group` (or `tune`), then run again")
    if opts.curve is not None:
        raise ConfigError("cannot compare curves (curve.enabled=true) of a tuned ablation yet: a curve verdict of "
                          "each arm's chosen setting is not built", where="tune",
                          fix="drop `curve.enabled=true` (the verdict judges the chosen settings' final values), "
                              "or drop `tune`, then run again")
    return tune


#: Effects, in SDs of one seed's metric, the dry run of ``sequential=group`` prints the expected trials for.
PLAN_EFFECTS = (0.0, 0.5, 1.0)


def sequential_plan_line(looks: list[int], n_treatments: int, alpha: float, effect: float | None = None,
                         futility: float = 0.1) -> str:
    """The dry run's planning line for ``sequential=group`` (issue 39 item 3): expected trials under no effect and
    under 0.5 and 1 SD effects (every treatment alike), beside the fixed-N design at the last look.

    Parameters
    ----------
    looks : list of int
        Seeds per arm at each look.
    n_treatments : int
        Treatments compared with the control (α/m each).
    alpha : float
        Family-wise level.
    effect, futility : float
        The planned effect (``effect=``) and γ: the simulation stops treatments for futility as the verdict does, and
        the planned effect is one of the effects shown. None: no futility stop.

    Returns
    -------
    str
        ``  sequential: looks at N = 5, 10, 15, 20; expected trials ... (simulation: ...)``.
    """
    from ablate.stats.sequential import expected_trials  # noqa: PLC0415  # lazy: numpy and scipy off the plain dry run

    effects = sorted({*PLAN_EFFECTS, *([effect] if effect is not None else [])})
    res = expected_trials(looks, effects, n_treatments=n_treatments, alpha=alpha, paths=4000, planned_effect=effect,
                          futility=futility)
    cells = ", ".join(f"{'no effect' if r.effect == 0 else f'{r.effect:g} SD'} {r.trials:.0f} "
                      f"({r.seeds_per_treatment:.1f} seeds per treatment)" for r in res)
    return (f"  sequential: looks at N = {', '.join(map(str, looks))}; expected trials {cells}; fixed N = "
            f"{looks[-1]}: {res[0].fixed_trials} (a simulation of Welch's test on normal seeds, 4,000 seeded paths, "
            "every treatment with the same effect in SDs of one seed's metric"
            + (f"; futility stops at conditional power < {futility:g} under {effect:g} SD" if effect is not None
               else "")
            + "; docs/verdict.md, Sequential seeds)")


def _describe(plan: Plan) -> str:
    return describe_suite(plan) if isinstance(plan, SuitePlan) else describe(plan)


def start(cfg: Mapping[str, Any], *, out: Callable[[str], None] = print, plots_later: bool = False,
          **kwargs: Any) -> SweepDir | None:
    """Plan, pin and run an ablation (:func:`create`, then :func:`execute`, which ``plots_later`` is passed
    to); returns its sweep dir (None for ``dry_run``).

    Raises
    ------
    UserError
        Invalid input (nothing is created or launched).
    AblationFailed
        The ablation was aborted (``on_failure=abort``).
    """
    with early_parents():  # one started while planning (LocalLauncher.start_early) and not launched ends here
        sd = create(cfg, out=out, **kwargs)
        if sd is not None:
            execute(sd, out=out, detach=not load_plan(sd)["options"].get("wait", True), plots_later=plots_later)
    return sd


def _warn_if_tracked(sd: SweepDir, code: Mapping[str, Any]) -> None:
    """Warn when the sweep dir is inside the git tree and not ignored: the next ablation would find
    the tree dirty (untracked files) and refuse to start."""
    root = Path(code["root"]).resolve()
    try:
        sd.root.resolve().relative_to(root)
    except ValueError:
        return
    proc = subprocess.run(["git", "check-ignore", "-q", str(sd.root)], cwd=root, capture_output=True, check=False)
    if proc.returncode == 1:
        rel = sd.root.resolve().relative_to(root)
        _log(f"ablate: warning: the sweep dir {rel} is inside the git tree and not ignored; the next ablation "
             f"would refuse the dirty tree. Add `{rel.parts[0]}/` to .gitignore")


def _check_task(plan: Plan, cwd: str) -> None:
    get_form(form_of(plan.control.config.get("task") or {})).check(plan, cwd)


def _refuse_untracked_task(plan: Plan, cwd: str, code: Mapping[str, Any]) -> None:
    """Refuse a task whose own file git does not track: the code snapshot lacks it, so no trial could start."""
    found = pins_mod.untracked_task_file(plan.control.config.get("task") or {}, cwd, code)
    if found:
        setting, rel = found
        raise PinError(f"{rel} is not tracked by git, so the code snapshot the trials run from lacks it",
                       where=setting, fix=f"`git add {rel} && git commit`, then run again")


def _data_paths(plan: Plan) -> list[str]:
    task = plan.control.config.get("task") or {}
    data = task.get("data") or []
    if isinstance(data, str):
        return [data]
    if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
        raise ConfigError(f"must be a list of paths, got {data!r}", where="task.data",
                          fix="e.g. `data: [data/digits.npz]` in conf/task/<name>.yaml")
    return list(data)


def pending_trials(sd: SweepDir, plan: Mapping[str, Any], *, retry_failed: bool = False,
                   seeds: list[int] | None = None, arms: list[str] | None = None,
                   resubmit: bool = False, rerun_pin_mismatch: bool = False) -> list[TrialRef]:
    """Trials that still have to run: no result yet, interrupted, (with ``retry_failed``) failed
    with attempts left, (with ``resubmit``) stopped from outside: killed (cancelled, node failure,
    preempted past its requeues, OOM) or timed out, and (with ``rerun_pin_mismatch``, once the pins
    were checked again) trials that refused to run because code or data differed from the pins.
    Outputs of interrupted or re-run attempts are moved to ``attempts/<n>/``.

    Decided with no trial process of the sweep dir running (:func:`ablate.record.trial_lock.quiet`): one left by an
    ablate process that died is waited for (a trial that finishes meanwhile counts as finished), so none writes
    into a trial dir after its outputs were moved aside for a re-run.

    Raises
    ------
    SweepDirError
        When such trial processes still run after :data:`ablate.record.trial_lock.STRAY_WAIT_S` seconds."""
    with trial_lock.quiet(sd.root, log=_log):  # no trial process of the sweep dir runs while this decides
        return _pending(sd, plan, retry_failed=retry_failed, seeds=seeds, arms=arms, resubmit=resubmit,
                        rerun_pin_mismatch=rerun_pin_mismatch)


def _pending(sd: SweepDir, plan: Mapping[str, Any], *, retry_failed: bool, seeds: list[int] | None,
             arms: list[str] | None, resubmit: bool, rerun_pin_mismatch: bool) -> list[TrialRef]:
    """:func:`pending_trials` while the sweep dir's trial lock is held."""
    opts = plan.get("options", {})
    max_attempts = 1 + int(opts.get("max_retries", 0))
    todo: list[TrialRef] = []
    for seed in seeds if seeds is not None else plan["seeds"]:
        for arm in plan["arms"]:
            name = arm["name"]
            if arms is not None and name not in arms:
                continue
            status, rec = trial_state(sd, name, seed)
            if status == "ok":
                continue
            if status in ("pending",):
                todo.append(TrialRef(name, seed, 1))
            elif status == "running" or status == "interrupted":
                n_prev = _attempts_so_far(sd, name, seed)
                sd.move_aside(name, seed)
                todo.append(TrialRef(name, seed, n_prev + 1))
            elif rec is not None and ((retry_failed and int(rec.get("attempt", 1)) < max_attempts
                                       and status in ("failed", "diverged", "killed", "timeout"))
                                      or (resubmit and status in ("killed", "timeout"))
                                      or (rerun_pin_mismatch and status == "pin_mismatch")):
                attempt = int(rec.get("attempt", 1)) + 1
                sd.move_aside(name, seed)
                todo.append(TrialRef(name, seed, attempt))
    return todo


def _check_pins_still_hold(sd: SweepDir, plan: Mapping[str, Any]) -> None:
    """Before launching more trials (a resume, a later look), check the data pins still hold here; then drop a
    read-only copy of the data in the code snapshot that a trial changed (as root, whom modes do not stop), so the
    next trial places it again from the project's, just checked.

    Raises
    ------
    PinError
        Naming the data that changed and how to restore it; nothing is launched.
    """
    pinned = (plan.get("pins") or {}).get("data") or {}
    if not pinned:
        return
    problems = pins_mod.mismatches({"data": pinned}, {"data": pins_mod.data_seen(plan)})
    if problems:
        raise PinError("the data no longer matches the pins recorded at launch, so no further trial may run: "
                       + "; ".join(problems), where="task.data",
                       fix="restore it with the command above, then `ablate resume` again; finished trials are kept")
    root = pins_mod.trial_code_root(sd, plan)
    if root is None:
        return
    for rel, seen in pins_mod.data_seen(plan, root).items():
        copy = root / rel
        if seen.get("content") == (pinned.get(rel) or {}).get("content") or copy.is_symlink() or not copy.exists():
            continue
        shutil.rmtree(copy) if copy.is_dir() else copy.unlink()
        _log(f"ablate: the trials' read-only copy of {rel} (in the code snapshot) was changed by a trial; the next "
             "trial copies it again from the project's, which matches the pin")


def _check_code_snapshot(sd: SweepDir, plan: Mapping[str, Any]) -> None:
    """Before launching trials, check the code snapshot trials import is the one pinned (its marker
    and its content digest), so a deleted or edited ``code/`` stops the launch instead of failing, or
    silently changing, every trial.

    Raises
    ------
    PinError
        Naming what differs and how to recover; nothing is launched.
    """
    code = (plan.get("pins") or {}).get("code") or {}
    if not code.get("commit"):
        return
    seen = pins_mod.code_seen(sd, plan, pins_mod.trial_code_root(sd, plan))
    problems = pins_mod.mismatches({"code": code}, {"code": seen})
    if problems:
        raise PinError("the code snapshot no longer matches the pins, so no trial may run: " + "; ".join(problems),
                       where=str(sd.code_dir),
                       fix="start the ablation again from the pinned commit (`git checkout "
                       f"{code['commit'][:12]}`); finished trials are kept")


def check_pins(sd: SweepDir, plan: Mapping[str, Any]) -> None:
    """The checks a resume makes before launching more trials: the code snapshot and the data still as pinned
    (``ablate extend`` makes them before it records anything).

    Raises
    ------
    PinError
        Naming what differs and how to recover.
    """
    _check_code_snapshot(sd, plan)
    _check_pins_still_hold(sd, plan)


def _attempts_so_far(sd: SweepDir, arm: str, seed: int) -> int:
    d = sd.trial(arm, seed).attempts
    n = len([p for p in d.iterdir() if p.is_dir()]) if d.is_dir() else 0
    return n + 1


def execute(sd: SweepDir, *, out: Callable[[str], None] = print, resubmit: bool = False,
            detach: bool = False, plots_later: bool = False) -> dict[str, Any] | None:
    """Run what is left of the ablation in ``sd``, then write results.csv and the verdict.

    Safe to repeat: completed trials are never run again; trials still queued or running in a
    scheduler (``launcher=slurm``) are waited for, never submitted twice; trials that were running
    when a previous orchestrator died are re-run (their partial outputs kept in ``attempts/``).

    Parameters
    ----------
    resubmit : bool
        Also re-run trials stopped from outside (status ``killed`` or ``timeout``), as a new attempt.
    detach : bool
        Submit what is left and return without waiting (``wait=false``; detachable launchers only).
    plots_later : bool
        True (``ablate -m``): return once verdict.json and verdict.md are written; the PNG plots are drawn
        after them by a detached process that holds the sweep dir's lock
        (:func:`ablate.judge.verdict.draw_plots_in_background`, as ``ablate verdict`` does), so other ablate
        commands on it wait for them. Drawn here all the same with a tracker (it logs the PNGs) and inside a
        DVC stage (``$DVC_STAGE``: DVC hashes the outputs as soon as the command exits).

    Returns
    -------
    dict or None
        The verdict (as written to verdict.json); None when detached.

    Raises
    ------
    SweepDirError
        When another ablate process holds the sweep dir.
    AblationFailed
        When ``on_failure=abort`` stopped the ablation, or the verdict is invalid (confounded).
    """
    # lazy: the verdict's numpy and ablate.stats, kept off the path from `ablate -m`'s start to the early warm
    # parent (issue 42); imported here, while it imports the task
    from ablate.judge.verdict import draw_plots_in_background, preimport, write_verdict  # noqa: PLC0415  # lazy: as said above

    global CURRENT_SWEEP_DIR
    CURRENT_SWEEP_DIR = str(sd.root)
    with sd.locked():
        plan = load_plan(sd)
        if misplaced := misplaced_records(sd, plan):  # another trial's record in a trial's dir: re-run below
            _log(f"ablate: {misplaced_warning(sd, misplaced)}")
        opts = plan.get("options", {})
        launcher = get_launcher(opts.get("launcher", {"name": "local"}))
        on_failure = opts.get("on_failure", "report")
        with Progress(sd, plan, enabled=opts.get("progress", "auto") != "off") as progress:
            monitor = Monitor(on_event=progress.event, abort_on_failure=on_failure == "abort",
                              watch_flags=MODE_KEY not in _variable_keys(plan),
                              meanwhile=preimport)  # while a warm parent starts: the verdict's scipy & co
            if "ok" in progress.outcome.values():  # a resume: the task has returned the metric before
                monitor.metric_seen()
            ran = _launch_rounds(sd, plan, launcher, monitor, on_failure=on_failure, resubmit=resubmit,
                                 detach=detach)
            if ran is None:  # detached: the trials are the scheduler's now
                out(str(sd.root))
                return None
            launched, aborted = ran
        stopped = _stopped_from_outside(sd, plan) if not resubmit else 0
        rerun = f"`ablate resume {sd.root} --resubmit` re-runs them"
        if not launched and not aborted:
            _log("ablate: every trial already has a result; nothing to run (the verdict is rewritten)"
                 + (f"; {stopped} of them were killed or timed out: {rerun}" if stopped else ""))
        elif stopped and monitor.halted is None:
            _log(f"ablate: {stopped} trial(s) were killed or timed out (not the task's own failure): {rerun}")

        digest = TrialDigest()  # records the verdict's reuse key: `ablate verdict DIR` then reuses it
        plots = opts.get("plots", True) is not False  # `plots=false`: no PNGs (a plan before the option draws them)
        later = plots and plots_later and not opts.get("tracker") and not os.environ.get("DVC_STAGE")
        verdict = write_verdict(sd, None if plots else {"plots": False}, rows=write_results(sd, plan, digest),
                                digest=digest, plots_later=later)
        if opts.get("tracker"):
            log_after_ablation(sd, opts["tracker"], _log)
        if later:
            draw_plots_in_background(sd)  # the drawer holds the lock from here (released below is a no-op)
    _raise_what_the_monitor_stopped(sd, plan, monitor)
    out(str(sd.verdict_md))
    _raise_unless_complete(sd, monitor, aborted, verdict)
    return verdict


def _launch_rounds(sd: SweepDir, plan: Mapping[str, Any], launcher: Launcher, monitor: Monitor, *, on_failure: str,
                   resubmit: bool, detach: bool) -> tuple[int, bool] | None:
    """Launch the pending trials of each round (all of them, or each sequential look's), checking the snapshot and
    the pins before each; retried under ``on_failure=retry``.

    Returns
    -------
    tuple of (int, bool) or None
        The number of trials launched and whether the monitor stopped the ablation; None when ``detach`` submitted
        them to the scheduler instead (its job ids logged).
    """
    launched, aborted = 0, False
    for seeds, arms in _rounds(sd, plan):
        launcher.wait(sd, monitor)  # trials still in the scheduler finish there, never run twice
        _check_code_snapshot(sd, plan)  # a deleted or edited snapshot: refuse before any trial starts
        if (sd.root / TRIALS_DIR).exists():  # resuming, or a later look (a fresh run was just pinned)
            _check_pins_still_hold(sd, plan)  # data changed since launch: refuse, launch nothing
        todo = pending_trials(sd, plan, seeds=seeds, arms=arms, retry_failed=on_failure == "retry",
                              resubmit=resubmit, rerun_pin_mismatch=True)
        if detach and todo:
            jobs = launcher.submit(sd, todo)
            _log(f"ablate: {len(todo)} trial(s) submitted as job(s) {', '.join(jobs)}; "
                 f"`ablate status {sd.root}` shows progress, `ablate collect {sd.root}` the verdict")
            return None
        while todo and not monitor.should_stop():
            launched += len(todo)
            launcher.launch(sd, todo, monitor)
            if on_failure != "retry" or monitor.should_stop():
                break
            todo = pending_trials(sd, plan, seeds=seeds, arms=arms, retry_failed=True)
        if monitor.should_stop():
            aborted = True
            break
    return launched, aborted


def _raise_what_the_monitor_stopped(sd: SweepDir, plan: Mapping[str, Any], monitor: Monitor) -> None:
    """Raise :class:`ConfigError` when the monitor stopped the ablation for the task's own fault (a wrong contract,
    the first trials failing alike, every arm diverged, the determinism flags split); return otherwise."""
    if monitor.contract_error is not None:
        rec = monitor.contract_error
        if rec.get("metric_missing"):  # several trials, and none returned it: task.metric names the wrong key
            err = str(rec.get("error", ""))
            returned = err.split("it returned: ", 1)[-1].split(". Fix:", 1)[0] if "it returned: " in err else "?"
            raise ConfigError(f"no trial returned the metric {plan.get('metric')!r} (the first {MISSING_METRIC_STOP} "
                              f"to finish lacked it; {rec.get('arm')}/seed={rec.get('seed')} returned: {returned}), "
                              f"so the ablation stopped (the sweep dir {sd.root} keeps what ran)", where="task.metric",
                              fix="set `task.metric` to a key the task returns, then start the ablation again")
        where, what, fix = _trial_error_parts(str(rec.get("error", "")))
        raise ConfigError(
            f"trial {rec.get('arm')}/seed={rec.get('seed')} shows the task itself is wrong, so the ablation stopped "
            f"(the sweep dir {sd.root} keeps what ran): {what}",
            where=where or "task",
            fix=fix or "fix the task (the trial's log is in its dir), then start the ablation again",
        )
    if monitor.same_failure is not None:
        rec = monitor.same_failure
        arms = ", ".join(rec.get("arms_failed") or [])
        raise ConfigError(
            f"the first trials of {arms} all failed the same way before the task's first step, so the ablation "
            f"stopped instead of running every trial (the sweep dir {sd.root} keeps what ran): "
            f"{rec.get('failure_line')}", where="task",
            fix=f"read the end of the log (`ablate status {sd.root}` shows it; each trial's command.json has the exact "
            "command, to run by hand), fix the task config or the script, then start the ablation again",
        )
    if monitor.all_diverged is not None:
        _stop_all_diverged(sd, plan, monitor.all_diverged)
    if monitor.flags_split is not None:
        _stop_flags_split(sd, plan, monitor.flags_split)


def _raise_unless_complete(sd: SweepDir, monitor: Monitor, aborted: bool, verdict: Mapping[str, Any]) -> None:
    """Raise :class:`AblationFailed` when the launcher halted, ``on_failure=abort`` stopped the ablation, or the
    verdict is invalid (up to three of its reasons named); return otherwise."""
    if monitor.halted is not None:  # the launcher could not go on (its warm parent died): say what is left
        raise AblationFailed(f"{monitor.halted} (the verdict so far: {sd.verdict_md})")
    if aborted:
        raise AblationFailed(f"the ablation was aborted after a failed trial (on_failure=abort); "
                             f"see {sd.verdict_md} and `ablate status {sd.root}`")
    if verdict.get("invalid"):
        confounds = [f"confound: {f['message']}" for f in (verdict.get("confounds") or {}).get("findings", [])
                     if f.get("severity") == "invalid"]
        reasons = [r for r in verdict.get("invalid_reasons") or [] if not r.startswith("confounded")]
        reasons = (confounds + reasons)[:3]
        raise AblationFailed("the verdict is invalid: " + ("; ".join(reasons) or "see verdict.md")
                             + f" ({sd.verdict_md})")


def _variable_keys(plan: Mapping[str, Any]) -> set[str]:
    """The config keys the arms change (a suite's several variables included)."""
    return {k for arm in plan.get("arms") or [] for k in (arm.get("changes") or {})}


def _stop_flags_split(sd: SweepDir, plan: Mapping[str, Any], split: Mapping[str, Any]) -> None:
    """Raise the one line for an ablation whose arms ran with different torch determinism flags."""
    names = sorted({k for f in split.values() for k, v in f.items() if any(g.get(k) != v for g in split.values())})
    shown = "; ".join(f"{arm}: " + ", ".join(f"{k}={f.get(k)}" for k in names) for arm, f in split.items())
    key = ", ".join(sorted(_variable_keys(plan))) or "the variable"
    raise ConfigError(
        f"the arms ran with different torch determinism flags ({shown}), so the task switches them itself and "
        f"{key} changes the determinism mode as well as what it names: a confound in every trial, so the ablation "
        f"stopped after the first trials (the sweep dir {sd.root} keeps what ran)", where="variable.key",
        fix="to compare determinism modes, let ablate set them: `ablate -m variable=determinism` (a variable file "
        "with `key: determinism` and `values: [strict]`); to ablate something else, keep the task from calling "
        "torch.use_deterministic_algorithms / setting cudnn flags itself")


def _stop_all_diverged(sd: SweepDir, plan: Mapping[str, Any], rec: Mapping[str, Any]) -> None:
    """Raise the one line for an ablation stopped because every trial so far gave a NaN or inf metric."""
    arms = ", ".join(rec.get("arms_failed") or [])
    error = str(rec.get("error") or "")
    if NAN_FILL in error:  # strict determinism filled the memory the task never wrote with NaN
        where, cause = "determinism", f"; {NAN_FILL}"
        fix = ("initialise what the task allocates (torch.zeros instead of torch.empty), or set "
               "`torch.utils.deterministic.fill_uninitialized_memory = False` in the task, or run with "
               "`determinism=seeded`")
    else:
        where, cause = "task", ""
        fix = (f"read the trials' logs (`ablate status {sd.root}`): a learning rate too high, a loss that divides by "
               "zero, a metric computed on an empty set; fix the task, then start the ablation again")
    raise ConfigError(f"the metric {plan.get('metric')!r} was NaN or inf in the first trials of {arms} and no trial "
                      f"gave a number, so the ablation stopped instead of running every trial (the sweep dir {sd.root} "
                      f"keeps what ran){cause}", where=where, fix=fix)


def _stopped_from_outside(sd: SweepDir, plan: Mapping[str, Any]) -> int:
    """How many trials are recorded ``killed`` or ``timeout`` (what ``ablate resume --resubmit`` re-runs)."""
    return sum(trial_state(sd, a["name"], seed)[0] in ("killed", "timeout")
               for a in plan["arms"] for seed in plan["seeds"])


def _rounds(sd: SweepDir, plan: Mapping[str, Any]) -> Iterable[tuple[list[int], list[str] | None]]:
    """The launch rounds: all seeds at once, or one round per look in sequential mode (arms that
    stopped at an earlier look are left out of later rounds; a generator that decides each next round
    from the results of the previous one)."""
    opts = plan.get("options", {})
    if plan.get("tuning"):  # the tuning trials, then each arm's evaluation at its chosen setting
        return tuning_rounds(sd, plan)
    if opts.get("sequential", "off") != "group":
        return [(list(plan["seeds"]), None)]

    from ablate.judge.verdict import sequential_rounds  # noqa: PLC0415  # lazy: as in execute

    return sequential_rounds(sd, plan)


def _trial_error_parts(error: str) -> tuple[str | None, str, str | None]:
    """Split a trial's recorded error (a :class:`~ablate.errors.UserError` message: ```where`: what. Fix: fix.``)
    into its parts, so the stop that quotes it names one place and one fix, not a fix inside a fix."""
    where = None
    if m := re.match(r"`([^`]+)`: ", error):
        where, error = m.group(1), error[m.end():]
    what, sep, fix = error.partition(" Fix: ")
    return where, what.rstrip(". "), (fix.rstrip(". ") or None) if sep else None
