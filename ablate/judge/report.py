"""verdict.md: the verdict for a person, its bottom line first.

The page opens with its heading (the key, the metric and its direction, said once: ``higher is better``), the
warnings (invalid ablation, post hoc, dirty tree: each said once, here), and the bottom line: per treatment one sentence
(:class:`ablate.judge.bottom_line.TreatmentLine`) and one "Next:" line with the command to run. Below it, each in its
own section function listed in :data:`SECTIONS` (a new section is one function and one entry there): the lines for
the paper, the seed recommendation, the suite, the ablation table, the target run, setup, arms, comparisons, flags,
failures, plots, provenance, confounds, raw values; last, :mod:`ablate.judge.terms` defines every term the page uses.
One sign convention throughout: Δ = treatment − control in the metric's own units and sign. Pure: a string from the
verdict dict (:func:`ablate.judge.verdict.analyse` plus confounds and pins).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ablate.judge.against import against_markdown
from ablate.judge.bottom_line import (
    BottomLine,
    bottom_line,
    control_value,
    direction,
    firm_seeds,
    raw_interval,
    raw_sign,
    seeds_next,
    signed,
    suite_variables,
    treatment_line,
    tuned_cost,
    verdict_decimals,
)
from ablate.judge.curves_report import curves_section
from ablate.judge.options import DEFAULT_FUTILITY
from ablate.judge.prereg import text as prereg_text
from ablate.judge.suite import suite_markdown
from ablate.judge.table import markdown as table_markdown
from ablate.judge.terms import terms_section
from ablate.judge.tuning import markdown as tuning_markdown
from ablate.pin.pins import untracked_summary
from ablate.record.errorline import failure_line
from ablate.stats.compare import ci_name, firm_shortfall, level_text
from ablate.stats.core import FAMILY_GUARD_BELOW, FIRM_MIN_CONTINUOUS, verdict_label
from ablate.stats.multiplicity import LABELS

#: Flags said elsewhere on the page, not again under Flags: the indicative reason is in the Seed recommendation.
SAID_ELSEWHERE = frozenset({"indicative_verdict"})
#: The tests' names in a line for the paper.
TEST_NAMES = {"Welch t": "Welch's t-test", "paired t": "paired t-test (by seed)"}


@dataclass(frozen=True)
class Page:
    """What every section reads: the verdict, the decimals of its numbers, its bottom line."""

    v: Mapping[str, Any]
    dec: int
    bottom: BottomLine

    @property
    def key(self) -> str:
        return str((self.v.get("variable") or {}).get("key", "?"))


def _num(v: Any, dec: int | None = None) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if dec is not None:
        return f"{v:.{dec}f}"
    return f"{v:.4g}"


def _stopped(seq: Mapping[str, Any]) -> str:
    """``, stopped for efficacy`` (or equivalence, budget), and for futility the conditional power and γ."""
    why = seq.get("stop_reason")
    if not why:
        return ""
    if why == "futility" and seq.get("conditional_power") is not None:
        return (f", stopped for futility (conditional power {seq['conditional_power']:.3f} < "
                f"{seq.get('futility_threshold')})")
    return f", stopped for {why}"


def _passed(looks: list[int] | None) -> str:
    """`` (ran on after an indicative crossing at look 2)`` for verdict.md's sequential row; empty when none."""
    if not looks:
        return ""
    return f" (ran on after an indicative crossing at look {', '.join(str(k) for k in looks)})"


def _p(v: Any) -> str:
    if v is None:
        return "–"
    return "< 0.0001" if v < 1e-4 else (f"{v:.2g}" if v < 0.001 else f"{v:.3g}")


def _p_is(v: Any) -> str:
    """``= 0.012`` or ``< 0.0001``: a p after its name."""
    text = _p(v)
    return text if text.startswith("<") else f"= {text}"


def _ci(ci: Any, dec: int | None = None) -> str:
    if not ci or ci[0] is None:
        return "–"
    return f"[{_num(ci[0], dec)}, {_num(ci[1], dec)}]"


