"""The ablation table a paper prints: one row per arm, in markdown (verdict.md), LaTeX and CSV.

Each row holds, per metric column, the mean ± the half-width of its t confidence interval (level
stated) and Δ = treatment − control in metric units with its CI. The primary metric (``task.metric``)
decides: its Δ and CI are the verdict's own numbers (verdict.json ``comparisons``, turned back from
sign-normalised to raw treatment − control), and its row carries the verdict as a marker whose legend
is in the caption. Further metrics (``metrics=[val_acc,val_loss]``) are descriptive: their Δ CIs come
from ``scipy.stats.ttest_rel`` (paired by seed) or Welch's ``scipy.stats.ttest_ind``, at the same
level as the primary comparison, and decide nothing.

The control is first. The best arm (by the primary metric's mean, in the goal's direction) is in bold
only when it is a treatment whose verdict is ``better``.

:func:`build_table` is pure; :func:`write_tables` writes ``ablation_table.tex``,
``ablation_table.csv`` and the forest plot ``verdict_forest.png`` into the sweep dir.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ablate.judge.curves_report import curve_cell_text, curve_column
from ablate.judge.forest import forest_plot
from ablate.plan.arms import format_value
from ablate.record.sweepdir import write_atomic
from ablate.stats import summarize
from ablate.stats.compare import level_text

TEX_FILE = "ablation_table.tex"
CSV_FILE = "ablation_table.csv"
FOREST_FILE = "verdict_forest.png"
#: Verdict word -> (markdown marker, LaTeX marker).
MARKERS = {
    "better": ("↑", r"$\uparrow$"),
    "worse": ("↓", r"$\downarrow$"),
    "equivalent": ("≈", r"$\approx$"),
    "inconclusive": ("○", r"$\circ$"),
    "insufficient data": ("–", "--"),
}
LEGEND = ("↑ better, ↓ worse, ≈ equivalent (within the margin), ○ inconclusive, – insufficient data; (indicative): "
          "a better/worse that is a lead, not yet firm")
LEGEND_TEX = (r"$\uparrow$ better, $\downarrow$ worse, $\approx$ equivalent (within the margin), "
              r"$\circ$ inconclusive, -- insufficient data; (indicative): a better/worse that is a lead, not yet firm")


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _metric_values(rows: Sequence[Mapping[str, Any]], metric: str) -> dict[str, dict[int, float]]:
    """arm -> seed -> value of ``metric`` for the trials with status ``ok`` and a finite value."""
    out: dict[str, dict[int, float]] = {}
    for r in rows:
        v = r.get(metric)
        if r.get("status") == "ok" and _finite(v):
            out.setdefault(str(r["arm"]), {})[int(r["seed"])] = float(v)
    return out


def _delta_ci(t: dict[int, float], c: dict[int, float], paired: bool, level: float
              ) -> tuple[float | None, tuple[float, float] | None]:
    """Δ = mean(t) − mean(c) and its CI: paired t over shared seeds, else Welch's t (scipy)."""
    from scipy import stats  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    if paired:
        seeds = sorted(set(t) & set(c))
        if len(seeds) < 2:
            return None, None
        a, b = [t[s] for s in seeds], [c[s] for s in seeds]
        res = stats.ttest_rel(a, b)
    else:
        a, b = list(t.values()), list(c.values())
        if len(a) < 2 or len(b) < 2:
            return None, None
        res = stats.ttest_ind(a, b, equal_var=False)
    delta = float(sum(a) / len(a) - sum(b) / len(b))
    ci = res.confidence_interval(confidence_level=level)
    lo, hi = float(ci.low), float(ci.high)
    return delta, ((lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None)


def build_table(verdict: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
                metrics: Sequence[str] | None = None) -> dict[str, Any]:
    """The ablation table's numbers.

    Parameters
    ----------
    verdict : mapping
        The verdict (:func:`ablate.judge.verdict.analyse`): ``metric``, ``goal``, ``arms``, ``comparisons``.
    rows : sequence of mapping
        The trial rows (:func:`ablate.record.results.collect`): ``arm``, ``seed``, ``status`` and metric values.
    metrics : sequence of str, optional
        The metric columns; the primary ``verdict["metric"]`` is always first. Default: the primary only.

    Returns
    -------
    dict
        ``primary``, ``goal``, ``metrics``, ``mean_ci_level`` (0.95), ``missing_metrics`` (asked for, returned by
        no completed trial), ``rows``: one per arm, control first, each
        ``{arm, variable, value, verdict, marker, bold, indicative, firm, cells: {metric: {n, mean, ci, delta, delta_ci,
        delta_ci_level}}}``; ``delta``/``delta_ci`` are raw treatment − control in metric units (None for
        the control). Primary cells repeat the verdict's numbers; the others are descriptive.

    Notes
    -----
    Mean CI: ``scipy.stats.t.interval`` (:func:`ablate.stats.summarize`). Descriptive Δ CIs:
    ``scipy.stats.ttest_rel(...).confidence_interval`` when the primary comparison is paired, else
    ``scipy.stats.ttest_ind(..., equal_var=False).confidence_interval`` (Welch).
    """
    primary, goal = verdict["metric"], verdict.get("goal", "maximize")
    cols = list(dict.fromkeys([primary, *(metrics or [])]))
    comps = {c["arm"]: c for c in verdict.get("comparisons") or []}
    arms = verdict["arms"]
    control = arms[0]["arm"] if arms else None
    values = {m: _metric_values(rows, m) for m in cols}
    out_rows: list[dict[str, Any]] = []
    for a in arms:
        name = a["arm"]
        c = comps.get(name)
        row: dict[str, Any] = {"arm": name, "variable": (c or {}).get("variable"), "value": a.get("value"),
                               "verdict": None if c is None else c.get("verdict"), "bold": False, "cells": {}}
        row["marker"] = MARKERS.get(row["verdict"], ("", ""))[0] if c is not None else ""
        row["indicative"] = c is not None and c.get("firm") is False  # as the bottom line labels it
        row["firm"] = None if c is None else c.get("firm")  # verdict.json's: None unless better/worse
        level = float(c["ci_level"]) if c and c.get("ci_level") else None
        for m in cols:
            if m == primary:
                cell = {"n": a.get("n"), "mean": a.get("mean"), "ci": a.get("ci"), "delta": None, "delta_ci": None,
                        "delta_ci_level": level}
                if c is not None and c.get("diff") is not None:
                    sign = 1.0 if goal == "maximize" else -1.0
                    cell["delta"] = sign * c["diff"]
                    ci = c.get("ci")
                    cell["delta_ci"] = None if not ci or ci[0] is None else sorted([sign * ci[0], sign * ci[1]])
            else:
                vals = values[m].get(name, {})
                seeds = sorted(vals)
                s = summarize([vals[k] for k in seeds], seeds=seeds) if seeds else None
                cell = {"n": len(seeds), "mean": s.mean if s else None,
                        "ci": list(s.ci) if s and s.ci else None, "delta": None, "delta_ci": None,
                        "delta_ci_level": level}
                if c is not None and control is not None and level is not None:
                    d, ci2 = _delta_ci(vals, values[m].get(control, {}), bool(c.get("paired")), level)
                    cell["delta"], cell["delta_ci"] = d, (list(ci2) if ci2 else None)
            row["cells"][m] = cell
        out_rows.append(row)
    means = [(r["cells"][primary]["mean"], i) for i, r in enumerate(out_rows) if _finite(r["cells"][primary]["mean"])]
    if means:
        _, best = (max if goal == "maximize" else min)(means)
        if out_rows[best]["verdict"] == "better":
            out_rows[best]["bold"] = True
    missing = [m for m in cols[1:] if not values[m]]  # asked for, returned by no completed trial
    return {"primary": primary, "goal": goal, "metrics": cols, "mean_ci_level": 0.95, "rows": out_rows,
            "missing_metrics": missing, **({"curve": curve} if (curve := curve_column(verdict)) else {}),
            "delta_ci_levels": sorted({r["cells"][primary]["delta_ci_level"] for r in out_rows
                                       if r["cells"][primary]["delta_ci_level"] is not None})}


# -- formatting ----------------------------------------------------------------------------------------
def decimals(table: Mapping[str, Any], metric: str) -> int:
    """Decimals that resolve a metric's CIs: two significant digits of the smallest CI half-width."""
    halves = []
    for r in table["rows"]:
        ci = r["cells"][metric].get("ci")
        if ci and _finite(ci[0]) and _finite(ci[1]) and ci[1] > ci[0]:
            halves.append((ci[1] - ci[0]) / 2)
    if not halves:
        return 4
    return int(min(6, max(0, -math.floor(math.log10(min(halves))) + 1)))


def _fmt(x: Any, dec: int, signed: bool = False) -> str:
    if not _finite(x):
        return "–"
    if signed:
        s = f"{x:+.{dec}f}"
        return "+" + s[1:] if float(s) == 0 else s  # no "-0.000"
    return f"{x:.{dec}f}"


def _mean_text(cell: Mapping[str, Any], dec: int, pm: str) -> str:
    if not _finite(cell.get("mean")):
        return "–"
    ci = cell.get("ci")
    if not ci or not _finite(ci[0]):
        return _fmt(cell["mean"], dec)
    return f"{_fmt(cell['mean'], dec)}{pm}{_fmt((ci[1] - ci[0]) / 2, dec)}"


def _delta_text(cell: Mapping[str, Any], dec: int) -> str:
    if not _finite(cell.get("delta")):
        return "–"
    ci = cell.get("delta_ci")
    ci_s = f" [{_fmt(ci[0], dec, True)}, {_fmt(ci[1], dec, True)}]" if ci else ""
    return f"{_fmt(cell['delta'], dec, True)}{ci_s}"


def _level_text(table: Mapping[str, Any]) -> str:
    """The CI levels of the Δ column as verdict.md's other lines write them (``97.5%``, ``98.33%``)."""
    levels = table.get("delta_ci_levels") or []
    if len(levels) == 1:
        return level_text(levels[0])
    if not levels:
        return "–"
    return f"{level_text(min(levels))}–{level_text(max(levels))}"


def caption(table: Mapping[str, Any], verdict: Mapping[str, Any]) -> str:
    """The table's caption in plain text: what the cells are, the CI levels, the legend."""
    seeds = len(verdict.get("seeds") or [])
    desc = [m for m in table["metrics"] if m != table["primary"]]
    return (f"Ablation of {_what(verdict)}, {seeds} seeds per arm. Cells: mean ± half-width of the "
            f"{table['mean_ci_level']:.0%} t-interval; Δ = treatment − control in metric units with its "
            f"{_level_text(table)} CI (the level each verdict was decided at, as in the verdict). "
            f"{table['primary']} ({'lower' if table['goal'] == 'minimize' else 'higher'} is better) decides the verdict"
            + (f"; {', '.join(desc)} {'is' if len(desc) == 1 else 'are'} descriptive" if desc else "")
            + f". Verdict: {LEGEND}. Bold: the best arm, shown only when its verdict is better."
            + (f" {table['curve']['header'].removesuffix(' [CI]')}: the curve verdict's summary (curve.summary), "
               "with its CI at the band's simultaneous level (see Curves)." if table.get("curve") else ""))


def _what(verdict: Mapping[str, Any]) -> str:
    suite = verdict.get("suite")
    if suite:
        return "a suite of " + ", ".join(v["key"] for v in suite["variables"]) + " against one control"
    return str((verdict.get("variable") or {}).get("key", "the variable"))


def _label(row: Mapping[str, Any]) -> str:
    if row["verdict"] is None:
        if row.get("value") is None or isinstance(row["value"], Mapping):  # a suite's control: one value per key
            return "control"
        return f"control ({format_value(row['value'])})"
    return str(row["arm"])


def markdown(table: Mapping[str, Any], verdict: Mapping[str, Any]) -> list[str]:
    """verdict.md lines: the ablation table with its caption."""
    suite = bool(verdict.get("suite"))
    ms = table["metrics"]
    decs = {m: decimals(table, m) for m in ms}
    head = ["arm", *(["variable"] if suite else [])]
    for m in ms:
        head += [f"{m} ({table['mean_ci_level']:.0%} CI)", f"Δ {m} [CI]"]
        if m == table["primary"]:
            head.append("verdict")
    curve = table.get("curve")
    if curve:  # curve.summary: the curve verdict's chosen summary, with its simultaneous CI
        head.append(curve["header"])
    L = ["## Ablation table", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table["rows"]:
        cells = [_label(r), *([r.get("variable") or "–"] if suite else [])]
        for m in ms:
            c = r["cells"][m]
            cells += [_mean_text(c, decs[m], " ± "), _delta_text(c, decs[m])]
            if m == table["primary"]:
                cells.append(f"{r['marker']} {r['verdict']}{' (indicative)' if r.get('indicative') else ''}"
                             if r["verdict"] else "")
        if curve:
            cells.append(curve_cell_text(curve["cells"].get(r["arm"]), decs[table["primary"]]) if r["verdict"] else "")
        if r["bold"]:
            cells = [f"**{x}**" if x not in ("", "–") else x for x in cells]
        L.append("| " + " | ".join(cells) + " |")
    if table.get("missing_metrics"):
        L += ["", f"No completed trial returned {', '.join(table['missing_metrics'])}: check `metrics=` against the "
              "keys the task returns (results.csv lists them)."]
    L += ["", caption(table, verdict), "",
          f"Also written as LaTeX (`{TEX_FILE}`, booktabs) and CSV (`{CSV_FILE}`).", ""]
    return L


_TEX_ESCAPE = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
               "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex_escape(text: str) -> str:
    """Escape LaTeX's special characters in plain text."""
    return "".join(_TEX_ESCAPE.get(ch, ch) for ch in text)


def _tex_num(text: str) -> str:
    return text.replace("–", "--").replace("−", "-")


def latex(table: Mapping[str, Any], verdict: Mapping[str, Any], *, label: str = "tab:ablation") -> str:
    """The table as a LaTeX ``table`` float with booktabs rules (needs ``\\usepackage{booktabs}``)."""
    suite = bool(verdict.get("suite"))
    ms = table["metrics"]
    decs = {m: decimals(table, m) for m in ms}
    spec = "l" + ("l" if suite else "")
    head = ["Arm", *(["Variable"] if suite else [])]
    for m in ms:
        spec += "rr" + ("c" if m == table["primary"] else "")
        head += [tex_escape(m), r"$\Delta$ " + tex_escape(m)]
        if m == table["primary"]:
            head.append("Verdict")
    curve = table.get("curve")
    if curve:
        spec += "r"
        head.append(tex_escape(curve["header"]).replace("Δ", r"$\Delta$"))
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(head) + r" \\", r"\midrule"]
    for i, r in enumerate(table["rows"]):
        cells = [tex_escape(_label(r)), *([tex_escape(r.get("variable") or "--")] if suite else [])]
        for m in ms:
            c = r["cells"][m]
            cells += [_tex_num(_mean_text(c, decs[m], r" $\pm$ ")), _tex_num(_delta_text(c, decs[m]))]
            if m == table["primary"]:
                cells.append(MARKERS.get(r["verdict"], ("", ""))[1] + (" (indicative)" if r.get("indicative") else "")
                             if r["verdict"] else "")
        if curve:
            cells.append(_tex_num(curve_cell_text(curve["cells"].get(r["arm"]), decs[table["primary"]]))
                         if r["verdict"] else "")
        if r["bold"]:
            cells = [rf"\textbf{{{x}}}" if x and x != "--" else x for x in cells]
        lines.append(" & ".join(cells) + r" \\")
        if i == 0 and len(table["rows"]) > 1:
            lines.append(r"\midrule")
    cap = tex_escape(caption(table, verdict).replace(f"Verdict: {LEGEND}.", "@@LEGEND@@"))
    cap = cap.replace("±", r"$\pm$").replace("Δ", r"$\Delta$").replace("−", "$-$").replace("@@LEGEND@@",
                                                                                        f"Verdict: {LEGEND_TEX}.")
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{cap}}}", rf"\label{{{label}}}", r"\end{table}", ""]
    return "\n".join(lines)


