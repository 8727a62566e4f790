"""The verdict: statistics per treatment against control, confounds, verdict.json, verdict.md and plots.

Reads only the sweep dir (plan, trial records, manifests), so ``ablate verdict DIR`` can recompute it with
new options (alpha, margin, multiplicity, pairing) without touching a trial. The numbers come from
:mod:`ablate.stats`; the layout of verdict.md from :mod:`ablate.judge.report`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import platform
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, is_dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ablate import __version__
from ablate.errors import ConfigError, SweepDirError
from ablate.judge import prereg, trial_resolved, tuning
from ablate.judge.against import compare_sweeps
from ablate.judge.bottom_line import bottom_line
from ablate.judge.confounds import check, config_drift
from ablate.judge.curves import curves_verdict
from ablate.judge.curves_report import curve_plots
from ablate.judge.extension import combine_stages, extension_of, summary_line
from ablate.judge.options import VERDICT_OVERRIDES, VerdictOptions, resolve_options
from ablate.judge.plots import paired_plot, values_plot
from ablate.judge.report import render_markdown
from ablate.judge.seedcheck import ignored_seed, short_why
from ablate.judge.seedcheck import message as seed_message
from ablate.judge.suite import suite_confounds, suite_summary
from ablate.judge.table import build_table, write_forest, write_tables
from ablate.judge.unchanged import mark_unchanged, unchanged_arms
from ablate.plan.suite import families
from ablate.record.results import (
    collect,
    iter_manifests,
    misplaced_records,
    misplaced_warning,
    read_manifests,
    write_summary,
)
from ablate.record.sweepdir import (
    PLOTS_LOG,
    VERDICT_OPTIONS,
    SweepDir,
    digest_mismatch,
    read_json,
    write_atomic,
    write_json,
)
from ablate.record.verdict_key import combine, context, outputs_recorded, record
from ablate.stats import (
    Comparison,
    Pairing,
    adjust_comparisons,
    boundaries,
    compare,
    decide_batch,
    information_fraction,
    pair_by_seed,
    summarize,
)
from ablate.stats.binary import is_binary
from ablate.stats.core import BETTER, VERDICTS, WORSE
from ablate.stats.futility import futile, pooled_sd_rows
from ablate.stats.sequential import futility_bound, indicative_at_every_n, stop_factors, stops

if TYPE_CHECKING:
    from ablate.record.verdict_key import TrialDigest

#: Statuses of trials that have not finished (left out of the statistics, reported as pending).
UNFINISHED = ("pending", "running", "interrupted")
#: Seed for Dunnett's quasi-Monte-Carlo integration, so a recomputed verdict is identical.
VERDICT_RNG_SEED = 20240917

@dataclass
class ArmData:
    """One arm's finished trials: seed -> value (NaN for a failed trial), statuses, errors."""

    name: str
    label: str
    value: Any
    values: dict[int, float]
    statuses: Counter[str]
    pending: int
    errors: dict[int, str]


def arm_data(plan: Mapping[str, Any], rows: list[dict[str, Any]], metric: str) -> dict[str, ArmData]:
    """Group :func:`ablate.record.results.collect` rows by arm. A finished trial without a finite metric is failed."""
    out: dict[str, ArmData] = {}
    for a in plan["arms"]:
        out[a["name"]] = ArmData(a["name"], str(a.get("label", a["name"])), a.get("value"), {}, Counter(), 0, {})
    for r in rows:
        d = out[r["arm"]]
        status = str(r["status"])
        if status in UNFINISHED:
            d.pending += 1
            continue
        v = r.get(metric)
        ok = status == "ok" and isinstance(v, int | float) and math.isfinite(v)
        if status == "ok" and not ok:
            status = "failed"
        d.statuses[status] += 1
        d.values[int(r["seed"])] = float(v) if ok else math.nan  # type: ignore[arg-type]
        if not ok:
            d.errors[int(r["seed"])] = str(r.get("error") or f"no finite `{metric}` in the result")
    return out