def _value(v: Any) -> str:
    return "null" if v is None else str(v)


def _level(level: Any) -> str:
    return level_text(level) if isinstance(level, int | float) else "95%"


def _level_num(level: Any) -> float:
    """A CI's level, 0.95 where the record has none (as :func:`_level` prints it)."""
    return float(level) if isinstance(level, int | float) else 0.95


def render_markdown(v: Mapping[str, Any]) -> str:
    """The verdict as markdown: the heading, the warnings, the bottom line, then :data:`SECTIONS`, then Terms.

    Parameters
    ----------
    v : mapping
        The content of verdict.json.

    Returns
    -------
    str
    """
    dec = verdict_decimals(v)
    page = Page(v, dec, bottom_line(v, dec))
    L: list[str] = []
    for section in SECTIONS:
        L += section(page)
    body = "\n".join(L)
    return body + "\n" + "\n".join(terms_section(body, direction(v.get("goal")))) + "\n"


def _heading(page: Page) -> list[str]:
    """The title, with the metric's direction said once for the whole page, and the warnings, each said once."""
    v = page.v
    what = ("Suite of " + ", ".join(f"`{sv['key']}`" for sv in suite_variables(v)) + " against one control"
            if suite_variables(v) else f"Ablation of `{page.key}`")
    L = [f"# {what}: {v['metric']}, {direction(v.get('goal'))}", ""]
    if v.get("invalid"):
        L += ["> **INVALID ABLATION**: " + " ".join(r.rstrip(".") + "." for r in v["invalid_reasons"])
              + " Do not act on the verdicts below: they are shown for inspection only.", ""]
    if v.get("post_hoc"):
        pre = "; ".join(f"{p['arm']} {verdict_label(p['verdict'], p.get('firm'))}"
                        for p in v.get("preregistered_verdict") or [])
        L += [f"> **Post hoc**: this verdict changes the analysis the plan froze before any trial ran "
              f"({prereg_text(v['post_hoc']['changed'])}); read it as exploratory. The pre-registered verdict: "
              f"{pre or '–'} (`ablate verdict DIR --reset` brings it back).", ""]
    if (v.get("extension") or {}).get("line"):  # `ablate extend`: the design the verdicts use, in one line
        L += [f"> **Extended**: {v['extension']['line']}", ""]
    if v.get("dirty"):
        L += ["> **Dirty**: the trials ran uncommitted changes to tracked files (the diff is in `dirty.patch`).", ""]
    return L


def _bottom_line(page: Page) -> list[str]:
    """Per treatment one sentence, then the one command to run next."""
    if not page.v["comparisons"]:
        return ["## Bottom line", "", "No treatment arms.", ""]
    return ["## Bottom line", "", *page.bottom.lines(), ""]


def bottom_line_words(c: Mapping[str, Any], v: Mapping[str, Any], dec: int | None = None,
                      rerun: Callable[[int], str] | None = None, *, confounded: bool = False,
                      change: str | None = None) -> str:
    """One treatment's bottom line as verdict.md words it (``ablate audit`` says its post-hoc verdict in these words),
    and, where more seeds are to run, what to run (``rerun``).

    Parameters
    ----------
    c : mapping
        A comparison of verdict.json.
    v : mapping
        The verdict (its ``metric``, ``goal``, ``arms``, ``variable``).
    dec : int, optional
        Decimals for the numbers; default: verdict.md's, from the arms' SDs.
    rerun : callable, optional
        Seeds per arm -> the clause saying what to run (``ablate audit``: its minimal ablation); default: nothing is
        added.
    confounded : bool
        The compared runs differ in more than the variable: the sentence says the difference cannot be credited to it
        (never an advice to adopt or reject).
    change : str, optional
        What changed, in the caller's words (``epochs 4 → 5``); default: from the verdict's variable and arms.

    Returns
    -------
    str
        :meth:`ablate.judge.bottom_line.TreatmentLine.sentence`, then ``Next: <rerun(seeds)>.`` when seeds are to run.
    """
    t = treatment_line(c, v, dec, confounded=confounded, change=change)
    if rerun is None or t.seeds_next is None:
        return t.sentence()
    return f"{t.sentence()} Next: {rerun(t.seeds_next)}."


