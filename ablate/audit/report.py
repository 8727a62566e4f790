"""audit.md: the audit for people (the bottom line first, then the differences, the statistics, what is missing,
and the one ablation that settles it). The verdict part is the verdict's own wording, from the same code
(:func:`ablate.judge.report.bottom_line_words`, :func:`ablate.judge.report.seed_advice_text`): an indicative
better/worse reads ``better (indicative)`` with the seeds that make it firm, as in verdict.md; the other sections
of :func:`ablate.judge.report.render_markdown` are not repeated (the numbers are in audit.json)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from ablate.judge.report import bottom_line_words, seed_advice_text


def _f(x: Any) -> str:
    return "n/a" if x is None else f"{x:.4g}" if isinstance(x, float) else str(x)


def _rerun(a: Mapping[str, Any], seeds: int) -> str:
    """What to run for ``seeds`` seeds per arm: the minimal ablation when there is one."""
    m = a.get("minimal")
    if m:
        return f"run the ablation that settles it ({a['seeds_advised']} seeds per arm, its command below)"
    return (f"run both sides as an ablation with {seeds} seeds per arm (name the variable with `--variable KEY` and "
            "`ablate audit` writes it)")


def render(a: Mapping[str, Any]) -> str:
    """audit.md from the content of audit.json."""
    var = a.get("variable")
    arms = {x["role"]: x for x in a["arms"]}
    L = [f"# Audit of existing runs: {a['metric']} ({a['goal']}, {a['goal_how']}; reduced by {a['reduce']})", "",
         f"Post hoc: these runs were chosen after the fact from {', '.join(a['sources'])} records, not launched "
         "as an ablation; read the numbers as evidence to plan an ablation with, not as its verdict.", "",
         "## Bottom line", ""]
    confounds = a["confounds"]
    if var is None:
        L.append(f"- No variable under test: the arms differ in {len(a['config_differences'])} config keys "
                 f"({', '.join(a['config_differences']) or 'none'}); name one with `--variable KEY`.")
    else:
        L.append(f"- Variable under test ({var['how']}): `{var['key']}`: {_f(var['a'])} in A, {_f(var['b'])} in B.")
    if confounds:
        L.append(f"- **Confounded**: besides the variable, the arms differ in {len(confounds)} more thing(s); the "
                 "difference cannot be credited to the variable:")
        L += [f"  - {c['message']}" for c in confounds]
    else:
        L.append("- No confound found in what the runs recorded" + (" (see Missing context)" if a["missing"] else "")
                 + ".")
    st = a["statistics"]
    v = st.get("verdict")
    if v is None:
        L.append(f"- **Not enough runs**: {st['sample_size']['message']}.")
    else:
        c = v["comparisons"][0]  # in the words of verdict.md's bottom line and seed recommendation, from the same code
        L.append(f"- Post-hoc verdict for B against A: {bottom_line_words(c, v, rerun=partial(_rerun, a))} "
                 f"{c['reason']}")
        if c.get("seed_advice"):
            L.append(f"- Seeds: {seed_advice_text(c)}")
    m = a.get("minimal")
    if m:
        L.append(f"- **The run that settles it** isolates `{m['isolates']}` at {m['pinned_to']}, "
                 f"{a['seeds_advised']} seeds per arm: `{m['command']}`")
    L += ["", "## Arms", "", "| arm | role | runs | commit |", "|---|---|---|---|"]
    L += [f"| {x['name']} | {x['role']} | {x['n']} | {(x['commit'] or 'not recorded / several')[:12]} |"
          for x in a["arms"]]
    L += ["", "## Differences", ""]
    L += [f"- variable: `{var['key']}` ({var['how']})"] if var else []
    L += [f"- derived: `{d['key']}`: {d['a']} -> {d['b']} ({d['why']})" for d in a["derived"]]
    L += [f"- confound ({c['kind']}): {c['message']}" for c in confounds]
    L += [f"- within an arm: {w}" for w in a["within"]]
    if a.get("left_out"):
        L += ["", f"Left out ({len(a['left_out'])} runs that did not finish): " + "; ".join(a["left_out"][:20])
              + (" ..." if len(a["left_out"]) > 20 else "")]
    L += ["", "## Missing context", ""]
    L += [f"- {x}" for x in a["missing"]] or ["- nothing: every field compared was recorded for every run"]
    L += ["", "## Statistics (post hoc)", ""]
    if v is None:
        L.append(st["sample_size"]["message"] + ".")
    else:
        c = v["comparisons"][0]
        for arm in v["arms"]:
            L.append(f"- {arms['control' if arm['arm'] == 'control' else 'treatment']['name']}: n = {arm['n']}, "
                     f"mean {_f(arm.get('mean'))}, SD {_f(arm.get('sd'))}")
        L.append(f"- test: {c.get('test')}, p = {_f(c.get('pvalue'))}, effect size {_f(c.get('effect_size'))} "
                 f"({c.get('effect_size_name') or ''})")
    L += ["", "Per-run values:", ""]
    for role, vals in st["values"].items():
        L.append(f"- {arms[role]['name']}: " + ", ".join(f"seed {s}: {x:.6g}" for s, x in vals.items()))
    if m:
        L += ["", "## The minimal ablation", "", f"Written to `{m['config_dir']}` (task and variable `audit`). Run:",
              "", f"    {m['command']}", ""]
    return "\n".join(L) + "\n"
