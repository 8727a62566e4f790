"""verdict.md: the verdict for a person, in the layout of the verdict spec (B9).

Order: title, validity warning, the bottom line (better / worse / equivalent / inconclusive, what to do), one
verdict line per treatment, setup, per-arm table, comparison table, seed recommendation, flags, failures,
plots, provenance, confounds, raw values by seed, terms. One function per section. Pure: a string
from the verdict dict (:func:`ablate.judge.verdict.analyse` plus confounds and pins).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from ablate.judge.against import against_markdown
from ablate.judge.prereg import text as prereg_text
from ablate.judge.suite import suite_markdown
from ablate.judge.table import markdown as table_markdown
from ablate.judge.unchanged import bottom_line as unchanged_bottom_line
from ablate.pin.pins import untracked_summary
from ablate.record.errorline import failure_line
from ablate.record.names import value_label
from ablate.stats.compare import firm_shortfall, level_text
from ablate.stats.core import verdict_label
from ablate.stats.multiplicity import LABELS

#: What an indicative better/worse is, in the bottom line: a lead to confirm, not advice to act on.
LEAD = "a lead, not yet a result"


def _num(v: Any, dec: int | None = None) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if dec is not None:
        return f"{v:.{dec}f}"
    return f"{v:.4g}"


def _p(v: Any) -> str:
    if v is None:
        return "–"
    return "< 0.0001" if v < 1e-4 else (f"{v:.2g}" if v < 0.001 else f"{v:.3g}")


def _ci(ci: Any, dec: int | None = None) -> str:
    if not ci or ci[0] is None:
        return "–"
    return f"[{_num(ci[0], dec)}, {_num(ci[1], dec)}]"


def _decimals(values: list[Any]) -> int:
    """Decimals that show the arms' spread: 2 significant digits of the smallest positive SD-like scale."""
    scales = [abs(v) for v in values if isinstance(v, int | float) and v and math.isfinite(v)]
    if not scales:
        return 4
    return int(min(8, max(0, -math.floor(math.log10(min(scales))) + 1)))



def _value(v: Any) -> str:
    return "null" if v is None else str(v)


def _value_if_hidden(c: Mapping[str, Any]) -> str:
    """The treatment's value when its arm name does not end in it (a marked or cleaned label), else ''."""
    val = value_label(c.get("value"))
    return "" if str(c["arm"]).endswith(f"={val}") else val


