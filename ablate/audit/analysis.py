"""The audit: runs -> arms -> differences -> post-hoc statistics -> the minimal ablation; audit.json content.

The statistics are the verdict's own (:func:`ablate.judge.verdict.analyse`, on a plan of the two arms built
from the runs), so a post-hoc comparison gets exactly the numbers an ablation launched by ablate would get on
the same values: the test, the interval, the effect size and the seed advice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ablate.audit.arms import Arm, classify, group
from ablate.audit.runs import Run
from ablate.errors import ConfigError
from ablate.stats.core import FIRM_FROM

#: Logged series that are counters, not metrics (never proposed as the metric).
COUNTERS = ("epoch", "step", "global_step", "trainer/global_step", "iteration")
#: Metric names that are minimized when no --goal is given.
_MINIMIZED = re.compile(r"loss|err|perplexity|ppl|mse|mae|rmse|wer|cer|nll|regret", re.IGNORECASE)
#: Replicates per arm the post-hoc test needs (as a launched ablation: :data:`ablate.plan.arms.MIN_SEEDS`).
MIN_REPLICATES = 3
#: Seeds per arm advised when the runs give no spread to plan with (ablate's default ``seeds``).
DEFAULT_SEEDS = 5


def choose_metric(runs: Sequence[Run], metric: str | None) -> str:
    """``metric``, checked to be logged by every run; or the one metric every run logged."""
    common = set.intersection(*(set(r.metrics) for r in runs)) if runs else set()
    if metric is not None:
        lacking = [r.id for r in runs if metric not in r.metrics]
        if lacking:
            have = ", ".join(sorted(common)) or "none"
            raise ConfigError(f"{len(lacking)} of {len(runs)} runs did not log {metric!r} (e.g. {lacking[0]}); "
                              f"metrics every run logged: {have}", where="--metric",
                              fix="choose a metric every run logged, or leave out the runs that lack it")
        return metric
    candidates = sorted(m for m in common if m not in COUNTERS)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        seen = sorted(set().union(*(r.metrics for r in runs)))
        raise ConfigError("the runs have no metric in common" + (f" (logged: {', '.join(seen[:12])})" if seen
                                                                 else " (none logged any metric)"),
                          where="ablate audit", fix="audit runs that logged the same metric, and name it with "
                          "--metric NAME")
    raise ConfigError(f"the runs share several metrics: {', '.join(candidates)}", where="--metric",
                      fix=f"name the one to compare, e.g. --metric {candidates[0]}")


def choose_goal(runs: Sequence[Run], metric: str, goal: str | None) -> tuple[str, str]:
    """The metric's direction and where it came from (given, an ablate sweep dir, or the metric's name).

    Raises
    ------
    ConfigError
        When sources disagree on the direction (a mixed comparison cannot be judged).
    """
    recorded = {r.context.get("goal") for r in runs if r.context.get("goal")}
    if len(recorded) > 1 or (goal and recorded and goal not in recorded):
        dirs = " and ".join(sorted(recorded | ({goal} if goal else set())))
        raise ConfigError(f"the metric {metric!r} is judged in mixed directions: {dirs}", where="--goal",
                          fix="audit sources that agree on the direction, or give the one that applies with "
                          "--goal maximize|minimize")
    if goal:
        return goal, "given"
    if recorded:
        return recorded.pop(), "recorded by ablate"
    return ("minimize" if _MINIMIZED.search(metric) else "maximize"), "guessed from the metric's name"


def _reduce(run: Run, metric: str, rule: str) -> float:
    from ablate.metrics import reduce_series

    return float(reduce_series(run.metrics[metric], rule)[0])


def _seeds(arm: Arm, seed_key: str) -> list[int]:
    """Each run's seed from its config, or its position when a seed is missing or repeated."""
    got = [arm_run.config.get(seed_key) for arm_run in arm.runs]
    ints = [g if isinstance(g, int) and not isinstance(g, bool) else None for g in got]
    if None in ints or len(set(ints)) != len(ints):
        return list(range(len(arm.runs)))
    return [int(s) for s in ints]  # type: ignore[arg-type]


def indicative(stats: dict[str, Any]) -> bool:
    """Whether the post-hoc verdict is an indicative better/worse (verdict.json's ``firm`` False)."""
    v = stats.get("verdict")
    return v is not None and v["comparisons"][0].get("firm") is False


