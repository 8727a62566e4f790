"""The audit: runs -> identities -> arms -> differences -> post-hoc statistics -> the minimal ablation's seeds;
audit.json content.

The statistics are the verdict's own (:func:`ablate.judge.verdict.analyse`, on a plan of the two arms built
from the runs), so a post-hoc comparison gets exactly the numbers an ablation launched by ablate would get on
the same values: the test, the interval, the effect size and the seed advice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ablate.audit.arms import Arm, classify, group
from ablate.audit.identity import COUNTERS, duplicates, merge, seed_of, unfinished
from ablate.audit.runs import Run
from ablate.audit.versions import add_data_versions
from ablate.errors import ConfigError
from ablate.stats.core import FIRM_FROM

#: Whole name tokens of metrics that are minimized, and of metrics that are maximized (``val_loss``,
#: ``top1_err``; ``answer_accuracy``, ``flowers102_acc``, ``cancer_auc``, ``answer_f1``).
MINIMIZED = frozenset({"loss", "losses", "err", "error", "errors", "perplexity", "ppl", "mse", "mae", "rmse", "mape",
                       "smape", "wer", "cer", "ter", "nll", "regret", "bpc", "bpd", "bpb", "fid", "lpips", "latency",
                       "distance", "divergence", "kl", "brier", "ece", "fpr", "fnr", "cost"})
MAXIMIZED = frozenset({"acc", "accuracy", "auc", "auroc", "auprc", "roc", "f1", "fscore", "precision", "recall",
                       "bleu", "rouge", "meteor", "chrf", "map", "ap", "iou", "miou", "dice", "r2", "score", "reward",
                       "rewards", "return", "returns", "psnr", "ssim", "success", "mrr", "ndcg", "hits", "kappa",
                       "mcc", "spearman", "pearson", "corr", "correlation", "em", "winrate", "elo", "tpr",
                       "sensitivity", "specificity", "likelihood", "throughput"})
#: Replicates per arm the post-hoc test needs (as a launched ablation: :data:`ablate.plan.arms.MIN_SEEDS`).
MIN_REPLICATES = 3
#: Seeds per arm advised when the runs give no spread to plan with (ablate's default ``seeds``).
DEFAULT_SEEDS = 5


def tokens(name: str) -> set[str]:
    """A metric name's whole tokens, lower-cased: split at anything not a letter or digit and at camelCase, each
    also without its digits (``flowers102_acc`` -> flowers102, flowers, acc; ``valLoss`` -> val, loss)."""
    out: set[str] = set()
    for part in re.split(r"[^A-Za-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", name)):
        part = part.lower()
        if part:
            out.add(part)
            out.update(t for t in re.split(r"\d+", part) if t)
    return out


def guess_goal(metric: str) -> str | None:
    """``minimize`` / ``maximize`` from the metric name's whole tokens (:data:`MINIMIZED`, :data:`MAXIMIZED`); None
    when no token says, or tokens say both."""
    t = tokens(metric)
    lo, hi = bool(t & MINIMIZED), bool(t & MAXIMIZED)
    return "minimize" if lo and not hi else "maximize" if hi and not lo else None


def _metric_lines(runs: Sequence[Run]) -> set[str]:
    return {m for r in runs for m in r.metrics if m not in COUNTERS and not m.startswith("system/")}


def _logged(r: Run) -> bool:
    """Whether ``r`` logged any value (a run with no status that logged none is an unfinished run, not a refusal)."""
    return r.status is not None or any(r.metrics.values())


def _check_logged(runs: Sequence[Run], metric: str, side: str = "") -> None:
    lacking = [r.id for r in runs if metric not in r.metrics and _logged(r)]
    if lacking:
        common = set.intersection(*(set(r.metrics) for r in runs if _logged(r)))
        have = ", ".join(sorted(common)) or "none"
        raise ConfigError(f"{len(lacking)} of {len(runs)} runs{side} did not log {metric!r} (e.g. {lacking[0]}); "
                          f"metrics every one of them logged: {have}", where="--metric",
                          fix="choose a metric every run logged (`--metric A=NAME B=NAME` where the sides name it "
                          "differently), or leave out the runs that lack it")


def choose_metric(runs: Sequence[Run], metric: str | None) -> str:
    """``metric``, checked to be logged by every run; or the one metric every run logged, when no run logged
    another (never a silent switch to the one metric in common)."""
    if metric is not None:
        _check_logged(runs, metric)
        return metric
    live = [r for r in runs if _logged(r)]
    common = set.intersection(*(set(r.metrics) for r in live)) if live else set()
    candidates = sorted(m for m in common if m not in COUNTERS and not m.startswith("system/"))
    others = sorted(_metric_lines(live) - set(candidates))
    if len(candidates) == 1 and not others:
        return candidates[0]
    if not candidates:
        raise ConfigError("the runs have no metric in common" + (f" (logged: {', '.join(others[:12])})" if others
                                                                 else " (none logged any metric)"),
                          where="ablate audit", fix="name the metric to compare with --metric NAME, or each "
                          "side's with --metric A=NAME B=NAME")
    if len(candidates) == 1:
        raise ConfigError(f"the runs share only the metric {candidates[0]!r}, but some also logged "
                          f"{', '.join(others[:8])}: ablate audit does not switch metrics silently", where="--metric",
                          fix=f"name the one to compare: --metric {candidates[0]}, or each side's with --metric "
                          f"A=NAME B=NAME")
    raise ConfigError(f"the runs share several metrics: {', '.join(candidates)}", where="--metric",
                      fix=f"name the one to compare, e.g. --metric {candidates[0]}")


def side_metrics(a: Arm, b: Arm, metric: str | Mapping[str, str] | None) -> tuple[str, str]:
    """Each arm's metric: one name for both (given, or :func:`choose_metric`), or ``{"A": name, "B": name}``
    (``--metric A=... B=...``), each checked against its side's runs."""
    if isinstance(metric, Mapping):
        for arm in (a, b):
            if arm.name not in metric:
                raise ConfigError(f"--metric names no metric for side {arm.name}", where="--metric",
                                  fix="give each side's: --metric A=NAME B=NAME")
            _check_logged(arm.runs, metric[arm.name], f" of side {arm.name}")
        return metric[a.name], metric[b.name]
    try:
        m = choose_metric(a.runs + b.runs, metric)
    except ConfigError:
        la, lb = sorted(_metric_lines(a.runs) - _metric_lines(b.runs)), sorted(_metric_lines(b.runs) - _metric_lines(
            a.runs))
        if metric is None and la and lb:
            raise ConfigError(f"the sides logged other metrics: A {', '.join(la[:6])}; B {', '.join(lb[:6])}",
                              where="--metric", fix=f"name each side's: --metric A={la[0]} B={lb[0]} (or one both "
                              "logged: --metric NAME)") from None
        raise
    return m, m