def paper_line(c: Mapping[str, Any], v: Mapping[str, Any], dec: int) -> str:
    """One treatment's result as a paper reports it, to paste: Δ with its CI, the test and its p, N per arm, the
    seeds, and whether the verdict is firm.

    Returns
    -------
    str
        ``lr=0.2 vs control (task.optim.lr 0.05 → 0.2): Δ val_acc = +0.019 (97.5% CI +0.004 to +0.034; higher is
        better), Welch's t-test, p_adj = 0.012 (Holm over 2 treatments), N = 10 seeds per arm (seeds 0-9): better,
        firm.``
    """
    t = treatment_line(c, v, dec)
    seeds = v.get("seeds") or []
    if (c.get("sequential") or {}).get("n"):  # sequential: the seeds of the look it reached, not the planned list
        seeds = seeds[:c["sequential"]["n"]]
    span = f"seeds {seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[0] + len(seeds))) else \
        "seeds " + ", ".join(str(s) for s in seeds)
    n = min(c.get("n_treatment") or 0, c.get("n_control") or 0)
    head = f"{t.arm} vs control ({t.key} {t.control} → {t.value})"
    if t.delta is None:
        return f"{head}: {t.word}: {t.why}; N = {n} completed seeds per arm ({span})."
    ci = f"{ci_name(_level_num(t.ci_level), t.firm is False)} {signed(t.ci[0], dec)} to {signed(t.ci[1], dec)}; " \
        if t.ci else ""
    delta = f"Δ {t.metric} = {signed(t.delta, dec)} ({ci}{direction(v.get('goal'))})"
    test = TEST_NAMES.get(str(c.get("test")), str(c.get("test")))
    m = c.get("n_comparisons") or 1
    if c.get("multiplicity") in (None, "none", "group sequential") or m < 2:
        p = f"p {_p_is(c.get('pvalue_adjusted') if c.get('guard_factor', 1) > 1 else c.get('pvalue'))}"
    else:
        how = LABELS.get(c["multiplicity"], c["multiplicity"]).split(" (")[0]
        p = f"p_adj {_p_is(c.get('pvalue_adjusted'))} ({how} over {m} treatments)"
    if c.get("guard_factor", 1) > 1:
        p += f" (from p × {c['guard_factor']:g}: the skew guard, Flags)"
    paired = " pairs" if c.get("paired") else " seeds per arm"
    firm = "" if t.verdict not in ("better", "worse") else ", firm" if t.firm is not False else ", not yet firm"
    word = t.verdict + (f" ({t.size})" if t.size else "")
    return f"{head}: {delta}, {test}, {p}, N = {n}{paired} ({span}): {word}{firm}."


def _paper(page: Page) -> list[str]:
    """A line per treatment a user can paste into a paper (plain text: no markdown inside)."""
    comps = page.v["comparisons"]
    if not comps:
        return []
    return ["## For the paper", "", *(f"- {paper_line(c, page.v, page.dec)}" for c in comps), ""]


