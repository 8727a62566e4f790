"""``ablate repro``: re-run one trial from its pins and check weak and strong reproducibility.

The re-run uses what the original trial used: the sweep dir's code snapshot (``<sweep>/code``), the
arm's config resolved for the same seed, the same determinism mode (read from the original
manifest), the data verified against the DVC pins, and the numeric environment variables the
original trial process recorded (thread counts, ``PYTHONHASHSEED``, ``CUBLAS_WORKSPACE_CONFIG`` ...).
It runs :func:`ablate.trials.trial.run_trial` in a fresh child process and writes into
``<sweep>/repro/<arm>/seed=<k>/<n>/``; the original trial is never touched.

Two guarantees are checked:

- **weak**: the final metrics are bitwise equal. Timing metrics (names ending in a time unit, such
  as ``samples_per_s`` or ``epoch_time``) measure the machine, not the model, and are shown but not
  compared.
- **strong** (``--strong``): every per-step fingerprint the task logged with
  :func:`ablate.log_step` (``steps.jsonl``: the loss as ``float.hex`` and a SHA-256 of the
  parameters) is equal; otherwise the first step at which the runs diverge is named.

Exit codes of the command: 0 the checked guarantee holds, 1 it does not, 2 bad input.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError, PinError, SweepDirError, UserError
from ablate.judge.confounds import manifest_fields, observed_only
from ablate.judge.seedcheck import ignored_seed
from ablate.judge.seedcheck import message as seed_message
from ablate.pin import pins
from ablate.record import timing
from ablate.record.results import collect, nothing_finished, trial_state
from ablate.record.sweepdir import SweepDir, TrialPaths, open_log, read_json, write_json
from ablate.trials import seeding
from ablate.trials.config import load_plan
from ablate.trials.launchers.local import tail
from ablate.trials.proctree import PARENT_ENV, die_with_parent
from ablate.trials.trial import run_trial

#: Metric names that measure time or speed (compared by neither guarantee): :mod:`ablate.record.timing`.
TIMING_METRIC = timing.TIMING_METRIC
#: Numeric variables the re-run does not copy from the original trial (the GPU to use is this machine's).
NOT_REPLAYED = frozenset({"CUDA_VISIBLE_DEVICES"})


@dataclass
class MetricCheck:
    """One final metric of the original trial and of the re-run.

    Attributes
    ----------
    name : str
    original, repro : float or None
        The values (None when that run did not report the metric).
    equal : bool
        Bitwise equal (NaN equals NaN).
    timing : bool
        A timing metric (see :data:`TIMING_METRIC`): shown, not compared.
    """

    name: str
    original: float | None
    repro: float | None
    equal: bool
    timing: bool


@dataclass
class Divergence:
    """The first per-step fingerprint at which the two runs differ.

    Attributes
    ----------
    index : int
        0-based position in ``steps.jsonl``.
    step : int
        The step number the task logged there (from the original run, or the re-run when the
        original stopped logging first).
    fields : dict
        Field name -> (original value, re-run value), for each field that differs; values are as
        logged (``float.hex`` strings, digests), None when absent.
    """

    index: int
    step: int
    fields: dict[str, tuple[Any, Any]]


@dataclass
class ReproReport:
    """What ``ablate repro`` found. ``exit_code`` is 0 when the checked guarantee holds, else 1.

    Attributes
    ----------
    arm, seed, mode : str, int, str
        The trial re-run and its determinism mode.
    original_dir, repro_dir : str
        The original trial's dir and the re-run's scratch dir.
    status : str
        The re-run's status (``ok``, ``failed`` ...); ``error`` its error, if any.
    metrics : list of MetricCheck
    weak : bool
        Every compared final metric is bitwise equal (and the re-run finished ``ok``).
    strong : bool or None
        Every per-step fingerprint is equal; None when not checked (no ``--strong``).
    steps : tuple of int
        Fingerprints logged by the original run and by the re-run.
    divergence : Divergence or None
    differences : list of str
        Fields that differ between the two runs' manifests (code, data, config, determinism,
        environment): the first place to look when a guarantee fails.
    path_only : list of str
        Fields that differ only by naming each run's own trial dir (an app's
        ``${hydra:runtime.output_dir}``): expected, listed apart as explained.
    """

    arm: str
    seed: int
    mode: str
    original_dir: str
    repro_dir: str
    status: str
    error: str | None = None
    metrics: list[MetricCheck] = field(default_factory=list)
    weak: bool = False
    strong: bool | None = None
    steps: tuple[int, int] = (0, 0)
    divergence: Divergence | None = None
    differences: list[str] = field(default_factory=list)
    path_only: list[str] = field(default_factory=list)
    seed_ignored: str | None = None

    @property
    def holds(self) -> bool:
        """The checked guarantee holds: weak, and strong too when it was checked."""
        return self.weak and self.strong is not False

    @property
    def exit_code(self) -> int:
        """The command's exit code: 0 when the checked guarantee holds, 1 when it does not."""
        return 0 if self.holds else 1

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (written to ``report.json``), with ``holds`` added."""
        d = asdict(self)
        d["holds"] = self.holds
        return d

    def format(self) -> str:
        """The human report printed by ``ablate repro``."""
        lines = [f"ablate repro: {self.arm}/seed={self.seed} (determinism={self.mode}) re-run into {self.repro_dir}"]
        if self.status != "ok":
            lines.append(f"  the re-run did not finish: status {self.status}: {self.error}")
        word = "holds" if self.weak else "DOES NOT HOLD"
        if self.weak and self.seed_ignored:
            word = "holds, but says nothing about seeding: every seed of this arm gave these metrics (below)"
        lines.append(f"weak reproducibility (final metrics bitwise equal): {word}")
        width = max((len(m.name) for m in self.metrics), default=0)
        for m in self.metrics:
            if m.timing:
                lines.append(f"  {m.name:<{width}}  {_fmt(m.original)} vs {_fmt(m.repro)}  (timing: not compared)")
            elif m.equal:
                lines.append(f"  {m.name:<{width}}  {_fmt(m.original)} == {_fmt(m.repro)}")
            else:
                lines.append(f"  {m.name:<{width}}  {_fmt(m.original)} != {_fmt(m.repro)}  "
                             f"(original {_hex(m.original)}, re-run {_hex(m.repro)})")
        if self.strong is not None:
            n_orig, n_new = self.steps
            if self.strong:
                lines.append(f"strong reproducibility (per-step fingerprints equal): holds ({n_orig} steps identical)")
            else:
                lines.append("strong reproducibility (per-step fingerprints equal): DOES NOT HOLD")
                d = self.divergence
                if d is not None:
                    same = f"; the {d.index} before it are identical" if d.index else ""
                    lines.append(f"  first divergence at step {d.step} (fingerprint {d.index + 1} of {n_orig} "
                                 f"logged by the original, {n_new} by the re-run{same})")
                    for name, (a, b) in d.fields.items():
                        lines.append(f"    {name}: {_fmt_field(name, a)} vs {_fmt_field(name, b)}")
        if self.differences:
            lines.append("the two runs' manifests differ in:")
            lines.extend(f"  {d}" for d in self.differences)
        if self.path_only:
            lines.append(f"paths only ({len(self.path_only)}; expected: each run writes into its own trial dir, the "
                         "same once that dir is written <trial dir>):")
            lines.extend(f"  {d}" for d in self.path_only)
        if self.seed_ignored:
            lines.append(f"note: {self.seed_ignored}")
        if not self.holds and self.mode == "off":
            lines.append("note: determinism=off seeds nothing, so no guarantee is expected; use seeded or strict")
        elif self.strong is False and self.mode != "strict":
            lines.append(f"note: determinism={self.mode} promises the same final metrics at best; bitwise identical "
                         "steps need determinism=strict")
        return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "(absent)" if v is None else repr(v)


def _hex(v: float | None) -> str:
    return "(absent)" if v is None else float(v).hex()


def _fmt_field(name: str, v: Any) -> str:
    if v is None:
        return "(absent)"
    if isinstance(v, str) and name != "params":
        try:
            return f"{v} ({float.fromhex(v)!r})"
        except ValueError:
            return v
    return str(v)[:16] + "..." if name == "params" else str(v)


# -- pure comparisons ------------------------------------------------------------------------------
is_timing_metric = timing.is_timing_metric  # re-exported: repro's callers and tests name it here


def _num(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, str):  # NaN and inf are stored as strings in result.json
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(v, math.nan)
    return float(v)


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) and math.isnan(b):
        return True
    return a.hex() == b.hex()  # bitwise: -0.0 != 0.0


def compare_metrics(original: Mapping[str, Any], repro: Mapping[str, Any],
                    timing_metrics: Sequence[str] = ()) -> list[MetricCheck]:
    """Compare two runs' final metrics, bitwise (timing metrics are shown, not compared).

    Parameters
    ----------
    original, repro : mapping
        Metric name -> value (floats, or the strings ``"nan"``, ``"inf"``, ``"-inf"``).
    timing_metrics : sequence of str
        More timing metrics, named by the task.

    Returns
    -------
    list of MetricCheck
        One per metric name in either run, in the original's order, then the re-run's extras.
    """
    names = list(dict.fromkeys([*original, *repro]))
    out = []
    for n in names:
        a, b = _num(original.get(n)), _num(repro.get(n))
        out.append(MetricCheck(name=n, original=a, repro=b, equal=_same(a, b),
                               timing=is_timing_metric(n, timing_metrics)))
    return out


def read_steps(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The fingerprints in a ``steps.jsonl`` (empty when the file does not exist).

    Parameters
    ----------
    path : path-like
        A trial's (or re-run's) ``steps.jsonl``, written by :func:`ablate.log_step`.

    Returns
    -------
    list of dict
        One record per logged step, in order: ``step``, ``loss`` (``float.hex``), ``params`` (SHA-256) ...
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise SweepDirError(f"is not valid JSON lines ({exc.msg}, line {exc.lineno})", where=str(path),
                            fix="the per-step log was damaged; re-run the trial (`ablate resume` after removing it)"
                            ) from None


def first_divergence(original: Sequence[Mapping[str, Any]], repro: Sequence[Mapping[str, Any]]) -> Divergence | None:
    """The first fingerprint at which two runs differ, or None when they are identical.

    Parameters
    ----------
    original, repro : sequence of mapping
        Per-step records as written by :func:`ablate.log_step` (``step``, ``loss``, ``params`` ...).

    Returns
    -------
    Divergence or None
        When one run logged more steps than the other and they agree up to the shorter one, the
        divergence is at the first step only one of them logged.
    """
    for i in range(max(len(original), len(repro))):
        a = original[i] if i < len(original) else None
        b = repro[i] if i < len(repro) else None
        if a is not None and b is not None and a == b:
            continue
        keys = list(dict.fromkeys([*(a or {}), *(b or {})]))
        fields = {k: ((a or {}).get(k), (b or {}).get(k)) for k in keys if (a or {}).get(k) != (b or {}).get(k)}
        step = (a or b or {}).get("step", i)
        return Divergence(index=i, step=int(step), fields=fields)
    return None


def manifest_differences(original: Mapping[str, Any], repro: Mapping[str, Any],
                         dirs: tuple[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Fields that differ between two manifests of the same trial, as ``kind `key`: a -> b`` lines.

    Parameters
    ----------
    original, repro : mapping
        The two runs' ``manifest.json`` contents; the fields compared are those of the confound
        check (:func:`ablate.judge.confounds.manifest_fields`). An app's config is what the app saw
        (recorded from its own process). As there, an imported distribution (or what torch reports of
        itself) counts only where both runs recorded it (a warm fork also holds what its parent imported for
        ablate's own use; :func:`ablate.judge.confounds.observed_only`).
    dirs : (str, str), optional
        The original trial's dir and the re-run's: a value that differs only by naming its own run's
        dir (``${hydra:runtime.output_dir}``, the working dir) is a path-only difference.

    Returns
    -------
    differences, path_only : list of str, list of str
        Real differences, and the path-only ones (expected: each run writes into its own dir).
    """
    a, b = manifest_fields(original), manifest_fields(repro)
    out, paths = [], []
    for k in sorted(set(a) | set(b)):
        if observed_only(k) and (k not in a or k not in b):
            continue  # a distribution only one run imported says nothing (a warm fork inherits its parent's), nor
            # torch's flags where only one run's process held torch; as in the confound check, only a value both
            # runs recorded and that differs is a difference
        if a.get(k) != b.get(k):
            kind, key = k.split(":", 1)
            line = f"{kind} `{key}`: {_short(a.get(k))} (original) -> {_short(b.get(k))} (re-run)"
            (paths if dirs and _path_only(a.get(k), b.get(k), dirs) else out).append(line)
    return out, paths