def choose_goal(runs: Sequence[Run], metric: str | Sequence[str], goal: str | None) -> tuple[str, str]:
    """The metric's direction and where it came from (given, an ablate sweep dir, or the metric's name tokens).

    Raises
    ------
    ConfigError
        When sources disagree on the direction (a mixed comparison cannot be judged), or none is given and the
        name does not say (or the two sides' names say different ones).
    """
    names = [metric] if isinstance(metric, str) else list(dict.fromkeys(metric))
    recorded = {r.context.get("goal") for r in runs if r.context.get("goal")}
    if len(recorded) > 1 or (goal and recorded and goal not in recorded):
        dirs = " and ".join(sorted(recorded | ({goal} if goal else set())))
        raise ConfigError(f"the metric {names[0]!r} is judged in mixed directions: {dirs}", where="--goal",
                          fix="audit sources that agree on the direction, or give the one that applies with "
                          "--goal maximize|minimize")
    if goal:
        return goal, "given"
    if recorded:
        return recorded.pop(), "recorded by ablate"
    guesses = {guess_goal(m) for m in names}
    if len(guesses) != 1 or None in guesses:
        raise ConfigError(f"whether {' / '.join(names)} is maximized or minimized cannot be told from its name",
                          where="--goal", fix="give it: --goal maximize or --goal minimize")
    return guesses.pop(), "guessed from the metric's name"  # type: ignore[return-value]