def _suite_vars(v: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((v.get("suite") or {}).get("variables") or [])


def _control_value(v: Mapping[str, Any], c: Mapping[str, Any] | None = None) -> str:
    """The control's value of the key a comparison varies (a suite's control has one value per key)."""
    arms = v["arms"]
    value = arms[0].get("value") if arms else "?"
    if isinstance(value, Mapping):
        keys = {sv["name"]: sv["key"] for sv in _suite_vars(v)}
        key = keys.get(c.get("variable")) if c else None
        if key is not None and key in value:
            return _value(value[key])
        return "; ".join(f"{k} {_value(x)}" for k, x in value.items())
    return _value(value)


def render_markdown(v: Mapping[str, Any]) -> str:
    """The verdict as markdown: the bottom line first, then the evidence, one function per section.

    Parameters
    ----------
    v : mapping
        The content of verdict.json.

    Returns
    -------
    str
    """
    var = v.get("variable") or {}
    key = var.get("key", "?")
    arms = v["arms"]
    dec = _decimals([a.get("sd") for a in arms] + [a.get("sem") for a in arms])
    L: list[str] = [f"# Ablation of `{key}`: {v['metric']} ({v['goal']})", ""]
    if v.get("invalid"):
        L += ["> **INVALID ABLATION.** " + " ".join(r.rstrip(".") + "." for r in v["invalid_reasons"])
              + " The verdicts below are shown for inspection only.", ""]
    if v.get("dirty"):
        L += ["> **Dirty**: the trials ran uncommitted changes to tracked files (the diff is in `dirty.patch`).", ""]
    L += _bottom_line(v, dec)
    L += _verdict_lines(v)
    L += _suite_table_against(v)
    L += _setup(v, key)
    L += _arms_table(v, dec)
    L += _comparisons_table(v, dec)
    L += _seed_section(v)
    L += _flags(v)
    L += ["## Failures", ""]
    L += _failures(v)
    L += _plots(v)
    L += _provenance(v)
    L += _confounds(v)
    L += _raw(v, dec)
    L += _terms()
    return "\n".join(L) + "\n"


def _rerun(v: Mapping[str, Any], seeds: int) -> str:
    """The command that runs this ablation again with ``seeds`` seeds per arm (a new sweep dir)."""
    names = [sv["name"] for sv in _suite_vars(v)] or [str((v.get("variable") or {}).get("name", "?"))]
    return (f"run the ablation again with `ablate -m variable={','.join(names)} seeds={seeds}` (and the other "
            "overrides of this run; a new sweep dir)")


def _more_seeds(c: Mapping[str, Any], v: Mapping[str, Any] | None = None,
                rerun: Callable[[int], str] | None = None) -> str:
    """What to run next for an undecided treatment, from its seed advice (one advised number)."""
    adv = c.get("seed_advice") or {}
    if c.get("seed_advice_sequential"):
        return c["seed_advice_sequential"]
    n, need, cap, power = adv.get("n"), adv.get("n_needed"), adv.get("cap", 50), adv.get("power")
    if n is None:
        return "run more seeds per arm"
    if need is None:
        return (f"more than {cap} seeds per arm would be needed (> cap: the seed advice's cap, the most seeds per arm "
                f"it plans for, is {cap}): it cannot be decided within budget"
                + ("" if adv.get("target_kind") == "margin" else "; set a margin to test for no meaningful "
                   "difference instead"))
    what = "the margin" if adv.get("target_kind") == "margin" else "the effect seen so far, which may be optimistic"
    buys = f"; power {power:.2f} at the SD seen so far" if isinstance(power, int | float) else ""
    return (f"run {max(1, need - n)} more seeds per arm ({need} per arm: 80% power for {what}, planned on the "
            f"SD's 90% upper confidence limit{buys}) to decide: {(rerun or partial(_rerun, v or {}))(need)}")


def _bottom_line(v: Mapping[str, Any], dec: int) -> list[str]:
    """What a reader can act on, per treatment: the verdict word, what to do, and the numbers behind it."""
    comps = v["comparisons"]
    L = ["## Bottom line", ""]
    if not comps:
        return [*L, "No treatment arms.", ""]
    if v.get("invalid"):
        L += ["Do not act on these results: the ablation is invalid (see the warning above). "
              "Fix the cause and run it again.", ""]
    if v.get("post_hoc"):
        pre = "; ".join(f"{p['arm']} **{verdict_label(p['verdict'], p.get('firm'))}**"
                        for p in v.get("preregistered_verdict") or [])
        L += [f"> **Post hoc**: this verdict changes the analysis the plan froze before any trial ran "
              f"({prereg_text(v['post_hoc']['changed'])}); read it as exploratory. The pre-registered verdict: "
              f"{pre or '–'} (in verdict.json under `preregistered_verdict`; `ablate verdict DIR --reset` "
              "brings it back).", ""]
    for c in comps:
        what = bottom_line_words(c, v, dec)
        val = _value_if_hidden(c)  # the treatment's value, always (when the arm's name does not show it)
        L.append(f"- **{c['arm']}** ({f'value {val}; ' if val else ''}vs control {_control_value(v, c)}): {what}")
    if v.get("non_default_options"):
        L += ["", "Options changed from the defaults: " + _non_default(v) + "."]
    L += ["", "Words in **bold** and the numbers behind them are defined under [Terms](#terms).", ""]
    return L


def bottom_line_words(c: Mapping[str, Any], v: Mapping[str, Any], dec: int | None = None,
                      rerun: Callable[[int], str] | None = None) -> str:
    """One treatment's bottom line: the verdict word (``better (indicative)`` where indicative), what to do, the
    numbers behind it and, for an indicative or inconclusive verdict, the seeds to run (``ablate audit`` says its
    post-hoc verdict in these words too).

    Parameters
    ----------
    c : mapping
        A comparison of verdict.json.
    v : mapping
        The verdict (its ``metric``, ``arms``, ``variable``).
    dec : int, optional
        Decimals for the numbers; default: verdict.md's, from the arms' SDs.
    rerun : callable, optional
        seeds per arm -> the clause saying what to run; default: verdict.md's "run the ablation again with ...".

    Returns
    -------
    str
    """
    if dec is None:
        dec = _decimals([a.get("sd") for a in v["arms"]] + [a.get("sem") for a in v["arms"]])
    metric = v["metric"]
    ci = c.get("ci")
    level = _level(c.get("ci_level"))
    diff = c.get("diff")
    size = (f" by {_num(abs(diff), dec)}" + (f" ({abs(c['diff_pct']):.1f}%)" if c.get("diff_pct") is not None
                                             else "")
            + (f"; {level} CI of the difference [{_num(ci[0], dec)}, {_num(ci[1], dec)}]" if ci else "")
            if diff is not None else "")
    verdict = c["verdict"]
    firm = c.get("firm") is not False
    word = verdict_label(verdict, c.get("firm"))
    if c.get("unchanged"):  # every seed equal to the control's: what it is and why, never "run more seeds"
        return unchanged_bottom_line(c, word)
    if verdict == "better":
        what = f"**{word}**: {'adopt it' if firm else LEAD}; it improves {metric}{size}."
    elif verdict == "worse":
        what = f"**{word}**: {'reject it' if firm else LEAD}; it makes {metric} worse{size}."
    elif verdict == "equivalent":
        what = (f"**equivalent**: no difference that matters; the difference stays within the margin "
                f"±{c.get('margin'):.4g}; choose on other grounds (cost, simplicity).")
    elif verdict == "inconclusive":
        what = f"**inconclusive**: {_more_seeds(c, v, rerun)}."
    else:
        what = f"**insufficient data**: {c.get('insufficient_reason') or 'see the verdict line'}."
    if verdict in ("better", "worse") and not firm:
        what += " " + indicative_note(c, (rerun or partial(_rerun, v))(c.get("firm_from") or 20))
    return what


def indicative_note(c: Mapping[str, Any], rerun: str) -> str:
    """Why a better/worse verdict is only indicative, and the seeds that would make it firm (verdict.md's bottom
    line; the audit's too).

    Parameters
    ----------
    c : mapping
        A comparison of verdict.json (``firm`` False).
    rerun : str
        What to run for the seeds that make it firm (a clause, e.g. verdict.md's "run the ablation again with ...").
    """
    n = min(c.get("n_treatment") or 0, c.get("n_control") or 0)
    lim = c.get("firm_from") or 20
    pname = "p" if c.get("multiplicity") in ("none", "group sequential") else "p_adj"
    short = firm_shortfall(c.get("pvalue_adjusted"), c.get("decision_level"), c.get("decision_label") or "α", pname,
                           lim)
    return (f"Indicative only: with {n} seeds per arm{' (paired)' if c.get('paired') else ''} no test of the mean "
            f"holds α for every metric shape (skewed arms of unequal spread reach a false-positive rate of 0.08-0.14 "
            f"there), and {short}. At {lim} seeds per arm ({max(0, lim - n)} more) it is firm if its {pname} is then "
            f"below {c.get('decision_label') or 'α'} (ablate's rule for a firm verdict; more seeds can also show no "
            f"effect; the seeds for 80% power are a separate answer, under Seed recommendation): {rerun}.")


def _robust(c: Mapping[str, Any]) -> str:
    """The rank test's p and its floor, ``0.148 (floor 0.0079)``: never a p printed below the floor it cannot go
    under (an asymptotic p is shown at the floor then)."""
    if not c.get("robust_test"):
        return "–"
    p, floor = c.get("robust_pvalue"), c.get("robust_min_pvalue")
    if p is not None and floor is not None:
        p = max(p, floor)
    return f"{_p(p)} (floor {_p(floor)})" if floor is not None else _p(p)


def _level(level: Any) -> str:
    return level_text(level) if isinstance(level, int | float) else "95%"


def _verdict_lines(v: Mapping[str, Any]) -> list[str]:
    comps = v["comparisons"]
    L = ["## Verdict", ""]
    if not comps:
        L.append("No treatment arms.")
    for c in comps:
        size = f" ({c['size']})" if c.get("size") else ""
        val = _value_if_hidden(c)
        shown = f" (value {val})" if val else ""  # the treatment's value, always
        control = _control_value(v, c)
        L.append(f"- **{c['arm']}**{shown} vs control ({control}): **{verdict_label(c['verdict'], c.get('firm'))}**"
                 f"{size}. {c['reason']}")
    return [*L, ""]


def _arms_table(v: Mapping[str, Any], dec: int) -> list[str]:
    arms = v["arms"]
    L = ["## Arms", "", "| arm | value | n | failed | pending | mean | SD | SEM | CI of the mean (95%) | median | IQM "
         "| min | max |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for a in arms:
        ci = _ci(a.get("ci"), dec) + (" (Wilson, 0/1 metric)" if str(a.get("ci_method", "t")).startswith("Wilson")
                                      else "")
        L.append(f"| {a['arm']} | {_value(a.get('value'))} | {a['n']} | {a['n_failed']} | {a.get('pending', 0)} | "
                 f"{_num(a.get('mean'), dec)} | {_num(a.get('sd'), dec)} | {_num(a.get('sem'), dec)} | "
                 f"{ci} | {_num(a.get('median'), dec)} | {_num(a.get('iqm'), dec)} | "
                 f"{_num(a.get('min'), dec)} | {_num(a.get('max'), dec)} |")
    notes = sorted({a["iqm_note"] for a in arms if a.get("iqm_note")})
    if notes:
        L += ["", "IQM: " + "; ".join(notes) + " (informative from n = 5)."]
    return [*L, ""]


def _comparisons_table(v: Mapping[str, Any], dec: int) -> list[str]:
    comps = v["comparisons"]
    L = ["## Comparisons", "",
         "Δ = treatment − control in the metric's own sign, as in the verdict lines and the ablation table"
         + (" (the metric is minimised: a negative Δ is better)" if v.get("goal") == "minimize" else "")
         + ". Each CI of Δ is at the level its decision used (shown in the cell), so it excludes 0 exactly when the "
         "verdict is better or worse; effect size: Hedges' g (unpaired) or d_z (paired), t and P(T>C) are "
         "sign-normalised (positive = better). P(T>C) has a 95% CI.", "",
         "| treatment | test | n (T/C) | Δ | Δ% | CI of Δ (level) | t (df) | p | p_adj | effect | P(T>C) [95% CI] "
         "| robust p (floor) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    flip = -1.0 if v.get("goal") == "minimize" else 1.0
    for c in comps:
        pi = _num(c.get("prob_improvement"), 2)
        if c.get("prob_improvement_ci"):
            pi += " " + _ci(c["prob_improvement_ci"], 2)
        t = f"{_num(c.get('statistic'), 2)} ({_df(c.get('df'))})" if c.get("statistic") is not None else "–"
        eff = f"{c['effect_size_name']} = {_num(c.get('effect_size'), 2)}" if c.get("effect_size") is not None else "–"
        rob = _robust(c)
        level = f" ({_level(c['ci_level'])})" if c.get("ci") else ""
        diff = None if c.get("diff") is None else flip * c["diff"]
        pct = None if c.get("diff_pct") is None else flip * c["diff_pct"]
        ci = sorted((flip * c["ci"][0], flip * c["ci"][1])) if c.get("ci") and c["ci"][0] is not None else c.get("ci")
        L.append(f"| {c['arm']} | {c['test']} | {c['n_treatment']}/{c['n_control']} | {_num(diff, dec)} | "
                 f"{_num(pct, 1)} | {_ci(ci, dec)}{level} | {t} | {_p(c.get('pvalue'))} | "
                 f"{_p(c.get('pvalue_adjusted'))} | {eff} | {pi} | {rob} |")
    return [*L, ""]


def seed_advice_text(c: Mapping[str, Any]) -> str:
    """A comparison's seed recommendation (verdict.md's Seed recommendation line; the audit's too): the seeds for
    80% power and, for an indicative verdict, what they answer beside the seeds that make it firm."""
    adv = c.get("seed_advice")
    msg = adv["message"] if adv else "not computable (needs at least 2 completed seeds per arm and some variance)"
    if c.get("seed_advice_sequential"):
        msg = c["seed_advice_sequential"] + (f". {msg}" if adv else "")
    if c.get("firm") is False:  # the bottom line names another number of seeds: say what each answers
        msg += (f" (This is the seeds for 80% power at the observed effect; the {c.get('firm_from') or 20} seeds "
                "per arm in the bottom line answer another question: from how many seeds ablate calls this "
                "verdict firm.)")
    return msg


def _seed_section(v: Mapping[str, Any]) -> list[str]:
    L = ["## Seed recommendation", ""]
    for c in v["comparisons"]:
        L.append(f"- **{c['arm']}**: {seed_advice_text(c)}")
    L += ["", "The MDE (minimum detectable effect) is the smallest true difference this N detects with 80% power. "
          "Seeds needed are planned on the 90% upper confidence limit of the test's SD (pooled, or of the paired "
          "differences), since SDs from few seeds are "
          "noisy (the point SD would reach the power in only about half the pilots). "
          "ablate reports no post-hoc \"observed power\" (it only restates the p-value).", ""]
    return L


def _flags(v: Mapping[str, Any]) -> list[str]:
    L = ["## Flags", ""]
    n_flags = 0
    for c in v["comparisons"]:
        for f in c.get("flags") or []:
            L.append(f"- {c['arm']}: {f['message']} (`{f['code']}`)")
            n_flags += 1
    if not n_flags:
        L.append("None.")
    return [*L, ""]


def _plots(v: Mapping[str, Any]) -> list[str]:
    plots = v.get("plots") or {}
    L: list[str] = []
    if plots.get("values") or plots.get("paired"):
        L += ["## Plots", ""]
        if plots.get("values"):
            L += ["![per-seed values per arm (ordered by the variable's value), with mean and 95% CI]"
                  f"({plots['values']})", ""]
        if plots.get("paired"):
            L += [f"![paired differences by seed, with Δ and CI]({plots['paired']})", ""]
    elif plots.get("error"):
        L += ["## Plots", "", f"Not drawn: {plots['error']}", ""]
    elif plots.get("pending"):
        L += ["## Plots", "", "Being drawn after this text, by a separate process that rewrites this section "
              "when they are done. If this line stays, they were not drawn: `plots.log` in this directory says "
              "why; `ablate verdict DIR --wait-plots` draws them again.", ""]
    return L


def _suite_table_against(v: Mapping[str, Any]) -> list[str]:
    """The suite, ablation-table and --against sections (:mod:`ablate.judge.suite`, :mod:`ablate.judge.table`,
    :mod:`ablate.judge.against`), placed after the verdict lines."""
    L = suite_markdown(v)
    if v.get("table"):
        L += table_markdown(v["table"], v)
        if (v.get("plots") or {}).get("forest"):
            L += [f"![forest plot: Δ vs control with its CI, per treatment]({v['plots']['forest']})", ""]
    return L + against_markdown(v)


def _df(df: Any) -> str:
    """Degrees of freedom: ``9`` for a whole number (paired t, Student), ``7.3`` for Welch's."""
    if not isinstance(df, int | float):
        return "–"
    return str(int(df)) if float(df).is_integer() else f"{df:.1f}"


def _terms() -> list[str]:
    return [
        "## Terms", "",
        "- **Δ**: mean(treatment) − mean(control), signed so that positive is better; **Δ%**: relative to control.",
        "- **CI** (confidence interval): the range of true values compatible with the data at the level shown "
        "(95%, 97.5%, ...). The CI of Δ is at the level its decision used: 1 − α/m (Bonferroni), Holm's step "
        "level α/(m − j + 1), R·α/m for Benjamini-Hochberg (false coverage-statement rate), Dunnett's "
        "simultaneous level, or 1 − the boundary p of a sequential look; it excludes 0 exactly when the verdict "
        "is better or worse. Arms' CIs of the mean are 95% (Wilson's interval for a 0/1 metric).",
        "- **α** (alpha): the accepted chance of calling a treatment better or worse when it does nothing, for "
        "the whole family of treatments. **p**: how surprising the data would be if the treatment did nothing; "
        "**p_adj**: p after Holm's correction for testing m treatments (or the chosen multiplicity).",
        "- **seed**: one run of an arm with its own random seed; **arm**: the control or a treatment.",
        "- **g** (Hedges' g): Δ in units of the pooled standard deviation, bias-corrected; **d_z**: the mean of the "
        "paired differences in units of their SD (paired designs). 0.5 is medium, 0.8 large.",
        "- **P(T>C)**: how often a treatment seed beats a control seed (0.5 = no difference).",
        "- **robust p**: a rank test (Mann-Whitney, or Wilcoxon when paired) that does not assume normal errors; "
        "its floor is the smallest p it can reach at this N.",
        "- **IQM**: interquartile mean (mean of the middle 50% of seeds). **MDE**: see Seed recommendation. "
        "**Winner's curse**: an effect that just passed a test tends to be overestimated, so seeds planned "
        "from it are too few.",
        "- Verdicts, one word each in the bottom line, the verdict lines, the tables (↑ ↓ ≈ ○ –), the plots and "
        "verdict.json: **better** / **worse** (p_adj < α: adopt / reject), **equivalent** (the CI lies inside "
        "±margin: no difference that matters), **inconclusive** (the data cannot decide at this N, with the seeds "
        "to run), **insufficient data** (< 3 completed seeds, or nothing to test). **indicative**: a better/worse "
        "below 20 seeds per arm (20 pairs) whose p_adj × 10 is not below its level: no test of the mean holds α "
        "there for every metric shape, so it is a lead to confirm with the seeds named, not a result.",
        "- **CI level**: each CI of Δ is at the level its decision was taken at (1 − α/m, Holm's step level, a "
        "sequential boundary, divided by 10 where the skew guard fired), so it excludes 0 exactly when the verdict "
        "is better or worse.", "",
    ]


def _setup(v: Mapping[str, Any], key: str) -> list[str]:
    arms, comps, o = v["arms"], v["comparisons"], v.get("options") or {}
    vals = ", ".join(_value(a.get("value")) for a in arms[1:])
    tests = sorted({c["test"] for c in comps}) or ["–"]
    robust = sorted({c["robust_test"] for c in comps if c.get("robust_test")})
    pairing = sorted({c["pairing"]["reason"] for c in comps}) or ["–"]
    pairing.extend(_rho_lines(comps))
    m = max(1, len(comps))
    mult = v.get("multiplicity", "holm")
    if mult == "group sequential":
        mult_s = f"group sequential: Bonferroni α/m = {v['alpha'] / m:.3g} per treatment, spent over the looks"
    else:
        mult_s = LABELS.get(mult, mult) if m > 1 else "none needed (one treatment)"
    seq = o.get("sequential", "off")
    if seq == "group":
        seq_s = f"group: looks at N = {', '.join(str(x) for x in o.get('looks', []))} seeds per arm, O'Brien-Fleming " \
                "(Lan-DeMets) spending"
        looks = [f"{c['label']}: look {c['sequential']['look']} (N = {c['sequential']['n']}), boundary p = "
                 f"{_p(c['sequential']['boundary_p'])}" for c in comps if c.get("sequential", {}).get("look")]
        if looks:
            seq_s += "; " + "; ".join(looks)
    else:
        seq_s = "off (fixed N)"
    margin = o.get("margin")
    seeds = v.get("seeds") or []
    ver = v.get("versions") or {}
    suite = v.get("suite") or {}
    if suite:  # one row per variable of the suite, each with its own control value
        variable_s = "; ".join(f"`{sv['key']}`: control {_control_value(v, {'variable': sv['name']})}; "
                               f"treatments {', '.join(_value(x) for x in sv.get('values') or []) or '–'}"
                               for sv in _suite_vars(v))
    else:
        variable_s = f"`{key}`: control {_value(arms[0].get('value')) if arms else '?'}; treatments {vals or '–'}"
    if suite.get("family") == "variable":
        alpha_s = (f"{v['alpha']:.3g} family-wise within each variable (family=variable): "
                   + ", ".join(f"{sv['name']} {len(sv.get('arms') or [])}" for sv in _suite_vars(v))
                   + " treatment(s); not controlled across the suite")
    else:
        alpha_s = f"{v['alpha']:.3g} family-wise over {m} treatment(s)" + (" of the suite" if suite else "")
    return [
        "## Setup", "",
        "| | |", "|---|---|",
        f"| variable | {variable_s} |",
        f"| arms | {', '.join(str(a['arm']) for a in arms)} |",
        f"| seeds | {', '.join(str(s) for s in seeds[:30])}{' ...' if len(seeds) > 30 else ''} "
        f"({len(seeds)} per arm{'; ' + v['seed_note'] if v.get('seed_note') else ''}"
        f"{'; observed: ' + v['seed_ignored']['message'] if v.get('seed_ignored') else ''}) |",
        f"| α | {alpha_s} |",
        f"| test | {', '.join(tests)} (primary); {', '.join(robust) or '–'} (robustness check) |",
        f"| pairing | {o.get('pairing', 'auto')}: {'; '.join(pairing)} |",
        f"| multiplicity | {mult_s} |",
        f"| margin δ | {margin if margin is not None else 'none (the equivalent verdict is off)'} |",
        f"| sequential | {seq_s} |",
        f"| changed from defaults | {_non_default(v)} |",
        f"| libraries | {', '.join(f'{k} {x}' for k, x in ver.items())} |",
        *_app_rows(v),
        "",
    ]


def _app_rows(v: Mapping[str, Any]) -> list[str]:
    """Setup rows of an ``app`` task: its run mode when its config sets another, keys resolved only in the trial."""
    rows = []
    if v.get("app_mode") and v["app_mode"] != "RUN":
        rows.append(f"| app run mode | the app's config sets hydra.mode={v['app_mode']}; each trial ran it with "
                    "hydra.mode=RUN (one job, in its own trial dir) |")
    if v.get("trial_resolved"):
        rows.append(f"| resolved only in the trial | {', '.join(f'`{k}`' for k in v['trial_resolved'])} (a resolver "
                    "the app registers when it runs): the arms were compared on the unresolved text; each "
                    "manifest records the value the app saw |")
    return rows


def _rho_of(c: Mapping[str, Any]) -> float | None:
    """ρ̂ of a comparison's arms across their shared seeds: the pairing record's, else the paired effect's."""
    rho = (c.get("pairing") or {}).get("rho")
    return rho if rho is not None else (c.get("rho") if c.get("paired") else None)


def _rho_lines(comps: Sequence[Mapping[str, Any]]) -> list[str]:
    """The arms' correlation across seeds, as information for planning the next ablation: it never changes
    this one's analysis (choosing the test after seeing ρ̂ raises the false-positive rate)."""
    shown = [(c, r) for c in comps if (r := _rho_of(c)) is not None]
    if not shown:
        return []
    line = "correlation of the arms across seeds ρ̂: " + ", ".join(f"{c['arm']} {r:.2f}" for c, r in shown)
    paired = [r for c, r in shown if c.get("paired")]
    by_rule = [r for c, r in shown if not c.get("paired") and (c.get("pairing") or {}).get("mode") == "auto"]
    if paired and all(abs(r) < 0.2 for r in paired):
        line += (" (near 0: pairing gained nothing here; if the seed drives nothing shared between arms, plan "
                 "the next ablation with pairing=unpaired)")
    elif by_rule and any(r >= 0.2 for r in by_rule):
        line += (" (information only: a declared pairing=paired is for the next ablation; switching this one now, "
                 "after seeing the data, would raise its false-positive rate)")
    return [line]


def _non_default(v: Mapping[str, Any]) -> str:
    """Every verdict option that differs from its default, with where it came from."""
    items = v.get("non_default_options") or []
    if not items:
        return "nothing: every verdict option is at its default"
    src = {"given now": "given to this `ablate verdict`",
           "remembered": "remembered from an earlier `ablate verdict`; `ablate verdict DIR --reset` forgets it",
           "ablation config": "from the ablation's config"}
    return "; ".join(f"{o['option']} = {o['value']} (default {o['default']}; {src.get(o['source'], o['source'])})"
                     for o in items)


def _failures(v: Mapping[str, Any]) -> list[str]:
    L: list[str] = []
    any_fail = False
    for a in v["arms"]:
        bad = {k: n for k, n in (a.get("statuses") or {}).items() if k != "ok"}
        if bad or a.get("n_failed"):
            any_fail = True
            L.append(f"- {a['arm']}: {a['n_failed']} of {a['n'] + a['n_failed']} finished trials failed ("
                     + ", ".join(f"{k}: {n}" for k, n in sorted(bad.items())) + ")")
            for seed, err in list((a.get("errors") or {}).items())[:5]:
                L.append(f"  - seed {seed}: {failure_line(err) or '?'}")
    for c in v["comparisons"]:
        f = c.get("failures") or {}
        if f.get("pvalue") is not None:
            L.append(f"- {c['arm']} vs control: {f['message']}")
    pending = sum(a.get("pending", 0) for a in v["arms"])
    if not any_fail:
        L.append("No failed trials." if not pending else "No failed trials among those finished.")
    if pending and (v.get("options") or {}).get("sequential") == "group":
        L.append(f"- {pending} planned trial(s) not run: the sequential design stopped their arm at an earlier look "
                 "(or they are still pending); not counted as failures.")
    elif pending:
        L.append(f"- {pending} trial(s) not finished (pending or running): left out, not counted as failures.")
    return [*L, ""]


def _provenance(v: Mapping[str, Any]) -> list[str]:
    pins = v.get("pins") or {}
    code = pins.get("code") or {}
    L = ["## Provenance", ""]
    state = "dirty" if code.get("dirty") or v.get("dirty") else "clean"
    L.append(f"- code: commit `{str(code.get('commit', '?'))[:12]}` ({state} tree)")
    for path, digest in (code.get("dvc_params") or {}).items():
        L.append(f"- params: `{path}` changed from the commit by DVC (for the running stage), pinned by content "
                 f"sha256 `{digest[:16]}`")
    exp = code.get("dvc_experiment") or {}
    if exp:
        L.append("- DVC: " + ", ".join(f"{k} `{exp[k]}`" for k in ("stage", "name", "baseline") if exp.get(k)))
    for rel in code.get("ignored_files") or []:
        L.append(f"- unpinned: `{rel}` is git-ignored and not tracked by DVC (not in the code snapshot)")
    untracked = code.get("untracked_files") or []
    if untracked:
        L.append(f"- untracked: {untracked_summary(untracked, code.get('untracked_count'))} (git does not track "
                 "them: outside the code snapshot, so no trial saw them)")
    for path, d in (pins.get("data") or {}).items():
        L.append(f"- data: `{path}` {(d or {}).get('hash', '?')}")
    env = pins.get("environment") or {}
    if env:
        pk = env.get("packages") or {}
        pk_s = ", ".join(f"{k} {x}" for k, x in list(pk.items())[:8])
        L.append(f"- environment: python {env.get('python', '?')} on {env.get('host', '?')} "
                 f"({env.get('cpu', '?')}, {env.get('cpu_count', '?')} CPUs); cuda {env.get('cuda') or 'none'}"
                 + (f"; {pk_s}" if pk_s else ""))
    drift = v.get("config_drift") or []
    if drift:
        L.append("- config drift: the config files on disk changed since launch (the verdict uses the trials' own "
                 "records): " + ", ".join(f"`{d}`" for d in drift))
    return [*L, ""]


def _confounds(v: Mapping[str, Any]) -> list[str]:
    cf = v.get("confounds") or {}
    L = ["## Confounds", ""]
    findings = cf.get("findings") or []
    if not findings:
        if cf.get("complete") and cf.get("checked"):
            L.append(f"None found ({cf.get('checked', 0)} trial manifests compared).")
        elif cf.get("complete"):
            L.append("Not checked: no trial completed, so there is nothing to compare.")
        else:
            missing = cf.get("missing") or []
            L.append(f"Not checked on every trial: {len(missing)} completed trial(s) have no manifest "
                     f"({', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}).")
    for f in findings:
        L.append(f"- **{f['severity']}**: {f['message']}")
    return [*L, ""]


def _raw(v: Mapping[str, Any], dec: int) -> list[str]:
    arms = v["arms"]
    seeds = sorted({int(s) for a in arms for s in a["values"]})
    L = ["## Raw values by seed", "", "| seed | " + " | ".join(str(a["arm"]) for a in arms) + " |",
         "|---|" + "---|" * len(arms)]
    for s in seeds:
        cells = []
        for a in arms:
            if str(s) not in a["values"]:
                cells.append("pending" if a.get("pending") else "–")
            elif a["values"][str(s)] is None:
                cells.append("failed")
            else:
                cells.append(_num(a["values"][str(s)], dec + 1))
        L.append(f"| {s} | " + " | ".join(cells) + " |")
    if not seeds:
        L.append("| – |" + " – |" * len(arms))
    return [*L, ""]
