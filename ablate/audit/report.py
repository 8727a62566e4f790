"""audit.md: the audit for people (the bottom line first, then the differences, the statistics, what is missing,
the plots and the one ablation that settles it). The verdict part is the verdict's own wording, from the same code
(:func:`ablate.judge.report.bottom_line_words`, :func:`ablate.judge.report.seed_advice_text`): an indicative
better/worse reads ``better (indicative)`` with the seeds that make it firm, as in verdict.md; the other sections
of :func:`ablate.judge.report.render_markdown` are not repeated (the numbers are in audit.json). A confounded
comparison is worded as such by the same code (``confounded=True``): a difference that cannot be credited to the
variable is not one to act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from ablate.judge.curves_report import curves_section
from ablate.judge.report import bottom_line_words, seed_advice_text

#: The curve comparison's plot in the audit's output dir (the curve verdict's figure for side B against A).
CURVE_PLOT = "curve_verdict.png"


def _f(x: Any) -> str:
    return "n/a" if x is None else f"{x:.4g}" if isinstance(x, float) else str(x)


def _rerun(a: Mapping[str, Any], seeds: int) -> str:
    """What to run for ``seeds`` seeds per arm: the minimal ablation when there is one."""
    m = a.get("minimal")
    if m and m.get("command"):
        return f"run the ablation that settles it ({a['seeds_advised']} seeds per arm, its command below)"
    return (f"run both sides as an ablation with {seeds} seeds per arm (name the variable with `--variable KEY` and "
            "`ablate audit` writes it)")


def _variable(var: Mapping[str, Any]) -> str:
    if var.get("kind") == "data":
        named = (f" (named by config `{var['config_key']}`, the same on both sides)" if var.get("config_key") else
                 " (no config key names it)")
        return (f"the data version of `{var['key'].removeprefix('data:')}`{named}: {_f(var['a'])} in A, "
                f"{_f(var['b'])} in B, as recorded at each side's commit")
    if var.get("kind") == "code":
        return f"the code commit: {str(var['a'])[:12]} in A, {str(var['b'])[:12]} in B"
    return f"`{var['key']}`: {_f(var['a'])} in A, {_f(var['b'])} in B"


def _verdict_line(a: Mapping[str, Any], c: Mapping[str, Any], v: Mapping[str, Any]) -> str:
    """verdict.md's bottom line on the post-hoc values; on a confounded comparison in its confounded words (the
    difference cannot be credited to the variable: never an advice to adopt or reject)."""
    words = bottom_line_words(c, v, rerun=partial(_rerun, a), confounded=bool(a["confounds"]))
    return f"- Post-hoc verdict for B against A{' (confounded)' if a['confounds'] else ''}: {words} {c['reason']}"


def _bottom(a: Mapping[str, Any]) -> list[str]:
    var = a.get("variable")
    L = []
    if var is None:
        L.append(f"- No variable under test: the arms differ in {len(a['config_differences'])} config keys "
                 f"({', '.join(a['config_differences']) or 'none'}); name one with `--variable KEY`.")
    else:
        L.append(f"- Variable under test ({var['how']}): {_variable(var)}.")
    confounds = a["confounds"]
    if confounds:
        L.append(f"- **Confounded**: besides the variable, the arms differ in {len(confounds)} more thing(s); the "
                 "difference cannot be credited to the variable:")
        L += [f"  - {c['message']}" for c in confounds]
    else:
        L.append("- No confound found in what the runs recorded" + (" (see Missing context)" if a["missing"] else "")
                 + ".")
    if (a.get("merged") or {}).get("message"):
        L.append(f"- Runs: {a['merged']['message']}.")
    L += [f"- **Duplicate seed**: {d}." for d in a.get("duplicates", [])]
    st = a["statistics"]
    v = st.get("verdict")
    if v is None:
        L.append(f"- **Not enough runs**: {st['sample_size']['message']}.")
    else:
        c = v["comparisons"][0]  # in the words of verdict.md's bottom line and seed recommendation, from the same code
        L.append(_verdict_line(a, c, v))
        if c.get("seed_advice"):
            L.append(f"- Seeds: {seed_advice_text(c)}")
        for cc in (st.get("curves") or {}).get("comparisons") or []:  # the runs' logged series, where they exist
            L.append("- Curves (post hoc, B against A, simultaneous band): "
                     + (f"insufficient data: {cc['insufficient']}." if "insufficient" in cc else f"{cc['sentence']}."))
    m = a.get("minimal")
    if m and m.get("command"):
        L.append(f"- **The run that settles it** isolates `{m['isolates']}` at {m['pinned_to']}, "
                 f"{a['seeds_advised']} seeds per arm (enough for a firm verdict): `{m['command']}`")
    elif m:
        L.append(f"- **The runs that settle it**, by hand: {m['by_hand']}.")
    return L


def _values(a: Mapping[str, Any]) -> list[str]:
    arms = {x["role"]: x for x in a["arms"]}
    L = ["| arm | seed | run | value |", "|---|---|---|---|"]
    for role, vals in a["statistics"]["values"].items():
        for (label, x), run in zip(vals.items(), arms[role]["runs"], strict=False):
            L.append(f"| {arms[role]['name']} | {label} | {run} | {x:.6g} |")
    return L


def render(a: Mapping[str, Any]) -> str:
    """audit.md from the content of audit.json."""
    var = a.get("variable")
    arms = {x["role"]: x for x in a["arms"]}
    L = [f"# Audit of existing runs: {a['metric']} ({a['goal']}, {a['goal_how']}; reduced by {a['reduce']})", "",
         f"Post hoc: these runs were chosen after the fact from {', '.join(a['sources'])} records, not launched "
         "as an ablation; read the numbers as evidence to plan an ablation with, not as its verdict.", "",
         "## Bottom line", "", *_bottom(a)]
    L += ["", "## Arms", "", "| arm | role | runs | commit |", "|---|---|---|---|"]
    L += [f"| {x['name']} | {x['role']} | {x['n']} | {(x['commit'] or 'not recorded / several')[:12]} |"
          for x in a["arms"]]
    L += ["", "## Differences", ""]
    L += [f"- variable: `{var['key']}` ({var['how']})"] if var else []
    L += [f"- derived: `{d['key']}`: {_f(d['a'])} -> {_f(d['b'])} ({d['why']})" for d in a["derived"]]
    L += [f"- confound ({c['kind']}): {c['message']}" for c in a["confounds"]]
    L += [f"- within an arm: {w}" for w in a["within"]]
    if a.get("left_out"):
        L += ["", f"Left out ({len(a['left_out'])} runs: unfinished, failed, or trials ablate launched):", ""]
        L += [f"- {x}" for x in a["left_out"][:50]] + (["- ..."] if len(a["left_out"]) > 50 else [])
    L += ["", "## Missing context", ""]
    L += [f"- {x}" for x in [*a["missing"], *a.get("notes", []), *a["statistics"].get("notes", [])]] or [
        "- nothing: every field compared was recorded for every run"]
    L += ["", "## Statistics (post hoc)", ""]
    v = a["statistics"].get("verdict")
    if v is None:
        L.append(a["statistics"]["sample_size"]["message"] + ".")
    else:
        c = v["comparisons"][0]
        for arm in v["arms"]:
            L.append(f"- {arms['control' if arm['arm'] == 'control' else 'treatment']['name']}: n = {arm['n']}, "
                     f"mean {_f(arm.get('mean'))}, SD {_f(arm.get('sd'))}")
        L.append(f"- test: {c.get('test')}, p = {_f(c.get('pvalue'))}, effect size {_f(c.get('effect_size'))} "
                 f"({c.get('effect_size_name') or ''})")
    L += ["", "Per-run values:", "", *_values(a), ""]
    if a["statistics"].get("curves"):  # the curve verdict's section, from the same code as verdict.md's
        shown = {"curves": a["statistics"]["curves"],
                 "plots": {"curves": {"treatment": CURVE_PLOT} if CURVE_PLOT in a.get("plots", []) else {}}}
        L += [x.replace("## Curves", "## Curves (post hoc)", 1) if x == "## Curves" else x
              for x in curves_section(shown)]
    titles = {"curves.png": "Metric curves of the two sides", "values.png": "Per-run values"}
    L += [f"![{titles.get(p, p)}]({p})" for p in a.get("plots", []) if p != CURVE_PLOT]  # that one is in Curves
    m = a.get("minimal")
    if m and m.get("command"):
        L += ["", "## The minimal ablation", "", f"Written to `{m['config_dir']}` (task and variable `audit`). Run, "
              "as printed (each step in order; the team's work tree is left alone):", ""]
        L += ["    " + s + (" && \\" if i < len(m["steps"]) - 1 else "") for i, s in enumerate(m["steps"])] + [""]
    elif m:
        L += ["", "## The runs that settle it", "", m["by_hand"] + "."]
    return "\n".join(map(_one_line, L)) + "\n"


def _one_line(line: str) -> str:
    """One line of audit.md, whatever the records it quotes hold: a recorded value's line break is shown as
    ``\\n`` (``x\\n# a`` printed as it is made a heading of audit.md)."""
    return line.replace("\r", "\\r").replace("\n", "\\n")