def _path_only(a: Any, b: Any, dirs: tuple[str, str]) -> bool:
    """``a`` and ``b`` are the same once each run's own dir is written as ``<trial dir>``."""
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    return dirs[0] in a and dirs[1] in b and a.replace(dirs[0], "<trial dir>") == b.replace(dirs[1], "<trial dir>")


def hash_seed_difference(original: Mapping[str, Any], repro: Mapping[str, Any]) -> str | None:
    """A line naming differing string hashing (``determinism.hash_seed``) of two manifests, or None.

    A ``random`` hash seed on either side counts as a difference: two such processes hash strings
    differently, so the order of sets of strings (and what a task computes from it) can change.
    """
    a = (original.get("determinism") or {}).get("hash_seed")
    b = (repro.get("determinism") or {}).get("hash_seed")
    if a is None or b is None or (a == b and a != "random"):
        return None
    why = (" (the original ran under launcher=inline without PYTHONHASHSEED, which a running process cannot "
           "take on)" if a == "random" else "")
    return (f"string hashing (determinism.hash_seed): {a} (original) -> {b} (re-run){why}: the order of sets of "
            "strings can differ, and with it the metrics. Fix: run the ablation with launcher=local, or "
            "`PYTHONHASHSEED=0 ablate ...` under launcher=inline")