def _reduce(run: Run, metric: str, rule: str) -> float:
    from ablate.metrics import reduce_series  # noqa: PLC0415  # lazy: keeps pandas-free imports of the audit light

    return float(reduce_series(run.metrics[metric], rule)[0])


def seed_labels(arm: Arm, key: str) -> tuple[list[str], list[int], list[str]]:
    """Each run's seed as audit.json labels it (``1``; a second run of seed 1 ``1#2``), the distinct integers the
    statistics key them by, and notes: a seed missing, or run more than once (flagged, never renumbered)."""
    labels, ints, notes, count = [], [], [], {}
    got = [r.config.get(key) for r in arm.runs]
    usable = [g for g in got if isinstance(g, int) and not isinstance(g, bool)]
    nxt = max(usable, default=0) + 1
    for i, g in enumerate(got):
        if not isinstance(g, int) or isinstance(g, bool):
            labels.append(f"run{i + 1}")
            ints.append(nxt)
            nxt += 1
            continue
        count[g] = count.get(g, 0) + 1
        labels.append(str(g) if count[g] == 1 else f"{g}#{count[g]}")
        ints.append(g if count[g] == 1 else nxt)
        nxt += count[g] > 1
    missing = sum(1 for g in got if not isinstance(g, int) or isinstance(g, bool))
    if missing:
        notes.append(f"arm {arm.name}: {missing} of {len(got)} runs record no integer `{key}`: labelled run1, run2 ...")
    return labels, ints, notes


def indicative(stats: dict[str, Any]) -> bool:
    """Whether the post-hoc verdict is an indicative better/worse (verdict.json's ``firm`` False)."""
    v = stats.get("verdict")
    return v is not None and v["comparisons"][0].get("firm") is False


def statistics(a: Arm, b: Arm, metric: str | tuple[str, str], goal: str, rule: str,
               seed_key: str | Mapping[str, str], variable: str | None) -> dict[str, Any]:
    """The verdict's statistics on the two arms' values (B against A as control), via
    :func:`ablate.judge.verdict.analyse`: ``{"values", "verdict", "notes", "curves"}``; ``verdict`` is None with
    fewer than :data:`MIN_REPLICATES` runs in an arm (then ``sample_size`` says what is needed); ``curves`` compares
    the runs' logged step series with the curve verdict's statistics (:func:`ablate.audit.curves.audit_curves`;
    None when no run logged one). ``metric`` and ``seed_key``
    may name each side's own."""
    from ablate.judge.options import resolve_options  # noqa: PLC0415  # lazy: the verdict's machinery, after the checks
    from ablate.judge.verdict import analyse  # noqa: PLC0415  # lazy: the verdict's machinery (53 modules), after the checks

    metrics = dict(zip((a.name, b.name), (metric, metric) if isinstance(metric, str) else metric, strict=True))
    keys = {arm.name: seed_key if isinstance(seed_key, str) else seed_key[arm.name] for arm in (a, b)}
    values: dict[str, dict[int, float]] = {}
    shown: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    label = {a.name: "control", b.name: "treatment"}
    sides = []
    for arm in (a, b):
        labels, ints, more = seed_labels(arm, keys[arm.name])
        vals = [_reduce(r, metrics[arm.name], rule) for r in arm.runs]
        values[arm.name] = dict(zip(ints, vals, strict=True))
        shown[arm.name] = dict(zip(labels, vals, strict=True))
        notes += more
        sides.append((label[arm.name], metrics[arm.name], arm.runs, ints, labels))
    out: dict[str, Any] = {"values": {label[k]: d for k, d in shown.items()}, "notes": notes}
    n = min(len(a.runs), len(b.runs))
    if n < MIN_REPLICATES:
        out["verdict"] = None
        out["sample_size"] = _sample_size(values[a.name], values[b.name], n)
        return out
    name = metrics[a.name] if metrics[a.name] == metrics[b.name] else f"{metrics[a.name]} / {metrics[b.name]}"
    plan = {"metric": name, "goal": goal, "variable": {"key": variable or "?"},
            "seeds": sorted(set(values[a.name]) | set(values[b.name])), "options": {},
            "arms": [{"name": "control", "label": "A", "value": None},
                     {"name": "treatment", "label": "B", "value": None}]}
    rows = [{"arm": label[k], "seed": s, "status": "ok", name: v} for k, d in values.items() for s, v in d.items()]
    out["verdict"] = analyse(plan, rows, resolve_options(plan))
    # lazy: the curve statistics (numpy, scipy), as the verdict's
    from ablate.audit.curves import audit_curves  # noqa: PLC0415  # lazy: the curve audit's 16 modules, only when the audit has curves

    out["curves"] = audit_curves(sides, out["verdict"])  # where the runs logged step series
    return out


