"""All treatments against one control: apply the family's multiplicity adjustment (verdict spec B5)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ablate.stats import _iv
from ablate.stats.compare import Comparison, Flag, finish, with_ci_level
from ablate.stats.multiplicity import MULTIPLICITY_METHODS, adjust_pvalues, dunnett, stage_levels

#: Largest ratio of arm SDs for which Dunnett's pooled variance is acceptable (spec B5).
DUNNETT_SD_RATIO = 2.0


def adjust_comparisons(comparisons: Sequence[Comparison], method: str = "holm", *,
                       treatments: Sequence[Any] | None = None, control: Any = None,
                       rng: Any = None) -> list[Comparison]:
    """Adjust a family of comparisons sharing one control, and re-decide their verdicts.

    Parameters
    ----------
    comparisons : sequence of Comparison
        One per treatment, from :func:`ablate.stats.compare` with ``n_comparisons = len(comparisons)``.
    method : {"holm", "dunnett", "bh", "none"}
        Holm (default, family-wise), Dunnett (family-wise many-to-one; unpaired designs with arm SDs within
        2x and no skew guard fired, else Holm is used and flagged), Benjamini-Hochberg (false discovery rate,
        exploratory) or none.
    treatments, control : optional
        Finite values of each treatment and of the control; needed for Dunnett only.
    rng : None, int or numpy.random.Generator
        For Dunnett's quasi-Monte-Carlo integration.

    Returns
    -------
    list of Comparison
        With ``pvalue_adjusted``, ``multiplicity``, ``verdict``, ``reason``, ``flags`` and the CI updated: each
        CI is at the level its decision was taken at (Holm's step level, BH's false coverage-statement rate
        level, Dunnett's simultaneous CI), so a CI excludes 0 exactly when its verdict is better/worse.
        Comparisons without a p-value (insufficient data) are left out of the family and unchanged.

    Raises
    ------
    StatsInputError
        For an unknown method, or Dunnett without ``treatments`` and ``control``.

    Notes
    -----
    Holm (1979) via :func:`ablate.stats.multiplicity.holm`; Dunnett (1955) via ``scipy.stats.dunnett``
    and its ``confidence_interval``; CI levels from :func:`ablate.stats.multiplicity.stage_levels`
    (Benjamini & Yekutieli 2005 for BH); Benjamini & Hochberg (1995) via ``scipy.stats.false_discovery_control``.
    """
    meth = _iv.choice(method, "method", MULTIPLICITY_METHODS)
    comps = list(comparisons)
    # the skew guard's p x 10 enters the family as it is (ablate.stats.core.decide_batch)
    p = np.array([np.nan if c.pvalue is None else min(1.0, c.pvalue * c.guard_factor) for c in comps], dtype=float)
    alpha = comps[0].alpha if comps else 0.05
    note: Flag | None = None
    dunnett_ci: dict[int, tuple[float, float]] = {}
    if meth == "dunnett":
        if treatments is None or control is None or len(treatments) != len(comps):
            raise _iv.fail("treatments", "must give every treatment's values (and `control`) for Dunnett",
                           treatments)
        ok = [i for i, c in enumerate(comps) if c.pvalue is not None]
        sds = [float(np.std(np.asarray(treatments[i], float), ddof=1)) for i in ok]
        if ok:  # no comparison to adjust (none has a p-value yet): no SD to take of the control either
            sds.append(float(np.std(np.asarray(control, float), ddof=1)))
        ratio = max(sds) / min(sds) if ok and min(sds) > 0 else np.inf
        guarded = any(c.guard_factor > 1 for c in comps)
        if any(c.paired for c in comps) or ratio > DUNNETT_SD_RATIO or guarded:
            why = ("paired comparisons" if any(c.paired for c in comps) else
                   f"arm SDs differ {ratio:.1f}-fold (> 2)" if ratio > DUNNETT_SD_RATIO else
                   "the skew guard fired: the values are skewed")
            note = Flag("multiplicity", f"Dunnett needs unpaired, normal-like arms with similar SDs ({why}): Holm "
                                        "used instead")
            meth = "holm"
        else:
            adj = np.full(p.shape, np.nan)
            if ok:
                pd, lo, hi = dunnett([treatments[i] for i in ok], control, alpha=alpha, rng=rng)
                adj[ok] = pd
                for j, i in enumerate(ok):
                    sign = 1.0 if comps[i].goal == "maximize" else -1.0
                    a_, b_ = sign * lo[j], sign * hi[j]
                    dunnett_ci[i] = (min(a_, b_), max(a_, b_))
    if meth != "dunnett":
        adj = adjust_pvalues(p, meth)
    levels = stage_levels(p, meth if len(comps) > 1 else "none", alpha) if meth != "dunnett" else None
    out = []
    for i, (c, pa) in enumerate(zip(comps, adj, strict=True)):
        if c.pvalue is None:
            out.append(c)
            continue
        extra = (note,) if note else ()
        c2 = dataclasses.replace(c, pvalue_adjusted=float(pa), multiplicity=meth if len(comps) > 1 else "none",
                                 decision_label="α", decision_level=c.alpha, data_flags=c.data_flags + extra)
        if levels is not None:
            c2 = with_ci_level(c2, float(levels[i]))
        elif i in dunnett_ci:
            c2 = dataclasses.replace(c2, ci=dunnett_ci[i], ci_level=1 - alpha)
        out.append(finish(c2))
    return out
