"""The curve verdict: for each treatment, where along the x-axis it is better, worse or indistinguishable from
the control, with the error rate held over every grid point (verdict.json ``curves``).

Reads each finished trial's ``curve.json`` (:mod:`ablate.record.curves`), or, for curves asked for after the run
(``ablate verdict DIR --curve``), the series the trial left (:mod:`ablate.judge.curves_recorded`), puts both arms'
curves on one grid
(:func:`ablate.stats.align_curves`), and compares them with the max-|t| permutation band
(:func:`ablate.stats.curve_band`), paired by seed when the final verdict's comparison is, at level ``alpha / m``
for the m treatments of its family (Bonferroni over treatments, as the final verdict's CIs). The summaries
(normalised area, time to ``curve.threshold``, final value) are columns of the same family. The final
value's Δ is the final verdict's own (the trial's metric, per seed; only for a curve of the verdict's metric); its
verdict word stays the final verdict's. :func:`compare_each` serves ``ablate audit`` too (:mod:`ablate.audit.curves`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ablate.errors import ConfigError
from ablate.judge.curve_options import CURVE_DEFAULTS
from ablate.judge.curves_recorded import trial_curve
from ablate.record.sweepdir import SweepDir

#: Random permutations when there are more (the observed labelling is counted too): the test is exact for any
#: number; 3,000 put the critical value at the 16th largest maximum for alpha/m = 0.05/9, and keep the verdict of
#: 10 arms x 50 seeds x 1,000 steps within 2x of the verdict without curves (benchmarks/curve_speed.py).
N_PERMUTATIONS = 2999
#: Fewest seeds per arm with a curve for a curve verdict (as for the final verdict).
MIN_SEEDS = 3
#: Seed of the permutations, so a recomputed verdict is identical.
CURVE_RNG_SEED = 20260117


def _trial_curves(sd: SweepDir, plan: Mapping[str, Any], arm: str, seeds: Sequence[int], cfg: Mapping[str, Any]
                  ) -> tuple[dict[int, tuple[Any, Any]], dict[str, str], dict[str, str], list[str]]:
    """seed -> (xs, ys) of the arm's trials with a curve, ``arm/seed=k`` -> why not for the others, ``arm/seed=k``
    -> where each curve came from, and the files read (:func:`ablate.judge.curves_recorded.trial_curve`)."""
    got, why, source, inputs = {}, {}, {}, []
    for seed in seeds:
        res = trial_curve(sd, plan, arm, seed, cfg)
        inputs += res[-1]
        if len(res) == 2:
            why[f"{arm}/seed={seed}"] = str(res[0])
        else:
            got[seed], source[f"{arm}/seed={seed}"] = res[0], str(res[1])
    return got, why, source, inputs


def _values_by_seed(arm: Mapping[str, Any]) -> dict[int, float]:
    """A verdict arm's finite final values by seed."""
    out = {}
    for k, v in (arm.get("values") or {}).items():
        if isinstance(v, int | float) and math.isfinite(v):
            out[int(k)] = float(v)
    return out


