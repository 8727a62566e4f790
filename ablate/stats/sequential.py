"""Group-sequential seeds: Lan-DeMets alpha spending boundaries and looks (verdict spec B8).

Running seeds in looks (say N = 5, 10, 15, 20 per arm) and stopping a treatment at the first look whose
test crosses a boundary keeps the family-wise error at alpha, where naive re-testing after every seed
does not (false-positive rate 0.21 at nominal 0.05 for N = 3..20; Armitage, McPherson & Rowe 1969).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ablate.stats import _iv
from ablate.stats.core import BETTER, EQUIVALENT, INCONCLUSIVE, WORSE, decide_batch, firm_factor, is_firm
from ablate.stats.futility import FUTILITY_CP, futile, pooled_sd_rows
from ablate.stats.pairing import auto_pairs

SPENDING = ("obf", "pocock")


def spending(t: Any, alpha: float, kind: Literal["obf", "pocock"] = "obf") -> np.ndarray:
    """Cumulative two-sided alpha spent by information fraction ``t``.

    Parameters
    ----------
    t : array_like
        Information fractions in (0, 1].
    alpha : float
        Total two-sided level.
    kind : {"obf", "pocock"}
        O'Brien-Fleming type, α(t) = 2 - 2Φ(z_{1-α/2} / √t); or Pocock type, α ln(1 + (e - 1) t).

    Returns
    -------
    numpy.ndarray
        α(t), same shape as ``t``; α(1) = alpha.

    Raises
    ------
    StatsInputError
        When ``t`` is outside (0, 1], ``alpha`` out of range or ``kind`` unknown.

    Notes
    -----
    Lan & DeMets (1983), Biometrika 70(3), 659-663; Jennison & Turnbull (2000), ch. 7.
    """
    from scipy.stats import norm  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    a = _iv.alpha(alpha)
    k = _iv.choice(kind, "kind", SPENDING)
    tt = np.asarray(t, dtype=float)
    if np.any(~(tt > 0) | (tt > 1)):
        raise _iv.fail("t", "must lie in (0, 1]", t)
    if k == "obf":
        return 2 - 2 * norm.cdf(norm.isf(a / 2) / np.sqrt(tt))
    return a * np.log(1 + (math.e - 1) * tt)


@dataclass(frozen=True)
class Boundaries:
    """Two-sided group-sequential boundaries.

    Attributes
    ----------
    fractions : tuple of float
        Information fraction of each look.
    z : tuple of float
        Critical |Z| at each look (inf where no alpha is spent).
    nominal_p : tuple of float
        The two-sided nominal p-value threshold 2(1 - Φ(z)) at each look: reject at look k when p < it.
    spent : tuple of float
        Cumulative alpha the spending function allows by each look (where a look stops only when firm, less is
        spent there and the rest carried on: ``stop_factor``).
    alpha : float
    kind : str
    stop_factor : tuple of float
        The factor p must survive at each look to stop there (:func:`boundaries`).
    """

    fractions: tuple[float, ...]
    z: tuple[float, ...]
    nominal_p: tuple[float, ...]
    spent: tuple[float, ...]
    alpha: float
    kind: str
    stop_factor: tuple[float, ...] = ()


def _boundaries_iv(fractions: Any, alpha: Any, kind: Any) -> tuple[tuple[float, ...], float, str]:
    f = np.asarray(fractions, dtype=float)
    if f.ndim != 1 or f.size == 0 or np.any(~(f > 0) | (f > 1)) or np.any(np.diff(f) < 0):
        raise _iv.fail("fractions", "must be a non-empty, non-decreasing sequence in (0, 1]", fractions)
    return tuple(round(float(x), 6) for x in f), _iv.alpha(alpha), _iv.choice(kind, "kind", SPENDING)


def boundaries(fractions: Sequence[float], *, alpha: float = 0.05, kind: str = "obf",
               stop_factor: Sequence[float] | None = None) -> Boundaries:
    """Lan-DeMets boundaries for looks at the given information fractions.

    Parameters
    ----------
    fractions : sequence of float, shape (K,)
        Information fraction at each look, non-decreasing in (0, 1]: n_k / N_max for the planned looks, or
        the actual fractions when seeds crashed (pass 1 for the final look to spend all of ``alpha``).
    alpha : float
        Two-sided level for this treatment (alpha / m under Bonferroni across treatments).
    kind : {"obf", "pocock"}
        The spending function (see :func:`spending`).
    stop_factor : sequence of float, shape (K,), optional
        Per look, the factor p must survive for the look to *stop* the treatment: 1 (default) where any
        crossing stops; :data:`ablate.stats.core.FIRM_FACTOR` where only a firm verdict does (below
        :data:`ablate.stats.core.FIRM_FROM` seeds per arm, p x 10 under the boundary; :func:`stop_factors`).
        Later boundaries are computed against the boundaries actually stopped at, so the α such a look does not
        spend is carried to the next look (the firm-aware boundary of issue 37 item 4).

    Returns
    -------
    Boundaries
        For looks {5,10,15,20} of 20 at alpha 0.05, OBF: z = 3.92, 2.77, 2.30, 2.04, nominal p = 9e-5, 0.0055,
        0.0216, 0.0411 (spec A9); with stop factors (10, 10, 10, 1): nominal p = 9e-5, 0.0056, 0.0236, 0.0498.

    Raises
    ------
    StatsInputError
        When an argument breaks its rule.

    Notes
    -----
    The test statistics at the looks are jointly normal with corr(Z_i, Z_j) = √(t_i / t_j) (Jennison &
    Turnbull 2000, ch. 3). Boundary k solves P(|Z_j| < s_j, j < k; |Z_k| < c_k) = 1 - α(t_k), where s_j is the
    boundary look j stops at (c_j, or the z of its nominal p / stop factor), with
    ``scipy.stats.multivariate_normal.cdf(..., lower_limit=...)`` (Genz integration, absolute error 1e-5,
    fixed ``rng`` so results are reproducible) inside ``scipy.optimize.brentq``. A look at the same fraction
    as the previous one spends nothing (z = inf). The probability of any stop (any crossing at the last look)
    under "no effect" is α(1) = α whatever the factors: a look that stops less leaves its α to the next.
    """
    f, a, k = _boundaries_iv(fractions, alpha, kind)
    sf = tuple(1.0 for _ in f) if stop_factor is None else tuple(float(x) for x in stop_factor)
    if len(sf) != len(f) or not all(x >= 1 for x in sf):
        raise _iv.fail("stop_factor", f"must give one factor >= 1 per look ({len(f)})", stop_factor)
    return _boundaries_cached(f, a, k, sf)


def stop_factors(looks: Sequence[int]) -> tuple[float, ...]:
    """The factor p must survive at each planned look for that look to stop a treatment (fixed by the plan).

    Parameters
    ----------
    looks : sequence of int
        Seeds per arm at each look, increasing.

    Returns
    -------
    tuple of float
        :func:`ablate.stats.core.firm_factor` at each look's seed count (10 below
        :data:`ablate.stats.core.FIRM_FROM`, else 1: only a firm verdict stops, :func:`stops`), and 1 at the last
        look, where every crossing is the verdict. Looks 5, 10, 15, 20: (10, 10, 10, 1). Below
        :data:`ablate.stats.core.FIRM_MIN_CONTINUOUS` seeds no crossing on a continuous metric is firm, so such a look
        spends less than the factor 10 reserves (conservative; a 0/1 metric, firm where its exact test rejects, may
        stop there, so the plan, made before the metric is seen, keeps the factor).
    """
    lk = [int(x) for x in looks]
    out = [float(x) for x in firm_factor(np.asarray(lk), False)]
    return (*out[:-1], 1.0) if out else ()


@functools.lru_cache(maxsize=4096)
def _boundaries_cached(f: tuple[float, ...], a: float, kind: str, sf: tuple[float, ...]) -> Boundaries:
    from scipy.optimize import brentq  # noqa: PLC0415  # lazy: numpy and scipy off this module's import
    from scipy.stats import multivariate_normal, norm  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    def inside(up: np.ndarray, cov: np.ndarray) -> float:
        return float(multivariate_normal.cdf(up, mean=np.zeros(up.size), cov=cov, lower_limit=-up,
                                             rng=np.random.default_rng(12345), abseps=1e-5, releps=0))

    def cov_of(idx: list[int]) -> np.ndarray:
        tt = np.array([f[j] for j in idx])
        return np.sqrt(np.minimum.outer(tt, tt) / np.maximum.outer(tt, tt))

    spent = spending(np.array(f), a, kind)  # type: ignore[arg-type]
    z: list[float] = []
    stop_z: list[float] = []  # the boundary each look actually stops at: z of (nominal p / stop factor)
    prev_spent = 0.0
    for i, (ti, si) in enumerate(zip(f, spent, strict=True)):
        if si - prev_spent <= 1e-12 or (i > 0 and ti <= f[i - 1]):
            z.append(math.inf)
            stop_z.append(math.inf)
            continue
        live = [j for j in range(i) if math.isfinite(stop_z[j])]
        if not live:  # no earlier boundary constrains the path: a single-look boundary
            z.append(float(norm.isf(si / 2)))
        else:
            idx = [*live, i]
            cov = cov_of(idx)
            prev = np.array([stop_z[j] for j in live])
            # α spent by the stops before this look (less than planned where a look stops only when firm)
            done = 1.0 - inside(prev, cov_of(live)) if len(live) > 1 else float(2 * norm.sf(prev[0]))
            target = 1.0 - si

            def g(c: float, prev: np.ndarray = prev, cov: np.ndarray = cov, target: float = target) -> float:
                return inside(np.append(prev, c), cov) - target

            # P(exit at look i, not before) lies between P(|Z_i| >= c) - done and P(|Z_i| >= c), so the root is
            # bracketed by the single-look boundaries of the cumulative and of the remaining alpha
            lo, hi = float(norm.isf(si / 2)) - 1e-6, float(norm.isf(max(si - done, 1e-300) / 2)) + 1e-6
            if g(hi) < 0:  # numerical floor: spending increment below integration error
                z.append(math.inf)
                stop_z.append(math.inf)
                continue
            z.append(float(brentq(g, lo, hi, xtol=1e-5)) if g(lo) < 0 else lo)
        stop_z.append(float(norm.isf(norm.sf(z[-1]) / sf[i])))
        prev_spent = si
    nominal = tuple(float(2 * norm.sf(x)) if math.isfinite(x) else 0.0 for x in z)
    return Boundaries(f, tuple(z), nominal, tuple(float(s) for s in spent), a, kind, sf)


def look_pairing(looks: Sequence[int], *, alpha: float = 0.05, kind: str = "obf") -> list[bool]:
    """Planning figure: whether pairing at ρ = 0 costs at most 2.5 points of power at each look's level.

    (``pairing=auto`` no longer uses it: it pairs when the design shares randomness across arms, at every look;
    :func:`ablate.stats.pair_by_seed`.)

    Each look's test runs at that look's nominal level, so the rule of :func:`ablate.stats.pairing.auto_pairs`
    is applied with it: paired at look k when ``looks[k] >= auto_pair_from(nominal_p[k])``, the nominal levels
    of the planned boundaries (information fraction ``looks[k] / looks[-1]``). Everything is fixed before the
    data: looks 5, 10, 15, 20 at α = 0.05 give nominal levels 0.0001, 0.0055, 0.0215, 0.0411, from which
    pairing needs 128, 48, 29 and 21 seeds per arm: no look pairs; looks 10, 20, 30, 40 pair at 30 and 40.

    Parameters
    ----------
    looks : sequence of int
        Seeds per arm at each look, increasing.
    alpha : float
        The treatment's level (α/m).
    kind : {"obf", "pocock"}

    Returns
    -------
    list of bool
        One per look.

    Raises
    ------
    StatsInputError
        When ``looks`` or ``alpha`` break their rule.
    """
    lk = [_iv.positive_int(x, "looks", lo=1) for x in looks]
    if not lk or lk != sorted(set(lk)):
        raise _iv.fail("looks", "must be increasing seed counts", looks)
    b = boundaries([n / lk[-1] for n in lk], alpha=alpha, kind=kind)
    return [auto_pairs(n, level=max(p, 1e-12)) for n, p in zip(lk, b.nominal_p, strict=True)]


def information_fraction(n_treatment: int, n_control: int, n_max: int, *, paired: bool = False) -> float:
    """Information at a look relative to the planned maximum, capped at 1.

    Parameters
    ----------
    n_treatment, n_control : int
        Completed seeds per arm at this look (paired: both equal the number of complete pairs).
    n_max : int
        Planned seeds per arm at the final look.
    paired : bool
        Paired: n / n_max. Unpaired: information ∝ 1/(1/n_T + 1/n_C), relative to n_max/2.

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    StatsInputError
        When a count is negative or ``n_max`` < 1.

    Notes
    -----
    Jennison & Turnbull (2000), sec. 3.1: the information of a difference of means is 1/Var(Δ̂).
    """
    nt = _iv.positive_int(n_treatment, "n_treatment", lo=0)
    nc = _iv.positive_int(n_control, "n_control", lo=0)
    nm = _iv.positive_int(n_max, "n_max", lo=1)
    if paired:
        return min(1.0, min(nt, nc) / nm)
    if nt == 0 or nc == 0:
        return 0.0
    return min(1.0, (nt * nc / (nt + nc)) / (nm / 2))


def stops(verdict: Any, firm: Any) -> np.ndarray:
    """Whether a look's verdict stops its treatment: a firm better/worse, or equivalent (with a margin).

    Parameters
    ----------
    verdict : array_like of int
        Codes into :data:`ablate.stats.core.VERDICTS` at the look (decided at the look's boundary).
    firm : array_like of bool
        :func:`ablate.stats.core.is_firm` of those verdicts (``BatchResult.firm``).

    Returns
    -------
    numpy.ndarray of bool
        True for a firm better/worse or an equivalent verdict. An indicative better/worse (below
        :data:`ablate.stats.core.FIRM_FROM` seeds per arm, p x 10 not under the boundary; on a continuous metric,
        any crossing below :data:`ablate.stats.core.FIRM_MIN_CONTINUOUS` seeds) does not stop: stopping
        there left 57% of 1 SD effects with an indicative answer and no more seeds (issue 37 item 4), so the arm
        runs to the next look; :func:`boundaries` with :func:`stop_factors` spends α on these stops only. Callers
        pass ``firm | indicative_at_every_n(...)``: from FIRM_FROM seeds a crossing that only evident skew keeps
        indicative stops too (issue 39, :func:`indicative_at_every_n`).
    """
    v, f = np.broadcast_arrays(np.asarray(verdict), np.asarray(firm, bool))
    return (np.isin(v, (BETTER, WORSE)) & f) | (v == EQUIVALENT)


def indicative_at_every_n(res: Any, n_comparisons: int) -> np.ndarray:
    """Better/worse verdicts of a look that only evident skew keeps indicative: more seeds cannot make them firm.

    Parameters
    ----------
    res : ablate.stats.core.BatchResult
        The look's :func:`ablate.stats.core.decide_batch` result.
    n_comparisons : int
        m, the treatments compared with the control (as ``decide_batch`` was given).

    Returns
    -------
    numpy.ndarray of bool
        True from :data:`ablate.stats.core.FIRM_FROM` seeds per arm where the values are evidently skewed
        (``res.skewed``) and the verdict would be firm on values that were not (:func:`ablate.stats.core.is_firm`
        with ``skewed=False``). A verdict on evidently skewed values is indicative at every N (issue 37), so such a
        crossing stops its arm as a firm one does (issue 39): running on cannot turn it firm, and the boundaries
        already spend α on every crossing from FIRM_FROM seeds (:func:`stop_factors`). Below FIRM_FROM seeds the
        skew test is too noisy to say the metric is skewed (it fires on about 5% of normal samples), and there an
        indicative crossing runs on as before.
    """
    n = np.minimum(np.asarray(res.n_treatment), np.asarray(res.n_control))
    would = is_firm(res.verdict, res.p_decision, res.alpha_decision, res.guard_factor, n, res.paired, False,
                    n_comparisons, res.skew_z)
    return np.asarray(res.skewed, bool) & would & (firm_factor(n, res.paired) == 1)


@dataclass(frozen=True)
class SequentialBatch:
    """Outcome of :func:`group_sequential_batch`, arrays of shape (batch,).

    Attributes
    ----------
    verdict : int array
        Codes into :data:`ablate.stats.core.VERDICTS` at the look where each row stopped.
    stopped_at : int array
        Index of the look where each row stopped (the last look when it never crossed).
    n_used : int array
        Seeds per arm at that look.
    firm : bool array
        Whether the verdict there is a firm better/worse (:func:`ablate.stats.core.is_firm`, the flag
        ``compare()`` writes); False for every other verdict.
    futile : bool array or None
        Whether the row stopped for futility (:mod:`ablate.stats.futility`); None when no planned effect was given.
    """

    verdict: np.ndarray
    stopped_at: np.ndarray
    n_used: np.ndarray
    firm: np.ndarray
    futile: np.ndarray | None = None


def group_sequential_batch(treatment: Any, control: Any, looks: Sequence[int], *,
                           paired: bool | Sequence[bool] = False,
                           alpha: float = 0.05, goal: str = "maximize", margin: float | str | None = None,
                           n_comparisons: int = 1, kind: str = "obf", effect: float | None = None,
                           futility: float = FUTILITY_CP, last_look: Any = None) -> SequentialBatch:
    """Replay a group-sequential ablation over a batch: stop each row at its first boundary crossing.

    Parameters
    ----------
    treatment, control : array_like, shape (batch, n_max) or (n_max,)
        Values in seed order (column j = the j-th seed of the seed list), NaN = failed trial.
    looks : sequence of int
        Seeds per arm at each look, increasing, the last <= n_max.
    paired : bool or sequence of bool
        Paired t-test (True) or Welch (False) at every look, or one choice per look: ``pairing=auto`` pairs
        a look only from :func:`ablate.stats.pairing.auto_pair_from` seeds per arm on, at the look's nominal
        level (:func:`look_pairing`).
    alpha, goal, margin, n_comparisons :
        As in :func:`ablate.stats.core.decide_batch`; each treatment is tested at ``alpha / n_comparisons``
        spent over the looks (Bonferroni across treatments keeps the family valid).
    kind : {"obf", "pocock"}
    effect : float, optional
        The planned effect in SDs of one seed's metric: a row that has not stopped for efficacy at a look before the
        last stops for futility when its conditional power under this effect is below ``futility``
        (:func:`ablate.stats.futility.futile`; non-binding: the boundaries ignore it). None: no futility stop.
    futility : float
        γ, the conditional-power threshold (:data:`ablate.stats.futility.FUTILITY_CP`).
    last_look : array_like of int, optional
        Per row, the index of the look where a budget ends it (:func:`ablate.stats.budget.budget_last_look`): the row
        takes its verdict there at that look's planned boundary, without spending the α left (so its rejections are a
        subset of the full design's, whatever decided the budget). None: every row may run to the last look.

    Returns
    -------
    SequentialBatch

    Raises
    ------
    StatsInputError
        When an argument breaks its rule.

    Notes
    -----
    Boundaries from :func:`boundaries` at the actual information fractions (:func:`information_fraction`);
    the final look spends what is left (fraction 1). With a margin, a row also stops at the first look
    whose TOST, at the same nominal level, shows equivalence (non-binding futility, spec B8). Welch at the
    early looks and the paired t later test the same mean difference, with the same information at ρ = 0;
    with ρ > 0 Welch's standard error is the larger, so its early looks spend less α than planned (A/A rate
    0.046-0.049 at ρ = 0.5, looks 10, 20, 30, 40; docs/verdict.md, Pairing) and the family stays valid.

    Firm-aware stopping (issue 37): a row stops for efficacy only when its better/worse verdict at the look
    is firm (:func:`stops`); an indicative crossing runs on to the next look, where it is tested again at that
    look's boundary, and the boundaries are computed for those stops (:func:`stop_factors`): the α an early look
    does not spend goes to the later ones (final nominal p 0.0498 for looks 5, 10, 15, 20, where it was 0.0411).
    """
    t = _iv.values_2d(treatment, "treatment")
    c = _iv.values_2d(control, "control")
    lk = [_iv.positive_int(x, "looks", lo=1) for x in looks]
    if not lk or lk != sorted(set(lk)) or lk[-1] > min(t.shape[1], c.shape[1]):
        raise _iv.fail("looks", f"must be increasing seed counts, the last <= {min(t.shape[1], c.shape[1])}", looks)
    m = _iv.positive_int(n_comparisons, "n_comparisons")
    a_each = _iv.alpha(alpha) / m
    per_look = [paired] * len(lk) if isinstance(paired, bool | np.bool_) else list(paired)
    if len(per_look) != len(lk) or not all(isinstance(x, bool | np.bool_) for x in per_look):
        raise _iv.fail("paired", f"must be True, False or one of them per look ({len(lk)})", paired)
    b = t.shape[0]
    ends = None if last_look is None else np.broadcast_to(np.asarray(last_look, int), (b,))
    factors = stop_factors(lk)
    verdict = np.full(b, INCONCLUSIVE)
    z_final = futility_bound(lk, a_each, kind) if effect is not None else math.inf
    futile_rows = np.zeros(b, bool)
    firm = np.zeros(b, bool)
    stopped = np.full(b, len(lk) - 1)
    active = np.ones(b, bool)
    fractions: list[np.ndarray] = []
    for k, n_k in enumerate(lk):
        tk, ck = t[:, :n_k], c[:, :n_k]
        paired = bool(per_look[k])
        okt, okc = ~np.isnan(tk), ~np.isnan(ck)
        nt = (okt & okc).sum(1) if paired else okt.sum(1)
        nc = (okt & okc).sum(1) if paired else okc.sum(1)
        fr = np.array([information_fraction(int(x), int(y), lk[-1], paired=paired)
                       for x, y in zip(nt, nc, strict=True)])
        fractions.append(fr if k < len(lk) - 1 else np.ones(b))
        hist = np.stack(fractions, axis=1)
        thr = np.empty(b)
        for row in np.unique(hist, axis=0):
            sel = (hist == row).all(axis=1)
            if row[-1] <= 0:
                thr[sel] = 1e-300
                continue
            fixed = np.maximum.accumulate(np.clip(row, 1e-6, 1))
            thr[sel] = max(boundaries(fixed, alpha=a_each, kind=kind, stop_factor=factors[:k + 1]).nominal_p[-1],
                           1e-300)
        res = decide_batch(tk, ck, paired=paired, alpha=alpha, goal=goal, margin=margin, n_comparisons=m,
                           p_threshold=thr)
        last = k == len(lk) - 1
        hit = active & stops(res.verdict, res.firm | indicative_at_every_n(res, m))
        if last:
            hit = active.copy()
        elif effect is not None:
            fut = active & ~hit & futile(res.pvalue, res.se, pooled_sd_rows(tk, ck), fr, effect=effect,
                                         z_final=z_final, threshold=futility)[0]
            futile_rows |= fut
            hit |= fut
        if last_look is not None and not last:
            hit |= active & (ends == k)  # the budget ends these rows here (after any efficacy/futility stop)
        verdict[hit] = res.verdict[hit]
        firm[hit] = res.firm[hit]
        stopped[hit] = k
        active &= ~hit
        if not active.any():
            break
    n_used = np.asarray(lk)[stopped]
    return SequentialBatch(verdict, stopped, n_used, firm, futile_rows if effect is not None else None)


def futility_bound(looks: Sequence[int], alpha: float, kind: str = "obf") -> float:
    """The last look's efficacy boundary z of the planned design (fractions ``looks[k] / looks[-1]``, the firm-aware
    stop factors), against which a futility stop's conditional power is computed (fixed by the plan)."""
    lk = [int(x) for x in looks]
    return float(boundaries([n / lk[-1] for n in lk], alpha=alpha, kind=kind, stop_factor=stop_factors(lk)).z[-1])