CSV_COLUMNS = ["arm", "variable", "value", "metric", "role", "n", "mean", "ci_low", "ci_high", "ci_level", "delta",
               "delta_ci_low", "delta_ci_high", "delta_ci_level", "verdict", "firm", "bold"]


def to_csv(table: Mapping[str, Any]) -> str:
    """The table in long form: one line per arm and metric, full precision, the columns of ``CSV_COLUMNS``.

    ``firm`` is verdict.json's ``firm``: ``true`` / ``false`` (indicative) for a better/worse verdict, empty for the
    other verdicts and the control.
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in table["rows"]:
        for m in table["metrics"]:
            c = r["cells"][m]
            ci, dci = c.get("ci") or [None, None], c.get("delta_ci") or [None, None]
            w.writerow([r["arm"], r.get("variable") or "", format_value(r.get("value")), m,
                        "primary" if m == table["primary"] else "descriptive", c.get("n"),
                        *("" if x is None else repr(float(x)) for x in (c.get("mean"), ci[0], ci[1])),
                        table["mean_ci_level"],
                        *("" if x is None else repr(float(x)) for x in (c.get("delta"), dci[0], dci[1])),
                        "" if c.get("delta_ci_level") is None else c["delta_ci_level"],
                        r.get("verdict") or "", "" if r.get("firm") is None else str(bool(r["firm"])).lower(),
                        str(bool(r["bold"])).lower()])
        cell = (table.get("curve") or {}).get("cells", {}).get(r["arm"])
        if cell:  # the curve column: its summary's Δ with the simultaneous CI, the band's reading as the verdict
            dci = cell.get("ci") or [None, None]
            w.writerow([r["arm"], r.get("variable") or "", format_value(r.get("value")),
                        f"{table['primary']}:curve:{table['curve']['summary']}", "curve", "", "", "", "", "",
                        *("" if x is None else repr(float(x)) for x in (cell.get("delta"), dci[0], dci[1])),
                        "" if cell.get("level") is None else cell["level"], cell.get("word") or "", "", "false"])
    return buf.getvalue()


def write_tables(sd: Any, plan: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], verdict: dict[str, Any]
                 ) -> dict[str, Any]:
    """Build the table into ``verdict["table"]`` and write ``ablation_table.tex`` and ``ablation_table.csv``
    beside verdict.md (the forest plot: :func:`write_forest`, drawn after the text).

    Parameters
    ----------
    sd : SweepDir
    plan : mapping
        The plan record; ``options.metrics`` names the columns.
    rows : sequence of mapping
        The trial rows (:func:`ablate.record.results.collect`).
    verdict : dict
        The verdict being written; ``table`` is added to it.

    Returns
    -------
    dict
        The table (as stored in ``verdict["table"]``).
    """
    metrics = (plan.get("options") or {}).get("metrics") or None
    table = build_table(verdict, rows, metrics)
    verdict["table"] = table
    write_atomic(sd.root / TEX_FILE, latex(table, verdict))
    write_atomic(sd.root / CSV_FILE, to_csv(table))
    return table


def write_forest(sd: Any, verdict: dict[str, Any]) -> None:
    """Draw the forest plot ``verdict_forest.png`` of ``verdict["table"]`` beside verdict.md and name it in
    ``verdict["plots"]["forest"]``; a failure is recorded in ``verdict["plots"]["forest_error"]`` instead
    (it never costs the verdict)."""
    try:
        png = forest_plot(verdict)
        if png is not None:
            write_atomic(sd.root / FOREST_FILE, png)
            verdict.setdefault("plots", {})["forest"] = FOREST_FILE
    except Exception as exc:  # a plotting failure must not cost the verdict
        verdict.setdefault("plots", {})["forest_error"] = f"{type(exc).__name__}: {exc}"