def curves_verdict(sd: SweepDir, plan: Mapping[str, Any], verdict: Mapping[str, Any],
                   cfg: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """verdict.json's ``curves`` object, or None when neither the ablation nor the verdict asks for curves.

    Parameters
    ----------
    sd : SweepDir
        Its trials' ``curve.json`` files are read (or, for curves asked for after the run, what the trials left:
        :mod:`ablate.judge.curves_recorded`).
    plan : mapping
        The plan (``options.curve``: the curve settings the ablation asked for).
    verdict : mapping
        The final verdict (:func:`ablate.judge.verdict.analyse`): arms with values by seed, comparisons with
        their pairing and family size.
    cfg : mapping, optional
        The curve settings this verdict uses (``ablate verdict DIR --curve ...``: the verdict options' ``curve``);
        default: the plan's.

    Returns
    -------
    dict or None
        ``metric``, ``x``, ``goal``, ``alpha``, ``summary``, ``threshold``, ``method``, ``rules`` and
        ``comparisons`` (one per treatment, :func:`compare_curves`), plus ``trial_errors``, ``asked`` (``with the
        ablation`` or ``after the run``), ``sources`` (how many trials' curves came from each source) and
        ``_inputs`` (the files read, relative to the sweep dir: for the reuse key, not written).

    Raises
    ------
    ConfigError
        Curves asked for after the run, and not one trial recorded the metric's series: the fix says how to
        record it.
    """
    planned = (plan.get("options") or {}).get("curve")
    cfg = planned if cfg is None else cfg
    if not cfg:
        return None
    arms = {a["arm"]: a for a in verdict["arms"]}
    names = [a["name"] for a in plan["arms"]]
    ok = {name: sorted(_values_by_seed(arms[name])) for name in names}
    curves, errors, sources, inputs = {}, {}, {}, []
    for name in names:
        curves[name], why, src, read = _trial_curves(sd, plan, name, ok[name], cfg)
        errors.update(why)
        sources.update(src)
        inputs += read
    after = dict(cfg) != dict(planned or {})
    if after and not sources and errors:
        first, why = next(iter(errors.items()))
        raise ConfigError(f"no trial of {sd.root} kept a series of {cfg['metric']!r} against {cfg.get('x')!r} to "
                          f"compare curves with ({len(errors)} finished; e.g. {first}: {why})", where="--curve",
                          fix=f"log {cfg['metric']!r} at every step (`ablate.log_step(step, {cfg['metric']}=value)` "
                          "in a fn task; a metrics.csv, TensorBoard or JSONL log in the run dir; or printed lines "
                          "read by a `task.metric_pattern` with a `step` group), then run the ablation again with "
                          "`curve.enabled=true`")
    return {**compare_each(curves, verdict, cfg), "trial_errors": errors,
            "asked": "after the run" if after else "with the ablation",
            "sources": dict(sorted(Counter(sources.values()).items())), "_inputs": inputs}


def compare_each(curves: Mapping[str, Mapping[int, tuple[Any, Any]]], verdict: Mapping[str, Any],
                 cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The curves object's settings and ``comparisons``: each of the final verdict's comparisons
    (:func:`compare_curves`) on the arms' curves (arm -> seed -> (xs, ys); the verdict's first arm is the control),
    with permutations seeded by :data:`CURVE_RNG_SEED`, so a recomputed verdict is identical. Also the audit's
    (:mod:`ablate.audit.curves`)."""
    import numpy as np  # noqa: PLC0415  # lazy: numpy (with ablate.stats) is kept off verdict reuse and `ablate status`

    # lazy: threadpoolctl (a dependency) only here. One BLAS thread: the permutations' products are small, and a
    # multi-threaded BLAS on a busy machine spins (measured 20x slower at load 9 on 2 cores)
    from threadpoolctl import threadpool_limits  # noqa: PLC0415  # lazy: one BLAS thread for the permutations (see above)

    arms = {a["arm"]: a for a in verdict["arms"]}
    control = verdict["arms"][0]["arm"]
    ss = np.random.SeedSequence(CURVE_RNG_SEED).spawn(max(1, len(arms) - 1))
    comps = []
    with threadpool_limits(limits=1, user_api="blas"):
        for i, c in enumerate(verdict.get("comparisons") or []):
            comps.append(compare_curves(c, curves[c["arm"]], curves[control], _values_by_seed(arms[c["arm"]]),
                                        _values_by_seed(arms[control]), cfg, verdict,
                                        rng=np.random.default_rng(ss[i])))
    return {"metric": str(cfg.get("metric") or verdict["metric"]), "x": str(cfg.get("x") or "step"),
            "goal": verdict.get("goal", "maximize"), "alpha": verdict["alpha"],
            "summary": cfg.get("summary", "final"), "threshold": cfg.get("threshold"), "method": METHOD,
            "rules": RULES, "comparisons": comps}


#: How the band is computed, as verdict.md says it.
METHOD = ("max-|t| permutation band (Blair & Karniski 1993; Westfall & Young 1993): t at every grid point and "
          "for each summary; the band's multiplier is the 1 - alpha/m quantile of the largest |t| over all of them "
          "under sign flips of the paired per-seed differences (or relabelling of seeds between arms, Welch's t, "
          "when unpaired), so it holds family-wise over every grid point and summary")
#: The stated rules for irregular curves.
RULES = {
    "restarts": "a step logged again (a run resumed from a checkpoint) keeps the value logged last",
    "nonfinite": "NaN/inf points are dropped; the grid bridges them (interpolated) or leaves that x out (shared)",
    "missing_steps": "the grid holds the x values every seed logged; an x one seed did not log is left out",
    "unequal_lengths": "the grid spans only the range every seed covers (no extrapolation): the shortest curve "
                       "ends it",
    "interpolation": "when the seeds share no x values (tokens, wall time), a regular grid of curve.points with "
                     "linear interpolation between each seed's neighbouring logged points",
    "downsampling": "above 2000 logged points a trial keeps every k-th point and the last (curve.json: stride)",
}


def compare_curves(comp: Mapping[str, Any], t_curves: Mapping[int, tuple[Any, Any]],
                   c_curves: Mapping[int, tuple[Any, Any]], t_final: Mapping[int, float],
                   c_final: Mapping[int, float], cfg: Mapping[str, Any], verdict: Mapping[str, Any],
                   *, rng: Any) -> dict[str, Any]:
    """One treatment's curve verdict against the control (see :func:`curves_verdict`).

    Returns
    -------
    dict
        ``arm``, ``paired``, ``n``, ``seeds``, ``level``, and either ``insufficient`` (why there is none) or the
        grid, the curves (``x``, per-arm means and pointwise 95% CIs), the raw difference with its simultaneous
        band, adjusted and pointwise p-values, ``regions``, ``sentence``, ``summaries`` and ``seed_advice``.
    """
    from ablate.stats import align_curves  # noqa: PLC0415  # lazy: ablate.stats loads numpy and scipy, kept off verdict reuse

    paired = bool((comp.get("pairing") or {}).get("paired"))
    m = int(comp.get("n_comparisons") or 1)
    alpha = float(verdict["alpha"])
    out: dict[str, Any] = {"arm": comp["arm"], "label": comp.get("label"), "paired": paired,
                           "level": 1 - alpha / m, "n_comparisons": m}
    if paired:
        seeds = sorted(set(t_curves) & set(c_curves))
        t_seeds = c_seeds = seeds
    else:
        t_seeds, c_seeds = sorted(t_curves), sorted(c_curves)
    out["n"] = [len(t_seeds), len(c_seeds)]
    out["seeds"] = {"treatment": t_seeds, "control": c_seeds}
    if min(len(t_seeds), len(c_seeds)) < MIN_SEEDS:
        out["insufficient"] = (f"{min(len(t_seeds), len(c_seeds))} seed(s) with a curve in an arm"
                               + (" (paired: both arms at the same seed)" if paired else "")
                               + f"; a curve verdict needs {MIN_SEEDS}")
        return out
    try:
        al = align_curves([t_curves[s] for s in t_seeds] + [c_curves[s] for s in c_seeds],
                          points=int(cfg.get("points") or CURVE_DEFAULTS["points"]))
    except ValueError as exc:
        out["insufficient"] = f"the curves cannot be put on one grid: {exc}"
        return out
    all_seeds = [("treatment", s) for s in t_seeds] + [("control", s) for s in c_seeds]
    out["grid"] = _grid_record(al, all_seeds, comp["arm"], verdict)
    out.update(_band_record(al, len(t_seeds), paired, alpha / m, cfg, verdict,
                            [t_final.get(s, math.nan) for s in t_seeds], [c_final.get(s, math.nan) for s in c_seeds],
                            comp, rng))
    return out


def _grid_record(al: Any, seeds: Sequence[tuple[str, int]], arm: str, verdict: Mapping[str, Any]) -> dict[str, Any]:
    """How the grid was built, with the seed whose curve ends it and the rule counts."""
    who, seed = seeds[al.ends_first]
    control = verdict["arms"][0]["arm"]
    return {"rule": al.rule, "points": len(al.x), "range": [float(al.x[0]), float(al.x[-1])],
            "full_range": list(al.full_range), "subsampled": al.subsampled,
            "ends_first": f"{arm if who == 'treatment' else control}/seed={seed}",
            "restarts": int(sum(al.restarts)), "dropped_points": int(sum(al.dropped))}


def _band_record(al: Any, n_t: int, paired: bool, level: float, cfg: Mapping[str, Any], verdict: Mapping[str, Any],
                 t_final: list[float], c_final: list[float], comp: Mapping[str, Any], rng: Any) -> dict[str, Any]:
    """The band, the regions, the summaries and the seed advice of one comparison, as JSON values."""
    import numpy as np  # noqa: PLC0415  # lazy: numpy, with ablate.stats

    from ablate.stats import curve_band, curve_regions, curve_summaries  # noqa: PLC0415  # lazy: numpy and scipy, as above

    goal = verdict.get("goal", "maximize")
    t_y, c_y = al.y[:n_t], al.y[n_t:]
    thr = cfg.get("threshold")
    s_t = curve_summaries(al.x, t_y, goal=goal, threshold=thr)
    s_c = curve_summaries(al.x, c_y, goal=goal, threshold=thr)
    spec: dict[str, tuple[Any, Any, str]] = {"auc": (s_t["auc"], s_c["auc"], goal)}
    if thr is not None and (s_t["reached"].any() or s_c["reached"].any()):
        spec["time_to"] = (s_t["time_to"], s_c["time_to"], "minimize")
    same = str(cfg.get("metric") or verdict["metric"]) == str(verdict["metric"])  # a curve of another metric: no
    if same and np.isfinite(t_final).all() and np.isfinite(c_final).all():  # final value of the verdict's in it
        spec["final"] = (np.asarray(t_final), np.asarray(c_final), goal)
    band = curve_band(t_y, c_y, x=al.x, paired=paired, alpha=level, goal=goal, summaries=spec,
                      n_resamples=N_PERMUTATIONS, rng=rng)
    sign = band.sign
    lo, hi = np.minimum(sign * band.low, sign * band.high), np.maximum(sign * band.low, sign * band.high)
    regions = curve_regions(band)
    rec: dict[str, Any] = {
        "critical": band.critical, "n_permutations": band.n_permutations, "exact": band.exact, "min_p": band.min_p,
        "x": band.x.tolist(), "mean_treatment": band.mean_treatment.tolist(),
        "mean_control": band.mean_control.tolist(),
        "ci_treatment": _pointwise_ci(t_y), "ci_control": _pointwise_ci(c_y),
        "diff": (sign * band.diff).tolist(), "low": lo.tolist(), "high": hi.tolist(),
        "p_adj": band.p_adj.tolist(), "p_pointwise": band.p_pointwise.tolist(),
        "pointwise_marked": int((band.p_pointwise <= verdict["alpha"]).sum()),
        "bonferroni_marked": int((band.p_pointwise * len(band.x) <= level).sum()),
        "regions": [{"word": r.word, "from": r.start, "to": r.end, "points": r.points} for r in regions],
        "summaries": {k: _summary_record(v, comp, thr, s_t, s_c) for k, v in band.summaries.items()},
    }
    rec["sentence"] = regions_sentence(rec["regions"], str(cfg.get("x") or "step"))
    rec["seed_advice"] = _seed_advice(band, cfg, verdict)
    return rec


def _pointwise_ci(y: Any) -> list[list[float]]:
    """Each grid point's 95% t-interval of the arm's mean (for the plot; pointwise, not simultaneous)."""
    import numpy as np  # noqa: PLC0415  # lazy: numpy, with scipy
    from scipy.stats import t as student_t  # noqa: PLC0415  # lazy: scipy, only when curves are compared

    n = len(y)
    half = student_t.ppf(0.975, n - 1) * y.std(axis=0, ddof=1) / np.sqrt(n)
    mean = y.mean(axis=0)
    return [(mean - half).tolist(), (mean + half).tolist()]


def _summary_record(s: Any, comp: Mapping[str, Any], thr: Any, s_t: Mapping[str, Any], s_c: Mapping[str, Any]
                    ) -> dict[str, Any]:
    lo, hi = sorted([s.sign * s.ci[0], s.sign * s.ci[1]])
    rec = {"diff": s.sign * s.diff, "ci": [lo, hi], "p_adj": s.p_adj,
           "word": "better" if s.ci[0] > 0 else "worse" if s.ci[1] < 0 else "indistinguishable",
           "mean_treatment": s.mean_treatment, "mean_control": s.mean_control}
    if s.name == "final":
        rec["verdict"] = comp.get("verdict")
        rec["final_diff"] = comp.get("diff_raw")
        rec["agrees"] = comp.get("diff_raw") is not None and math.isclose(
            rec["diff"], comp["diff_raw"], rel_tol=1e-9, abs_tol=1e-12)
    if s.name == "time_to":
        rec["threshold"] = thr
        rec["reached"] = [int(s_t["reached"].sum()), int(s_c["reached"].sum())]
    return rec


def _seed_advice(band: Any, cfg: Mapping[str, Any], verdict: Mapping[str, Any]) -> dict[str, Any] | None:
    """The band's half-width now, and the seeds per arm at which it is expected at ``curve.width`` (else the
    margin), from the pointwise spread of these seeds (:func:`ablate.stats.seeds_for_width`)."""
    import numpy as np  # noqa: PLC0415  # lazy: numpy, with ablate.stats

    from ablate.stats import seeds_for_width  # noqa: PLC0415  # lazy: numpy and scipy, as above

    if not math.isfinite(band.critical) or not np.isfinite(band.spread).all() or band.spread.max() <= 0:
        return None
    half = float(np.max(band.high - band.low) / 2)
    now = min(band.n_treatment, band.n_control)
    rec: dict[str, Any] = {"half_width": half, "now": now}
    width, source = cfg.get("width"), "curve.width"
    margin = (verdict.get("options") or {}).get("margin")
    if width is None and isinstance(margin, int | float):
        width, source = float(margin), "the margin"
    if width is None:
        rec["message"] = (f"the band's half-width is up to {half:.4g} now (N = {now}); set `curve.width` (metric "
                          "units) for the seeds a narrower band needs")
        return rec
    n = seeds_for_width(band.spread, band.critical, float(width))
    rec.update(width=float(width), width_from=source, n=n,
               message=f"the band's half-width is up to {half:.4g} now (N = {now}); a half-width of {width:.4g} "
               f"everywhere ({source}) needs about {n} seeds per arm, from the pointwise SD of these seeds (the "
               "critical value shrinks with more seeds, so this errs high)")
    return rec


def _spans(regions: Sequence[Mapping[str, Any]], gap: int) -> list[dict[str, Any]]:
    """Regions merged for reading: a better (worse) region absorbs the next one of the same word when only
    indistinguishable points, at most ``gap`` of them, lie between; each span keeps how many of its grid points
    the band itself marks (``marked``) and how many it holds (``points``)."""
    spans = [{**r, "marked": 0 if r["word"] == "indistinguishable" else r["points"]} for r in regions]
    out: list[dict[str, Any]] = []
    for sp in spans:  # absorb short indistinguishable gaps between two spans of one word
        if (len(out) >= 2 and out[-1]["word"] == "indistinguishable" and out[-1]["points"] <= gap
                and out[-2]["word"] == sp["word"] != "indistinguishable"):
            hole = out.pop()
            prev = out.pop()
            sp = {**prev, "to": sp["to"], "points": prev["points"] + hole["points"] + sp["points"],
                  "marked": prev["marked"] + sp["marked"]}
        out.append(sp)
    return out


def regions_sentence(regions: Sequence[Mapping[str, Any]], x: str, gap: int | None = None) -> str:
    """The regions as one sentence: "indistinguishable at step 0; better from 10 to 1,200; indistinguishable
    after" (the x-axis named once, in the first part). A better or worse stretch interrupted only by short
    indistinguishable gaps (at most ``gap`` grid points: default 5% of the grid, at least 2) reads as one,
    "worse between 15 and 412 (75 of 81 points)": the count says where the band itself excludes 0."""
    if not regions:
        return "no grid"
    total = sum(r["points"] for r in regions)
    spans = _spans(regions, max(2, math.ceil(0.05 * total)) if gap is None else gap)
    if len(spans) == 1:
        return f"{spans[0]['word']} everywhere ({x} {_x(spans[0]['from'])} to {_x(spans[0]['to'])})"
    parts = []
    for i, r in enumerate(spans):
        name = f"{x} " if i == 0 else ""
        if i == len(spans) - 1 and r["word"] == "indistinguishable":
            parts.append("indistinguishable after")
        elif r["from"] == r["to"]:
            parts.append(f"{r['word']} at {name}{_x(r['from'])}")
        elif r["word"] != "indistinguishable" and r["marked"] < r["points"]:
            parts.append(f"{r['word']} between {name}{_x(r['from'])} and {_x(r['to'])} ({r['marked']} of "
                         f"{r['points']} points)")
        else:
            parts.append(f"{r['word']} from {name}{_x(r['from'])} to {_x(r['to'])}")
    return "; ".join(parts)


def _x(v: float) -> str:
    """An x value as people write it: 1,200 for whole numbers, 3 significant digits otherwise."""
    return f"{int(v):,}" if float(v).is_integer() else f"{v:.3g}"