def indicative_text(c: Mapping[str, Any]) -> str:
    """Why a better/worse verdict is not yet firm, and from how many seeds it would be (said once, in the Seed
    recommendation)."""
    if c.get("binary") or c.get("skew_evident") or c.get("firm_from") == FAMILY_GUARD_BELOW or any(
            "far from the others" in f["message"] or "is never firm" in f["message"]
            for f in c.get("flags") or [] if f["code"] == "indicative_verdict"):
        # a 0/1 metric's exact test, skewed values, the family guard at 20-29 seeds, a seed far from the others, or
        # fewer than FIRM_MIN_CONTINUOUS seeds on a continuous metric: the flag's reason
        why = next((f["message"] for f in c.get("flags") or [] if f["code"] == "indicative_verdict"), "indicative")
        return f"Not yet firm: {why.removeprefix('indicative: ')}."
    n = min(c.get("n_treatment") or 0, c.get("n_control") or 0)
    lim = c.get("firm_from") or 20
    pname = "p" if c.get("multiplicity") in ("none", "group sequential") else "p_adj"
    short = firm_shortfall(c.get("pvalue_adjusted"), c.get("decision_level"), c.get("decision_label") or "α", pname,
                           lim)
    return (f"Not yet firm: with {n} seeds per arm{' (paired)' if c.get('paired') else ''} no test of the mean holds α "
            f"for every metric shape (skewed arms of unequal spread reach a false-positive rate of 0.08-0.14 there), "
            f"and {short}. At {lim} seeds per arm it is firm if its {pname} then stays below "
            f"{c.get('decision_label') or 'α'} (more seeds can also show no effect).")


def seed_advice_text(c: Mapping[str, Any]) -> str:
    """A comparison's seed recommendation (verdict.md's Seed recommendation line; the audit's too): the seeds for
    80% power and, for an indicative verdict, why it is not yet firm, the seeds that make it firm, and one sentence on
    how the two numbers differ (the Next line runs the larger)."""
    adv = c.get("seed_advice")
    msg = adv["message"] if adv else "not computable (needs at least 2 completed seeds per arm and some variance)"
    seq = c.get("sequential") or {}
    if seq.get("stop_reason") == "futility" or seq.get("skewed_stop"):  # the plan stopped it: no seeds to advise
        mde = msg.split("; ", 1)[0] if adv and msg.startswith("MDE") else ""
        why = ("the plan's futility rule judged them not worth it (non-binding: a new ablation may still test this "
               "treatment, with a margin to show no meaningful difference)" if seq.get("stop_reason") == "futility"
               else "none could make this verdict firm")
        return (f"{c.get('seed_advice_sequential') or 'stopped by the looks'}. No more seeds are advised: {why}."
                + (f" {mde}." if mde else ""))
    if c.get("seed_advice_sequential"):
        msg = c["seed_advice_sequential"] + (f". {msg}" if adv else "")
    if c.get("verdict") in ("better", "worse") and c.get("firm") is False:
        lim = firm_seeds(c)
        need = (adv or {}).get("n_needed")
        target = "the margin δ" if (adv or {}).get("target_kind") == "margin" else "the effect seen so far"
        power = f"{need} seeds per arm give 80% power for {target}" if need is not None else \
            f"80% power for {target} needs more seeds than the cap"
        rule = ("ablate's rule calls this verdict firm" if not c.get("binary") and not c.get("skew_evident") else
                "the Next line's floor (more seeds do not make a verdict on skewed values firm)"
                if c.get("skew_evident") else
                "Fisher's exact test would reject at these success rates" if c.get("firm_from") else
                "the cap (Fisher's exact test would not reject within it at these success rates)")
        msg = (f"{indicative_text(c)} {msg} The two numbers answer two questions: {lim} seeds per arm is where "
               f"{rule}, {power}; the Next line runs the larger, {max(lim, int(need or 0))}.")
    elif c.get("verdict") == "inconclusive" and not c.get("binary") and seeds_next(c) == FIRM_MIN_CONTINUOUS != (
            (adv or {}).get("n_needed")):
        msg += (f" The Next line runs {FIRM_MIN_CONTINUOUS} seeds per arm: below {FIRM_MIN_CONTINUOUS} a verdict on a "
                "continuous metric is never firm (docs/verdict.md).")
    return msg