def _plan_futile(p: np.ndarray, se: np.ndarray, sd: np.ndarray, fractions: np.ndarray, effect: float,
                 z_final: float, gamma: float) -> np.ndarray:
    """:func:`expected_trials`' futility stops, arrays (paths, m, looks): the rule of :func:`group_sequential_batch`."""
    return futile(p, se, sd, np.broadcast_to(fractions, p.shape), effect=effect, z_final=z_final, threshold=gamma)[0]


@dataclass(frozen=True)
class SequentialPlan:
    """What a sequential design is expected to cost, from :func:`expected_trials`.

    Attributes
    ----------
    effect : float
        The true effect, in SDs of one seed's metric (Δ / σ).
    seeds_per_treatment : float
        Expected seeds a treatment runs (E[N]).
    trials : float
        Expected trials of the whole ablation: every treatment's seeds, and the control's, which runs while any
        treatment does.
    fixed_trials : int
        Trials of the fixed-N design at the last look: (m + 1) x ``looks[-1]``.
    p_stop : float
        Probability that a treatment stops with a firm better/worse (an efficacy stop, or a crossing at the last
        look).
    """

    effect: float
    seeds_per_treatment: float
    trials: float
    fixed_trials: int
    p_stop: float


#: Simulated paths per effect in :func:`expected_trials` (seeded): MC SE of E[N] below 0.05 seeds.
PLAN_PATHS = 20_000