# -- sequential mode ---------------------------------------------------------------------------------
def sequential_state(plan: Mapping[str, Any], data: Mapping[str, ArmData], opts: VerdictOptions
                     ) -> dict[str, dict[str, Any]]:
    """Replay the looks on the trials on disk: where each treatment stopped (or how far it got).

    Returns
    -------
    dict
        treatment -> ``{"look": index or None, "n": seeds per arm, "stopped": bool, "threshold": nominal p,
        "fractions": [...], "z": boundary z, "passed": [...]}``. ``look`` is the last complete look (None before
        the first); ``passed`` the looks whose crossing was indicative, so the treatment ran on
        (:func:`ablate.stats.sequential.stops`: only a firm better/worse, or equivalence, stops it).
    """
    seeds, looks = list(plan["seeds"]), opts.looks
    names = [a["name"] for a in plan["arms"]]
    control, treatments = data[names[0]], names[1:]
    m = max(1, len(treatments))
    planned = planned_look_levels(looks, opts.alpha / m)
    factors = stop_factors(looks)  # only a firm verdict stops an arm below FIRM_FROM seeds: α carried on
    goal = plan.get("goal", "maximize")
    shared, design = shared_randomness(plan)
    z_final = futility_bound(looks, opts.alpha / m) if opts.effect is not None else math.inf
    out: dict[str, dict[str, Any]] = {}
    for name in treatments:
        arm = data[name]
        passed: list[int] = []
        st: dict[str, Any] = {"look": None, "n": 0, "stopped": False, "threshold": None, "fractions": [], "z": None,
                              "passed": passed}
        fractions: list[float] = []
        for k, n_k in enumerate(looks):
            sk = seeds[:n_k]
            if any(s not in arm.values or s not in control.values for s in sk):
                break
            pr = pair_by_seed({s: arm.values[s] for s in sk}, {s: control.values[s] for s in sk},
                              pairing=opts.pairing, n_design=n_k, level=planned[k], shared_randomness=shared,
                              design=design)
            fin_t = [v for v in pr.treatment if not math.isnan(v)]
            fin_c = [v for v in pr.control if not math.isnan(v)]
            if pr.paired:
                n_t = n_c = sum(1 for x, y in zip(pr.treatment, pr.control, strict=True)
                                if not (math.isnan(x) or math.isnan(y)))
            else:
                n_t, n_c = len(fin_t), len(fin_c)
            last = k == len(looks) - 1
            fractions.append(1.0 if last else max(1e-6, information_fraction(n_t, n_c, looks[-1], paired=pr.paired)))
            fixed = [max(fractions[: i + 1]) for i in range(len(fractions))]
            b = boundaries(fixed, alpha=opts.alpha / m, stop_factor=factors[:k + 1])
            thr = max(b.nominal_p[-1], 1e-300)
            res = decide_batch(pr.treatment, pr.control, paired=pr.paired, alpha=opts.alpha, goal=goal,
                               margin=opts.margin, n_comparisons=m, p_threshold=thr)
            code, firm = _look_verdict(pr, opts, goal, m, thr, res)
            st = {"look": k, "n": n_k, "stopped": False, "threshold": b.nominal_p[-1], "fractions": fixed,
                  "z": b.z[-1], "passed": passed}
            skewed_stop = not last and code in (BETTER, WORSE) and not firm and not is_binary(
                np.asarray(pr.treatment, float), np.asarray(pr.control, float)) and bool(
                indicative_at_every_n(res, m)[0])
            if bool(stops(code, firm or skewed_stop)):
                st.update(stopped=True, skewed_stop=skewed_stop)
                break
            if opts.effect is not None and not last:  # non-binding futility: conditional power under the effect
                fut, cp = futile(res.pvalue, res.se, pooled_sd_rows(np.atleast_2d(pr.treatment),
                                                                    np.atleast_2d(pr.control)),
                                 fractions[-1], effect=opts.effect, z_final=z_final, threshold=opts.futility)
                st["conditional_power"] = float(cp[0]) if math.isfinite(cp[0]) else None
                if bool(fut[0]):
                    st.update(stopped=True, futile=True)
                    break
            if code in (BETTER, WORSE) and not last:  # crossed, indicative: runs to the next look
                passed.append(k)
        out[name] = st
    return out


def _look_verdict(pr: Any, opts: VerdictOptions, goal: str, m: int, thr: float, res: Any) -> tuple[int, bool]:
    """The verdict code and firm flag of one sequential look: those of ``res`` (:func:`ablate.stats.decide_batch`
    on the look's seeds), or, on a 0/1 metric, :func:`ablate.stats.compare`'s (the score test, firm only where
    Fisher's exact test also rejects), so that a look stops on the same firm answer the verdict then prints for the
    same seeds (issue 37)."""
    t, c = np.asarray(pr.treatment, float), np.asarray(pr.control, float)
    if is_binary(t, c):
        comp = compare(t, c, paired=pr.paired, alpha=opts.alpha, goal=goal, margin=opts.margin, n_comparisons=m,
                       p_threshold=thr, pi_interval=False)
        return VERDICTS.index(comp.verdict), bool(comp.firm)
    return int(res.verdict[0]), bool(res.firm[0])