def _seed_section(page: Page) -> list[str]:
    L = ["## Seed recommendation", ""]
    for c in page.v["comparisons"]:
        L.append(f"- **{c['arm']}**: {seed_advice_text(c)}")
    if page.v.get("tuning"):
        n = max((int((c.get("seed_advice") or {}).get("n_needed") or 0) for c in page.v["comparisons"]), default=0)
        n = n or len(page.v.get("seeds") or [])
        L += ["", "The seeds above count evaluation seeds per arm; a new run tunes every arm again first: "
              f"{tuned_cost(page.v['tuning'], n)}."]
    L += ["", "Seeds needed are planned on the 90% upper confidence limit of the test's SD (pooled, or of the paired "
          "differences), since SDs from few seeds are noisy (the point SD would reach the power in only about half "
          "the pilots); where that exceeds the cap, the range from the point SD's N is given and the planning SD's N "
          "advised above the cap (the Next line runs at most the cap); \"> cap\" only where even the SD's 90% lower "
          "limit needs more than the cap. "
          "ablate reports no post-hoc \"observed power\" (it only restates the p-value).", ""]
    return L


def _suite_table_against(page: Page) -> list[str]:
    """The suite, ablation-table and --against sections (:mod:`ablate.judge.suite`, :mod:`ablate.judge.table`,
    :mod:`ablate.judge.against`)."""
    v = page.v
    L = suite_markdown(v)
    if v.get("table"):
        L += table_markdown(v["table"], v)
        if (v.get("plots") or {}).get("forest"):
            L += [f"![forest plot: Δ vs control with its CI, per treatment]({v['plots']['forest']})", ""]
    return L + against_markdown(v)