#: Above this many simulated seeds (paths x arms x last look), :func:`_look_sums` draws each stretch between looks
#: as its sum and sum of squares instead of seed by seed (same distribution; 160 MB of float64 per array at the limit).
SEEDWISE_LIMIT = 20_000_000


def _look_sums(paths: int, m: int, looks: Sequence[int], effect: float) -> tuple[np.ndarray, np.ndarray]:
    """Running sums and sums of squares at each look of normal seeds (SD 1; the m treatments shifted by ``effect``).

    Returns
    -------
    tuple of numpy.ndarray
        Sum and sum of squares, each of shape (paths, m + 1, looks).

    Notes
    -----
    Seed by seed (``numpy.random.default_rng(0)``, the figures docs quote) while paths x (m + 1) x the last look is
    at most :data:`SEEDWISE_LIMIT`; above it (``looks=[5, 100000]`` would need 48 GB seed by seed) each stretch of k
    seeds between looks is drawn whole: its sum ~ N(k effect, k) and, independent of it, its squared deviations from
    the stretch mean ~ chi-square(k - 1) (Cochran's theorem), so the sum of squares is that plus sum^2 / k: the same
    joint distribution of the looks' sums, in memory proportional to the number of looks.
    """
    rng = np.random.default_rng(0)
    if paths * (m + 1) * looks[-1] <= SEEDWISE_LIMIT:
        x = rng.normal(size=(paths, m + 1, looks[-1]))
        x[:, 1:] += effect
        at = np.asarray(looks) - 1
        return np.cumsum(x, axis=2)[..., at], np.cumsum(x * x, axis=2)[..., at]
    k = np.diff(np.asarray([0, *looks], float))  # seeds in each stretch
    mu = np.zeros((m + 1, 1))
    mu[1:] = effect
    s = rng.normal(k * mu, np.sqrt(k), size=(paths, m + 1, len(k)))
    dev = np.where(k > 1, rng.chisquare(np.maximum(k - 1, 1), size=(paths, m + 1, len(k))), 0.0)
    return np.cumsum(s, axis=2), np.cumsum(dev + s * s / k, axis=2)


