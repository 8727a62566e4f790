"""One treatment vs the control: every number of the verdict spec's comparison (B3, B4, B7)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ablate.stats import _iv, binary
from ablate.stats.binary import BinaryCounts, is_binary
from ablate.stats.core import (
    BETTER,
    EQUIVALENT,
    FAMILY_FIRM_M,
    FAMILY_GUARD_BELOW,
    FIRM_FACTOR,
    FIRM_FROM,
    FIRM_MIN_CONTINUOUS,
    GAP_FIRM_SHARE,
    GAP_FROM,
    INCONCLUSIVE,
    INSUFFICIENT_REASONS,
    MIN_SEEDS,
    SKEW_FIRM_Z,
    VERDICTS,
    WORSE,
    decide_batch,
    decision_rule,
    is_firm,
    seed_gap,
)
from ablate.stats.effect import hedges_g, paired_effect, pooled_sd, prob_improvement, robust_test
from ablate.stats.failures import FailureFinding, failure_finding
from ablate.stats.pi_interval import MIN_N_COVERED
from ablate.stats.power import SEED_CAP, SeedAdvice, recommend_seeds
from ablate.stats.shape import SKEW_GUARD_FACTOR, skew_spread


@dataclass(frozen=True)
class Flag:
    """A caveat attached to a comparison: never switches the test, always shown.

    Attributes
    ----------
    code : str
        Stable identifier (``small_n``, ``outliers``, ``sd_ratio``, ``skew_spread``, ``one_arm_constant``,
        ``non_normal``, ``paired_fallback``, ``failures_differ``, ``tests_disagree``, ``robust_floor``, ``holm_ci``,
        ``skew_guard``, ``indicative`` (the P(T>C) interval), ``indicative_verdict``, ``multiplicity`` (Dunnett
        replaced by Holm)).
    message : str
        One sentence for the report.
    """

    code: str
    message: str


@dataclass(frozen=True)
class Comparison:
    """Treatment vs control. Differences are sign-normalised (positive = better for ``goal``), in metric units.

    Attributes
    ----------
    verdict : str
        ``better``, ``worse``, ``equivalent``, ``inconclusive`` or ``insufficient data``.
    reason : str
        One sentence with the numbers behind the verdict.
    size : str or None
        With a margin δ and a better/worse verdict: ``"≥ δ"`` (CI beyond δ), ``"< δ"`` (CI inside (0, δ)) or
        ``"size uncertain"``.
    diff, diff_pct : float or None
        Δ = mean_T - mean_C (sign-normalised), and Δ as % of |control mean|.
    diff_raw : float or None
        mean_T - mean_C in the metric's own direction.
    ci : (float, float) or None
        CI of Δ at ``ci_level``, sign-normalised: the level the decision was taken at, so the CI excludes 0
        exactly when the verdict is better/worse (1 - alpha/m Bonferroni; Holm's or BH's step level after
        :func:`ablate.stats.adjust_comparisons`; Dunnett's simultaneous CI; 1 - boundary p sequentially).
    se : float or None
        Standard error of Δ (metric units); None for a 0/1 metric.
    binary : BinaryCounts or None
        Set for a 0/1 metric (every value 0 or 1): ``test`` is then Newcombe's score interval and the p-value
        it implies (unpaired) or exact McNemar (paired), see :mod:`ablate.stats.binary`.
    statistic, df, pvalue : float or None
        t statistic (sign-normalised), degrees of freedom, raw two-sided p-value.
    pvalue_adjusted : float or None
        The p the verdict used: Holm/Dunnett/BH/Bonferroni-adjusted (``multiplicity`` says which), or raw.
    effect_size : float or None
        Hedges' g (unpaired) or d_z (paired); ``effect_size_name`` says which.
    cohen_d, g_av, rho : float or None
        Cohen's d (unpaired); g_av and the correlation ρ̂ of the arms (paired).
    prob_improvement : float or None
        P(T > C), ties ½; with ``prob_improvement_ci``, its 95% CI (Newcombe 2006 score interval unpaired,
        Clopper-Pearson paired).
    robust_pvalue : float or None
        Mann-Whitney U (unpaired) or Wilcoxon signed-rank (paired) two-sided p; ``robust_min_pvalue`` is the
        smallest p that test can reach at these n.
    seeds : SeedAdvice or None
        MDE and seeds needed (spec B7).
    failures : FailureFinding or None
        Failure counts and Fisher's exact test when they differ.
    flags : tuple of Flag
    skew_z : float or None
        D'Agostino's skewness z of the values, oriented against Δ (:func:`ablate.stats.shape.skew_against`).
    guard_factor : float
        1, or 10 where the skew guard fired (``skew_z`` >= 1.96): the decision then used ``p x 10`` (in
        ``pvalue_adjusted``) and ``ci`` is at the matching level ``1 - level/10``.
    firm : bool or None
        For a better/worse verdict: whether it is firm (:func:`ablate.stats.core.is_firm`: from
        :data:`ablate.stats.core.FIRM_FROM` seeds per arm on, or where p x 10 clears the level, never below
        :data:`ablate.stats.core.FIRM_MIN_CONTINUOUS` seeds) or indicative (``False``: no test of the mean holds α
        there for every metric shape; flag ``indicative_verdict``).
        None for the other verdicts. A 0/1 metric's better/worse is firm when Fisher's exact test (``pvalue_exact``,
        adjusted for the family like ``pvalue``) also clears the level; paired, McNemar's exact test decides: firm.
    firm_from : int or None
        With ``firm`` False: the seeds per arm from which the same result would be firm (0/1 metric: from which
        Fisher's test would reject at the same success rates, None beyond the seed cap; None too where
        ``skew_evident``: more seeds do not make it firm; 30, :data:`ablate.stats.core.FAMILY_GUARD_BELOW`, in a
        family of 5+ at 20-29 seeds held by the family guard, :func:`ablate.stats.core.is_firm`).
    skew_evident : bool
        The values are evidently skewed (|D'Agostino z| >= 1.96 either way; paired, of the differences or of the
        arms' residuals, :func:`ablate.stats.core.skew_evident`): a better/worse verdict is then indicative at
        every N (docs/verdict.md "Firm verdicts on skewed values and in families").
    pvalue_exact : float or None
        0/1 metric only: the exact test a firm verdict needs (:func:`ablate.stats.binary.firm_pvalue`: Fisher's
        exact test unpaired, McNemar's exact test paired), raw two-sided p.
    ci_indicative : bool
        True beside an indicative verdict (``firm`` False): its CI of Δ is the t-interval at the decision's level,
        but its coverage is not assured there either (95% CIs covered 0.87-0.93 on skewed arms of unequal spread
        below 10 seeds, docs/verdict.md), so every place that prints it says ``indicative`` (:func:`ci_name`).
    seed_gap : str or None
        Where an arm shows a seed far from the others (:func:`ablate.stats.core.seed_gap` share >=
        :data:`ablate.stats.core.GAP_FIRM_SHARE`), the arm and its values in metric units (:func:`gap_text`,
        ``the control: 0.1 vs 0.889-0.912``); None otherwise and on a 0/1 metric. Below
        :data:`ablate.stats.core.FIRM_FROM` seeds a better/worse is then indicative (docs/verdict.md "A seed far from
        the others").
    """

    verdict: str
    reason: str
    size: str | None
    goal: str
    alpha: float
    n_comparisons: int
    test: str
    paired: bool
    n_treatment: int
    n_control: int
    failed_treatment: int
    failed_control: int
    mean_treatment: float | None
    mean_control: float | None
    diff: float | None
    diff_raw: float | None
    diff_pct: float | None
    ci: tuple[float, float] | None
    ci_level: float
    statistic: float | None
    df: float | None
    pvalue: float | None
    pvalue_adjusted: float | None
    multiplicity: str
    decision_level: float
    decision_label: str
    margin: float | None
    tost_ci: tuple[float, float] | None
    tost_level: float
    effect_size: float | None
    effect_size_name: str
    cohen_d: float | None
    g_av: float | None
    rho: float | None
    prob_improvement: float | None
    prob_improvement_ci: tuple[float, float] | None
    robust_test: str
    robust_pvalue: float | None
    robust_min_pvalue: float | None
    seeds: SeedAdvice | None
    failures: FailureFinding | None
    insufficient_reason: str | None
    flags: tuple[Flag, ...]
    se: float | None = None
    binary: BinaryCounts | None = None
    data_flags: tuple[Flag, ...] = dataclasses.field(repr=False, default=())
    insufficient_code: int = dataclasses.field(repr=False, default=0)
    skew_z: float | None = None
    guard_factor: float = 1.0
    firm: bool | None = None
    firm_from: int | None = None
    skew_evident: bool = False
    ci_indicative: bool = False
    pvalue_exact: float | None = None
    seed_gap: str | None = None


def _f(x: Any) -> float | None:
    """A finite float or None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _signed(ci: tuple[float, float], sign: float) -> tuple[float, float]:
    """An interval of a raw difference, sign-normalised (positive = better)."""
    return (ci[0], ci[1]) if sign > 0 else (-ci[1], -ci[0])


def _decimals(scale: float | None) -> int:
    if scale is None or scale <= 0 or not math.isfinite(scale):
        return 4
    return int(min(8, max(0, -math.floor(math.log10(scale)) + 2)))


def fmt_p(p: float | None) -> str:
    """A p-value for reading: 3 significant digits, ``< 0.0001`` below."""
    if p is None:
        return "n/a"
    if p < 1e-4:
        return "< 0.0001"
    return f"{p:.2g}" if p < 0.001 else f"{p:.3g}"


def level_text(level: float) -> str:
    """A confidence level for reading: ``95%``, ``97.5%``, ``98.3%``, ``99.99%`` (never rounded up to 100%)."""
    pct = 100 * level
    for digits in range(0, 6):
        s = f"{pct:.{digits}f}"
        if float(s) < 100 and abs(float(s) - pct) <= 0.01 * (100 - pct) + 1e-12:
            return s.rstrip("0").rstrip(".") + "%" if "." in s else s + "%"
    return f"{pct:.6g}%"


#: The word before a CI of Δ printed beside an indicative verdict (verdict.md, verdict.json's ``reason``).
INDICATIVE_CI = "indicative"


def ci_name(level: float | None, indicative: bool | None = False) -> str:
    """The name of a CI of Δ as printed: ``97.5% CI``, or ``indicative 97.5% CI`` beside an indicative verdict.

    Parameters
    ----------
    level : float or None
        The CI's confidence level (``ci_level``); None prints ``CI`` alone.
    indicative : bool or None
        verdict.json's ``ci_indicative`` (True where ``firm`` is False): the interval's coverage is not assured
        below :data:`ablate.stats.core.FIRM_FROM` seeds per arm on every metric shape (docs/verdict.md).

    Returns
    -------
    str
    """
    lvl = f"{level_text(level)} " if isinstance(level, int | float) else ""
    return f"{INDICATIVE_CI + ' ' if indicative else ''}{lvl}CI"


def p_is(p: float | None) -> str:
    """``"= 0.0387"`` or ``"< 0.0001"``: the relation and value to write after ``p``."""
    s = fmt_p(p)
    return s if s.startswith("<") else f"= {s}"


def _compare_iv(treatment: Any, control: Any, paired: Any) -> tuple[np.ndarray, np.ndarray]:
    t = _iv.values_1d(treatment, "treatment")
    c = _iv.values_1d(control, "control")
    if not isinstance(paired, bool | np.bool_):
        raise _iv.fail("paired", "must be True or False", paired)
    if paired and t.size != c.size:
        raise _iv.fail("control", f"must have as many values as `treatment` ({t.size}) when paired "
                                  "(aligned by seed, NaN for a failed trial)", c.size)
    return t, c


def compare(treatment: Any, control: Any, *, paired: bool = False, alpha: float = 0.05, goal: str = "maximize",
            margin: float | str | None = None, n_comparisons: int = 1, rng: Any = None,
            pvalue_adjusted: float | None = None, multiplicity: str | None = None,
            p_threshold: float | None = None, cap: int = SEED_CAP, pi_interval: bool = True,
            n_resamples: int | None = None) -> Comparison:
    """Compare a treatment with the control: test, CI, effect sizes, verdict and seed advice.

    Parameters
    ----------
    treatment, control : array_like, shape (n_seeds,)
        Final metric values per seed, in metric units; NaN = a failed or diverged trial (counted, never
        silently dropped). When ``paired``, index j is the same seed in both.
    paired : bool
        Paired analysis by seed (``scipy.stats.ttest_rel``); fewer than 3 complete pairs fall back to
        the unpaired analysis of all runs (flagged). Decide it by design (:func:`ablate.stats.pair_by_seed`),
        never by which p is smaller.
    alpha : float
        Family-wise significance level.
    goal : {"maximize", "minimize"}
        Direction of the metric; Δ, CIs, effect sizes and P(T>C) are sign-normalised (positive = better).
    margin : float or str, optional
        Smallest effect size of interest δ (metric units, or ``"2%"`` of the control mean). Enables the
        ``equivalent`` verdict (TOST) and targets the seed recommendation.
    n_comparisons : int
        m, treatments sharing this control; CI level 1 - alpha/m, MDE at alpha/m, and, unless
        ``pvalue_adjusted`` is given, Bonferroni p_adj = min(1, m p).
    rng : None, int or numpy.random.Generator
        Kept for older calls; nothing in a comparison is random any more (the P(T>C) interval is analytic).
    pvalue_adjusted : float, optional
        The family-adjusted p-value (see :func:`ablate.stats.adjust_comparisons`), labelled ``multiplicity``.
    multiplicity : str, optional
        Label of the adjustment in ``pvalue_adjusted``.
    p_threshold : float, optional
        Sequential mode: the look's nominal boundary p; the verdict uses raw p < p_threshold.
    cap : int
        Most seeds per arm a recommendation may ask for (default 50).
    pi_interval : bool
        Compute the P(T>C) confidence interval (Newcombe's score interval, or Clopper-Pearson when paired).
    n_resamples : int, optional
        Deprecated alias: 0 means ``pi_interval=False`` (there is no bootstrap any more).

    Returns
    -------
    Comparison

    Raises
    ------
    StatsInputError
        When an argument breaks its rule (the message names it in backticks).

    Notes
    -----
    Welch (1947) ``scipy.stats.ttest_ind(equal_var=False)`` or paired ``ttest_rel``, CI of the same t
    distribution at the decision's level (1 - alpha/m, or 1 - p_threshold); for a 0/1 metric Newcombe's
    (1998) interval and the p-value it implies, or exact McNemar when paired (:mod:`ablate.stats.binary`).
    Values are standardised first (scale-free; ties within 1e-12 of their magnitude). Hedges' g (Hedges
    1981) or d_z (Lakens 2013); P(T>C) (Agarwal et al. 2021; Bouthillier et al. 2021) with Newcombe's (2006)
    score interval or Clopper-Pearson (paired); Mann-Whitney / Wilcoxon as the robustness check; TOST
    (Schuirmann 1987); seed advice per spec B7; rule per spec B4. Recommended by Colas, Sigaud & Oudeyer
    (2019) for small N. The skew guard of :func:`ablate.stats.core.decide_batch` (``guard_factor``, flag
    ``skew_guard``: p x 10 where D'Agostino's skewness z >= 1.96 lies opposite to Δ) keeps the false-positive
    rate from 20 seeds per arm; the ``skew_spread`` flag marks where Welch itself runs above alpha below that.

    Examples
    --------
    >>> from ablate.stats import compare
    >>> c = compare([0.728, 0.741, 0.716, 0.739, 0.733], [0.712, 0.695, 0.731, 0.704, 0.719], rng=0)
    >>> c.verdict, round(c.pvalue, 4), round(c.effect_size, 3)
    ('better', 0.0387, 1.437)
    """
    t, c = _compare_iv(treatment, control, paired)
    sign = _iv.goal(goal)
    _iv.rng(rng)  # still validated, so a bad value keeps failing loudly
    if n_resamples is not None and _iv.positive_int(n_resamples, "n_resamples", lo=0) == 0:
        pi_interval = False
    r = decide_batch(t, c, paired=bool(paired), alpha=alpha, goal=goal, margin=margin, n_comparisons=n_comparisons,
                     pvalue_adjusted=pvalue_adjusted, p_threshold=p_threshold)
    a = _iv.alpha(alpha)
    m = int(n_comparisons)
    used_paired = bool(r.paired[0])
    tv, cv, ts, cs, scale = _used_values(t, c, used_paired, sign)
    num = _t_numbers(r, sign)
    eff = _effects(ts, cs, scale, r, num["diff"], a / m, pi_interval, cap)
    fail, data_flags = _run_flags(t, c, r, bool(paired), a, eff.pop("data_flags"))
    level = p_threshold if p_threshold is not None else a / m
    if num["ins"] in (0, 4, 5) and min(num["nt"], num["nc"]) >= MIN_SEEDS and is_binary(tv, cv):
        num = _binary_numbers(num, tv, cv, used_paired, sign, level, _f(r.margin[0]) is not None)
        num["p_dec"] = num["pval"] if p_threshold is not None else (
            _f(pvalue_adjusted) if pvalue_adjusted is not None else min(1.0, m * num["pval"]))
    if p_threshold is not None:
        mult, label = "group sequential", "boundary"
    elif pvalue_adjusted is not None:
        mult, label = multiplicity or "adjusted", "α"
    else:
        mult, label = ("bonferroni" if m > 1 else "none"), "α"
    diff, counts = num["diff"], num["counts"]
    comp = Comparison(
        verdict="", reason="", size=None, goal=goal, alpha=a, n_comparisons=m,
        test=num["test"], paired=used_paired, n_treatment=num["nt"], n_control=num["nc"],
        failed_treatment=fail.failed_treatment, failed_control=fail.failed_control, mean_treatment=num["mean_t"],
        mean_control=num["mean_c"], diff=diff, diff_raw=None if diff is None else sign * diff,
        diff_pct=num["diff_pct"], ci=num["ci"], ci_level=1 - level / num["guard"], se=num["se"], binary=counts,
        skew_z=_f(r.skew_z[0]), guard_factor=num["guard"], skew_evident=bool(r.skewed[0]) and counts is None,
        statistic=num["stat"], df=num["df"], pvalue=num["pval"], pvalue_adjusted=num["p_dec"],
        multiplicity=mult, decision_level=float(r.alpha_decision[0]), decision_label=label, margin=_f(r.margin[0]),
        tost_ci=num["tost"], tost_level=1 - 2 * level, effect_size=_f(eff["g"]),
        effect_size_name="d_z" if used_paired else "Hedges' g", cohen_d=_f(eff["d"]),
        g_av=_f(eff["gav"]), rho=_f(eff["rho"]), prob_improvement=_f(eff["pi"]), prob_improvement_ci=eff["pi_ci"],
        robust_test=eff["robust"] or "", robust_pvalue=_f(eff["rob_p"]), robust_min_pvalue=_f(eff["rob_min"]),
        seeds=eff["advice"], failures=fail, insufficient_reason=INSUFFICIENT_REASONS[num["ins"]] or None, flags=(),
        data_flags=tuple(data_flags), insufficient_code=num["ins"], pvalue_exact=num["p_exact"],
        seed_gap=gap_text(tv, cv) if counts is None and r.gap[0] >= GAP_FIRM_SHARE
        and min(len(tv), len(cv)) >= GAP_FROM else None)
    return finish(comp)


def gap_text(treatment: np.ndarray, control: np.ndarray) -> str:
    """Where an arm's seeds split far apart (:func:`ablate.stats.core.seed_gap`), in metric units.

    Parameters
    ----------
    treatment, control : numpy.ndarray
        The values the test used (finite), metric units.

    Returns
    -------
    str
        For the arm with the larger share, ``the control: 0.1 vs 0.889-0.912`` (the seeds on the smaller side of
        its largest gap, then the range of the others; 3 significant digits).
    """
    def share(x: np.ndarray) -> float:
        g = seed_gap(x[None, :])[0]
        return -1.0 if np.isnan(g) else float(g)

    name, x = max((("the treatment", treatment), ("the control", control)), key=lambda a: share(a[1]))
    s = np.sort(x)
    cut = int(np.argmax(np.diff(s))) + 1
    far, rest = (s[:cut], s[cut:]) if cut <= s.size - cut else (s[cut:], s[:cut])

    def span(v: np.ndarray) -> str:
        return f"{v[0]:.3g}" if v[0] == v[-1] else f"{v[0]:.3g}-{v[-1]:.3g}"

    return f"{name}: {span(far)} vs {span(rest)}"


def _used_values(t: np.ndarray, c: np.ndarray, used_paired: bool, sign: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Stage 1 of :func:`compare`: the values the test used and standardised, sign-normalised copies of them.

    Returns
    -------
    (tv, cv, ts, cs, scale)
        The finished values (complete pairs when paired) in metric units; the same standardised (centre = median,
        scale = largest deviation) and sign-normalised: every number computed from them is scale-free, so 1e200
        or 1e-200 neither overflows nor underflows; ``scale`` brings SDs back to metric units for the advice.
    """
    if used_paired:
        ok = ~np.isnan(t) & ~np.isnan(c)
        tv, cv = t[ok], c[ok]
    else:
        tv, cv = t[~np.isnan(t)], c[~np.isnan(c)]
    both = np.concatenate([tv, cv])
    center = float(np.median(both)) if both.size else 0.0
    scale = float(np.max(np.abs(both - center))) if both.size else 1.0
    scale = scale if scale > 0 and math.isfinite(scale) else 1.0
    return tv, cv, sign * (tv - center) / scale, sign * (cv - center) / scale, scale


def _t_numbers(r: Any, sign: float) -> dict[str, Any]:
    """Stage 2 of :func:`compare`: the t-test's numbers of the batch-of-one ``r`` (:class:`BatchResult`) as floats
    or None, keyed as :func:`compare` reads them (``nt``, ``nc``, ``mean_t``, ``diff``, ``ci``, ``p_dec``, ...)."""
    mean_c = _f(sign * r.mean_control[0])
    diff = _f(r.diff[0])
    return {"nt": int(r.n_treatment[0]), "nc": int(r.n_control[0]), "mean_t": _f(sign * r.mean_treatment[0]),
            "mean_c": mean_c, "diff": diff,
            "diff_pct": 100 * diff / abs(mean_c) if diff is not None and mean_c else None,
            "ci": (float(r.ci_low[0]), float(r.ci_high[0])) if _f(r.ci_low[0]) is not None else None,
            "tost": (float(r.tost_low[0]), float(r.tost_high[0])) if _f(r.tost_low[0]) is not None else None,
            "ins": int(r.insufficient[0]), "test": "paired t" if bool(r.paired[0]) else "Welch t",
            "stat": _f(r.statistic[0]), "df": _f(r.df[0]), "pval": _f(r.pvalue[0]), "p_dec": _f(r.p_decision[0]),
            "se": _f(r.se[0]), "counts": None, "p_exact": None, "guard": float(r.guard_factor[0])}


def _effects(ts: np.ndarray, cs: np.ndarray, scale: float, r: Any, diff: float | None, alpha_m: float,
             pi_interval: bool, cap: int) -> dict[str, Any]:
    """Stage 3 of :func:`compare`: effect sizes, P(T>C), the robust test, seed advice and the data's flags
    (all None, and no flags, below 2 values per arm); ``alpha_m`` is the per-comparison level α/m."""
    nt, nc, used_paired = int(r.n_treatment[0]), int(r.n_control[0]), bool(r.paired[0])
    eff: dict[str, Any] = dict.fromkeys(("d", "g", "gav", "rho", "pi", "pi_ci", "robust", "rob_p", "rob_min",
                                         "advice"))
    eff["data_flags"] = []
    if nt < 2 or nc < 2:
        return eff
    if used_paired:
        eff["g"], eff["gav"], eff["rho"] = paired_effect(ts, cs)
    else:
        eff["d"], eff["g"] = hedges_g(ts, cs)
    pim = prob_improvement(ts, cs, paired=used_paired, interval=pi_interval and min(nt, nc) >= 3,
                           confidence_level=0.95)
    eff["pi"], eff["pi_ci"] = pim.estimate, pim.ci
    rt = robust_test(ts, cs, paired=used_paired)
    eff["robust"], eff["rob_p"], eff["rob_min"] = rt.name, rt.pvalue, rt.min_pvalue
    if used_paired:
        sd_, df_ = scale * float((ts - cs).std(ddof=1)), nt - 1
    else:
        sd_, df_ = scale * pooled_sd(ts, cs), nt + nc - 2
    delta = _f(r.margin[0])
    target = delta if delta is not None else (abs(diff) if diff else None)
    eff["advice"] = recommend_seeds(min(nt, nc), sd_, df_, alpha=alpha_m, paired=used_paired, target=target,
                                    target_kind="margin" if delta is not None else "observed", cap=cap)
    eff["data_flags"] = _data_flags(ts, cs, used_paired, eff["advice"])
    return eff


def _run_flags(t: np.ndarray, c: np.ndarray, r: Any, paired: bool, alpha: float, data_flags: list[Flag]
               ) -> tuple[FailureFinding, list[Flag]]:
    """Stage 4 of :func:`compare`: the failed trials' finding, and ``data_flags`` with the paired fallback's and
    the failures' flags after them."""
    nt, nc = int(r.n_treatment[0]), int(r.n_control[0])
    if paired and not bool(r.paired[0]):
        data_flags.append(Flag("paired_fallback", f"fewer than 3 complete seed pairs: unpaired analysis of all "
                                                  f"runs ({nt} treatment, {nc} control)"))
    ft, fc = int(r.failed_treatment[0]), int(r.failed_control[0])
    fail = failure_finding(ft, ft + int((~np.isnan(t)).sum()), fc, fc + int((~np.isnan(c)).sum()))
    if fail.differs and fail.pvalue is not None and fail.pvalue < alpha:
        data_flags.append(Flag("failures_differ", fail.message()))
    return fail, data_flags


def _binary_numbers(num: dict[str, Any], tv: np.ndarray, cv: np.ndarray, used_paired: bool, sign: float,
                    level: float, tost: bool) -> dict[str, Any]:
    """Stage 5 of :func:`compare`, for a 0/1 metric: ``num`` with Newcombe's interval (McNemar's when paired) and
    the p-value it implies in place of the t-test's; a constant arm (all successes) is informative here, not a lack
    of variance. ``level``: the CI's α; ``tost``: whether a margin asks for the TOST interval. :func:`compare` sets
    the decision p (``p_dec``) from the new ``pval``."""
    counts = binary.counts(tv, cv, paired=used_paired)
    pval = binary.pvalue(counts)
    diff = sign * counts.diff
    mean_c = num["mean_c"]
    return {**num, "counts": counts, "pval": pval, "stat": None, "df": None, "se": None, "ins": 0, "guard": 1.0,
            "test": "exact McNemar (0/1 metric)" if used_paired else "Newcombe score (0/1 metric)",
            "p_exact": binary.firm_pvalue(counts), "diff": diff,
            "diff_pct": 100 * diff / abs(mean_c) if mean_c else None,
            "ci": _signed(binary.interval(counts, level), sign),
            "tost": _signed(binary.interval(counts, 2 * level), sign) if tost else None}


def with_ci_level(comp: Comparison, alpha_level: float) -> Comparison:
    """``comp`` with its CI of Δ recomputed at level ``1 - alpha_level`` (t-based: Δ ± t_{1-a/2, df} SE).

    Parameters
    ----------
    comp : Comparison
    alpha_level : float
        In (0, 1): the level the decision on ``comp`` was taken at (see
        :func:`ablate.stats.multiplicity.stage_levels`).

    Returns
    -------
    Comparison
        Unchanged when it has no SE (insufficient data) or ``alpha_level`` is NaN.

    Notes
    -----
    The same interval as ``scipy.stats.ttest_ind(...).confidence_interval(1 - alpha_level)`` (Welch) or
    ``ttest_rel`` (paired), from ``scipy.special.stdtrit``.
    """
    from scipy.special import stdtrit  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    if comp.binary is not None and 0 < alpha_level < 1:
        ci = _signed(binary.interval(comp.binary, alpha_level), 1.0 if comp.goal == "maximize" else -1.0)
        return dataclasses.replace(comp, ci=ci, ci_level=1 - alpha_level)
    if comp.se is None or comp.df is None or comp.diff is None or not 0 < alpha_level < 1:
        return comp
    level = alpha_level / comp.guard_factor  # the skew guard decided on p x 10: its CI is at 1 - level/10
    half = float(stdtrit(comp.df, 1 - level / 2)) * comp.se
    return dataclasses.replace(comp, ci=(comp.diff - half, comp.diff + half), ci_level=1 - level)


def _data_flags(ts: np.ndarray, cs: np.ndarray, paired: bool, advice: SeedAdvice | None) -> list[Flag]:
    from scipy import stats  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    flags: list[Flag] = []
    n = min(ts.size, cs.size)
    if n < 5 and advice is not None:
        flags.append(Flag("small_n", f"only large effects are detectable at N = {n}: MDE d ≈ {advice.mde_d:.1f}"))
    for name, x in (("treatment", ts), ("control", cs)) if n >= 5 else ():  # 3-4 seeds: no outlier can be told
        mad = 1.482602218505602 * float(np.median(np.abs(x - np.median(x))))  # = median_abs_deviation(scale="normal")
        if mad > 0:
            out = x[np.abs(x - np.median(x)) > 3 * mad]
            if out.size:
                flags.append(Flag("outliers", f"{name} has {out.size} outlier(s) beyond 3 MAD of its median "
                                              f"(inspect failed or collapsed seeds)"))
    st, sc = float(ts.std(ddof=1)), float(cs.std(ddof=1))
    if (st == 0) != (sc == 0):
        flags.append(Flag("one_arm_constant", f"the {'treatment' if st == 0 else 'control'} is constant across "
                                              "seeds" + ("" if paired else "; Welch's test relies on the other arm's "
                                                                           "variance alone")))
    elif st > 0 and sc > 0 and max(st, sc) / min(st, sc) > 3:
        flags.append(Flag("sd_ratio", f"the arms' SDs differ {max(st, sc) / min(st, sc):.1f}-fold"))
    if not paired and ts.size >= 3 and cs.size >= 3 and bool(skew_spread(ts[None], cs[None])[0]):
        flags.append(Flag("skew_spread", f"the arms' SDs differ {max(st, sc) / min(st, sc):.1f}-fold and the values "
                                         "are skewed: below 20 seeds per arm the verdict's false-positive rate can "
                                         "then reach 0.07-0.14 (the skew guard needs more seeds to see the skew; "
                                         "docs/verdict.md): confirm a better/worse verdict with more seeds"))
    samples = [("paired differences", ts - cs)] if paired else [("treatment", ts), ("control", cs)]
    samples = [(name, x) for name, x in samples if x.size >= 3 and np.ptp(x) > 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if len(samples) == 2 and samples[0][1].size == samples[1][1].size:  # one call for both arms
            ps = [float(v) for v in stats.shapiro(np.stack([x for _, x in samples]), axis=1).pvalue]
        else:
            ps = [float(stats.shapiro(x).pvalue) for _, x in samples]
    for (name, _), p in zip(samples, ps, strict=True):
        if p < 0.05:
            flags.append(Flag("non_normal", f"{name}: Shapiro-Wilk p {p_is(p)} (information only; the "
                                            "robust test is the check)"))
    return flags


def finish(comp: Comparison) -> Comparison:
    """Decide the verdict and write its reason and flags from the numbers in ``comp`` (spec B4).

    Parameters
    ----------
    comp : Comparison
        With its numeric fields set; ``verdict``, ``reason``, ``size`` and ``flags`` are recomputed.

    Returns
    -------
    Comparison
    """
    nan = math.nan
    code = int(decision_rule(
        nan if comp.pvalue_adjusted is None else comp.pvalue_adjusted, comp.decision_level,
        nan if comp.diff is None else comp.diff, comp.tost_ci[0] if comp.tost_ci else nan,
        comp.tost_ci[1] if comp.tost_ci else nan, nan if comp.margin is None else comp.margin,
        comp.insufficient_code)[()])
    verdict = VERDICTS[code]
    flags = list(comp.data_flags)
    size = None
    if code in (BETTER, WORSE) and comp.margin is not None and comp.ci is not None:
        lo, hi = comp.ci if code == BETTER else (-comp.ci[1], -comp.ci[0])
        size = "≥ δ" if lo >= comp.margin else "< δ" if hi < comp.margin and lo > 0 else "size uncertain"
    if code in (BETTER, WORSE) and comp.ci is not None and comp.ci[0] <= 0 <= comp.ci[1]:
        flags.append(Flag("holm_ci", f"p_adj < α but the {level_text(comp.ci_level)} CI still touches 0; the verdict "
                                     "follows p_adj"))
    if comp.robust_pvalue is not None and comp.pvalue is not None and comp.robust_min_pvalue is not None:
        # Judge the rank test at the level the decision used: scale its p by the same multiplicity factor
        # as the primary p (Holm's p_adj / p), and compare both with the decision level.
        # (the skew guard's x 10 is the t-test's own correction, not the family's: the rank test does not get it)
        raw = min(1.0, comp.pvalue * comp.guard_factor)
        factor = (comp.pvalue_adjusted / raw) if comp.pvalue_adjusted is not None and raw > 0 else 1.0
        robust_adj = min(1.0, comp.robust_pvalue * factor)
        primary_adj = comp.pvalue_adjusted if comp.pvalue_adjusted is not None else comp.pvalue
        if comp.robust_min_pvalue * factor >= comp.decision_level:
            flags.append(Flag("robust_floor", f"{comp.robust_test} cannot reach significance at these n "
                                              f"(smallest possible p = {comp.robust_min_pvalue:.3g})"))
        elif (primary_adj < comp.decision_level) != (robust_adj < comp.decision_level):
            flags.append(Flag("tests_disagree", f"{comp.test} and {comp.robust_test} disagree at the decision level "
                                                f"({comp.test} p {p_is(primary_adj)}, {comp.robust_test} p "
                                                f"{p_is(robust_adj)}, adjusted alike): "
                                                "look at the raw values for outlier seeds, which move the mean but "
                                                "not the ranks"))
    if comp.guard_factor > 1 and comp.skew_z is not None:
        flags.append(Flag("skew_guard", f"the values are skewed with the long tail on the side opposite to Δ "
                                        f"(D'Agostino z = {comp.skew_z:.2f} ≥ 1.96), where the t-test rejects too "
                                        f"often (false-positive rate up to 0.14, docs/verdict.md): the decision "
                                        f"needed p × {comp.guard_factor:g} below the level, and the CI is the "
                                        f"{level_text(comp.ci_level)} one"))
    if comp.prob_improvement_ci is not None and min(comp.n_treatment, comp.n_control) < MIN_N_COVERED:
        flags.append(Flag("indicative", f"the 95% P(T>C) interval may under-cover below {MIN_N_COVERED} seeds "
                                        "per arm (0.90 at N = 3): indicative only"))
    firm = firm_from = None
    if code in (BETTER, WORSE) and comp.binary is not None:
        firm, firm_from, flag = _binary_firm(comp)
        flags += [flag] if flag else []
    elif code in (BETTER, WORSE):
        firm, firm_from, flag = _continuous_firm(comp, code)
        flags += [flag] if flag else []
    comp = dataclasses.replace(comp, verdict=verdict, size=size, flags=tuple(flags), firm=firm, firm_from=firm_from,
                               ci_indicative=firm is False)
    return dataclasses.replace(comp, reason=_reason(comp, code))


def _continuous_firm(comp: Comparison, code: int) -> tuple[bool, int | None, Flag | None]:
    """A better/worse on a continuous metric: firm by :func:`ablate.stats.core.is_firm`, else why not, in the order
    that binds (evident skew: never; fewer than FIRM_MIN_CONTINUOUS seeds: never; a seed far from the others; the
    family guard at 20-29 seeds; p x 10 below 20 seeds).

    Returns
    -------
    (firm, firm_from, flag)
        ``firm_from``: seeds per arm from which it is firm if its p is then below the level (None on skewed values);
        ``flag``: ``indicative_verdict`` with the reason, None when firm.
    """
    n = min(comp.n_treatment, comp.n_control)
    args = (code, comp.pvalue_adjusted, comp.decision_level, comp.guard_factor, n, comp.paired,
            comp.skew_evident, comp.n_comparisons, np.nan if comp.skew_z is None else comp.skew_z)
    if bool(is_firm(*args, gap=1.0 if comp.seed_gap else np.nan)):
        return True, None, None
    lim = FIRM_FROM[comp.paired]
    if comp.skew_evident:
        return False, None, Flag("indicative_verdict", SKEWED_REASON)
    if n < FIRM_MIN_CONTINUOUS:
        return False, lim, Flag("indicative_verdict", few_seeds_reason(n, comp.paired, lim))
    if comp.seed_gap and bool(is_firm(*args)):  # the far seed alone holds it back
        return False, lim, Flag("indicative_verdict", gap_reason(comp.seed_gap, lim))
    if n >= lim and comp.n_comparisons >= FAMILY_FIRM_M:
        return False, FAMILY_GUARD_BELOW, Flag("indicative_verdict", family_guard_reason(n, comp.n_comparisons,
                                                                                         comp.skew_z))
    pname = "p" if comp.multiplicity in ("none", "group sequential") else "p_adj"
    short = (family_shortfall(comp.n_comparisons, lim) if comp.n_comparisons >= FAMILY_FIRM_M else
             firm_shortfall(comp.pvalue_adjusted, comp.decision_level, comp.decision_label, pname, lim))
    return False, lim, Flag("indicative_verdict", indicative_reason(n, comp.paired, shortfall=short))


def _binary_firm(comp: Comparison) -> tuple[bool, int | None, Flag | None]:
    """A 0/1 better/worse: firm when the exact test (:func:`ablate.stats.binary.firm_pvalue`), adjusted for the
    family by the same factor as the score test's p (Holm's p_adj / p; 1 at a sequential look), clears the level.

    Returns
    -------
    (firm, firm_from, flag)
        ``firm_from``: seeds per arm from which Fisher's test rejects at the same rates (None: not within the cap);
        ``flag``: ``indicative_verdict`` with the reason, None when firm.
    """
    assert comp.binary is not None and comp.pvalue is not None and comp.pvalue_adjusted is not None
    p_exact = comp.pvalue_exact if comp.pvalue_exact is not None else binary.firm_pvalue(comp.binary)
    factor = comp.pvalue_adjusted / comp.pvalue if comp.pvalue > 0 else 1.0
    if min(1.0, p_exact * factor) < comp.decision_level:
        return True, None, None
    cap = comp.seeds.cap if comp.seeds is not None else SEED_CAP
    lim = binary.firm_from(comp.binary, comp.decision_level / factor, cap)
    adj = "" if factor == 1 else f" × {factor:.3g} (the family's adjustment)"
    then = (f"at these success rates it would from {lim} seeds per arm" if lim is not None else
            f"at these success rates it would not within {cap} seeds per arm")
    return False, lim, Flag("indicative_verdict", (
        f"indicative: the score test rejects but Fisher's exact test does not (p{adj} = "
        f"{min(1.0, p_exact * factor):.2g}, not below {comp.decision_label} = {comp.decision_level:.3g}); the score "
        f"test alone rejects up to {BINARY_SCORE_AA:g} of A/A ablations at some N (exact enumeration, "
        f"docs/verdict.md), Fisher's at most its level, and {then}"))


#: The score test's worst exact A/A rate at α = 0.05 (N = 3-50, p = 0.1, 0.3, 0.5; docs/verdict.md,
#: ``benchmarks/stats37_tables.py --only binary``).
BINARY_SCORE_AA = 0.077


#: Why a better/worse on evidently skewed values is indicative (verdict.json's flag; the Seed recommendation's words).
SKEWED_REASON = (
    f"indicative: the values are evidently skewed (|D'Agostino z| ≥ {SKEW_FIRM_Z:g}), and on skewed metrics no test "
    "of the mean held α within 50 seeds per arm (a firm family-wise error up to 0.32 for 10 treatments, 0.12 for one "
    "whose skew grows with its spread; docs/verdict.md), so more seeds do not make it firm: read it as a lead, or "
    "compare a quantity the skew does not bias (P(T>C), the medians)")


def firm_shortfall(p: float | None, level: float | None, label: str = "α", pname: str = "p_adj",
                   firm_from: int = FIRM_FROM[False]) -> str:
    """Why an indicative verdict's p is not enough below ``firm_from`` seeds, in words that need no glossary.

    Parameters
    ----------
    p : float or None
        The p the decision used (adjusted for the family, ``pname`` names it).
    level : float or None
        The level it was compared with (``label`` names it: α, or a sequential boundary).
    label, pname : str
    firm_from : int
        Seeds per arm from which a better/worse verdict is firm.

    Returns
    -------
    str
        ``p_adj (p adjusted for testing several treatments) × 10 = 0.45 is not below α = 0.05 (below 20 seeds per
        arm a verdict is firm only when p_adj is 10 times under its level)``.
    """
    why = (f"(below {firm_from} seeds per arm a verdict is firm only when {pname} is {FIRM_FACTOR:g} times under "
           "its level)")
    what = f"{pname} (p adjusted for testing several treatments)" if pname == "p_adj" else pname
    if p is None or level is None:
        return f"{what} × {FIRM_FACTOR:g} is not below the level {why}"
    return f"{what} × {FIRM_FACTOR:g} = {p * FIRM_FACTOR:.2g} is not below {label} = {level:.3g} {why}"


def family_shortfall(m: int, firm_from: int = FIRM_FROM[False]) -> str:
    """Why a family's verdict below ``firm_from`` seeds is indicative whatever its p (words that need no glossary).

    Parameters
    ----------
    m : int
        Treatments compared with the control.
    firm_from : int

    Returns
    -------
    str
    """
    return (f"with {m} treatments each is tested at a fraction of α, far in the tail where the t-test's excess on "
            f"skewed arms is largest (a firm family-wise error of 0.06-0.09 at 5-10 seeds even with p × "
            f"{FIRM_FACTOR:g}, docs/verdict.md), so below {firm_from} seeds per arm no verdict of a family is firm")


def family_guard_reason(n: int, m: int, skew_z: float | None) -> str:
    """Why a family's verdict at :data:`~ablate.stats.core.FIRM_FROM` to 29 seeds is indicative (one sentence).

    Parameters
    ----------
    n : int
        Completed seeds per arm (pairs when paired).
    m : int
        Treatments compared with the control.
    skew_z : float or None
        The skew guard's oriented D'Agostino z.

    Returns
    -------
    str
    """
    z = "" if skew_z is None else f" (D'Agostino z = {skew_z:.2f})"
    return (f"indicative: with {m} treatments each is tested at a fraction of α, far in the tail where the t-test "
            f"rejects too often on arms of unequal spread (a firm family-wise error of 0.058 on two-mode arms at 20 "
            f"seeds, docs/verdict.md); with {n} seeds per arm and values leaning against Δ{z} a verdict is firm only "
            f"when p_adj is {SKEW_GUARD_FACTOR:g} times under its level; at {FAMILY_GUARD_BELOW} seeds per arm it is "
            "firm if its p is then below the level")


def gap_reason(where: str, firm_from: int = FIRM_FROM[False]) -> str:
    """Why a better/worse whose arm shows a seed far from the others is indicative below ``firm_from`` seeds.

    Parameters
    ----------
    where : str
        :func:`gap_text`'s words (``the control: 0.1 vs 0.889-0.912``).
    firm_from : int
        Seeds per arm from which the verdict is firm if its p is below the level.

    Returns
    -------
    str
    """
    arm, _, vals = where.partition(": ")
    return (f"indicative: {arm} has a seed far from the others ({vals}): a mode the few seeds cannot measure "
            f"(accuracy with seeds stuck at chance reached a firm false-positive rate of 0.07-0.13 at 10 seeds, "
            f"docs/verdict.md); firm from {firm_from} seeds per arm if its p is then below the level")


def few_seeds_reason(n: int, paired: bool, firm_from: int = FIRM_FROM[False]) -> str:
    """Why a better/worse on a continuous metric below :data:`~ablate.stats.core.FIRM_MIN_CONTINUOUS` seeds per arm
    is indicative whatever its p (one sentence; a 0/1 metric keeps its exact tests).

    Parameters
    ----------
    n : int
        Completed seeds per arm (pairs when paired).
    paired : bool
    firm_from : int
        Seeds per arm from which the verdict is firm if its p is then below the level.

    Returns
    -------
    str
    """
    here = f"here {n}{', paired' if paired else ''}"
    return (f"indicative: below {FIRM_MIN_CONTINUOUS} seeds per arm ({here}) a verdict on a continuous metric is "
            f"never firm, whatever its p (a metric with a rare second "
            f"mode, such as accuracy with seeds stuck at chance, gives two tight clusters at 5-7 seeds whatever the "
            f"truth, and a firm false-positive rate of 0.07-0.17 there: docs/verdict.md); at {firm_from} seeds per "
            f"arm it is firm if its p is then below the level (ablate's rule for a firm verdict, not a power target)")


def indicative_reason(n: int, paired: bool, shortfall: str | None = None) -> str:
    """Why a better/worse verdict at ``n`` seeds per arm is indicative, and what would make it firm (one sentence).

    Parameters
    ----------
    n : int
        Completed seeds per arm (pairs when paired).
    paired : bool
    shortfall : str, optional
        :func:`firm_shortfall`'s words for this verdict's p; default: without the numbers.

    Returns
    -------
    str
    """
    lim = FIRM_FROM[bool(paired)]
    return (f"indicative: with {n} seeds per arm{' (paired)' if paired else ''} (< {lim}) no test of the mean holds "
            f"α for every metric shape (skewed arms of unequal spread reach a false-positive rate of 0.08-0.14 there, "
            f"docs/verdict.md), and {shortfall or firm_shortfall(None, None, firm_from=lim)}; at {lim} seeds per arm "
            f"it is firm if its p is then below the level (ablate's rule for a firm verdict, not a power target)")


def _reason(c: Comparison, code: int) -> str:
    if code == VERDICTS.index("insufficient data"):
        counts = f"{c.n_treatment} treatment and {c.n_control} control completed seeds" + (
            f", {c.failed_treatment} and {c.failed_control} failed" if c.failed_treatment or c.failed_control else "")
        extra = f"; Δ = {c.diff:+.4g}" if c.diff is not None and c.insufficient_code in (4, 5) else ""
        return f"Insufficient data: {c.insufficient_reason} ({counts}){extra}."
    dec = _decimals(None if c.ci is None else c.ci[1] - c.ci[0])
    pname = "p" if c.multiplicity in ("none", "group sequential") else "p_adj"
    p = c.pvalue_adjusted if pname == "p_adj" else c.pvalue
    if c.guard_factor > 1:  # the skew guard: the decision used p x 10 (adjusted or not)
        p, pname = c.pvalue_adjusted, (f"p × {c.guard_factor:g} (skew guard)" if pname == "p"
                                       else f"{pname} (of p × {c.guard_factor:g}: skew guard)")
    rel = "<" if code in (BETTER, WORSE) else "≥"
    if code not in (BETTER, WORSE) and p is not None and c.decision_level is not None and p < c.decision_level:
        rel = "<"  # only when Δ is exactly 0: significant, but with no direction to call (said below)
    test = "Welch" if c.test == "Welch t" else c.test.replace(" (0/1 metric)", "")
    parts = [f"{test} {pname} {p_is(p)} {rel} {c.decision_label} = {c.decision_level:.3g}"]
    # Δ in the metric's own sign, as the ablation table prints it (treatment − control): for a metric to minimize
    # a better treatment has Δ < 0, said once ("lower is better"); the decision is sign-free
    flip = -1.0 if c.goal == "minimize" else 1.0
    delta = f"Δ = {flip * c.diff:+.{dec}f}"
    if c.ci is not None:
        lo, hi = sorted((flip * c.ci[0], flip * c.ci[1]))
        delta += f", {ci_name(c.ci_level, c.ci_indicative)} [{lo:.{dec}f}, {hi:.{dec}f}]"
    if c.diff_pct is not None:
        delta += f" ({flip * c.diff_pct:+.1f}%)"
    if flip < 0:
        delta += " (treatment − control; lower is better)"
    parts.append(delta + (" (no direction: not better, not worse)" if rel == "<" and code not in (BETTER, WORSE)
                          else ""))
    if c.effect_size is not None:
        parts.append(f"{'d_z' if c.paired else 'g'} = {c.effect_size:.2f}")
    if c.prob_improvement is not None:
        parts.append(f"P(T>C) = {c.prob_improvement:.2f}")
    lead = ""
    if code == EQUIVALENT and c.tost_ci is not None and c.margin is not None:
        lead = (f"No meaningful difference: the {level_text(c.tost_level)} CI [{c.tost_ci[0]:.{dec}f}, "
                f"{c.tost_ci[1]:.{dec}f}] lies inside ±δ = {c.margin:.{dec}g}; ")
    if code in (BETTER, WORSE) and c.size:
        parts.append(f"size {c.size}" if c.size != "size uncertain" else "size uncertain against δ")
    elif code in (BETTER, WORSE) and c.ci is not None and c.ci[0] <= 0 <= c.ci[1]:
        parts.append(f"size uncertain (the {level_text(c.ci_level)} CI still touches 0)")
    if code == INCONCLUSIVE and c.seeds is not None:
        parts.append(f"MDE = {c.seeds.mde:.{dec}f} (d = {c.seeds.mde_d:.2f}) at N = {c.seeds.n}")
    return lead + "; ".join(parts) + "."
