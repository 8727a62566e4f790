"""Tuning as selection: each arm's best setting on its tuning seeds, the verdict's view of the evaluation trials,
and verdict.md's Tuning section (:mod:`ablate.plan.tuning` plans the trials).

The choice uses the tuning trials only and the verdict compares the arms at their chosen settings on the evaluation
seeds, which no choice saw: the max of k noisy means is biased upward (by about σ·E[max of k standard normals]), and
that bias stays out of the test. The naive comparison, best tuning mean against best tuning mean, is shown beside it
and labelled biased; Dodge et al. (2019)'s expected best value per tuning budget (:func:`ablate.stats.expected_max`)
shows which arm leads at which budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ablate.plan.tuning import setting_label
from ablate.record.names import format_value

#: Statuses of a trial that has not ended.
_UNFINISHED = ("pending", "running", "interrupted")
#: Statuses of a trial stopped from outside (infrastructure, re-run by ``--resubmit``): no choice until it re-ran.
_STOPPED = ("killed", "timeout")


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def select(plan: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each arm's tuning results and chosen setting, from the tuning trials' rows.

    An arm's own choice is the setting with the best mean metric over the tuning seeds (the max for ``goal:
    maximize``), among the settings whose every tuning trial gave a finite metric (a setting that failed on a seed
    is not chosen: it may fail again); a tie goes to the setting declared first. No choice is made while a tuning
    trial of the arm has not ended or was stopped from outside (killed, timeout: ``--resubmit`` re-runs it), or
    when no setting ran cleanly. Once every arm has one,
    :func:`ablate.stats.choose` says where each is judged: at its own choice only when the arms' tuning data show
    them preferring different settings, otherwise at one common setting, the best of their pooled tuning data (the
    rule that holds the A/A rate at alpha on shallow surfaces, benchmarks/results/tuning_aa.md).

    Parameters
    ----------
    plan : mapping
        The plan record of a tuned ablation (``tuning`` and the expanded arms).
    rows : sequence of mapping
        :func:`ablate.record.results.collect` rows (the ``tuning`` ones are used).

    Returns
    -------
    dict
        base arm -> ``{"arm": the tuned arm to judge it at, or None, "index", "setting", "own_arm" and
        "own_index": its own best, "common": bool (judged at the common setting, :func:`ablate.stats.choose`),
        "means": [per setting, None when not clean], "values": [[per tuning seed]], "complete": bool, "why":
        reason when no choice}``.
    """
    tuning = plan["tuning"]
    metric, goal = plan["metric"], plan.get("goal", "maximize")
    k = len(tuning["settings"])
    by_arm: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("role") == "tuning":
            by_arm.setdefault(str(r["arm"]), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for base in tuning["base_arms"]:
        arms = sorted((a for a in plan["arms"] if a.get("base") == base), key=lambda a: a["setting_index"])
        means: list[float | None] = [None] * k
        values: list[list[float | None]] = [[] for _ in range(k)]
        complete, stopped = True, False
        for a in arms:
            i = int(a["setting_index"])
            rs = by_arm.get(a["name"], [])
            vals = [float(r[metric]) if r.get("status") == "ok" and _finite(r.get(metric)) else None for r in rs]
            values[i] = vals
            complete &= not any(r.get("status") in _UNFINISHED for r in rs) and len(rs) == len(tuning["seeds"])
            stopped |= any(r.get("status") in _STOPPED for r in rs)
            if vals and all(v is not None for v in vals):
                means[i] = sum(vals) / len(vals)  # type: ignore[arg-type]
        clean = [i for i in range(k) if means[i] is not None]
        rec: dict[str, Any] = {"arm": None, "index": None, "setting": None, "means": means, "values": values,
                               "complete": complete, "why": None}
        if stopped:  # not a failure of its setting: choosing without it would drop a result
            rec.update(complete=False, why="a tuning trial was stopped (killed or timed out) before it gave a metric")
        elif not complete:
            rec["why"] = "its tuning trials have not all ended"
        elif not clean:
            rec["why"] = "no setting gave a finite metric on every tuning seed"
        else:
            sign = 1.0 if goal == "maximize" else -1.0
            best = max(clean, key=lambda i: (sign * means[i], -i))  # type: ignore[operator]
            rec.update(arm=arms[best]["name"], index=best, setting=dict(tuning["settings"][best]))
        rec.update(own_arm=rec["arm"], own_index=rec["index"], common=False)
        out[base] = rec
    if all(r["index"] is not None for r in out.values()) and len(out) > 1:
        _judge_at(plan, out)
    return out


def common_reason(n_seeds: int) -> str:
    """Why arms are judged at one common setting, in words (``tuning.json`` and verdict.md)."""
    if n_seeds < 2:
        return ("one tuning seed per setting: the noise of the choice cannot be estimated, so the arms are judged at "
                "the best setting of their pooled tuning data")
    return ("a treatment is judged at its own choice only when its tuning data and the control's each prefer their "
            "own choice by at least 2 standard errors of a difference; these do not, so they are judged at the best "
            "setting of their pooled tuning data (identical arms would otherwise often choose settings whose true "
            "values differ, and the verdict would measure the choice")


def _judge_at(plan: Mapping[str, Any], out: dict[str, dict[str, Any]]) -> None:
    """Set each arm's setting to judge it at by :func:`ablate.stats.choose` (its own, or the common one)."""
    # lazy: ablate.stats loads numpy and scipy, kept off `ablate status` and the orchestrator's imports
    import numpy as np  # noqa: PLC0415  # lazy: as said above

    from ablate.stats import choose  # noqa: PLC0415  # lazy: as said above

    tuning = plan["tuning"]
    bases = list(tuning["base_arms"])
    k, n = len(tuning["settings"]), len(tuning["seeds"])
    values = np.full((1, len(bases), k, n), np.nan)
    for a, base in enumerate(bases):
        for i, vals in enumerate(out[base]["values"]):
            for j, v in enumerate(vals[:n]):
                values[0, a, i, j] = np.nan if v is None else v
    c = choose(values, goal=plan.get("goal", "maximize"))
    names = {(a["base"], int(a["setting_index"])): a["name"] for a in plan["arms"] if a.get("base") in out}
    for a, base in enumerate(bases):
        i = int(c.index[0, a])
        out[base].update(arm=names[(base, i)], index=i, setting=dict(tuning["settings"][i]),
                         common=bool(c.common[0, a]))


def edges(tuning: Mapping[str, Any], setting: Mapping[str, Any]) -> list[str]:
    """The tuned keys whose chosen value is the smallest or the largest value tried (numbers only), in words."""
    out = []
    for key, value in setting.items():
        tried = sorted({s[key] for s in tuning["settings"] if _finite(s.get(key))})
        if len(tried) < 2 or not _finite(value):
            continue
        if value == tried[0] or value == tried[-1]:
            end = "smallest" if value == tried[0] else "largest"
            out.append(f"{key.rsplit('.', 1)[-1]}={format_value(value)} is the {end} value tried")
    return out


def close_settings(s: Mapping[str, Any], goal: str) -> list[int] | None:
    """The other settings within the tuning noise of the chosen one: a mean less than 2 standard errors of a
    difference (2·√2·s/√n, s the pooled SD within settings over n tuning seeds) from the chosen mean; None when the
    noise cannot be estimated (one tuning seed per setting).

    Two identical arms can choose settings this far apart, and a verdict judging each at its own choice then
    measures the choice, not the arm (benchmarks/results/tuning_aa.md): :func:`ablate.stats.choose` judges such arms
    at one common setting.
    """
    if s["index"] is None:
        return []
    clean = [i for i, m in enumerate(s["means"]) if m is not None]
    n = len(s["values"][s["index"]])
    if n < 2:
        return None
    ss = sum(sum((v - s["means"][i]) ** 2 for v in s["values"][i]) for i in clean)
    sd = math.sqrt(ss / (len(clean) * (n - 1)))
    sign = 1.0 if goal == "maximize" else -1.0
    best = s["means"][s["index"]]
    bar = 2 * math.sqrt(2) * sd / math.sqrt(n)
    return [i for i in clean if i != s["index"] and sign * (best - s["means"][i]) < bar]


def evaluation_view(plan: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
                    chosen: Mapping[str, str] | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The plan and rows the ordinary verdict judges: each arm at its chosen setting, on the evaluation seeds.

    Parameters
    ----------
    plan : mapping
        The tuned plan record.
    rows : sequence of mapping
        Every row (tuning and evaluation) of :func:`ablate.record.results.collect`.
    chosen : mapping or None
        base arm -> tuned arm, as recorded in ``tuning.json`` (what the evaluation trials ran); None before.

    Returns
    -------
    (dict, list of dict)
        A plan record whose ``arms`` are the chosen tuned arms (an arm not chosen yet keeps its own name, with no
        trial) labelled as the arm, and whose ``seeds`` are the evaluation seeds; and the evaluation rows.
    """
    tuning = plan["tuning"]
    by_name = {a["name"]: a for a in plan["arms"]}
    arms = []
    for base in tuning["base_arms"]:
        name = (chosen or {}).get(base)
        first = next(a for a in plan["arms"] if a.get("base") == base)
        arm = dict(by_name[name]) if name in by_name else {**first, "name": base, "setting": None}
        arm["label"] = first["base_label"]
        arms.append(arm)
    view = {k: v for k, v in plan.items() if k != "tuning"}
    view.update(arms=arms, seeds=list(tuning["eval_seeds"]))
    return view, [dict(r) for r in rows if r.get("role") == "evaluation"]


def section(plan: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], selection: Mapping[str, Any],
            chosen: Mapping[str, str] | None, comparisons: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """verdict.json's ``tuning``: the declaration, each arm's choice, edge warnings, expected-max curves and the
    naive (biased) best-vs-best comparison beside the verdict's.

    Parameters
    ----------
    plan : mapping
        The tuned plan record.
    rows : sequence of mapping
        Every row of :func:`ablate.record.results.collect`.
    selection : mapping
        :func:`select`'s result.
    chosen : mapping or None
        The recorded choice (``tuning.json``): what the evaluation trials ran.
    comparisons : sequence of mapping
        The verdict's comparisons (on the evaluation seeds), by base arm order (treatments).
    """
    # lazy: ablate.stats loads numpy and scipy, kept off verdict reuse and `ablate status`
    from ablate.stats import expected_max  # noqa: PLC0415  # lazy: as said above

    tuning = plan["tuning"]
    goal = plan.get("goal", "maximize")
    sign = 1.0 if goal == "maximize" else -1.0
    bases = list(tuning["base_arms"])
    label = {b: b for b in bases}  # the arm's own name (``control``, ``hidden=32``), as results.csv's rows say it
    arms_out = []
    curves: dict[str, Any] = {}
    for base in bases:
        s = selection[base]
        clean = [m for m in s["means"] if m is not None]
        curve = expected_max(clean, goal=goal) if clean else None
        if curve is not None:
            curves[base] = curve
        recorded = (chosen or {}).get(base)
        arms_out.append({
            "arm": base, "label": label.get(base, base), "chosen_arm": s["arm"], "index": s["index"],
            "setting": s["setting"], "setting_label": setting_label(s["setting"]) if s["setting"] else None,
            "means": s["means"], "values": s["values"], "why": s["why"],
            "edge": edges(tuning, s["setting"]) if s["setting"] else [],
            "close": None if (close := close_settings(s, goal)) is None else [
                setting_label(tuning["settings"][i]) for i in close],
            "own_arm": s.get("own_arm"), "own_setting_label": None if s.get("own_index") is None else
            setting_label(tuning["settings"][s["own_index"]]), "common": bool(s.get("common")),
            "recorded": recorded, "recorded_differs": bool(recorded and s["arm"] and recorded != s["arm"]),
            "expected_max": None if curve is None else {"budgets": curve.budgets, "mean": curve.mean,
                                                         "low": curve.low, "high": curve.high}})
    control = bases[0]
    naive = []
    by_label = {c.get("arm"): c for c in comparisons}
    view_names = {base: (chosen or {}).get(base, base) for base in bases}
    for base in bases[1:]:
        t, c = selection[base], selection[control]
        entry: dict[str, Any] = {"arm": base, "label": label.get(base, base)}
        if t["index"] is not None and c["index"] is not None:
            t_best, c_best = t["means"][t["index"]], c["means"][c["index"]]
            entry["naive_diff"] = sign * (t_best - c_best)
        comp = by_label.get(view_names[base])
        if comp is not None:
            entry["verdict"] = comp.get("verdict")
            entry["diff"] = comp.get("diff")
        if base in curves and control in curves:
            # the budgets both curves have: an arm with a setting that failed has fewer clean settings
            n = min(len(curves[base].mean), len(curves[control].mean))
            lead = [sign * (a - b) for a, b in zip(curves[base].mean[:n], curves[control].mean[:n], strict=True)]
            final = math.copysign(1.0, lead[-1]) if lead[-1] != 0 else 0.0
            entry["flips"] = [k for k, d in zip(curves[base].budgets[:n], lead, strict=True)
                              if (math.copysign(1.0, d) if d != 0 else 0.0) != final]
            entry["lead"] = lead
        naive.append(entry)
    common = [a["arm"] for a in arms_out if a["common"]]
    return {"keys": list(tuning["keys"]), "how": tuning["how"], "settings": tuning["settings"],
            "seeds": tuning["seeds"], "eval_seeds": tuning["eval_seeds"], "arms": arms_out, "naive": naive,
            "common": {"arms": common, "reason": common_reason(len(tuning["seeds"]))} if common else None}


def markdown(t: Mapping[str, Any], metric: str, dec: int = 4) -> list[str]:
    """verdict.md's Tuning section, from verdict.json's ``tuning``."""

    def num(x: Any) -> str:
        return "–" if not _finite(x) else f"{x:.{dec}f}"

    def signed(x: Any) -> str:
        return "–" if not _finite(x) else f"{x:+.{dec}f}"

    k = len(t["settings"])
    L = ["## Tuning", "",
         f"Every arm, the control included, ran the same {k} settings of {', '.join(f'`{x}`' for x in t['keys'])} "
         f"({t['how']}) on the same tuning seeds ({', '.join(map(str, t['seeds']))}); each arm's setting with the "
         f"best mean {metric} over them was chosen (or one common setting, below), and the verdict above compares "
         f"the arms at their chosen settings on the evaluation seeds ({len(t['eval_seeds'])}, disjoint from the "
         "tuning seeds), so the choice's upward bias does not enter the test.", "",
         "| arm | chosen setting | its tuning mean | " + " | ".join(setting_label(s) for s in t["settings"]) + " |",
         "|---|---|---|" + "---|" * k]
    for a in t["arms"]:
        chosen = a["setting_label"] or f"none ({a['why']})"
        best = a["means"][a["index"]] if a["index"] is not None else None
        cells = [("**" + num(m) + "**" if i == a["index"] else num(m)) for i, m in enumerate(a["means"])]
        L.append(f"| {a['label']} | {chosen} | {num(best)} | " + " | ".join(cells) + " |")
    L.append("")
    if t.get("common"):
        own = "; ".join(f"{a['label']}'s own best was {a['own_setting_label']}" for a in t["arms"]
                        if a["common"] and a.get("own_setting_label"))
        at = next(a["setting_label"] for a in t["arms"] if a["common"])
        L += [f"**One common setting**: {', '.join(t['common']['arms'])} are judged at {at} ({own}): "
              f"{t['common']['reason']}. It was fixed from the tuning data before any evaluation trial ran "
              "(`tuning.json`).", ""]
    for a in t["arms"]:
        if a["edge"]:
            L.append(f"- **Edge of the range**: {a['label']}'s choice {'; '.join(a['edge'])}: its best may lie "
                     "outside the range searched, so the arm may be under-tuned; widen the range (`tune.values`) "
                     "and run again.")
        if a["recorded_differs"]:
            L.append(f"- **Choice changed**: {a['label']}'s evaluation trials ran {a['recorded']}, chosen when its "
                     f"tuning ended; the tuning records now choose {a['chosen_arm']} (a record re-run or edited "
                     "since).")
        if a.get("close"):
            L.append(f"- **Choice within noise**: for {a['label']}, {', '.join(a['close'])} lie within the tuning "
                     f"noise of {a['setting_label']} (less than 2 standard errors of a difference from it): its "
                     "best is not clear, which is why arms are judged at one common setting unless both arms' tuning "
                     "data prefer their own choices; more tuning seeds (`tune.seeds`) make the choice clear.")
        elif "close" in a and a["close"] is None and a["index"] is not None:
            L.append(f"- {a['label']}: one tuning seed per setting, so how clear its choice is cannot be said "
                     "(`tune.seeds=2` or more says it).")
    if any(a["edge"] or a["recorded_differs"] or a.get("close") or ("close" in a and a["close"] is None
                                                                 and a["index"] is not None) for a in t["arms"]):
        L.append("")
    L += [f"Expected best {metric} when tuning with a budget of n settings (Dodge et al. 2019: the expected best "
          "of n settings drawn from those tried, ±1 s.d.):", "",
          "| n | " + " | ".join(a["label"] for a in t["arms"]) + " |", "|---|" + "---|" * len(t["arms"])]
    for j in range(k):
        cells = []
        for a in t["arms"]:
            em = a["expected_max"]
            cells.append("–" if em is None or j >= len(em["mean"]) else
                         f"{num(em['mean'][j])} [{num(em['low'][j])}, {num(em['high'][j])}]")
        L.append(f"| {j + 1} | " + " | ".join(cells) + " |")
    L.append("")
    for n in t["naive"]:
        flips = n.get("flips")
        lead = ("; the expected-best curves rank it the other way at a budget of "
                + ", ".join(map(str, flips)) + " setting(s)") if flips else ""
        L.append(f"- {n['label']}: the naive best-vs-best difference of tuning means is {signed(n.get('naive_diff'))} "
                 f"(**biased**: each side is the best of {k} noisy means, and chosen on the same seeds), against "
                 f"{signed(n.get('diff'))} on the evaluation seeds ({n.get('verdict') or 'not judged yet'}){lead}.")
    a_n, s_n, n_eval = len(t["arms"]), len(t["seeds"]), len(t["eval_seeds"])
    L += ["", f"Cost: {a_n * k * s_n} tuning trials ({a_n} arms x {k} settings x {s_n} seeds) and {a_n * n_eval} "
          f"evaluation trials. The seed advice above counts evaluation seeds per arm: running this design again with "
          f"N evaluation seeds costs {a_n * k * s_n} + {a_n} x N trials, the tuning included.", ""]
    return L
