"""Run and report the transfer check: ``ablate -m variable=lr scale.key=task.hidden scale.values=[32,128,512]``.

The ablation runs once per scale value, each in its own sweep dir under one parent dir::

    <parent>/
      transfer.yaml          the scale key and values, the variable, the child sweep dirs (written first)
      hidden=32/ ...         a complete sweep dir per scale (ablation.yaml, trials/, verdict.md ...)
      transfer.json          per treatment: Δ at each scale, the interaction test, the flag
      transfer.md            the same for a person, with the seeds-needed advice per scale

Every scale's composition is planned and checked before any trial runs. ``ablate verdict <parent>``
recomputes every scale's verdict and the transfer report; ``ablate status|resume <parent>/hidden=32``
act on one scale. The statistics are in :mod:`ablate.judge.transfer`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from ablate.errors import AblationFailed, ConfigError, close_matches
from ablate.judge.curves_transfer import transfer_curves, transfer_curves_md
from ablate.judge.rerun import SCALE_KEYS, rerun_command, without_keys
from ablate.orchestrate.pipeline import prepare, start
from ablate.plan.app_config import APP_NODE, to_app_key
from ablate.plan.arms import RESERVED_KEYS, check_value_type, flatten, select, task_keys
from ablate.plan.compose import compose
from ablate.plan.overrides import format_override
from ablate.record.names import arm_name
from ablate.record.results import write_results
from ablate.record.sweepdir import SweepDir, create_unique_dir, dump_yaml, read_json, write_atomic, write_json
from ablate.trials.config import load_plan
from ablate.trials.tasks.interface import attach, with_cli_overrides

TRANSFER_RECORD = "transfer.yaml"
TRANSFER_JSON = "transfer.json"
TRANSFER_MD = "transfer.md"


def parse_scale(cfg: Mapping[str, Any], cwd: str | os.PathLike[str] | None = None) -> tuple[str, list[Any]] | None:
    """Read and validate ``scale.key`` / ``scale.values`` from a composed config; None when no scale is set.

    For an ``app`` task the key names the app's own config (``scale.key=model.hidden``, as a variable's
    ``key:`` does) and is returned at its place in ablate's config (``task.params.model.hidden``);
    :func:`run_transfer` passes each scale value to the app as one of its overrides.

    Raises
    ------
    ConfigError
        The key is missing from the config (close matches listed), is reserved or the variable's own key,
        or the values are not a list of at least 2 distinct values of the key's type.
    """
    node = cfg.get("scale") or {}
    key, values = node.get("key"), node.get("values")
    if key is None and values is None:
        return None
    if not isinstance(key, str) or not key:
        raise ConfigError(f"must name a dotted config key, got {key!r}", where="scale.key",
                          fix="e.g. `scale.key=task.hidden scale.values=[32,128]`")
    if cfg.get("dry_run") is True:  # refused before anything is composed or imported (an app's module)
        first = values[0] if isinstance(values, list | tuple) and values else "<value>"
        where_ = f"app.{to_app_key(key) or key}" if is_app(cfg) else key
        raise ConfigError("a transfer check has no dry run yet", where="dry_run",
                          fix=f"dry-run one scale, without scale.key: `{format_override(where_, first)} dry_run=true`")
    if is_app(cfg):  # the app's own config, composed by Hydra, at task.params; the variable mapped onto it
        cfg, _, _ = attach(dict(cfg), None, None, cwd)
        if not key.startswith(APP_NODE + ".") and key.split(".")[0] in cfg["task"]["params"]:
            key = f"{APP_NODE}.{key}"
    leaves = flatten({k: v for k, v in cfg.items() if k != "hydra"})
    if key not in leaves:
        if is_app(cfg):  # the app's own keys, as its users write them
            app_keys = list(flatten(cfg["task"]["params"]))
            near = close_matches(key.removeprefix(APP_NODE + "."), app_keys)
            where_ = "the app's config"
            fix = f"point it at a value of the app's config, e.g. `scale.key={(near or app_keys or ['<key>'])[0]}`"
        else:
            near, where_ = close_matches(key, task_keys(cfg)), "the composed config"
            fix = "point it at a leaf of your task, e.g. `scale.key=task.hidden`"
        raise ConfigError(f"{key!r} is not a value in {where_}" + (f". Close matches: {', '.join(near)}" if near
                                                                   else ""), where="scale.key", fix=fix)
    if any(key == r or key.startswith(r + ".") for r in RESERVED_KEYS | {"scale", "variable"}):
        raise ConfigError(f"{key!r} is a setting of ablate or of the comparison, not a scale of the task",
                          where="scale.key", fix="e.g. `scale.key=task.hidden`")
    var = cfg.get("variable") or {}
    if var.get("key") and (key == var["key"] or key.startswith(str(var["key"]) + ".")):
        raise ConfigError(f"{key!r} is the variable's own key", where="scale.key",
                          fix="the scale must be a second key, e.g. the model width or the data size")
    if not isinstance(values, list | tuple) or len(values) < 2:
        raise ConfigError(f"must list at least 2 settings of {key}, got {values!r}", where="scale.values",
                          fix=f"e.g. `scale.values=[{leaves[key]},{leaves[key]}]` with two different values")
    control_value = select(cfg, key)
    out = [check_value_type(key, control_value, v, i) for i, v in enumerate(values)]
    if len({repr(v) for v in out}) != len(out):
        raise ConfigError(f"repeats a value: {list(values)}", where="scale.values", fix="list each value once")
    tune = cfg.get("tune") or {}
    if tune.get("key") is not None or tune.get("params") is not None:
        raise ConfigError("cannot tune the arms of a transfer check yet: its statistics read every scale's trials "
                          "as evaluation trials", where="tune",
                          fix="drop `scale.key` and `scale.values` and run one tuned ablation per scale, e.g. with "
                              f"`{format_override(key, out[0])}`")
    return key, out


def is_app(cfg: Mapping[str, Any]) -> bool:
    """The composed config's task is an ``app`` task."""
    task = cfg.get("task")
    return isinstance(task, Mapping) and bool(task.get("app"))