def _comparisons_table(page: Page) -> list[str]:
    """Every number of each comparison, in the metric's own sign (Δ, t and the effect size alike)."""
    v, dec = page.v, page.dec
    L = ["## Comparisons", "",
         "Δ, Δ%, t and the effect size are treatment − control in the metric's own sign; each CI of Δ is at the level "
         "its decision used.", "",
         "| treatment | test | n (T/C) | Δ | Δ% | CI of Δ (level) | t (df) | p | p_adj | effect | P(T beats C) "
         "[95% CI] | robust p (floor) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    s = raw_sign(v.get("goal"))
    for c in v["comparisons"]:
        pi = _num(c.get("prob_improvement"), 2)
        if c.get("prob_improvement_ci"):
            pi += " " + _ci(c["prob_improvement_ci"], 2)
        stat = c.get("statistic")
        t = f"{signed(s * stat, 2)} ({_df(c.get('df'))})" if stat is not None else "–"
        eff = c.get("effect_size")
        eff_s = f"{c['effect_size_name']} = {signed(s * eff, 2)}" if eff is not None else "–"
        ci = raw_interval(c.get("ci"), v.get("goal"))
        ind = ", indicative" if c.get("ci_indicative") else ""  # beside an indicative verdict
        ci_s = f"[{signed(ci[0], dec)}, {signed(ci[1], dec)}] ({_level(c['ci_level'])}{ind})" if ci else "–"
        diff, pct = c.get("diff"), c.get("diff_pct")
        L.append(f"| {c['arm']} | {c['test']} | {c['n_treatment']}/{c['n_control']} | "
                 f"{signed(None if diff is None else s * diff, dec)} | "
                 f"{signed(None if pct is None else s * pct, 1)} | {ci_s} | {t} | {_p(c.get('pvalue'))} | "
                 f"{_p(c.get('pvalue_adjusted'))} | {eff_s} | {pi} | {_robust(c)} |")
    return [*L, ""]


def _flags(page: Page) -> list[str]:
    L = ["## Flags", ""]
    for c in page.v["comparisons"]:
        L += [f"- {c['arm']}: {f['message']} (`{f['code']}`)" for f in c.get("flags") or []
              if f["code"] not in SAID_ELSEWHERE]
    return L + (["None."] if len(L) == 2 else []) + [""]


def _robust(c: Mapping[str, Any]) -> str:
    """The rank test's p and its floor, ``0.148 (floor 0.0079)``: never a p printed below the floor it cannot go
    under (an asymptotic p is shown at the floor then)."""
    if not c.get("robust_test"):
        return "–"
    p, floor = c.get("robust_pvalue"), c.get("robust_min_pvalue")
    if p is not None and floor is not None:
        p = max(p, floor)
    return f"{_p(p)} (floor {_p(floor)})" if floor is not None else _p(p)


def _arms_table(page: Page) -> list[str]:
    v, dec = page.v, page.dec
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


def _plots(page: Page) -> list[str]:
    v = page.v
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


def _df(df: Any) -> str:
    """Degrees of freedom: ``9`` for a whole number (paired t, Student), ``7.3`` for Welch's."""
    if not isinstance(df, int | float):
        return "–"
    return str(int(df)) if float(df).is_integer() else f"{df:.1f}"


def _setup(page: Page) -> list[str]:
    v, key = page.v, page.key
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
                "(Lan-DeMets) spending, an arm stopped only by a firm verdict"
        if o.get("effect") is not None:
            seq_s += (f", or for futility when its conditional power under the planned {o['effect']} SD is below "
                      f"{o.get('futility') or DEFAULT_FUTILITY} (non-binding)")
        looks = [f"{c['label']}: look {c['sequential']['look']} (N = {c['sequential']['n']}), boundary p = "
                 f"{_p(c['sequential']['boundary_p'])}" + _passed(c['sequential'].get("passed_looks"))
                 + _stopped(c['sequential']) for c in comps if c.get("sequential", {}).get("look")]
        if looks:
            seq_s += "; " + "; ".join(looks)
    else:
        seq_s = "off (fixed N)"
    margin = o.get("margin")
    seeds = v.get("seeds") or []
    ver = v.get("versions") or {}
    suite = v.get("suite") or {}
    if suite:  # one row per variable of the suite, each with its own control value
        variable_s = "; ".join(f"`{sv['key']}`: control {control_value(v, {'variable': sv['name']})}; "
                               f"treatments {', '.join(_value(x) for x in sv.get('values') or []) or '–'}"
                               for sv in suite_variables(v))
    else:
        variable_s = f"`{key}`: control {_value(arms[0].get('value')) if arms else '?'}; treatments {vals or '–'}"
    if suite.get("family") == "variable":
        alpha_s = (f"{v['alpha']:.3g} family-wise within each variable (family=variable): "
                   + ", ".join(f"{sv['name']} {len(sv.get('arms') or [])}" for sv in suite_variables(v))
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
        f"{'; every seed of an arm gave the same metrics: the warning at the top' if v.get('seed_ignored') else ''}) |",
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


def _failures(page: Page) -> list[str]:
    v = page.v
    L: list[str] = ["## Failures", ""]
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


def _provenance(page: Page) -> list[str]:
    v = page.v
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


def _confounds(page: Page) -> list[str]:
    v = page.v
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


def _raw(page: Page) -> list[str]:
    v, dec = page.v, page.dec
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


def _curves(page: Page) -> list[str]:
    """The curve verdicts (``curve.enabled=true``; :mod:`ablate.judge.curves_report`)."""
    return curves_section(page.v)


#: verdict.md's sections, in order: each a function of the :class:`Page` returning its lines. A new section is one
#: function and one entry here (Terms is built last, from the text of these).
def _tuning(page: Page) -> list[str]:
    """A tuned ablation: each arm's chosen setting, edge warnings, expected-best curves, the naive comparison."""
    t = page.v.get("tuning")
    return tuning_markdown(t, str(page.v["metric"]), page.dec) if t else []


SECTIONS: tuple[Callable[[Page], list[str]], ...] = (
    _heading, _bottom_line, _paper, _seed_section, _suite_table_against, _setup, _arms_table, _comparisons_table,
    _tuning, _curves, _flags, _failures, _plots, _provenance, _confounds, _raw,
)