def _short(v: Any) -> str:
    s = "(absent)" if v is None else str(v)
    return s if len(s) <= 60 else s[:57] + "..."


# -- choosing the trial ----------------------------------------------------------------------------
def select_trial(sd: SweepDir, plan: Mapping[str, Any], spec: str | None) -> tuple[str, int]:
    """The trial to re-run: ``spec`` (``ARM/SEED`` or ``ARM/seed=SEED``), or the first completed
    control trial.

    Raises
    ------
    ConfigError
        Malformed ``spec``, unknown arm or seed (the valid ones listed), a trial that never
        completed (its status shown), or no completed control trial.
    """
    arms = [a["name"] for a in plan["arms"]]
    seeds = [int(s) for s in plan["seeds"]]
    seeds += [int(s) for s in (plan.get("tuning") or {}).get("eval_seeds") or []]  # a tuned ablation's evaluation
    empty = nothing_finished(sd, plan)
    if empty:  # nothing to re-run yet, whatever the trial asked for
        raise SweepDirError(f"{empty} in {sd.root}, so there is no trial to re-run", where="ablate repro",
                            fix=f"run them first with `ablate resume {sd.root}` (`ablate status {sd.root}` shows "
                            "progress)")
    if spec is None:
        for seed in seeds:
            if trial_state(sd, arms[0], seed)[0] == "ok":
                return arms[0], seed
        raise ConfigError(f"no {arms[0]} trial of this ablation completed, so there is none to re-run by default",
                          where="--trial", fix="name a completed trial, e.g. `--trial ARM/SEED`; "
                          f"`ablate status {sd.root}` lists them")
    arm, sep, seed_s = spec.rpartition("/")
    seed_s = seed_s.removeprefix("seed=")
    if not sep or not arm or not re.fullmatch(r"-?\d+", seed_s):
        raise ConfigError(f"{spec!r} is not ARM/SEED", where="--trial", fix=f"e.g. `--trial {arms[0]}/{seeds[0]}`")
    if arm not in arms:
        raise ConfigError(f"no arm named {arm!r} in this ablation", where="--trial",
                          fix=f"use one of: {', '.join(arms)}")
    seed = int(seed_s)
    if seed not in seeds:
        raise ConfigError(f"seed {seed} is not in this ablation's seed list", where="--trial",
                          fix=f"use one of: {', '.join(map(str, seeds))}")
    status, rec = trial_state(sd, arm, seed)
    if status != "ok":
        why = f": {str((rec or {}).get('error') or '').splitlines()[0][:200]}" if (rec or {}).get("error") else ""
        raise ConfigError(f"trial {arm}/seed={seed} never completed (status {status}{why}); only a completed "
                          "trial has final metrics to compare", where="--trial",
                          fix="pick a trial with status ok (`ablate status DIR`), or finish it with "
                          "`ablate resume DIR`")
    return arm, seed


