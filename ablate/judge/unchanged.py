"""Treatments that changed nothing: every seed's metrics bit-identical to the control's at that seed.

When a treatment arm gives, on every seed both arms finished, exactly the control's numbers (each metric, to
the bit), the treatment did not reach what the task reports: an argparse ``type=bool`` option reads
``--augment false`` as True (any non-empty string is true), the task never reads the key, or the change
(a callback group, a logger) cannot affect this metric. No number of seeds tells such arms apart, so the
verdict says what was seen and the likely causes instead of advising more seeds
(:func:`unchanged_arms` finds them, :func:`message` says it, :func:`short` is the bottom line's words).
Only what was observed is said: the arms' metrics were identical; why is listed as likely causes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ablate.judge.seedcheck import has_task, metric_bits, metric_names

#: A command task's argument styles that pass each setting as a ``--flag`` (argparse reads them).
_FLAG_STYLES = ("--key=value", "--key value", "equals", "space", "flags")
#: The fewest seeds both arms finished for an identity to count (one seed in common is a coincidence).
MIN_SEEDS = 2


def unchanged_arms(plan: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The treatment arms whose metrics equal the control's, bit for bit, on every seed both finished.

    Parameters
    ----------
    plan : mapping
        The plan record (``ablation.yaml``): its first arm is the control.
    rows : sequence of mapping
        One per trial (results.csv rows: ``arm``, ``seed``, ``status`` and the metrics).

    Returns
    -------
    dict
        Treatment arm -> ``{"arm", "label", "seeds", "metrics"}``: the seeds compared (at least
        :data:`MIN_SEEDS`, every seed both arms finished) and the metrics compared (timing metrics left out).
    """
    arms = [a["name"] for a in plan.get("arms") or []]
    if len(arms) < 2 or not has_task(plan):
        return {}  # runs made without ablate (`ablate audit`) say what they are in their own words
    labels = {a["name"]: str(a.get("label", a["name"])) for a in plan.get("arms") or []}
    ok: dict[str, dict[int, Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "ok":
            ok.setdefault(str(r["arm"]), {})[int(r["seed"])] = r
    control = ok.get(arms[0]) or {}
    out: dict[str, dict[str, Any]] = {}
    for arm in arms[1:]:
        trials = ok.get(arm) or {}
        seeds = sorted(set(trials) & set(control))
        if len(seeds) < MIN_SEEDS:
            continue
        names = metric_names(plan, [*(trials[s] for s in seeds), *(control[s] for s in seeds)])
        if names and all(metric_bits(trials[s], names) == metric_bits(control[s], names) for s in seeds):
            out[arm] = {"arm": arm, "label": labels.get(arm, arm), "seeds": seeds, "metrics": names}
    return out


def likely_causes(plan: Mapping[str, Any], arm: str) -> list[str]:
    """Why a treatment may have changed nothing the task reports, the likeliest first, for the task's form and
    the variable's kind."""
    var = plan.get("variable") or {}
    rec = next((a for a in plan.get("arms") or [] if a.get("name") == arm), {})
    control = next(iter(plan.get("arms") or []), {})
    key = _script_key(str((rec.get("variable") and _suite_key(plan, rec)) or var.get("key", "the key")))
    task = ((control.get("config") or {}).get("task") or {})
    values = [rec.get("value"), control.get("value")]
    causes: list[str] = []
    if task.get("command") and str(task.get("args", "hydra")) in _FLAG_STYLES and any(isinstance(v, bool)
                                                                                       for v in values):
        causes.append(f"the script parses `--{key}` with argparse's `type=bool`, which reads every non-empty string "
                      "as True, `false` included (use `action=argparse.BooleanOptionalAction`, or a function that "
                      "maps 'false' to False)")
    if var.get("is_group") or _suite_is_group(plan, rec):
        causes.append(f"the option of `{key}` the treatment selects differs from the control's only in what does "
                      "not reach this metric (callbacks, loggers, checkpointing)")
    causes.append(f"the task never reads what `{key}` sets" if var.get("is_group") or _suite_is_group(plan, rec)
                  else f"the task never reads `{key}` (a misspelt key, or a setting it takes from elsewhere)")
    causes.append("the change cannot move this metric in this setup (too short a run, a metric too coarse to show it)")
    return causes


def _suite_key(plan: Mapping[str, Any], rec: Mapping[str, Any]) -> str | None:
    """The key of a suite arm's own variable (its ``variable`` names it)."""
    for v in (plan.get("suite") or {}).get("variables") or []:
        if v.get("name") == rec.get("variable"):
            return str(v.get("key"))
    return None


def _suite_is_group(plan: Mapping[str, Any], rec: Mapping[str, Any]) -> bool:
    for v in (plan.get("suite") or {}).get("variables") or []:
        if v.get("name") == rec.get("variable"):
            return bool(v.get("is_group"))
    return False


def message(found: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    """One sentence: what was seen for one treatment, the likely causes, and that more seeds cannot help."""
    names = found["metrics"]
    shown = ", ".join(f"`{n}`" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    causes = likely_causes(plan, found["arm"])
    return (f"the treatment changed nothing the task reports: on each of the {len(found['seeds'])} seeds both arms "
            f"finished ({', '.join(map(str, found['seeds']))}) its {shown} equal the control's bit for bit, so no "
            "number of seeds can tell the two arms apart. Likely causes: "
            + "; ".join(f"({i}) {c}" for i, c in enumerate(causes, 1))
            + ". Check that the change reached the task (the trial's `config.yaml`, and `command.json` for a script)")


def likeliest(plan: Mapping[str, Any], arm: str) -> str:
    """The likeliest cause in a few words, for the bottom line (:func:`likely_causes` has them all)."""
    var = plan.get("variable") or {}
    rec = next((a for a in plan.get("arms") or [] if a.get("name") == arm), {})
    key = _script_key(str((rec.get("variable") and _suite_key(plan, rec)) or var.get("key", "the key")))
    first = likely_causes(plan, arm)[0]
    if "type=bool" in first:
        return f"argparse's `type=bool` reads `--{key} false` as True"
    if var.get("is_group") or _suite_is_group(plan, rec):
        return f"its `{key}` option does not reach the metric"
    return f"the task never reads `{key}`"


def _script_key(key: str) -> str:
    for prefix in ("task.params.", "task/params/"):  # a script's own key, as the script names it
        key = key.removeprefix(prefix)
    return key


def mark_unchanged(rec: dict[str, Any], found: Mapping[str, Any], plan: Mapping[str, Any]) -> None:
    """Record on a comparison of verdict.json (in place) that its treatment changed nothing: ``unchanged`` (the seeds,
    the metrics, :func:`message`, every likely cause and the :func:`likeliest` in a few words), and the message as
    its seed advice, in place of a number of seeds."""
    text = message(found, plan)
    rec["unchanged"] = {"seeds": list(found["seeds"]), "metrics": list(found["metrics"]), "message": text,
                        "causes": likely_causes(plan, found["arm"]), "likeliest": likeliest(plan, found["arm"])}
    if isinstance(rec.get("seed_advice"), dict):
        rec["seed_advice"]["message"] = text


def short(c: Mapping[str, Any]) -> str:
    """verdict.md's bottom-line clause for a treatment that changed nothing (``c["unchanged"]``): what was seen and the
    likeliest cause in a few words (:func:`likeliest`, within the bottom line's 30 words); the whole message (every
    likely cause) is its seed recommendation."""
    u = c["unchanged"]
    first = u.get("likeliest") or str((u.get("causes") or [""])[0]).split(", which")[0].split(" (")[0]
    return ("it changed nothing the task reports (every seed equals the control's, bit for bit)"
            + (f"; likely: {first}" if first else ""))
