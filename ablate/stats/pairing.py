"""Pairing by design: match a treatment's trials to the control's by seed id (verdict spec B6).

``pairing=auto`` pairs by seed when the design shares randomness across arms: the same seed gives both arms the
same initialisation and data order (in ``ablate``, a ``fn`` task under ``determinism=seeded`` or ``strict``,
where ablate seeds python, numpy and torch from the trial seed before the task runs). Equal seed lists alone
do not pair: seeds that share nothing across arms (ρ = 0) only cost the paired t its degrees of freedom
(N - 1 against Welch's about 2N - 2; :func:`power_loss`). ``pairing=paired`` declares the design paired
(a script that seeds everything from the seed it is given), ``pairing=unpaired`` never pairs. A rule that
chose on the observed correlation ρ̂ was measured and rejected: it raised the A/A false-positive rate to
0.060-0.066 (docs/verdict.md, Pairing). :func:`auto_pair_from` (the N from which pairing at ρ = 0 costs at
most 2.5 points of power) is kept as a planning figure.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ablate.stats import _iv

PAIRING = ("auto", "paired", "unpaired")
#: The most power (absolute, at any effect size) ``pairing=auto`` may give up by pairing seeds that share
#: nothing across arms (ρ = 0).
MAX_POWER_LOSS = 0.025
#: Noncentralities over which the power loss is maximised (it peaks near the critical value, 2-4).
_NCP = np.linspace(0.0, 6.0, 121)


def _t_power(df: float, level: float) -> np.ndarray:
    """Two-sided t-test power at noncentralities :data:`_NCP` (scipy's noncentral t; the lower tail, below
    1e-15 where scipy returns NaN at large noncentrality, is taken as 0)."""
    from scipy import special  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    c = special.stdtrit(df, 1 - level / 2)
    return np.nan_to_num(special.nctdtr(df, _NCP, -c), nan=0.0) + 1 - special.nctdtr(df, _NCP, c)


def power_loss(n: int, level: float = 0.05) -> float:
    """Largest power the paired t gives up against Welch's when the arms are uncorrelated (ρ = 0).

    Parameters
    ----------
    n : int
        Seeds per arm (pairs), >= 3.
    level : float
        Two-sided level of the comparison (α/m).

    Returns
    -------
    float
        max over the effect size of power(Welch, df 2n - 2) - power(paired t, df n - 1), both at the
        noncentrality δ √(n/2) (Var(Δ̂) = 2σ²/n for both at ρ = 0): 0.129 at n = 5, 0.052 at 10, 0.0232 at 20
        (α = 0.05).

    Raises
    ------
    StatsInputError
        When ``n`` < 3 or ``level`` is not in (0, 0.5].

    Notes
    -----
    Noncentral t power (``scipy.special.nctdtr``), equal variances and equal n: the only difference between
    the two tests at ρ = 0 is the degrees of freedom (verdict spec A7).
    """
    n = _iv.positive_int(n, "n", lo=3)
    a = _iv.alpha(level, "level")
    return float(np.max(_t_power(2 * n - 2, a) - _t_power(n - 1, a)))


@functools.lru_cache(maxsize=64)
def _pair_from(level: float) -> int:
    lo, hi = 3, 64
    while float(np.max(_t_power(2 * hi - 2, level) - _t_power(hi - 1, level))) > MAX_POWER_LOSS and hi < 2**20:
        lo, hi = hi + 1, 4 * hi
    while lo < hi:  # the loss falls as n grows: bisection
        mid = (lo + hi) // 2
        if float(np.max(_t_power(2 * mid - 2, level) - _t_power(mid - 1, level))) <= MAX_POWER_LOSS:
            hi = mid
        else:
            lo = mid + 1
    return lo


def auto_pair_from(level: float = 0.05) -> int:
    """N0: the fewest seeds per arm from which ``pairing=auto`` pairs a comparison at two-sided ``level``.

    Parameters
    ----------
    level : float
        The comparison's level: α/m, Bonferroni over the m treatments of its family (the strictest level
        Holm may use; fixed before any outcome).

    Returns
    -------
    int
        The smallest N with :func:`power_loss` (N, level) <= :data:`MAX_POWER_LOSS`: 19 at 0.05, 27 at 0.025,
        32 at 0.05/3, 39 at 0.01.

    Raises
    ------
    StatsInputError
        When ``level`` is not in (0, 0.5].
    """
    return _pair_from(_iv.alpha(level, "level"))


@dataclass(frozen=True)
class Pairing:
    """The arrays to compare and how they were matched.

    Attributes
    ----------
    paired : bool
        Whether the comparison is paired (a design decision: never chosen by which p is smaller, nor by the
        observed correlation).
    treatment, control : numpy.ndarray
        Values (NaN = failed trial). Paired: aligned by ``seeds`` (same length). Unpaired: every
        finished trial of each arm.
    seeds : tuple of int
        The shared seed ids (paired), or () when unpaired.
    unmatched : int
        Finished trials left out of the paired analysis because the other arm has no trial at that seed.
    reason : str
        Which analysis and why, in plain words, for the report.
    mode : str
        The ``pairing`` setting: ``auto``, ``paired`` or ``unpaired``.
    n_design : int
        The seeds per arm the rule decided on (the planned N).
    rho : float or None
        The correlation ρ̂ of the arms across the seeds they share (complete pairs, at least 3), reported as
        information whether or not the analysis pairs; None when it cannot be computed.
    pair_from : int or None
        Kept for older records; always None now (``pairing=auto`` no longer switches at an N).
    """

    paired: bool
    treatment: np.ndarray
    control: np.ndarray
    seeds: tuple[int, ...]
    unmatched: int
    reason: str
    mode: str = "auto"
    n_design: int = 0
    rho: float | None = None
    pair_from: int | None = None


def auto_pairs(n: int, *, level: float = 0.05, shared: bool = True) -> bool:
    """Whether ``pairing=auto`` pairs a design of ``n`` planned seeds per arm.

    Parameters
    ----------
    n : int
        Seeds per arm the design planned (the seed list's length; the look's N in sequential mode).
    level : float
        The comparison's two-sided level α/m.
    shared : bool
        Whether the arms ran the same seed list (at least 3 seed ids in common).

    Returns
    -------
    bool
        ``shared and n >= auto_pair_from(level)``: at α = 0.05, False at 18 and True at 19.
    """
    return bool(shared) and int(n) >= auto_pair_from(level)


def _pair_iv(treatment: Any, control: Any, pairing: Any, n_design: Any, level: Any
             ) -> tuple[dict[int, float], dict[int, float], str, int | None, float]:
    mode = _iv.choice(pairing, "pairing", PAIRING)
    lv = _iv.alpha(level, "level")
    out = []
    for name, arm in (("treatment", treatment), ("control", control)):
        if not isinstance(arm, Mapping):
            raise _iv.fail(name, "must map seed id -> value (NaN for a failed trial)", arm)
        d: dict[int, float] = {}
        for k, v in arm.items():
            if isinstance(k, bool) or not isinstance(k, int | np.integer):
                raise _iv.fail(name, "must have integer seed ids as keys", k)
            fv = float(v) if v is not None else math.nan
            if math.isinf(fv):
                raise _iv.fail(name, "must not contain inf (a diverged trial is NaN)", v)
            d[int(k)] = fv
        out.append(d)
    n = None if n_design is None else _iv.positive_int(n_design, "n_design")
    return out[0], out[1], mode, n, lv


def _rho(t: dict[int, float], c: dict[int, float], common: list[int]) -> float | None:
    """ρ̂ of the arms over the complete seed pairs (None below 3 pairs or with a constant arm)."""
    pairs = [(t[s], c[s]) for s in common if not (math.isnan(t[s]) or math.isnan(c[s]))]
    if len(pairs) < 3:
        return None
    x, y = np.asarray(pairs, float).T
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def pair_by_seed(treatment: Mapping[int, float], control: Mapping[int, float], *,
                 pairing: str = "auto", n_design: int | None = None, level: float = 0.05,
                 shared_randomness: bool = False, design: str | None = None) -> Pairing:
    """Decide paired vs unpaired from the design, and align the arms by seed id.

    Parameters
    ----------
    treatment, control : mapping of int -> float
        Seed id -> metric value of every finished trial (NaN or None for a failed one). Pending trials
        are simply absent.
    pairing : {"auto", "paired", "unpaired"}
        ``auto`` pairs by seed when the design shares randomness across arms (``shared_randomness``: the same
        seed gives both arms the same initialisation and data order) and the arms share at least 3 seed ids;
        equal seed lists alone do not pair (seeds that share nothing across arms only cost the paired t degrees
        of freedom). ``paired`` declares the design paired (whatever seeds the arms share; seeds without a
        partner are dropped and counted). Both fall back to unpaired below 3 shared seeds. ``unpaired`` never
        pairs.
    n_design : int, optional
        The seeds per arm the design planned, reported. Default: the number of seed ids the arms share.
    level : float
        The two-sided level the test runs at (validated; kept for older calls).
    shared_randomness : bool
        Whether the design shares randomness across arms at the same seed: a design fact known before any
        outcome (in ``ablate``, a ``fn`` task under ``determinism=seeded|strict``, where ablate itself seeds
        python, numpy and torch from the trial seed).
    design : str, optional
        The words for why the design does (or does not) share randomness, for the reason.

    Returns
    -------
    Pairing

    Raises
    ------
    StatsInputError
        When an arm is not a seed -> value mapping, ``pairing`` is unknown, ``n_design`` < 1 or ``level`` is not
        in (0, 0.5].

    Notes
    -----
    Common random numbers (verdict spec A7, B6): Var(Δ̂) = 2σ²(1-ρ)/N paired vs 2σ²/N unpaired. Pairing is
    valid when it is fixed by the design before any result; it is chosen here from how the trials were seeded,
    never from the outcomes or their correlation. Pairs with a failed member are dropped inside
    :func:`ablate.stats.compare` (and counted there); fewer than 3 complete pairs fall back to the unpaired
    analysis of all runs.
    """
    t, c, mode, n, _ = _pair_iv(treatment, control, pairing, n_design, level)
    if not isinstance(shared_randomness, bool | np.bool_):
        raise _iv.fail("shared_randomness", "must be True or False", shared_randomness)
    common = [s for s in t if s in c]
    n = len(common) if n is None else n
    rho = _rho(t, c, common)
    unmatched = len(t) + len(c) - 2 * len(common)
    all_t, all_c = np.array(list(t.values()), float), np.array(list(c.values()), float)

    def unpaired(why: str) -> Pairing:
        return Pairing(False, all_t, all_c, (), 0, "unpaired (Welch): " + why, mode, n, rho, None)

    if mode == "unpaired":
        return unpaired("declared (pairing=unpaired)")
    if len(common) < 3:
        return unpaired(f"the arms share {len(common)} seed id{'' if len(common) == 1 else 's'} (< 3): "
                        "every run of each arm is compared")
    if mode == "auto" and not shared_randomness:
        return unpaired("pairing=auto pairs by seed only when the design shares randomness across arms"
                        + (f" ({design})" if design else "")
                        + "; declare pairing=paired if the arms' seeds share initialisation and data order")
    why = ("declared (pairing=paired)" if mode == "paired" else
           "pairing=auto: the design shares randomness across arms" + (f" ({design})" if design else ""))
    if unmatched:
        why += f"; {unmatched} trial(s) without a partner seed left out"
    return Pairing(True, np.array([t[s] for s in common], float), np.array([c[s] for s in common], float),
                   tuple(common), unmatched, "paired by seed: " + why, mode, n, rho, None)


def _at(level: float) -> str:
    """`` at this test's level 0.025`` (α/m, or a sequential look's nominal level; nothing at the default 0.05)."""
    return "" if level == 0.05 else f" at this test's level {level:.3g}"
