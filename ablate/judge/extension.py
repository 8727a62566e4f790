"""The verdict of an extended ablation (``ablate extend DIR seeds=K``): a two-stage adaptive design.

Stage 1 is the seeds the ablation had when the extension was decided (its look, recorded in ``ablation.yaml``
under ``extension``), stage 2 the seeds the extension ran. Each treatment's stages are tested apart and
combined by the inverse-normal method (:func:`ablate.stats.adaptive.two_stage_batch`); the family's
correction (Holm, BH or none; Dunnett's needs one pooled sample, so Holm stands in) then applies to the
combined p-values as it does to fixed-N ones. The naive pooled p (all K seeds as one sample, which a look
invalidates) is kept beside it, labelled.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ablate.stats import Comparison, Pairing

#: The plan's key for the extension record (``ablation.yaml``, written by :mod:`ablate.orchestrate.extend`), and
#: verdict.json's (top level, and ``comparisons[].extension``).
EXTENSION_KEY = "extension"


def extension_of(plan: Mapping[str, Any]) -> dict[str, Any] | None:
    """The plan's extension record (``ablation.yaml``'s ``extension``), or None for a fixed-N ablation."""
    ext = plan.get(EXTENSION_KEY)
    return dict(ext) if isinstance(ext, Mapping) else None


def _values(d: Mapping[int, float], seeds: Sequence[int]) -> list[float]:
    return [d.get(int(s), math.nan) for s in seeds]


def combine_stages(plan: Mapping[str, Any], values: Mapping[str, Mapping[int, float]], treatments: Sequence[str],
                   control: str, comps: list[Comparison], pairings: Sequence[Pairing],
                   families: Sequence[Sequence[str]], multiplicity: str
                   ) -> tuple[list[Comparison], dict[str, dict[str, Any]]]:
    """Re-decide each treatment of an extended ablation by the two-stage combination test.

    Parameters
    ----------
    plan : mapping
        The plan record, with its ``extension`` (stage-1 and stage-2 seeds, the look).
    values : mapping
        Arm -> seed -> value (NaN for a failed trial), every finished trial.
    treatments, control : sequence of str, str
        The arms' names.
    comps : list of Comparison
        The fixed-N comparisons of all seeds pooled (their p is the naive pooled p); replaced in the result.
    pairings : sequence of Pairing
        Each treatment's pairing by design (the stages use the same choice).
    families : sequence of sequence of str
        The multiplicity families (one, or one per variable of a suite).
    multiplicity : str
        The family's correction; ``dunnett`` is replaced by Holm (Dunnett's test needs one pooled sample).

    Returns
    -------
    (list of Comparison, dict)
        The comparisons decided on the combined p (labelled ``two-stage inverse normal``), and per treatment the
        record for verdict.json's ``comparisons[].extension``: each stage's seeds, one-sided p and whether it
        was tested, the weights, z, the combined p and the naive pooled p.
    """
    import numpy as np  # noqa: PLC0415  # lazy: numpy off this module's import

    from ablate.stats import adjust_comparisons  # noqa: PLC0415  # lazy: numpy off this module's import
    from ablate.stats.adaptive import METHOD, two_stage_batch  # noqa: PLC0415  # lazy: numpy off this module's import

    ext = extension_of(plan) or {}
    s1 = [int(s) for s in ext.get("stage1_seeds") or []]
    s2 = [int(s) for s in ext.get("stage2_seeds") or []]
    look = ext.get("look") or {}
    out = list(comps)
    records: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(treatments):
        pr, naive = pairings[i], comps[i]
        res = two_stage_batch(_values(values[name], s1), _values(values[control], s1), _values(values[name], s2),
                              _values(values[control], s2), n1=len(s1), paired=bool(pr.paired),
                              goal=plan.get("goal", "maximize"))
        per_stage = "paired t" if pr.paired else "Welch t"
        records[name] = {
            "method": METHOD, "weights": list(res.weights), "z": float(res.z[0]), "pvalue": float(res.pvalue[0]),
            "stage1": {"seeds": s1, "p_one_sided": float(res.p1[0]), "tested": bool(res.tested1[0])},
            "stage2": {"seeds": s2, "p_one_sided": float(res.p2[0]), "tested": bool(res.tested2[0])},
            "per_stage_test": per_stage, "naive_pooled_p": naive.pvalue, "naive_pooled_test": naive.test,
            "look": look.get(name)}
        if naive.pvalue is not None:  # insufficient data stays as it is: no test to combine
            out[i] = dataclasses.replace(naive, pvalue=float(res.pvalue[0]),
                                         test=f"two-stage inverse normal ({per_stage} per stage)")
    method = "holm" if multiplicity == "dunnett" else multiplicity
    for fam in families:
        idx = [treatments.index(n) for n in fam if n in treatments]
        adjusted = adjust_comparisons([out[j] for j in idx], method if len(idx) > 1 else "none",
                                      rng=np.random.default_rng(0))
        for j, c in zip(idx, adjusted, strict=True):
            out[j] = c
    return out, records


def summary_line(ext: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]],
                 labels: Mapping[str, str]) -> str:
    """verdict.md's one line on an extended ablation: the design, and the naive pooled p beside it, labelled.

    Parameters
    ----------
    ext : mapping
        The plan's extension record.
    records : mapping
        Per treatment, :func:`combine_stages`' record.
    labels : mapping
        Arm name -> label.

    Returns
    -------
    str
        ``Extended after a look at 3 seeds per arm (2026-12-02T10:55:00+0000) to 10: a two-stage combination test
        (inverse normal, weights 0.39/0.92 fixed from N = 3; Lehmacher & Wassmer 1999) keeps α; ...``.
    """
    from ablate.stats.compare import p_is  # noqa: PLC0415  # lazy: numpy off this module's import

    n1, k = len(ext.get("stage1_seeds") or []), len(ext.get("stage1_seeds") or []) + len(ext.get("stage2_seeds")
                                                                                         or [])
    w = next(iter(records.values()))["weights"] if records else [math.nan, math.nan]
    naive = "; ".join(f"{labels.get(a, a)}: p {p_is(r['naive_pooled_p'])}" for a, r in records.items())
    return (f"Extended after a look at {n1} seeds per arm ({ext.get('decided_at', 'time not recorded')}) to {k}: a "
            f"two-stage combination test (inverse normal, weights {w[0]:.2f}/{w[1]:.2f} fixed from N = {n1} before "
            "any data; Lehmacher & Wassmer 1999) keeps α, and the verdicts use it. Naive pooled p (all seeds as one "
            f"sample; not valid after a look): {naive or '–'}.")