def expected_trials(looks: Sequence[int], effects: Sequence[float], *, n_treatments: int = 1, alpha: float = 0.05,
                    kind: str = "obf", paths: int = PLAN_PATHS, planned_effect: float | None = None,
                    futility: float = FUTILITY_CP) -> list[SequentialPlan]:
    """Expected trials of a ``sequential=group`` design beside fixed N, for planning (``dry_run=true``).

    Parameters
    ----------
    looks : sequence of int
        Seeds per arm at each look, increasing.
    effects : sequence of float
        True effects to plan for, in SDs of one seed's metric (0 = no effect).
    n_treatments : int
        m: every treatment has the same effect and is tested at α/m, the control shared.
    alpha : float
        Family-wise level.
    kind : {"obf", "pocock"}
    paths : int
        Simulated paths per effect. Unpaired seeds (Welch): paired seeds that share variation need fewer; this plans
        for the worst case.
    planned_effect : float, optional
        ``effect=``: a treatment also stops for futility at a look before the last when its conditional power under
        this effect is below ``futility`` (:func:`ablate.stats.futility.futile`, as :func:`group_sequential_batch`).
    futility : float
        γ of the futility stops.

    Returns
    -------
    list of SequentialPlan
        One per effect.

    Raises
    ------
    StatsInputError
        When an argument breaks its rule.

    Notes
    -----
    Simulation (seeded, ``numpy.random.default_rng(0)``): normal seeds of SD 1, the treatment's shifted by the effect;
    at each look Welch's t of each treatment against the shared control (from running sums, p from
    ``scipy.stats.t``), and a treatment stops at the first look where p x its stop factor clears the boundary
    (:func:`boundaries` with :func:`stop_factors`: below 20 seeds only a firm verdict stops), as
    :func:`group_sequential_batch` decides on the same data (tests/unit/test_sequential_firm.py proves the two
    agree). The boundaries dominate the time (Genz integration, cached per design); the simulation itself takes
    about 50 ms per effect for 5 treatments. Not an exact recursion: MC SE of E[N] below 0.05 seeds.
    """
    from scipy.stats import t as t_dist  # noqa: PLC0415  # lazy: scipy loads only where a function needs it

    lk = [_iv.positive_int(x, "looks", lo=1) for x in looks]
    if not lk or lk != sorted(set(lk)) or lk[0] < 2:
        raise _iv.fail("looks", "must be increasing seed counts from 2", looks)
    m = _iv.positive_int(n_treatments, "n_treatments")
    b = boundaries([n / lk[-1] for n in lk], alpha=_iv.alpha(alpha) / m, kind=kind, stop_factor=stop_factors(lk))
    stop_p = np.array([p / f for p, f in zip(b.nominal_p, b.stop_factor, strict=True)])
    n = np.asarray(lk, float)
    out = []
    for d in effects:
        s1, s2 = _look_sums(paths, m, lk, float(d))
        mean = s1 / n
        var = (s2 - n * mean * mean) / (n - 1)  # (paths, m + 1, looks)
        vt, vc = var[:, 1:] / n, var[:, :1] / n
        se = np.sqrt(vt + vc)
        df = (vt + vc) ** 2 / (vt ** 2 / (n - 1) + vc ** 2 / (n - 1))
        p = 2 * t_dist.sf(np.abs(mean[:, 1:] - mean[:, :1]) / se, df)
        crossed = p < stop_p
        stop_here = crossed.copy()
        if planned_effect is not None:
            stop_here[..., :-1] |= _plan_futile(p, se, np.sqrt((var[:, 1:] + var[:, :1]) / 2), n / lk[-1],
                                                planned_effect, float(b.z[-1]), futility)[..., :-1]
        stop_here[..., -1] = True
        first = stop_here.argmax(axis=2)  # (paths, m): the look each treatment stops at
        seeds_t = n[first]
        firm = np.take_along_axis(crossed, first[..., None], axis=2)[..., 0]
        trials = seeds_t.sum(axis=1) + seeds_t.max(axis=1)
        out.append(SequentialPlan(float(d), float(seeds_t.mean()), float(trials.mean()), (m + 1) * lk[-1],
                                  float(firm.mean())))
    return out