def statistics(a: Arm, b: Arm, metric: str, goal: str, rule: str, seed_key: str, variable: str | None
               ) -> dict[str, Any]:
    """The verdict's statistics on the two arms' values (B against A as control), via
    :func:`ablate.judge.verdict.analyse`: ``{"values", "verdict"}``; ``verdict`` is None with fewer than
    :data:`MIN_REPLICATES` runs in an arm (then ``sample_size`` says what is needed)."""
    from ablate.judge.options import resolve_options
    from ablate.judge.verdict import analyse

    values = {arm.name: dict(zip(_seeds(arm, seed_key), (_reduce(r, metric, rule) for r in arm.runs), strict=True))
              for arm in (a, b)}
    label = {a.name: "control", b.name: "treatment"}
    out: dict[str, Any] = {"values": {label[k]: {str(s): v for s, v in d.items()} for k, d in values.items()}}
    n = min(len(a.runs), len(b.runs))
    if n < MIN_REPLICATES:
        out["verdict"] = None
        out["sample_size"] = _sample_size(values[a.name], values[b.name], n, goal)
        return out
    plan = {"metric": metric, "goal": goal, "variable": {"key": variable or "?"},
            "seeds": sorted(set(values[a.name]) | set(values[b.name])), "options": {},
            "arms": [{"name": "control", "label": "A", "value": None},
                     {"name": "treatment", "label": "B", "value": None}]}
    rows = [{"arm": label[k], "seed": s, "status": "ok", metric: v} for k, d in values.items() for s, v in d.items()]
    out["verdict"] = analyse(plan, rows, resolve_options(plan))
    return out


def _sample_size(va: dict[int, float], vb: dict[int, float], n: int, goal: str) -> dict[str, Any]:
    """What fewer than 3 replicates allow: no spread, no test; the seeds per arm to run."""
    from ablate.stats.power import recommend_seeds

    needed = DEFAULT_SEEDS
    how = f"ablate's default ({DEFAULT_SEEDS}): with one run per arm there is no spread to plan with"
    xa, xb = list(va.values()), list(vb.values())
    diff = (sum(xb) / len(xb)) - (sum(xa) / len(xa))
    if n >= 2:
        ma, mb = sum(xa) / len(xa), sum(xb) / len(xb)
        ss = sum((x - ma) ** 2 for x in xa) + sum((x - mb) ** 2 for x in xb)
        df = len(xa) + len(xb) - 2
        sd = math.sqrt(ss / df) if df > 0 else 0.0
        adv = recommend_seeds(n, sd, df, target=abs(diff) or None, target_kind="observed") if sd > 0 else None
        if adv is not None and adv.n_needed is not None:
            needed, how = max(MIN_REPLICATES, adv.n_needed), adv.message()
    one = "one seed is a sample size of one" if n == 1 else f"{n} seeds per arm give no test (a verdict needs 3)"
    return {"n": n, "diff": diff, "seeds_needed": needed, "how": how,
            "message": f"{one}: the difference ({diff:+.4g}) cannot be told from seed noise; run {needed} seeds per "
                       f"arm ({how})"}


def advised_seeds(stats: dict[str, Any]) -> int:
    """Seeds per arm for the minimal ablation: the seed advice (on the SD's upper limit), else the default; for an
    indicative better/worse at least the seeds from which ablate calls it firm (``firm_from``, 20), as the verdict's
    bottom line says: fewer would give an indicative verdict again, which settles nothing."""
    if stats.get("verdict") is None:
        return int(stats["sample_size"]["seeds_needed"])
    c = stats["verdict"]["comparisons"][0]
    n = (c.get("seed_advice") or {}).get("n_needed")
    seeds = max(MIN_REPLICATES, int(n)) if n else DEFAULT_SEEDS
    return max(seeds, int(c.get("firm_from") or FIRM_FROM[bool(c.get("paired"))])) if c.get("firm") is False else seeds


def audit(runs: Sequence[Run], *, variable: str | None = None, metric: str | None = None, goal: str | None = None,
          reduce: str = "last", seed_key: str = "seed", repo: str | None = None) -> dict[str, Any]:
    """The audit of ``runs`` (the content of audit.json, without the minimal ablation's files).

    Raises
    ------
    ConfigError
        Not two arms, no common metric, mixed directions, a ``variable`` the arms do not differ in.
    """
    arms = group(runs, seed_key)
    if len(arms) != 2:
        what = "all runs share one config (but the seed)" if len(arms) == 1 else \
            f"the runs form {len(arms)} configs (but the seed)"
        raise ConfigError(f"{what}; an audit compares two", where="ablate audit",
                          fix="give the sources of the two sides only" + ("" if len(arms) == 1 else
                                                                          ", or --seed-key KEY if the seed is "
                                                                          "not called `seed`"))
    a, b = arms
    metric = choose_metric(runs, metric)
    goal, goal_how = choose_goal(runs, metric, goal)
    diff = classify(a, b, variable, repo)
    stats = statistics(a, b, metric, goal, reduce, seed_key, (diff["variable"] or {}).get("key"))
    return {"metric": metric, "goal": goal, "goal_how": goal_how, "reduce": reduce, "seed_key": seed_key,
            "post_hoc": True, "sources": sorted({r.source for r in runs}),
            "arms": [{"name": arm.name, "role": "control" if arm is a else "treatment", "n": len(arm.runs),
                      "runs": [r.id for r in arm.runs], "commit": _one(r.commit for r in arm.runs)}
                     for arm in arms],
            **diff, "statistics": stats, "seeds_advised": advised_seeds(stats)}


def _one(vals: Any) -> str | None:
    got = {v for v in vals if v}
    return got.pop() if len(got) == 1 else None