def child_names(key: str, values: Sequence[Any]) -> list[str]:
    """One sweep-dir name per scale value, ``<leaf>=<value>``, unique even where file-name-safe forms collide.

    Parameters
    ----------
    key : str
        The scale's key (dotted); only its last part names the dirs.
    values : sequence
        The scale's values, in order.

    Returns
    -------
    list of str
        Named as treatment arms are (:func:`ablate.record.names.arm_name`): values whose text is not file-name safe
        (``a/b`` and ``a:b``) or that differ only in case get a hash of the value, so no two scales share a dir.
    """
    taken: set[str] = set()
    return [arm_name(key, v, taken) for v in values]


def run_transfer(overrides: Sequence[str], scale: tuple[str, list[Any]], composed: Any, *,
                 config_path: str | None, config_dirs: Sequence[str] = (), config_name: str | None = None,
                 cwd: str | None = None, app_overrides: Sequence[str] = (),
                 command: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run one ablation per scale value under one parent dir, then write the transfer report.

    Parameters
    ----------
    overrides : sequence of str
        The command line's overrides (Hydra syntax).
    scale : (str, list)
        From :func:`parse_scale`.
    composed : ablate.plan.compose.Composed
        The composition without a scale value (names the parent dir).
    config_path, config_dirs, config_name
        As for :func:`ablate.plan.compose.compose`.
    app_overrides : sequence of str
        ``app.`` overrides of the command line, for an ``app`` task.
    command : mapping, optional
        The command line (:func:`ablate.plan.overrides.command_record`): recorded in transfer.yaml, and each scale's
        plan records it as that scale's own ablation (``scale.*`` left out, the scale's value added).

    Returns
    -------
    dict
        The content of transfer.json.

    Raises
    ------
    ConfigError, PlanError
        Before anything is written, when any scale's plan is invalid.
    AblationFailed
        After the report is written, when a scale's ablation failed (its verdict is invalid).
    """
    key, values = scale
    app_key = to_app_key(key) if is_app(composed.cfg) else None  # an app's scale value is one of its overrides
    if composed.cfg.get("dry_run") is True:
        raise ConfigError("a transfer check has no dry run yet", where="dry_run",
                          fix="dry-run one scale, without scale.key: "
                          f"`{format_override(f'app.{app_key}' if app_key else key, values[0])} dry_run=true`")
    comps, commands = [], []
    for v in values:
        ours = list(overrides) if app_key else [*overrides, format_override(key, v)]
        theirs = [*app_overrides, format_override(app_key, v)] if app_key else list(app_overrides)
        c = with_cli_overrides(compose(ours, config_path=config_path, config_dirs=config_dirs,
                                       config_name=config_name), theirs)
        prepare(c.cfg, variable_name=c.variable_name, available_variables=c.variables, compose=c.compose,
                choices=c.choices, cwd=cwd)  # every scale is checked before anything runs
        comps.append(c)
        commands.append(without_keys(command, SCALE_KEYS, [format_override(f"app.{app_key}" if app_key else key, v)]))
    mode = int(str(composed.cfg.get("sweep_dir_mode", "0700")), 8)
    parent = create_unique_dir(composed.sweep_dir, mode).absolute()
    children = child_names(key, values)
    write_atomic(parent / TRANSFER_RECORD, dump_yaml({"scale": {"key": key, "values": values},
                                                      "variable": composed.variable_name,
                                                      "children": children,
                                                      **({"command": dict(command)} if command else {})}),
                 durable=True)
    failed: list[str] = []
    if composed.cfg.get("wait") is False:  # submitted (launcher=slurm): collect each scale, then the report
        for c, child, cmd in zip(comps, children, commands, strict=True):
            start(c.cfg, sweep_dir=str(parent / child), variable_name=c.variable_name,
                  available_variables=c.variables, compose=c.compose, cwd=cwd, config_dirs=c.config_dirs,
                  choices=c.choices, command=cmd)
        print(f"ablate: every scale submitted; `ablate collect {parent}/<scale>` for each of {', '.join(children)}, "
              f"then `ablate verdict {parent}` writes the transfer report", file=sys.stderr)
        return {"parent": str(parent), "submitted": True}
    for c, child, cmd in zip(comps, children, commands, strict=True):
        try:
            start(c.cfg, sweep_dir=str(parent / child), variable_name=c.variable_name,
                  available_variables=c.variables, compose=c.compose, cwd=cwd, config_dirs=c.config_dirs,
                  choices=c.choices, command=cmd)
        except AblationFailed as exc:
            failed.append(f"{child}: {exc}")
    report = write_transfer(parent)
    print(str(parent / TRANSFER_MD))
    if failed:
        raise AblationFailed("; ".join(failed))
    return report


def is_transfer_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is the parent dir of a transfer check."""
    return (Path(path) / TRANSFER_RECORD).is_file()