def shared_randomness(plan: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether the design shares randomness across arms at the same seed, and why (for ``pairing=auto``).

    Parameters
    ----------
    plan : mapping
        The plan record (``ablation.yaml``): ``task`` and ``options.determinism`` (and arms that vary it).

    Returns
    -------
    (bool, str)
        True for a ``fn`` task whose every arm runs under ``determinism=seeded`` or ``strict``: ablate seeds
        python, numpy and torch from the trial seed before calling it, so one seed gives every arm the same
        initialisation and data order. False for ``determinism=off`` (nothing is seeded), and for a ``command``
        or ``app`` task: ablate passes it the seed but cannot see whether it seeds its generators with it
        (declare ``pairing=paired`` then). Fixed by the plan, before any outcome.
    """
    task = plan.get("task") or {}
    mode = (plan.get("options") or {}).get("determinism", "seeded")
    modes = {str((a.get("config") or {}).get("determinism", mode)) if "determinism" in (a.get("changes") or {})
             else str(mode) for a in plan.get("arms") or []} or {str(mode)}
    if "off" in modes or "False" in modes:
        return False, "determinism=off: nothing is seeded from the trial seed"
    if task.get("fn"):
        return True, f"a fn task under determinism={'/'.join(sorted(modes))}: ablate seeds python, numpy and torch " \
                     "from the trial seed before it runs"
    form = "a command task" if task.get("command") else "an app task" if task.get("app") else "no fn task"
    return False, f"{form}: ablate passes it the seed but cannot see whether it seeds initialisation and " \
                  "data order with it"


def planned_look_levels(looks: list[int], alpha: float) -> list[float]:
    """The nominal two-sided level of each planned look (fractions ``looks[k] / looks[-1]``, the firm-aware
    boundaries of :func:`ablate.stats.sequential.stop_factors`): fixed before the data, so ``pairing=auto`` may
    decide a look's pairing with it (:func:`ablate.stats.look_pairing`)."""
    return [max(p, 1e-12) for p in boundaries([n / looks[-1] for n in looks], alpha=alpha,
                                              stop_factor=stop_factors(looks)).nominal_p]


def sequential_rounds(sd: SweepDir, plan: Mapping[str, Any]) -> Iterator[tuple[list[int], list[str] | None]]:
    """Launch rounds for ``sequential=group``: a generator the orchestrator iterates.

    Yields ``(seeds, arms)`` for each look: the first ``looks[k]`` seeds of the seed list, for the control
    and every treatment still running. When the orchestrator resumes it (those trials have run), the
    looks are replayed from the trial records (:func:`sequential_state`) and every treatment whose verdict at
    its O'Brien-Fleming boundary is a firm better/worse, or equivalence within the margin, is stopped (an
    indicative crossing runs on: :func:`ablate.stats.sequential.stops`). The control runs
    while any treatment does. Never re-tests after every seed: only at the planned looks.
    """
    opts = resolve_options(plan)
    names = [a["name"] for a in plan["arms"]]
    active = names[1:]
    for k, n_k in enumerate(opts.looks):
        yield list(plan["seeds"][:n_k]), [names[0], *active]
        states = sequential_state(plan, arm_data(plan, collect(sd, dict(plan)), plan["metric"]), opts)
        active = [a for a in active if not (states[a]["stopped"] and states[a]["look"] is not None
                                            and states[a]["look"] <= k)]
        if not active:
            return


def sequential_seeds(sd: SweepDir, plan: Mapping[str, Any]) -> dict[str, int]:
    """How many seeds of the seed list each arm runs at most under ``sequential=group``, given the trials on disk.

    A treatment stopped at a look (efficacy, equivalence or futility, replayed by :func:`sequential_state` as
    :func:`sequential_rounds` decides) runs that look's seeds; one still running, every seed. The control runs as
    far as its furthest treatment (all seeds while any runs). ``ablate status`` counts the rest as never to run, not
    as pending.
    """
    opts = resolve_options(plan)
    names = [a["name"] for a in plan["arms"]]
    states = sequential_state(plan, arm_data(plan, collect(sd, dict(plan)), plan["metric"]), opts)
    out = {t: int(states[t]["n"]) if states[t]["stopped"] else len(plan["seeds"]) for t in names[1:]}
    return {names[0]: max(out.values(), default=len(plan["seeds"])), **out}


# -- the verdict --------------------------------------------------------------------------------------
def _jsonable(obj: Any) -> Any:
    """Dataclasses, tuples, numpy scalars -> JSON types; NaN/inf -> None."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(asdict(obj))
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return obj
    try:
        f = float(obj)
    except (TypeError, ValueError):
        return str(obj)
    if float(f).is_integer() and type(obj).__name__.startswith("int"):
        return int(f)
    return f if math.isfinite(f) else None


#: The libraries the verdict's numbers come from (statsmodels no longer: see ablate.stats.power.t_power).
VERDICT_LIBRARIES = ("numpy", "scipy")


def versions() -> dict[str, str]:
    """ablate's, Python's and :data:`VERDICT_LIBRARIES`' versions, read from the installed distributions'
    metadata (``importlib.metadata``): nothing is imported to read them."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415  # lazy: importlib.metadata loads email and zipfile (40 modules), for the versions only

    out = {"ablate": __version__, "python": platform.python_version()}
    for p in VERDICT_LIBRARIES:
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            continue
    return out


def reuse_call(plan: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a verdict is computed from besides the sweep dir's files, for its reuse key
    (:func:`ablate.record.verdict_key.context`): the options given, the config drift now (the pinned config
    files' content, :func:`ablate.judge.confounds.config_drift`) and the libraries' versions."""
    drift = config_drift((plan.get("pins") or {}).get("config_files") or {})
    return {"options": dict(overrides or {}), "drift": drift, "versions": versions()}


def analyse(plan: Mapping[str, Any], rows: list[dict[str, Any]], opts: VerdictOptions) -> dict[str, Any]:
    """The verdict's content (the future verdict.json) from the plan and the trial rows; no I/O.

    Stages: the arms' statistics (:func:`_arm_records`), one comparison per treatment (:func:`_compared`), their
    family adjustment or the two stages of ``ablate extend`` combined (:func:`_adjusted`), and each comparison's
    record (:func:`_comparison_record`).

    Returns
    -------
    dict
        ``metric``, ``goal``, ``alpha``, ``options``, ``arms`` (per-arm statistics and values by seed),
        ``comparisons`` (one per treatment: verdict, reason, every number of :class:`ablate.stats.Comparison`,
        seed advice, failures, flags, pairing and sequential details), ``invalid`` and ``invalid_reasons``.
    """
    metric, goal = plan["metric"], plan.get("goal", "maximize")
    data = arm_data(plan, rows, metric)
    names = [a["name"] for a in plan["arms"]]
    treatments = names[1:]
    fams = families(plan, opts.family)  # one family, or one per variable of a suite (family=variable)
    arms_out, invalid_reasons = _arm_records(names, data)
    seq = sequential_state(plan, data, opts) if opts.sequential == "group" else {}
    ss = np.random.SeedSequence(VERDICT_RNG_SEED).spawn(len(treatments) + 1)
    comps, pairings = _compared(plan, data, opts, seq, fams, ss)
    comps, extended = _adjusted(plan, data, opts, seq, fams, ss, comps, pairings)
    flagged = ignored_seed(plan, rows)  # every seed of an arm gave the same metrics: a sample of one
    seed_msg = seed_message(flagged, plan) if flagged else None
    same = unchanged_arms(plan, rows)  # a treatment that changed nothing the task reports
    if seed_msg:
        invalid_reasons.append(seed_msg)
    seed_void = {name for name in treatments if seed_msg and (name in flagged or names[0] in flagged)}
    comparisons = [_comparison_record(plan, data[name], name, c, pr, opts, seq, extended, seed_msg, seed_void, same)
                   for name, c, pr in zip(treatments, comps, pairings, strict=True)]
    return {
        "metric": metric, "goal": goal, "alpha": opts.alpha,
        "variable": dict(plan.get("variable") or {}), "seeds": list(plan["seeds"]),
        "seed_note": plan.get("seed_note"),
        **({"trial_resolved": list(plan["trial_resolved"])} if plan.get("trial_resolved") else {}),
        **({"app_mode": plan["app_mode"]} if plan.get("app_mode") else {}),
        **({"seed_ignored": {"arms": list(flagged.values()), "message": seed_msg}} if flagged else {}),
        "options": _jsonable(asdict(opts)),
        "multiplicity": "group sequential" if seq else ("holm" if extended and opts.multiplicity == "dunnett"
                                                        else opts.multiplicity),
        "arms": arms_out, "comparisons": comparisons,
        "invalid": bool(invalid_reasons), "invalid_reasons": invalid_reasons, "versions": versions(),
        **({"suite": suite_summary(plan, opts.family, "group sequential" if seq else opts.multiplicity,
                                   ran=sum(sum(data[n].statuses.values()) for n in names) if seq else None)}
           if plan.get("suite") else {}),
        **({"extension": {**(extension_of(plan) or {}), "line": summary_line(
            extension_of(plan) or {}, extended, {n: data[n].label for n in names})}} if extended else {}),
    }


def _arm_records(names: list[str], data: Mapping[str, ArmData]) -> tuple[list[dict[str, Any]], list[str]]:
    """Stage 1 of :func:`analyse`: verdict.json's ``arms`` (summary, statuses, values and errors by seed), and the
    reasons the sweep is invalid so far (an arm with more than half of its trials failed)."""
    arms_out = []
    invalid_reasons: list[str] = []
    for name in names:
        d = data[name]
        seeds = sorted(d.values)
        s = summarize([d.values[k] for k in seeds], seeds=seeds)
        total = s.n + s.n_failed
        if total and s.n_failed / total > 0.5:
            invalid_reasons.append(f"{s.n_failed} of {total} trials failed in arm {d.label} (more than half)")
        arms_out.append({"arm": name, "label": d.label, "value": d.value, **_jsonable(s), "pending": d.pending,
                         "statuses": dict(d.statuses), "values": {str(k): _jsonable(d.values[k]) for k in seeds},
                         "errors": {str(k): v for k, v in d.errors.items()}})
    return arms_out, invalid_reasons


def _compared(plan: Mapping[str, Any], data: Mapping[str, ArmData], opts: VerdictOptions, seq: Mapping[str, Any],
              fams: list[list[str]], ss: list[np.random.SeedSequence]) -> tuple[list[Comparison], list[Pairing]]:
    """Stage 2 of :func:`analyse`: each treatment paired (or not) by seed and compared with the control, before any
    family adjustment; in sequential mode on the seeds of its current look, at that look's boundary.

    Returns
    -------
    (comparisons, pairings)
        One :class:`ablate.stats.Comparison` and one :class:`ablate.stats.Pairing` per treatment, in plan order.
    """
    names = [a["name"] for a in plan["arms"]]
    control, treatments = data[names[0]], names[1:]
    m_of = {name: len(f) for f in fams for name in f}
    m = max(1, len(treatments))
    comps, pairings = [], []
    shared, design = shared_randomness(plan)
    for i, name in enumerate(treatments):
        t_vals, c_vals = data[name].values, control.values
        thr = None
        n_design = len(plan["seeds"])  # the planned N: fixed before any outcome, so the pairing rule may use it
        if seq:
            st = seq[name]
            n_use = st["n"] if st["look"] is not None else len(plan["seeds"])
            keep = set(plan["seeds"][:n_use])
            t_vals = {k: v for k, v in t_vals.items() if k in keep}
            c_vals = {k: v for k, v in c_vals.items() if k in keep}
            thr = max(st["threshold"], 1e-300) if st["threshold"] is not None else None
            n_design = n_use
            look = st["look"] if st["look"] is not None else len(opts.looks) - 1
            level = planned_look_levels(opts.looks, opts.alpha / m)[look]  # the level that look tests at
        else:
            level = opts.alpha / m_of[name]
        pr = pair_by_seed(t_vals, c_vals, pairing=opts.pairing, n_design=n_design, level=level,
                          shared_randomness=shared, design=design)
        pairings.append(pr)
        comps.append(compare(pr.treatment, pr.control, paired=pr.paired, alpha=opts.alpha,
                             goal=plan.get("goal", "maximize"), margin=opts.margin, n_comparisons=m_of[name],
                             rng=np.random.default_rng(ss[i]), p_threshold=thr))
    return comps, pairings


def _adjusted(plan: Mapping[str, Any], data: Mapping[str, ArmData], opts: VerdictOptions, seq: Mapping[str, Any],
              fams: list[list[str]], ss: list[np.random.SeedSequence], comps: list[Comparison],
              pairings: list[Pairing]) -> tuple[list[Comparison], dict[str, Any]]:
    """Stage 3 of :func:`analyse`: the comparisons of ``ablate extend``'s two stages combined
    (:mod:`ablate.judge.extension`), or else each family of two or more adjusted (``opts.multiplicity``); none
    in sequential mode (its boundaries already spend α).

    Returns
    -------
    (comparisons, extended)
        The comparisons in plan order, and the extension's details by treatment (empty unless combined).
    """
    names = [a["name"] for a in plan["arms"]]
    treatments = names[1:]
    extended: dict[str, Any] = {}
    if extension_of(plan) is not None and not seq:  # `ablate extend`: two stages combined (judge/extension.py)
        comps, extended = combine_stages(plan, {n: data[n].values for n in names}, treatments, names[0], comps,
                                         pairings, fams, opts.multiplicity)
    fin_c = np.asarray([v for v in data[names[0]].values.values() if not math.isnan(v)])
    for fam in fams if not seq and not extended else []:
        if len(fam) < 2:
            continue
        idx = [treatments.index(n) for n in fam]
        fin = [np.asarray([v for v in data[n].values.values() if not math.isnan(v)]) for n in fam]
        adjusted = adjust_comparisons([comps[i] for i in idx], opts.multiplicity, treatments=fin, control=fin_c,
                                      rng=np.random.default_rng(ss[-1]))
        for i, c in zip(idx, adjusted, strict=True):
            comps[i] = c
    return comps, extended


def _comparison_record(plan: Mapping[str, Any], d: ArmData, name: str, c: Comparison, pr: Pairing,
                       opts: VerdictOptions, seq: Mapping[str, Any], extended: Mapping[str, Any],
                       seed_msg: str | None, seed_void: set[str], same: Mapping[str, Any]) -> dict[str, Any]:
    """Stage 4 of :func:`analyse`: verdict.json's record of treatment ``name`` (arm data ``d``) from its comparison
    ``c`` and pairing ``pr``; insufficient data where its seeds (or the control's) were one run
    (``name in seed_void``), marked where it changed nothing the task reports (``name in same``)."""
    rec = {"arm": name, "label": d.label, "value": d.value, **_jsonable(c)}
    arm_variable = {a["name"]: a["variable"] for a in plan["arms"] if a.get("variable")}
    if name in arm_variable:
        rec["variable"] = arm_variable[name]
    rec.pop("data_flags", None)
    rec.pop("insufficient_code", None)
    rec["seed_advice"] = rec.pop("seeds")
    if c.seeds is not None:
        rec["seed_advice"]["message"] = c.seeds.message(multiplicity=c.multiplicity if c.n_comparisons > 1 else None)
    rec["failures"]["message"] = c.failures.message() if c.failures else None
    rec["pairing"] = {"paired": pr.paired, "mode": pr.mode, "n_design": pr.n_design, "reason": pr.reason,
                      "rho": _jsonable(pr.rho), "pair_from": pr.pair_from, "unmatched": pr.unmatched,
                      "seeds": list(pr.seeds)}
    if name in extended:
        rec["extension"] = extended[name]
    if seq:
        st = seq[name]
        rec["sequential"] = {"looks": opts.looks, "look": None if st["look"] is None else st["look"] + 1,
                             "n": st["n"], "stopped_early": bool(st["stopped"] and st["look"] is not None
                                                               and st["look"] < len(opts.looks) - 1),
                             "crossed": bool(st["stopped"] and not st.get("futile")),
                             "boundary_p": _jsonable(st["threshold"]),
                             "boundary_z": _jsonable(st["z"]), "fractions": _jsonable(st["fractions"]),
                             "alpha_per_treatment": opts.alpha / max(1, len(plan["arms"]) - 1),
                             "spending": "O'Brien-Fleming (Lan-DeMets)",
                             "passed_looks": [k + 1 for k in st.get("passed") or []],
                             "stop_reason": stop_reason(c.verdict, st, opts),
                             "skewed_stop": bool(st.get("skewed_stop")),
                             "stop_rule": "firm better/worse (or, from 20 seeds, one indicative only through "
                                          "evident skew), or equivalent" + (
                                 f", or futility (conditional power under {opts.effect} SD < {opts.futility})"
                                 if opts.effect is not None else ""),
                             **futility_record(st, opts)}
        rec["seed_advice_sequential"] = _sequential_advice(c.verdict, st, opts)
    if name in seed_void:
        rec["verdict"] = "insufficient data"
        rec["reason"] = f"Insufficient data: {seed_msg}."
        rec["insufficient_reason"] = seed_msg  # the bottom line's: the seeds were one run, not a statistic
        rec["seed_ignored"] = True
        rec["seed_ignored_why"] = short_why(plan)  # the bottom line's words: the cause, by form
    elif name in same:  # every seed equal to the control's, bit for bit: named, never "run more seeds"
        mark_unchanged(rec, same[name], plan)
    return rec


def stop_reason(verdict: str, st: Mapping[str, Any], opts: VerdictOptions) -> str | None:
    """Why a sequential treatment stopped: ``efficacy`` (a firm better/worse at the look's boundary),
    ``equivalence`` (the TOST interval inside the margin at that level), ``futility`` (with a planned ``effect``:
    the conditional power under it below ``futility`` at a look before the last, :mod:`ablate.stats.futility`),
    ``budget`` (the last look reached without any of them), or None while it still runs."""
    if st["look"] is None:
        return None
    if st.get("futile"):
        return "futility"
    if st["stopped"]:
        return "equivalence" if verdict == "equivalent" else "efficacy"
    return "budget" if st["look"] == len(opts.looks) - 1 else None


def futility_record(st: Mapping[str, Any], opts: VerdictOptions) -> dict[str, Any]:
    """verdict.json's futility fields of a sequential treatment: the planned effect, γ, and the conditional power at
    its last look (None where it stopped for efficacy, at the last look, or without a planned effect)."""
    if opts.effect is None:
        return {}
    return {"effect": opts.effect, "futility_threshold": opts.futility,
            "conditional_power": _jsonable(st.get("conditional_power")),
            "futility_rule": "conditional power under the planned effect (Lachin 2005), non-binding"}


def _sequential_advice(verdict: str, st: Mapping[str, Any], opts: VerdictOptions) -> str:
    if st["look"] is None:
        return f"no look complete yet: the first look is at N = {opts.looks[0]} seeds per arm"
    if st.get("futile"):
        return (f"stopped for futility at look {st['look'] + 1} (N = {st['n']}): conditional power "
                f"{st['conditional_power']:.3f} under the planned {opts.effect} SD, below {opts.futility}")
    if st.get("skewed_stop"):
        return (f"stopped at look {st['look'] + 1} (N = {st['n']}): it crossed the boundary on evidently skewed "
                f"values, where a {verdict} verdict is indicative at every N, so more seeds could not make it firm")
    if st["stopped"]:
        return f"stopped at look {st['look'] + 1} (N = {st['n']}): nothing more to run for this treatment"
    if st["look"] < len(opts.looks) - 1:
        why = (f": it crossed the boundary at look {st['look'] + 1} with an indicative verdict, and only a firm one "
               "stops an arm" if st["look"] in (st.get("passed") or []) else "")
        return f"continue to look {st['look'] + 2} (N = {opts.looks[st['look'] + 1]} seeds per arm){why}"
    if verdict in ("better", "worse"):  # crossed at the last look, indicative (the skew guard, or failed seeds)
        return f"reached the last look (N = {st['n']}): its {verdict} verdict there is indicative, not firm"
    return (f"reached the last look (N = {st['n']}) without crossing the boundary"
            + ("" if opts.margin is not None else "; set a margin to allow an equivalence stop"))


#: Where ``ablate verdict DIR --alpha ...`` remembers its options (those in VERDICT_OVERRIDES).


def non_default_options(opts: VerdictOptions, given: Mapping[str, Any], saved: Mapping[str, Any]
                        ) -> list[dict[str, Any]]:
    """The verdict options that differ from the defaults, each with where it came from.

    Parameters
    ----------
    opts : VerdictOptions
        The options the verdict used.
    given, saved : mapping
        Options given to this ``ablate verdict`` call, and those remembered in verdict_options.json.

    Returns
    -------
    list of dict
        ``{"option", "value", "default", "source"}``; ``source`` is ``"given now"``, ``"remembered"`` (from an
        earlier ``ablate verdict --...``; clear with ``--reset``) or ``"ablation config"``.
    """
    default = asdict(VerdictOptions())
    out = []
    for k, v in asdict(opts).items():
        if v == default[k]:
            continue
        src = "given now" if k in given else "remembered" if k in saved else "ablation config"
        out.append({"option": k, "value": _jsonable(v), "default": _jsonable(default[k]), "source": src})
    return out


def preimport() -> None:
    """Import the libraries a verdict is computed with (numpy and ``ablate.stats``, ``scipy.stats``, the
    report), so that a caller with idle time pays for them then, not after its trials: the orchestrator while
    a warm parent imports the task (:class:`ablate.trials.launchers.base.Monitor`, ``meanwhile``), on the core
    the warm parent leaves free. An import that fails here is left to fail where the verdict needs it."""
    for name in ("scipy.stats", "ablate.stats", "ablate.judge.report"):  # lazy: numpy, scipy (about 1 s of CPU)
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def write_verdict(sd: SweepDir, overrides: Mapping[str, Any] | None = None,
                  rows: list[dict[str, Any]] | None = None, *, write: bool = True,
                  plots_later: bool = False, digest: TrialDigest | None = None) -> dict[str, Any]:
    """Compute the verdict from the trial records in ``sd`` and write verdict.json, verdict.md, then the plots.

    The text comes first: verdict.json and verdict.md are written with the plots marked as being drawn
    (``plots: {"pending": true}``), then :func:`draw_plots` draws the PNGs and rewrites both files to show
    them (or the error that stopped one). The caller holds the sweep dir's lock.

    Parameters
    ----------
    sd : SweepDir
        The sweep dir (its ``ablation.yaml``, trial records and manifests are read; trials are untouched).
    overrides : mapping, optional
        ``alpha``, ``margin``, ``multiplicity``, ``pairing`` replacing the plan's options; ``plots=False``
        skips the PNG plots. Statistical overrides are remembered in ``verdict_options.json`` and
        applied to every later verdict of this sweep dir (``ablate resume`` included) until replaced;
        ``reset=True`` forgets the remembered ones first (``margin="none"`` clears a margin). The options
        that differ from the defaults, and where each came from, are in ``non_default_options``.
    rows : list of dict, optional
        The trial rows :func:`ablate.record.results.write_results` just collected (each record is then read
        once); default: collected here.
    write : bool
        False: compute and return the verdict without writing any file (no plots); for a reader that
        does not hold the sweep dir's lock (``ablate verdict`` while the ablation runs).
    plots_later : bool
        True: write the text with the plots pending and return; the caller draws them
        (``ablate verdict``: :func:`draw_plots_in_background`, so the command returns with the text).
    digest : TrialDigest, optional
        Fed the bytes of every result.json (by whoever collected ``rows``, given the same digest) and
        every manifest.json (here): the verdict's reuse key is then recorded in ``.verdict_key.json``
        (:mod:`ablate.record.verdict_key`), so ``ablate verdict`` with unchanged inputs keeps it
        (and prints its path). Without it, any recorded key is removed.

    Returns
    -------
    dict
        The content of verdict.json.

    Raises
    ------
    ConfigError
        When an option or override is invalid.
    SweepDirError
        When ``verdict_options.json`` is corrupt (see :func:`read_saved_options`).
    """
    plan = sd.plan()
    saved_file = sd.root / VERDICT_OPTIONS
    reset = bool((overrides or {}).get("reset"))
    saved = {} if reset else read_saved_options(sd, plan)  # --reset clears even a corrupt file
    given = {k: v for k, v in (overrides or {}).items() if k in VERDICT_OVERRIDES}
    opts = resolve_options(plan, {**saved, **(overrides or {})})  # validates before anything is written
    if not write:
        verdict = _assemble(sd, plan, opts, rows, plots=False, write=False)
        verdict.pop("_curve_inputs", None)
        verdict["non_default_options"] = non_default_options(opts, given, saved)
        return verdict
    plots = (overrides or {}).get("plots", True) is not False
    verdict = _assemble(sd, plan, opts, rows, plots=plots, digest=digest)  # refuses before any file is written
    curve_inputs = verdict.pop("_curve_inputs", None)
    if reset and saved_file.exists() and not given:
        saved_file.unlink()
    if (given or reset) and {**saved, **given}:
        write_json(saved_file, {**saved, **given})
    verdict["non_default_options"] = non_default_options(opts, given, saved)
    write_json(sd.verdict_json, verdict)
    write_atomic(sd.verdict_md, render_markdown(verdict))

    write_summary(sd)  # summary.json: the main numbers, numbers only, for `dvc metrics show`
    # --against reads another sweep dir, a tuned one reads its evaluation trials beside the plan's: never reused
    reusable = digest is not None and not opts.against and not plan.get("tuning")
    record(sd, combine(context(sd, plan, reuse_call(plan, overrides)), digest.hexdigest(), curve_inputs, sd)
           if reusable else None)
    if plots and not plots_later:
        verdict = draw_plots(sd, verdict)
    return verdict


def draw_plots(sd: SweepDir, verdict: dict[str, Any] | None = None) -> dict[str, Any]:
    """Draw the verdict's PNGs (values, paired differences, forest) and rewrite verdict.json and verdict.md
    to show them; a plot that fails is reported in its place (``plots.error`` / ``plots.forest_error``,
    and "Not drawn: ..." in verdict.md), never silently dropped. The caller holds the sweep dir's lock.

    Parameters
    ----------
    sd : SweepDir
    verdict : dict, optional
        The verdict just written; default: read from verdict.json (the background process of
        :func:`draw_plots_in_background`). The plots are drawn from its JSON values either way.

    Returns
    -------
    dict
        The verdict with ``plots`` filled in, as now on disk.
    """
    verdict = read_json(sd.verdict_json) if verdict is None else verdict
    verdict["plots"] = _write_plots(sd, verdict)
    write_forest(sd, verdict)
    write_json(sd.verdict_json, verdict)
    write_atomic(sd.verdict_md, render_markdown(verdict))
    outputs_recorded(sd)  # the reuse key now names these files' digests
    return verdict


def draw_plots_in_background(sd: SweepDir) -> int | None:
    """Draw the plots of the verdict just written in a detached process, which inherits the sweep dir's lock.

    ``ablate verdict`` returns as soon as the text is written; the child (``python -m ablate.judge.plots_child``,
    started through ``/bin/sh -c '... &'`` so that it is detached) holds the lock without a gap
    (:meth:`SweepDir.hand_over_lock`), so no other ablate process writes the sweep dir meanwhile: they wait
    for it (a second or two, see :meth:`SweepDir.try_acquire`), and ``SweepDir.acquire()`` is how a
    script waits for the PNGs. The
    child's stderr goes to ``plots.log``, removed when it succeeds; a crash leaves it, and verdict.md's
    Plots section then still says they are being drawn and points to it. A plot that merely fails is
    reported in verdict.md like a synchronous one (:func:`draw_plots`).

    Parameters
    ----------
    sd : SweepDir
        Its lock is held by this process; afterwards it is not (the child holds it, or it was released).

    Returns
    -------
    int or None
        The child's pid; None when it could not be started, in which case the plots were drawn here.
    """
    fd = sd.hand_over_lock()
    # `sh -c 'python ... &'` detaches the child (new session, reparented to init when sh exits), so no
    # zombie is left in a long-lived caller and the child outlives `ablate verdict`
    # (its stdout must not be sh's, a pipe this process reads to its end: that would wait for the child)
    script = '"$0" -m ablate.judge.plots_child "$1" "$2" </dev/null >/dev/null & echo $!'
    try:
        with open(sd.root / PLOTS_LOG, "wb") as log:
            sh = subprocess.run(["/bin/sh", "-c", script, sys.executable, str(sd.root.absolute()), str(fd)],
                                pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                start_new_session=True, cwd=os.getcwd(), check=True, text=True)
        pid = int(sh.stdout.strip())
    except (OSError, ValueError, subprocess.CalledProcessError):  # no process started: draw them here
        draw_plots(sd)
        sd.clean_debris()
        (sd.root / PLOTS_LOG).unlink(missing_ok=True)
        sd.forget_lock()  # closed as the child would: no empty holder line while waiters look
        return None
    sd.forget_lock()
    return pid


def read_saved_options(sd: SweepDir, plan: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict options remembered in ``verdict_options.json`` (empty when there is none).

    Raises
    ------
    SweepDirError
        When the file is not a JSON object of known, valid options (a truncated or hand-edited file):
        never ignored, since the remembered options change the verdict (an alpha of 0.01 silently
        becoming 0.05 can flip it). The message names the file and the way out.
    """
    path = sd.root / VERDICT_OPTIONS
    fix = (f"restore it, or delete it (`rm {path}`) to use the ablation's own options, then set them again "
           f"with `ablate verdict {sd.root} --alpha A ...`")
    try:
        saved = read_json(path)
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise SweepDirError(f"is not valid JSON ({str(exc).splitlines()[0]})", where=str(path), fix=fix) from None
    except UnicodeDecodeError as exc:
        raise SweepDirError(f"is not text ({exc.reason})", where=str(path), fix=fix) from None
    if not isinstance(saved, dict):
        raise SweepDirError(f"holds a {type(saved).__name__}, not an object of verdict options", where=str(path),
                            fix=fix)
    unknown = sorted(set(saved) - set(VERDICT_OVERRIDES))
    if unknown:
        raise SweepDirError(f"has unknown option(s) {', '.join(map(repr, unknown))} (known: "
                            f"{', '.join(VERDICT_OVERRIDES)})", where=str(path), fix=fix)
    try:
        resolve_options(plan, saved)
    except ConfigError as exc:
        raise SweepDirError(f"holds an invalid option: {exc}", where=str(path), fix=fix) from None
    return saved


def edited_records(sd: SweepDir, plan: Mapping[str, Any]) -> list[str]:
    """``arm/seed=k`` of each trial whose result.json no longer matches its digest (an accidental edit)."""
    out = []
    for arm in plan.get("arms") or []:
        for seed in plan.get("seeds") or []:
            try:
                rec = sd.read_result(arm["name"], seed)
            except SweepDirError:
                continue
            if isinstance(rec, dict) and digest_mismatch(rec):
                out.append(f"{arm['name']}/seed={seed}")
    return out


def _assemble(sd: SweepDir, plan: Mapping[str, Any], opts: VerdictOptions, rows: list[dict[str, Any]] | None, *,
              plots: bool, write: bool = True, digest: TrialDigest | None = None) -> dict[str, Any]:
    """The verdict (statistics, confounds, pins, drift, table) from one read of the trial records; with
    ``write``, the table files are written too (the caller holds the lock) and the plots marked pending."""
    rows = collect(sd, plan, digest) if rows is None else rows
    tuned = plan if plan.get("tuning") else None
    if tuned is not None and opts.curve is not None:  # `ablate verdict DIR --curve` (planning refuses the rest)
        raise ConfigError("cannot compare curves of a tuned ablation yet: a curve verdict of each arm's chosen "
                          "setting is not built", where="--curve",
                          fix=f"run `ablate verdict {sd.root}` without --curve (it judges the chosen settings)")
    if tuned is not None:  # a tuned ablation: judge each arm at its chosen setting, on the evaluation seeds
        all_rows, chosen = rows, (sd.read_tuning() or {}).get("chosen")
        plan, rows = tuning.evaluation_view(tuned, all_rows, chosen)
    verdict = analyse(plan, rows, opts)
    if tuned is not None:
        verdict["tuning"] = tuning.section(tuned, all_rows, tuning.select(tuned, all_rows), chosen,
                                           verdict["comparisons"])
    if (curves := curves_verdict(sd, plan, verdict, opts.curve)) is not None:  # curve.enabled or --curve
        verdict["_curve_inputs"] = curves.pop("_inputs")  # for the reuse key (write_verdict), never written
        verdict["curves"] = curves
    planned = resolve_options(plan, None)  # the analysis the plan froze before any trial ran
    changed = prereg.changes(planned, opts)
    verdict["preregistered"] = _jsonable(prereg.preregistered(plan, planned))
    verdict["post_hoc"] = {"changed": _jsonable(changed)} if changed else None
    verdict["preregistered_verdict"] = (prereg.summary(analyse(plan, rows, planned)["comparisons"]) if changed
                                        else None)
    used = [(r["arm"], r["seed"]) for r in rows if r["status"] == "ok"]
    if plan.get("suite") or plan.get("trial_dependent"):  # checks that look trials up by (arm, seed): hold them
        manifests = read_manifests(sd, plan, digest)
        confounds = check(plan, manifests, used)
        per_arm = suite_confounds(plan, manifests, used, sd.root)  # each treatment differs in its own variable only
        per_arm += trial_resolved.check(plan, manifests, used)  # keys main()'s resolvers gave: from the trials' records
        if per_arm:
            confounds.update(findings=confounds["findings"] + per_arm, invalid=True)
    else:
        confounds = check(plan, iter_manifests(sd, plan, digest), used)  # one manifest in memory at a time
    edited = edited_records(sd, plan)
    if edited:
        n = len(edited)
        confounds["findings"] = [*confounds["findings"], {
            "kind": "record", "field": "result.json", "severity": "warning", "aligned": False, "split": {},
            "trials": edited,
            "message": f"{n} trial record(s) no longer match the digest written when the trial ended (edited "
                       f"since): {', '.join(edited[:10])}{' ...' if n > 10 else ''}; the verdict uses them as "
                       "they are now. Fix: restore the original result.json, or re-run the trial "
                       f"(move its dir aside, then `ablate resume {sd.root}`)"}]
    if misplaced := misplaced_records(sd, plan):
        confounds["findings"] = [*confounds["findings"], {
            "kind": "record", "field": "result.json", "severity": "warning", "aligned": False, "split": {},
            "trials": misplaced, "message": misplaced_warning(sd, misplaced)}]
    pins = plan.get("pins", {})
    if confounds["invalid"]:
        verdict["invalid_reasons"].insert(0, "confounded: the arms differ in more than the variable (see Confounds)")
    verdict.update(invalid=bool(verdict["invalid_reasons"]), dirty=confounds["dirty"],
                   pins={"code": pins.get("code"), "data": pins.get("data"), "environment": pins.get("environment")},
                   confounds=confounds, config_drift=config_drift(pins.get("config_files") or {}))
    if write:
        verdict["plots"] = {"pending": True} if plots else {}  # drawn after the text: draw_plots

        write_tables(sd, plan, rows, verdict)
    else:  # a reader without the lock: the table in the verdict, no file written

        verdict["plots"] = {}
        verdict["table"] = build_table(verdict, rows, (plan.get("options") or {}).get("metrics") or None)
    if opts.against:
        verdict["against"] = compare_sweeps(sd, opts.against, missing_ok=True)

    verdict["command"] = plan.get("command")  # the command line it was planned from: the Next line reruns it
    if any(a.get("pending") for a in verdict["arms"]):  # where `ablate resume` finishes it (the Next line)
        verdict["resume_dir"] = _from_project(sd, plan)
    elif opts.sequential != "group" and extension_of(plan) is None and not verdict.get("tuning"):
        # `ablate extend` may add seeds (the Next line); it refuses a tuned ablation, whose Next line reruns it
        verdict["extend_dir"] = _from_project(sd, plan)
    verdict["bottom_line"] = bottom_line(verdict).to_json()
    return verdict


def _from_project(sd: SweepDir, plan: Mapping[str, Any]) -> str:
    """The sweep dir as a command run from the project's root names it: relative to the root when inside it."""
    root = sd.root.absolute()
    cwd = (plan.get("project") or {}).get("cwd")
    if isinstance(cwd, str) and cwd and root.is_relative_to(cwd):
        return os.path.relpath(root, cwd)
    return str(root)


def _write_plots(sd: SweepDir, verdict: Mapping[str, Any]) -> dict[str, Any]:
    """Write the PNG plots; returns name -> file name (relative to the sweep dir). Plot errors never fail the
    verdict: they are reported in its place."""
    out: dict[str, str] = {}
    try:
        png = values_plot(verdict)
        if png is not None:
            write_atomic(sd.plot("values"), png)
            out["values"] = sd.plot("values").name
        png = paired_plot(verdict)
        if png is not None:
            write_atomic(sd.plot("paired"), png)
            out["paired"] = sd.plot("paired").name
        elif sd.plot("paired").exists():
            sd.plot("paired").unlink()
        for arm, curve_png in curve_plots(verdict).items():  # curve verdicts: one plot per treatment
            write_atomic(sd.curve_plot(arm), curve_png)
            out.setdefault("curves", {})[arm] = sd.curve_plot(arm).name
    except Exception as exc:  # a plotting failure must not cost the verdict
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out