def _sample_size(va: dict[int, float], vb: dict[int, float], n: int) -> dict[str, Any]:
    """What fewer than 3 replicates allow: no spread, no test; the seeds per arm to run (at least those from which
    ablate calls a better/worse firm: the runs are to settle the comparison)."""
    from ablate.stats.power import recommend_seeds  # noqa: PLC0415  # lazy: scipy's power search, only for too few runs

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
            needed, how = max(MIN_REPLICATES, min(adv.n_needed, adv.cap)), adv.message()  # a range: at most the cap
    if needed < FIRM_FROM[False]:
        needed, how = FIRM_FROM[False], (f"{how}; at least {FIRM_FROM[False]}, from which ablate calls a "
                                         "better/worse firm")
    one = "one seed is a sample size of one" if n == 1 else f"{n} seeds per arm give no test (a verdict needs 3)"
    return {"n": n, "diff": diff, "seeds_needed": needed, "how": how,
            "message": f"{one}: the difference ({diff:+.4g}) cannot be told from seed noise; run {needed} seeds per "
                       f"arm ({how})"}


def advised_seeds(stats: dict[str, Any]) -> int:
    """Seeds per arm for the minimal ablation, which must settle the comparison: the seeds the seed advice gives
    for the effect the runs suggest (on the SD's upper limit; the sample-size advice with fewer than 3 runs), and
    at least the seeds from which ablate calls a better/worse verdict firm (:data:`ablate.stats.core.FIRM_FROM`,
    20): fewer would give an indicative verdict at best, which settles nothing."""
    firm = FIRM_FROM[False]
    if stats.get("verdict") is None:
        return max(firm, int(stats["sample_size"]["seeds_needed"]))
    c = stats["verdict"]["comparisons"][0]
    adv = c.get("seed_advice") or {}
    n = min(int(adv["n_needed"]), int(adv.get("cap") or adv["n_needed"])) if adv.get("n_needed") else None
    return max(firm, int(c.get("firm_from") or firm), int(n) if n else DEFAULT_SEEDS)


def _seed_keys(seed_key: str | Mapping[str, str]) -> list[str]:
    return [seed_key] if isinstance(seed_key, str) else list(dict.fromkeys(seed_key.values()))


def _two_arms(runs: Sequence[Run], keys: list[str]) -> list[Arm]:
    arms = group(runs, keys)
    if len(arms) == 2:
        return arms
    what = ("all runs share one config (but the seed), one data version and one commit" if len(arms) == 1 else
            f"the runs form {len(arms)} configs (but the seed)")
    raise ConfigError(f"{what}; an audit compares two", where="ablate audit",
                      fix="give the sources of the two sides only" + ("" if len(arms) == 1 else
                                                                      ", or --seed-key KEY if the seed is not called "
                                                                      "`seed` (--seed-key A=KEY B=KEY where the sides "
                                                                      "name it differently)"))