# -- running ---------------------------------------------------------------------------------------
def replay_environment(manifest: Mapping[str, Any], mode: str, seed: int,
                       hash_seed: str | None = None) -> dict[str, str]:
    """The environment for the re-run's process: this process's, with the numeric variables replaced
    by those the original trial process recorded (``CUDA_VISIBLE_DEVICES`` excepted).

    Parameters
    ----------
    manifest : mapping
        The original trial's ``manifest.json`` (``environment.env`` holds its numeric variables).
    mode : {"off", "seeded", "strict"}
        The determinism mode of the re-run (its variables are set before the child's Python starts).
    seed : int
        The trial seed.
    hash_seed : str, optional
        ``PYTHONHASHSEED`` when the manifest recorded none (an inline trial): the ablation's
        (:func:`ablate.trials.seeding.ablation_hash_seed`), as every launcher that starts trial processes sets it.

    Returns
    -------
    dict
        The complete environment for the child process.
    """
    recorded = ((manifest.get("environment") or {}).get("env") or {})
    env = {k: v for k, v in os.environ.items() if k not in pins.NUMERIC_ENV_VARS or k in NOT_REPLAYED}
    env.update(seeding.environment_for(mode, seed))
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = str(hash_seed)
    env.update({k: str(v) for k, v in recorded.items() if k not in NOT_REPLAYED})
    effective = (manifest.get("determinism") or {}).get("hash_seed")
    if isinstance(effective, str | int) and str(effective).isdigit():
        # The hash seed the original process really ran under wins over its environment's variable: a trial
        # forked from a warm parent keeps the parent's (a running interpreter cannot take on another).
        env["PYTHONHASHSEED"] = str(effective)
        if ((manifest.get("warm") or {}).get("app") or {}).get("in_process"):
            env[seeding.APP_HASH_SEED_ENV] = str(effective)  # re-run app: the fork's hash seed
    env["PYTHONUNBUFFERED"] = "1"
    env[PARENT_ENV] = str(os.getpid())
    return env


