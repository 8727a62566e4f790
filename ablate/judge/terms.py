"""verdict.md's Terms section: a definition for every symbol and term the page uses, and none for those it does not.

:data:`TERMS` lists each term with the pattern that finds it in the page's text; :func:`terms_section` keeps the
entries whose pattern occurs in the rest of the page. A section that prints a new symbol adds its entry here. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    """One entry of the Terms section.

    Attributes
    ----------
    name : str
        As the page prints it (bold in the list).
    pattern : str
        A regular expression that finds its use in the page.
    text : str
        The definition; ``{direction}`` is replaced by the metric's direction (``higher is better``).
    """

    name: str
    pattern: str
    text: str


#: Every term verdict.md may print, in the order of the Terms section.
TERMS: tuple[Term, ...] = (
    Term("Δ", r"Δ(?!%)", "mean(treatment) − mean(control) in the metric's own units and sign ({direction}), as in "
         "every line, table and plot of this page"),
    Term("Δ%", r"Δ%", "Δ as a percentage of the control's mean"),
    Term("CI", r"\bCI\b", "confidence interval: the true values compatible with the data at the level shown. A CI of "
         "Δ is at the level its decision used (1 − α for one treatment; Holm's step level 1 − α/(m − j + 1); "
         "Benjamini-Hochberg's 1 − Rα/m; Dunnett's simultaneous level; 1 − a sequential look's boundary p; the level "
         "divided by 10 where the skew guard fired), so it excludes 0 exactly when the verdict is better or worse. "
         "An arm's CI of the mean is 95% (Wilson's interval for a 0/1 metric)"),
    Term("indicative CI", r"indicative \d|\d%, indicative\)", "a CI of Δ beside an indicative verdict: the same "
         "t-interval, whose coverage is not assured there either (95% CIs covered 0.87-0.93 on skewed arms of unequal "
         "spread below 10 seeds, docs/verdict.md); read it as a lead, like the verdict"),
    Term("α", r"α", "the accepted chance of calling a treatment better or worse when it changes nothing, for the "
         "whole family of treatments"),
    Term("p", r"(?<![\w(])p(?= [=<≥]| \(|\b \|| ×)|\| p \|", "how surprising the data would be if the treatment "
         "changed nothing (two-sided)"),
    Term("p_adj", r"p_adj", "p adjusted for testing several treatments against one control (Holm by default); the "
         "verdict compares it with α"),
    Term("m", r"α/m|\bm = \d", "the number of treatments tested against the control"),
    Term("t (df)", r"t \(df\)", "the t statistic of Δ and its degrees of freedom"),
    Term("g", r"\bg = |Hedges' g", "Hedges' g: Δ in units of the pooled standard deviation, bias-corrected "
         "(0.5 is medium, 0.8 large)"),
    Term("d_z", r"d_z", "the mean of the paired differences in units of their SD (paired designs)"),
    Term("d", r"\(d = ", "an effect in units of the test's SD"),
    Term("P(T beats C)", r"P\(T beats C\)", "how often a treatment seed is better than a control seed ({direction}; "
         "ties count ½, paired: the share of seeds), with its 95% CI; 0.5 means no difference"),
    Term("robust p", r"robust p", "a rank test's p (Mann-Whitney, or Wilcoxon signed-rank when paired) that does "
         "not assume normal errors; its floor is the smallest p that test can reach at this N"),
    Term("n, N", r"\bn \(T/C\)|\| n \||N = \d", "completed seeds per arm (pairs when paired)"),
    Term("SD, SEM", r"\bSD\b|\bSEM\b", "the seeds' standard deviation, and the standard error of the mean"),
    Term("IQM", r"\bIQM\b", "interquartile mean: the mean of the middle 50% of the seeds"),
    Term("MDE", r"\bMDE\b", "minimum detectable effect: the smallest true |Δ| this N detects with 80% power"),
    Term("δ", r"δ", "the margin: a difference smaller than δ does not matter (needed for the equivalent verdict)"),
    Term("ρ̂", r"ρ̂", "the correlation of the arms' values across seeds (information for planning the next ablation)"),
    Term("winner's curse", r"winner's curse", "an effect that just passed a test tends to be overestimated, so seeds "
         "planned from it are too few"),
    Term("better / worse", r"\bbetter\b|\bworse\b", "the test rejects \"no difference\" at α (after the family's "
         "correction) and Δ points that way"),
    Term("equivalent", r"\bequivalent\b", "with a margin δ: the CI of Δ lies inside ±δ, so no difference that "
         "matters"),
    Term("inconclusive", r"\binconclusive\b", "the data cannot tell better from worse at this N; not evidence of no "
         "effect"),
    Term("insufficient data", r"insufficient data", "fewer than 3 completed seeds in an arm, or nothing to test "
         "(no seed-to-seed variance, or identical values)"),
    Term("firm / indicative", r"\bfirm\b|indicative", "a better/worse is firm from 20 seeds per arm (20 pairs), or "
         "from 8 when p_adj × 10 still clears its level (a continuous metric is never firm below 8; a 0/1 metric is "
         "firm where its exact test rejects); otherwise it is indicative: no test of the mean holds α there for every "
         "metric shape, so it is a lead to confirm, not a result"),
    Term("post hoc", r"[Pp]ost hoc", "an analysis changed after the data were seen (another α, margin, pairing, "
         "correction or family than the plan froze): exploratory"),
)


def used_terms(text: str) -> list[Term]:
    """The entries of :data:`TERMS` whose pattern occurs in ``text`` or in a definition so included (a definition
    that names another term brings its entry too), in :data:`TERMS`' order."""
    seen = text
    used: list[Term] = []
    while True:
        more = [t for t in TERMS if t not in used and re.search(t.pattern, seen)]
        if not more:
            return [t for t in TERMS if t in used]
        used += more
        seen += "\n" + "\n".join(t.text for t in more)


def terms_section(body: str, direction: str) -> list[str]:
    """The Terms section of a page whose other text is ``body``: one line per term it uses.

    Parameters
    ----------
    body : str
        The page without its Terms section.
    direction : str
        ``higher is better`` or ``lower is better`` (:func:`ablate.judge.bottom_line.direction`).

    Returns
    -------
    list of str
        Markdown lines (empty when no term is used).
    """
    used = used_terms(body)
    if not used:
        return []
    return ["## Terms", "", *(f"- **{t.name}**: {t.text.format(direction=direction)}." for t in used), ""]
