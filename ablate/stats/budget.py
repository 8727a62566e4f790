"""Reallocating a sequential suite's freed seeds to the arms still running, within a seed budget (issue 39 item 2).

In a ``sequential=group`` suite with futility stops, an arm that stops early leaves seeds it did not use. With a
budget B (trials over every arm, the control included, B >= the planned last look x the arms), the rule fixed before
any trial is **equal shares by appended looks**: the looks go on past the planned last one at the same spacing, and
after each look from the planned last one on, every arm still running (and the control) takes the next look only if
the trials used so far plus that look's trials for all of them fit in B; else every running arm stops there for
budget. So the freed seeds are shared equally among the arms still running, and none of them is favoured by its own
data.

Why α holds: every arm's boundaries are those of the whole extended design (:func:`budget_looks`, information
fractions n / its last look), fixed by the plan; a budget stop takes the verdict at that look's planned boundary
without spending the α left (:func:`ablate.stats.sequential.group_sequential_batch` with ``last_look``). An arm's
rejections are then a subset of the extended design's, whatever the budget (and the other arms' data) decided, so
each arm keeps α/m and the family α (Bonferroni). This needs every crossing at a budget's stop to be one the
extended design stops on too: from :data:`ablate.stats.core.FIRM_FROM` seeds per arm (below, only a firm crossing
stops an arm, and the α such a look does not spend is carried on), so the planned last look must be at least that
(:func:`budget_looks` refuses less; a crossing that only evident skew keeps indicative stops from there as well,
:func:`ablate.stats.sequential.indicative_at_every_n`). The price: the planned looks sit at fractions below 1, so an arm
that receives no seeds is tested more strictly at the planned last look than without a budget.

Measured and not wired into the plan (docs/verdict.md, "Reallocating freed seeds within a budget";
benchmarks/sequential_budget.py): α holds (FWER 0.001-0.003), but the 0.5 SD treatment of the issue-39 suite keeps
0.30-0.40x of fixed N's power at the fixed design's budget: futility judged at the extended last look frees no seeds,
and the planned last look's boundary is the extended design's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ablate.stats import _iv
from ablate.stats.core import FIRM_FROM


def budget_looks(looks: Sequence[int], seeds_budget: int, n_arms: int) -> list[int]:
    """The planned looks and those appended at the last spacing up to the most one treatment can reach.

    Parameters
    ----------
    looks : sequence of int
        The planned looks (seeds per arm), increasing, at least two, the last >= FIRM_FROM (20).
    seeds_budget : int
        B, trials over every arm (the control included), >= ``looks[-1] * n_arms``.
    n_arms : int
        The arms, the control included (>= 2).

    Returns
    -------
    list of int
        ``looks`` then ``looks[-1] + j s`` (s = ``looks[-1] - looks[-2]``) while ``(n_arms - 2) looks[0] + 2 n <= B``
        (one treatment and the control reaching n while every other treatment stopped at the first look) and
        n <= 2 ``looks[-1]``: the planned looks keep at least half the information, so an arm that receives no seeds
        loses little power to the extension, and the boundaries' integration stays cheap (8 looks: 28 s, 12: 125 s
        on the shared build machine).
    """
    lk = [_iv.positive_int(x, "looks", lo=1) for x in looks]
    if len(lk) < 2 or lk != sorted(set(lk)):
        raise _iv.fail("looks", "must be at least two increasing seed counts", looks)
    if lk[-1] < FIRM_FROM[False]:
        raise _iv.fail("looks", f"must end at >= {FIRM_FROM[False]} seeds per arm with a budget (from there every "
                       "crossing stops, so a budget's stop rejects only where the extended design would)", looks)
    arms = _iv.positive_int(n_arms, "n_arms", lo=2)
    b = _iv.positive_int(seeds_budget, "seeds_budget", lo=lk[-1] * arms)
    step = lk[-1] - lk[-2]
    out = list(lk)
    while out[-1] + step <= 2 * lk[-1] and (arms - 2) * lk[0] + 2 * (out[-1] + step) <= b:
        out.append(out[-1] + step)
    return out


def budget_last_look(stopped_at: Any, looks: Sequence[int], planned: int, seeds_budget: int) -> np.ndarray:
    """Per row, the look index where the budget ends the suite (equal shares by appended looks).

    Parameters
    ----------
    stopped_at : array_like of int, shape (rows, treatments)
        Each treatment's stop look in the extended design without a budget (efficacy, futility, or the last look).
    looks : sequence of int
        The extended looks (:func:`budget_looks`).
    planned : int
        How many of them were planned (the budget is checked from the planned last look on).
    seeds_budget : int
        B, trials over every arm, the control included.

    Returns
    -------
    numpy.ndarray of int, shape (rows,)
        The first look k >= ``planned - 1`` after which the next look's trials, for the treatments still running and
        the control, no longer fit in B; the last index where they always fit (or nothing runs on).
    """
    st = np.atleast_2d(np.asarray(stopped_at, int))
    n = np.asarray([int(x) for x in looks])
    end = np.full(st.shape[0], len(n) - 1)
    open_ = np.ones(st.shape[0], bool)
    for k in range(int(planned) - 1, len(n) - 1):
        running = st > k
        used = n[np.minimum(st, k)].sum(1) + n[k]  # the treatments to their stop, the control to look k
        cost = (n[k + 1] - n[k]) * (running.sum(1) + 1)
        over = open_ & running.any(1) & (used + cost > int(seeds_budget))
        end[over] = k
        open_ &= ~over
    return end


def trials_used(n_used: Any) -> np.ndarray:
    """Trials of each row: the treatments' seeds plus the control's, which runs to the last treatment's stop.

    Parameters
    ----------
    n_used : array_like of int, shape (rows, treatments)
        Seeds per arm where each treatment stopped.
    """
    u = np.atleast_2d(np.asarray(n_used, int))
    return u.sum(1) + u.max(1)