def scale_dirs(parent: str | os.PathLike[str]) -> list[Path]:
    """The sweep dirs of a transfer check, in scale order (from its ``transfer.yaml``)."""
    rec = yaml.safe_load((Path(parent) / TRANSFER_RECORD).read_text())
    return [Path(parent) / c for c in rec["children"]]


def write_transfer(parent: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compute the transfer check from the scales' verdicts and write transfer.json and transfer.md.

    Parameters
    ----------
    parent : path-like
        The transfer check's parent dir.
    overrides : mapping, optional
        Verdict options (``alpha`` ...): when given, every scale's verdict is recomputed with them first.

    Returns
    -------
    dict
        The content of transfer.json.
    """
    from ablate.judge.verdict import write_verdict  # noqa: PLC0415  # lazy: numpy and scipy, kept off the command line's start

    root = Path(parent)
    rec = yaml.safe_load((root / TRANSFER_RECORD).read_text())
    key, values, children = rec["scale"]["key"], rec["scale"]["values"], rec["children"]
    verdicts = []
    for child in children:
        sd = SweepDir.open(root / child)
        if overrides is not None or not sd.verdict_json.is_file():
            write_results(sd)
            no_plots = {"plots": False} if load_plan(sd)["options"].get("plots", True) is False else {}
            write_verdict(sd, {**no_plots, **dict(overrides or {})})  # `plots=false` holds, as after each run
        verdicts.append(read_json(sd.verdict_json))
    report = analyse_transfer(key, values, verdicts)
    report["children"] = children
    report["command"] = rec.get("command")  # the transfer's command line: its Next line reruns it
    if (curves := transfer_curves(values, verdicts)) is not None:  # curve.enabled: matched x across scales
        report["curves"] = curves
    write_json(root / TRANSFER_JSON, report)
    write_atomic(root / TRANSFER_MD, render_transfer(report))
    return report


def analyse_transfer(key: str, values: Sequence[Any], verdicts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The transfer check from one verdict.json per scale (pure).

    Returns
    -------
    dict
        ``scale`` (key, values), ``metric``, ``goal``, ``alpha``, ``variable``, ``seeds`` (per arm, at each scale),
        ``results``: per treatment ``{arm, change, effects: [{scale, delta, ci, ci_level, verdict, firm, seed_advice,
        seeds_next}], test, pvalue, pvalue_adjusted, flag, message}`` (``change``: ``task.wd 0.0 → 0.1``).
    """
    # lazy: the transfer statistics load numpy, kept off the command line's start
    from ablate.judge.bottom_line import seeds_next, treatment_line  # noqa: PLC0415  # lazy: as said above
    from ablate.judge.transfer import ScaleEffect, check_transfer, finish  # noqa: PLC0415  # lazy: numpy off this module's import

    first = verdicts[0]
    alpha, goal = float(first["alpha"]), first.get("goal", "maximize")
    sign = 1.0 if goal == "maximize" else -1.0
    results, changes = [], []
    for comp in first["comparisons"]:
        t = treatment_line(comp, first)
        changes.append(f"{t.key} {t.control} → {t.value}")
        arm = comp["arm"]
        per_scale = []
        paired = True
        for v, val in zip(verdicts, values, strict=True):
            arms = {a["arm"]: a for a in v["arms"]}
            c = next((x for x in v["comparisons"] if x["arm"] == arm), None)
            if c is None:
                continue
            ci = c.get("ci")
            eff = ScaleEffect(scale=val, delta=None if c.get("diff") is None else sign * c["diff"],
                              ci=None if not ci or ci[0] is None else tuple(sorted((sign * ci[0], sign * ci[1]))),
                              ci_level=c.get("ci_level"), verdict=c["verdict"], firm=c.get("firm"),
                              seed_advice=(c.get("seed_advice") or {}).get("message"), seeds_next=seeds_next(c))
            paired = paired and bool(c.get("paired"))
            to_vals = lambda a: {int(k): (float("nan") if x is None else float(x))  # noqa: E731
                                 for k, x in (a.get("values") or {}).items()}
            per_scale.append({"scale": val, "treatment": to_vals(arms[arm]), "control": to_vals(v["arms"][0]),
                              "effect": eff})
        results.append(check_transfer(arm, per_scale, paired=paired))
    finish(results, alpha, key)
    return {"scale": {"key": key, "values": list(values)}, "metric": first["metric"], "goal": goal, "alpha": alpha,
            "variable": first.get("variable"), "seeds": len(first.get("seeds") or []),
            "results": [{**asdict(r), "change": ch} for r, ch in zip(results, changes, strict=True)]}


def _why_test(test: str) -> str:
    """Why the transfer check ran this interaction test (one clause)."""
    if test.startswith("Welch t on the paired differences"):
        return ("every scale's arms were analysed paired by seed, so each scale's per-seed differences T − C form a "
                "group, and Welch's t-test (scipy) compares the groups without assuming one noise level across "
                "scales" + (" (Bonferroni over the pairs of scales)" if "Bonferroni" in test else ""))
    if "HC3" in test:
        return ("the arms were analysed unpaired at some scale, so the arm x scale term of the two-way model "
                "y ~ arm * scale is tested, with MacKinnon & White's HC3 covariance because the noise usually "
                "changes with scale (the classic OLS F-test assumes one noise level and rejected 6.5-7.6% of A/A "
                "data sets at α = 5% with noise ratios 1:2-1:3)")
    return "too few seeds at a scale: nothing was tested"


#: A transfer flag in the bottom line's few words.
SHORT_FLAGS = {"no evidence that the effect changes with scale": "no sign that it changes with scale",
               "not tested": "interaction not tested"}


def transfer_bottom_line(report: Mapping[str, Any]) -> list[str]:
    """transfer.md's bottom line: per treatment one sentence (the flag, the interaction p, Δ and the verdict at each
    scale, in the metric's own sign), then the one command to run next (the transfer again, with the seeds the
    scales need)."""
    # lazy: the bottom line's words load ablate.stats (numpy), kept off the command line's start
    from ablate.judge.bottom_line import NextStep, signed  # noqa: PLC0415  # lazy: as said above
    from ablate.stats.core import verdict_label  # noqa: PLC0415  # lazy: numpy off this module's import

    key, metric = report["scale"]["key"], report["metric"]
    L = ["## Bottom line", ""]
    need = []
    for r in report["results"]:
        p = r.get("pvalue_adjusted")
        test = f" (interaction p = {p:.3g})" if p is not None else ""
        per = "; ".join(f"{signed(e['delta'], 4)} at {e['scale']}, {verdict_label(e['verdict'], e.get('firm'))}"
                        for e in r["effects"])
        L.append(f"- **{r['arm']}** ({r.get('change') or '?'}) across {key}: "
                 f"{SHORT_FLAGS.get(r['flag'], r['flag'])}{test}; Δ {metric} {per}.")
        need += [e["seeds_next"] for e in r["effects"] if e.get("seeds_next")]
    variables = [str((report.get("variable") or {}).get("name", "?"))]
    if need:
        n = max(need)
        step = NextStep(rerun_command(report.get("command"), n, variables=variables),
                        f"{n} seeds per arm at every scale, a new parent dir; Seeds per scale says why", n)
    else:
        step = NextStep(None, "nothing to run: every scale's verdict is firm or beyond the seed cap (Seeds per scale)")
    return [*L, "", step.line(), ""]


def render_transfer(report: Mapping[str, Any]) -> str:
    """transfer.md: the bottom line, the effect per scale, the interaction test and flag per treatment, seeds per
    scale; Δ = treatment − control in the metric's own sign throughout, the direction said once in the heading."""
    # lazy: the bottom line's words load ablate.stats (numpy), kept off the command line's start
    from ablate.judge.bottom_line import direction  # noqa: PLC0415  # lazy: as said above
    from ablate.judge.table import MARKERS  # noqa: PLC0415  # lazy: numpy off this module's import
    from ablate.stats.core import verdict_label  # noqa: PLC0415  # lazy: numpy off this module's import

    key = report["scale"]["key"]
    var = (report.get("variable") or {}).get("key", "?")
    L = [f"# Transfer check of `{var}` across `{key}`: {report['metric']}, {direction(report.get('goal'))}", ""]
    L += [*transfer_bottom_line(report), "## Effect per scale", ""]
    head = ["treatment", *[f"{key}={v}" for v in report["scale"]["values"]], "interaction p (Holm)", "transfer"]
    L += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["results"]:
        cells = [r["arm"]]
        for e in r["effects"]:
            ci = f" [{e['ci'][0]:+.3g}, {e['ci'][1]:+.3g}]" if e.get("ci") else ""
            d = "–" if e["delta"] is None else f"{e['delta']:+.3g}"
            tag = verdict_label(e["verdict"], e.get("firm"))[len(e["verdict"]):]  # " (indicative)" or ""
            cells.append(f"{d}{ci} {MARKERS.get(e['verdict'], ('', ''))[0]}{tag}")
        p = r.get("pvalue_adjusted")
        cells += ["–" if p is None else f"{p:.3g}", r["flag"]]
        L.append("| " + " | ".join(cells) + " |")
    L += ["", "Δ = treatment − control in the metric's units and sign, with each scale's verdict CI and marker "
          "(↑ better, ↓ worse, ≈ equivalent, ○ inconclusive; (indicative): a lead, not yet firm). The interaction "
          "test asks whether Δ is the same at every scale; Holm over the treatments.", ""]
    for test in dict.fromkeys(r["test"] for r in report["results"]):
        arms = ", ".join(r["arm"] for r in report["results"] if r["test"] == test)
        L.append(f"- Test that ran ({arms}): **{test}**, because {_why_test(test)}.")
    L += ["", "## Findings", ""]
    L += [f"- **{r['arm']}**: {r['message']}" for r in report["results"]]
    L += ["", *transfer_curves_md(report.get("curves"), key)]
    L += ["", "## Seeds per scale", ""]
    for i, v in enumerate(report["scale"]["values"]):
        for r in report["results"]:
            e = r["effects"][i] if i < len(r["effects"]) else None
            if e is not None:
                L.append(f"- {key}={v}, {r['arm']}: {e.get('seed_advice') or 'not computable'}")
    L += ["", "## Sweep dirs", ""] + [f"- `{c}/` (verdict.md there)" for c in report.get("children", [])]
    return "\n".join(L) + "\n"
