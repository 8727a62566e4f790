"""Statistics for the verdict: pure functions over arrays, no I/O (verdict spec, ``shared/stats-spec.md`` B).

Entry point: :func:`compare` (one treatment vs the control) and :func:`adjust_comparisons` (the family of
treatments sharing a control). Beside them: :func:`summarize` (per-arm statistics), :func:`pair_by_seed`
(pairing by design: ``pairing=auto`` pairs when the design shares randomness across arms; :func:`auto_pair_from`
is a planning figure),
:func:`recommend_seeds` / :func:`mde_d` / :func:`seeds_needed` (power and seed advice), :func:`failure_finding`
(differential failure rate), :func:`boundaries` and :func:`group_sequential_batch` (group-sequential looks),
the vectorised core :func:`decide_batch`, and curve verdicts (:mod:`ablate.stats.curves`: :func:`align_curves`,
:func:`curve_band` with its simultaneous band, :func:`curve_regions`, :func:`curve_summaries`).

Every function validates its input first and raises :class:`StatsInputError` (a ``ValueError``) naming
the parameter; scipy and statsmodels are imported only when a function needs them.
"""

from __future__ import annotations

from ablate.stats._iv import StatsInputError
from ablate.stats.compare import Comparison, Flag, compare, fmt_p
from ablate.stats.core import INSUFFICIENT_REASONS, VERDICTS, BatchResult, decide_batch, decision_rule
from ablate.stats.curves import (
    AlignedCurves,
    CurveBand,
    Region,
    SummaryTest,
    align_curves,
    curve_band,
    curve_regions,
    curve_summaries,
    seeds_for_width,
)
from ablate.stats.effect import (
    ProbImprovement,
    RobustTest,
    hedges_g,
    hedges_j,
    paired_effect,
    pooled_sd,
    prob_improvement,
    robust_test,
)
from ablate.stats.failures import FailureFinding, failure_finding
from ablate.stats.family import adjust_comparisons
from ablate.stats.multiplicity import adjust_pvalues, dunnett_pvalues
from ablate.stats.pairing import Pairing, auto_pair_from, auto_pairs, pair_by_seed, power_loss
from ablate.stats.power import SeedAdvice, mde_d, recommend_seeds, sd_upper_limit, seeds_needed
from ablate.stats.sequential import (
    Boundaries,
    SequentialBatch,
    boundaries,
    group_sequential_batch,
    information_fraction,
    look_pairing,
    spending,
)
from ablate.stats.summary import ArmSummary, summarize
from ablate.stats.tuning import Choice, ExpectedMax, choose, expected_max

__all__ = [
    "INSUFFICIENT_REASONS",
    "VERDICTS",
    "AlignedCurves",
    "ArmSummary",
    "BatchResult",
    "Boundaries",
    "Choice",
    "Comparison",
    "CurveBand",
    "ExpectedMax",
    "FailureFinding",
    "Flag",
    "Pairing",
    "ProbImprovement",
    "Region",
    "RobustTest",
    "SeedAdvice",
    "SequentialBatch",
    "StatsInputError",
    "SummaryTest",
    "adjust_comparisons",
    "adjust_pvalues",
    "align_curves",
    "auto_pair_from",
    "auto_pairs",
    "boundaries",
    "choose",
    "compare",
    "curve_band",
    "curve_regions",
    "curve_summaries",
    "decide_batch",
    "decision_rule",
    "dunnett_pvalues",
    "expected_max",
    "failure_finding",
    "fmt_p",
    "group_sequential_batch",
    "hedges_g",
    "hedges_j",
    "information_fraction",
    "look_pairing",
    "mde_d",
    "pair_by_seed",
    "paired_effect",
    "pooled_sd",
    "power_loss",
    "prob_improvement",
    "recommend_seeds",
    "robust_test",
    "sd_upper_limit",
    "seeds_for_width",
    "seeds_needed",
    "spending",
    "summarize",
]