def _seed_key_of(arm: Arm, seed_key: str | Mapping[str, str]) -> str:
    key = seed_key if isinstance(seed_key, str) else seed_key.get(arm.name)
    if key is None:
        raise ConfigError(f"--seed-key names no seed key for side {arm.name}", where="--seed-key",
                          fix="give each side's: --seed-key A=KEY B=KEY")
    if not isinstance(seed_key, str) and not any(key in r.config for r in arm.runs):
        have = sorted(k for k in set().union(*(r.config for r in arm.runs)) if not k.startswith("hydra-choice:"))
        raise ConfigError(f"side {arm.name}'s runs record no {key!r} (their config keys: {', '.join(have[:12])})",
                          where="--seed-key", fix="name the key each side records its seed under: --seed-key "
                          "A=KEY B=KEY (A is the side whose runs started first)")
    return key


def _finish(arms: Sequence[Arm], metrics: tuple[str, str]) -> tuple[list[str], list[str]]:
    """Leave out each arm's unfinished runs (:func:`ablate.audit.identity.unfinished`): (lines, notes)."""
    lines, notes = [], []
    for arm, m in zip(arms, metrics, strict=True):
        kept, gone, note = unfinished(arm.runs, {id(r): m for r in arm.runs}, arm.name)
        if not kept:
            raise ConfigError(f"no run of side {arm.name} finished ({len(gone)} left out: {gone[0]})",
                              where="ablate audit SOURCE", fix="give the runs that finished")
        arm.runs = kept
        lines += gone
        notes += [note] if note else []
    return lines, notes


def audit(runs: Sequence[Run], *, variable: str | None = None, metric: str | Mapping[str, str] | None = None,
          goal: str | None = None, reduce: str = "last", seed_key: str | Mapping[str, str] = "seed",
          repo: str | None = None) -> dict[str, Any]:
    """The audit of ``runs`` (the content of audit.json, without the minimal ablation's files; ``_arms`` holds the
    two :class:`Arm` for the plots and the minimal ablation, and is not written). ``metric`` and ``seed_key`` are
    one name, or each side's (``{"A": ..., "B": ...}``; A is the side whose runs started first).

    Raises
    ------
    ConfigError
        Not two arms, no common metric, mixed or unknown directions, a ``variable`` the arms do not differ in.
    """
    keys = _seed_keys(seed_key)
    runs, merged = merge(runs, keys)
    add_data_versions(runs, repo)
    a, b = _two_arms(runs, keys)
    side_keys = {arm.name: _seed_key_of(arm, seed_key) for arm in (a, b)}
    ma, mb = side_metrics(a, b, metric)
    goal, goal_how = choose_goal(runs, [ma, mb], goal)
    unfinished_lines, notes = _finish((a, b), (ma, mb))
    dups = duplicates(a.runs, [side_keys["A"]], "A") + duplicates(b.runs, [side_keys["B"]], "B")
    diff = classify(a, b, variable, repo)
    stats = statistics(a, b, (ma, mb), goal, reduce, side_keys, (diff["variable"] or {}).get("key"))
    notes += [n for r in a.runs + b.runs for n in r.context.get("notes", [])]
    return {"metric": ma if ma == mb else f"{ma} / {mb}", "metrics": {"A": ma, "B": mb}, "goal": goal,
            "goal_how": goal_how, "reduce": reduce,
            "seed_key": side_keys["A"] if side_keys["A"] == side_keys["B"] else side_keys,
            "post_hoc": True, "sources": sorted({s.split(":", 1)[0] for r in runs for s in r.records or [r.source]}),
            "arms": [{"name": arm.name, "role": "control" if arm is a else "treatment", "n": len(arm.runs),
                      "runs": [r.id for r in arm.runs], "commit": _one(r.commit for r in arm.runs),
                      "seeds": [seed_of(r, [side_keys[arm.name]]) for r in arm.runs]}
                     for arm in (a, b)],
            **diff, "merged": merged, "duplicates": dups, "unfinished": unfinished_lines, "notes": notes,
            "statistics": stats, "seeds_advised": advised_seeds(stats), "_arms": [a, b]}


def _one(vals: Any) -> str | None:
    got = {v for v in vals if v}
    return got.pop() if len(got) == 1 else None