def _run_child(sd: SweepDir, plan: Mapping[str, Any], arm: str, seed: int, tp: TrialPaths, mode: str,
               manifest: Mapping[str, Any]) -> None:
    opts = plan.get("options") or {}
    timeout_s = float(opts["timeout_min"]) * 60 if opts.get("timeout_min") else None
    cwd = (plan.get("project") or {}).get("cwd") or os.getcwd()
    cmd = [sys.executable, "-m", "ablate.orchestrate.repro", str(sd.root), arm, str(seed), str(tp.dir), mode]

    with os.fdopen(open_log(tp.stdout), "ab") as out, os.fdopen(open_log(tp.stderr), "ab") as err:
        env = replay_environment(manifest, mode, seed, seeding.ablation_hash_seed(plan))
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            write_json(tp.result, {"arm": arm, "seed": seed, "status": "timeout", "metrics": {},
                                   "error": f"the re-run exceeded timeout_min={opts.get('timeout_min')}"})
        except BaseException:  # Ctrl-C: take the child's whole process group down with us
            _kill_group(proc)
            raise


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def reproduce(sweep_dir: str | os.PathLike[str], *, trial: str | None = None, strong: bool = False) -> ReproReport:
    """Re-run one trial of an ablation from its pins and compare it with the original.

    Parameters
    ----------
    sweep_dir : path-like
        The ablation's sweep dir.
    trial : str, optional
        ``ARM/SEED`` (e.g. ``control/0`` or ``lr=0.1/seed=3``); default the first completed control trial.
    strong : bool
        Also compare the per-step fingerprints (``steps.jsonl``) and name the first divergent step.

    Returns
    -------
    ReproReport
        Also written to ``report.json`` in the re-run's dir (``repro/<arm>/seed=<k>/<n>/``).

    Raises
    ------
    SweepDirError
        ``sweep_dir`` is not a sweep dir.
    ConfigError
        Unknown arm or seed, a trial that never completed, or (``strong``) a trial that logged no
        steps: the task must call :func:`ablate.log_step`.
    PinError
        The pinned data changed since the ablation ran, so the trial cannot be re-run from its pins.
    """
    sd = SweepDir.open(sweep_dir)
    plan = load_plan(sd)
    arm, seed = select_trial(sd, plan, trial)
    orig = sd.trial(arm, seed)
    try:
        original_result = read_json(orig.result)
        original_manifest = read_json(orig.manifest)
    except FileNotFoundError as exc:
        raise ConfigError(f"trial {arm}/seed={seed} has no {Path(exc.filename).name}, so what it ran is unknown",
                          where="--trial", fix="pick another trial") from None
    except json.JSONDecodeError as exc:
        raise SweepDirError(f"a record of trial {arm}/seed={seed} is not valid JSON ({exc.msg}, line {exc.lineno})",
                            where=str(orig.dir), fix="pick another trial with --trial ARM/SEED") from None
    original_steps = read_steps(orig.steps)
    if strong and not original_steps:
        raise ConfigError(
            f"trial {arm}/seed={seed} logged no per-step fingerprints ({orig.steps.name} is missing or empty), so "
            "there is nothing to compare step by step",
            where="--strong",
            fix=("make the task call ablate.log_step(step, loss=loss.item(), params=model) once per step or epoch, "
                 "re-run the ablation, then `ablate repro DIR --strong`" if not _script_task(plan) else
                 "a script logs per-step fingerprints only if it imports ablate and calls ablate.log_step(step, "
                 "loss=...) itself; a script run as it is can be checked without --strong")
            + "; without --strong the final metrics are compared",
        )
    mode = seeding.check_mode((original_manifest.get("determinism") or {}).get("mode", "seeded"))
    tp = sd.new_repro(arm, seed)
    _run_child(sd, plan, arm, seed, tp, mode, original_manifest)
    try:
        new = read_json(tp.result)
    except (FileNotFoundError, json.JSONDecodeError):
        new = {"status": "failed", "metrics": {},
               "error": f"the re-run's process left no result; log tail:\n{tail(tp.stderr) or tail(tp.stdout)}"}
    if new.get("status") == "pin_mismatch":
        raise PinError(f"trial {arm}/seed={seed} cannot be re-run from its pins: {new.get('error')}",
                       where="data", fix="restore the pinned data (`dvc checkout`), then run `ablate repro` again")
    try:
        new_manifest = read_json(tp.manifest)
    except FileNotFoundError:
        new_manifest = {}
    metrics = compare_metrics(original_result.get("metrics") or {}, new.get("metrics") or {},
                              timing.task_timing_metrics(plan))
    compared = [m for m in metrics if not m.timing]
    if not compared and new.get("status") == "ok":
        raise UserError(f"trial {arm}/seed={seed} reported only timing metrics "
                        f"({', '.join(m.name for m in metrics) or 'none'}), so there is no final metric to compare",
                        where="--trial", fix="make the task also return what it learned, e.g. val_loss")
    report = ReproReport(
        arm=arm, seed=seed, mode=mode, original_dir=str(orig.dir), repro_dir=str(tp.dir),
        status=str(new.get("status")), error=new.get("error"), metrics=metrics,
        weak=new.get("status") == "ok" and all(m.equal for m in compared),
    )
    if new_manifest:
        report.differences, report.path_only = manifest_differences(original_manifest, new_manifest,
                                                                    (str(orig.dir), str(tp.dir)))
    flagged = ignored_seed(plan, [r for r in collect(sd, plan) if r["arm"] == arm])
    if flagged:
        report.seed_ignored = seed_message(flagged, plan)
    cause = hash_seed_difference(original_manifest, new_manifest)
    if cause:
        report.differences.insert(0, cause)
    if strong:
        repro_steps = read_steps(tp.steps)
        report.steps = (len(original_steps), len(repro_steps))
        report.divergence = first_divergence(original_steps, repro_steps)
        report.strong = report.divergence is None
    write_json(tp.dir / "report.json", report.to_dict())
    return report


def _script_task(plan: Mapping[str, Any]) -> bool:
    task = (plan.get("task") or {})
    return bool(task.get("command") or task.get("app"))


def _child_main(argv: list[str]) -> int:
    """``python -m ablate.orchestrate.repro SWEEP_DIR ARM SEED OUT_DIR MODE``: the re-run's own process."""
    if len(argv) != 5:
        print("usage: python -m ablate.orchestrate.repro SWEEP_DIR ARM SEED OUT_DIR MODE", file=sys.stderr)
        return 2

    die_with_parent()
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]  # never import from the live tree
    sweep, arm, seed, out_dir, mode = argv
    rec = run_trial(Path(sweep), arm, int(seed), trial_dir=out_dir, determinism=mode)
    return 0 if rec.get("status") == "ok" else 1


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
