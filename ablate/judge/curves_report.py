"""verdict.md's "Curves" section and the curve plots (one PNG per treatment), from verdict.json's ``curves``.

:func:`curves_section` is the whole section (``report.py`` calls it once); :class:`CurveFigure` draws one
treatment at a time: both arms' mean curves with their pointwise 95% bands above, the difference with its simultaneous
band below, the regions where the band excludes 0 shaded. matplotlib is imported here only, on the Agg canvas
without pyplot.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

#: Shading per region word.
REGION_COLORS = {"better": "#1a7f37", "worse": "#cf222e"}
#: How each summary is named in the table.
SUMMARY_NAMES = {"auc": "area (normalised)", "time_to": "time to threshold", "final": "final value"}


def _n(v: Any, dec: int = 4) -> str:
    if not isinstance(v, int | float):
        return "–"
    return f"{v:+.{dec}g}" if dec else f"{v:g}"


def _summary_cell(s: Mapping[str, Any] | None) -> str:
    if not s:
        return "–"
    cell = f"{_n(s['diff'])} [{_n(s['ci'][0])}, {_n(s['ci'][1])}] {s['word']}"
    if "verdict" in s:
        cell += f" (final verdict: {s['verdict']})"
    if "reached" in s:
        cell += f" (reached by {s['reached'][0]} / {s['reached'][1]} seeds)"
    return cell


def curves_section(v: Mapping[str, Any]) -> list[str]:
    """The "Curves" section of verdict.md (no lines when the ablation did not ask for curves)."""
    cv = v.get("curves")
    if not cv:
        return []
    x, metric = cv["x"], cv["metric"]
    thr = cv.get("threshold")
    L = ["## Curves", "",
         f"`{metric}` against `{x}` ({cv['goal']}): treatment − control at every grid point, with a band that holds "
         f"**simultaneously** over every grid point and the summaries of a treatment (level 1 − α/m: α = "
         f"{cv['alpha']:g} over the m treatments). Method: {cv['method']}.", "",
         *_asked_lines(cv),
         f"| treatment | where (simultaneous band) | {SUMMARY_NAMES['auc']} Δ [CI] | "
         + (f"time to {thr:g} Δ [CI] | " if thr is not None else "")
         + "final value Δ [CI] | points an uncorrected t-test marks | Bonferroni marks |",
         "|---|---|---|" + ("---|" if thr is not None else "") + "---|---|---|"]
    for c in cv["comparisons"]:
        if "insufficient" in c:
            L.append(f"| {c['arm']} | insufficient data: {c['insufficient']} |" + " – |" * (4 + (thr is not None)))
            continue
        s = c["summaries"]
        g = c["grid"]["points"]
        L.append(f"| {c['arm']} | {c['sentence']} | {_summary_cell(s.get('auc'))} | "
                 + (f"{_summary_cell(s.get('time_to'))} | " if thr is not None else "")
                 + f"{_summary_cell(s.get('final'))} | {c['pointwise_marked']} of {g} | {c['bonferroni_marked']} of "
                 f"{g} |")
    L += ["", "Δ in metric units (time to threshold: in x units), raw sign (treatment − control); each CI uses the "
          "band's critical value. The final value's Δ is the final verdict's own; its verdict word stays the final "
          "verdict's. The uncorrected count is the pointwise approach of Colas et al. (2019): with many points it "
          "marks some under no difference at all.", ""]
    for c in cv["comparisons"]:
        L += _comparison_lines(c, v, x)
    L += ["Rules: " + "; ".join(f"{k.replace('_', ' ')}: {r}" for k, r in cv["rules"].items()) + ".", ""]
    if cv.get("trial_errors"):
        errs = cv["trial_errors"]
        shown = "; ".join(f"{k}: {e}" for k, e in list(errs.items())[:5])
        L += [f"Trials without a curve ({len(errs)}): {shown}" + (" ..." if len(errs) > 5 else ""), ""]
    return L


def _asked_lines(cv: Mapping[str, Any]) -> list[str]:
    """Where the curves came from, when any came from elsewhere than the trials' curve.json: asked for after the
    run (``ablate verdict DIR --curve``), each trial's series read again from what it left."""
    if cv.get("asked") == "by the audit":  # runs ablate did not launch (ablate audit): sources are the sides
        got = cv.get("sources") or {}
        return [f"The runs' own logged series against the step (runs with one: A {got.get('A', 0)}, B "
                f"{got.get('B', 0)}), compared post hoc as a curve verdict compares an ablation's trials; the "
                "treatment is side B, the control side A.", ""]
    src = {k: n for k, n in (cv.get("sources") or {}).items() if k != "curve.json"}
    if cv.get("asked") != "after the run" and not src:
        return []
    read = ", ".join(f"{n} from {_SOURCE_NAMES.get(k, k)}" for k, n in (cv.get("sources") or {}).items())
    return [("Curves asked for after the run (`ablate verdict --curve`), not by the ablation: a post-hoc "
             "description beside the final verdict. " if cv.get("asked") == "after the run" else "")
            + f"Each trial's series as it recorded it: {read or 'none'}.", ""]


#: How verdict.md names where a trial's curve was read from.
_SOURCE_NAMES = {"curve.json": "curve.json", "log_step": "ablate.log_step (steps.jsonl)", "csv": "a CSV log",
                 "tensorboard": "TensorBoard events", "json": "a JSON/JSONL log",
                 "stdout": "printed lines (stdout.log)", "stderr": "printed lines (stderr.log)",
                 "file": "the metrics file"}


def _comparison_lines(c: Mapping[str, Any], v: Mapping[str, Any], x: str) -> list[str]:
    """One treatment's plot, grid and seed advice."""
    if "insufficient" in c:
        return []
    L = [f"**{c['arm']}** vs control: {c['sentence']}."]
    png = ((v.get("plots") or {}).get("curves") or {}).get(c["arm"])
    g = c["grid"]
    how = ("the steps every seed logged" + (" (subsampled evenly)" if g["subsampled"] else "")
           if g["rule"] == "shared" else "a regular grid, each seed linearly interpolated")
    L += [f"Grid: {g['points']} points, {x} {g['range'][0]:g} to {g['range'][1]:g} ({how}; the seeds' curves "
          f"span {g['full_range'][0]:g} to {g['full_range'][1]:g}, {g['ends_first']} ends first)"
          + (f"; {g['restarts']} re-logged steps (restarts) kept their last value" if g["restarts"] else "")
          + (f"; {g['dropped_points']} NaN/inf points dropped" if g["dropped_points"] else "") + ". "
          f"{'Paired by seed (sign flips)' if c['paired'] else 'Unpaired (relabelling seeds between arms)'}, "
          f"N = {c['n'][0]} / {c['n'][1]}, critical |t| = {c['critical']:.3g} at {c['level']:.4g} from "
          f"{c['n_permutations']} permutations{' (all of them)' if c['exact'] else ''}."]
    if c["min_p"] > 1 - c["level"]:
        L.append(f"With these seeds no region can be declared: the smallest family-wise p the permutations reach is "
                 f"{c['min_p']:.3g}, above {1 - c['level']:.3g}.")
    if c.get("seed_advice"):
        L.append(f"Seeds: {c['seed_advice']['message']}.")
    L.append("")
    if png:
        L += [f"![{c['arm']} vs control: mean curves with pointwise 95% bands; below, the difference with its "
              f"simultaneous band, regions where it excludes 0 shaded]({png})", ""]
    return L


class CurveFigure:
    """The curve plot's figure, drawn once per treatment (see the module docstring): built once, then each
    treatment's data put into the same artists (lines' data, the bands and shading replaced, the limits, the
    legend's and title's text) before its PNG is written.

    Reusing the figure keeps its axes and their tick objects, which a new figure creates again; the title's
    position and the legend's place are set, not searched for (matplotlib measures every tick label for an
    automatic title position, and every line point for ``loc="best"``): together most of a plot's drawing time
    besides the glyphs and the PNG's compression (benchmarks/curve_speed.py).
    """

    def __init__(self, cv: Mapping[str, Any]) -> None:
        # lazy: matplotlib (about 0.5 s to import) only where a plot is drawn, on the Agg canvas without pyplot
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415  # lazy: as said above
        from matplotlib.figure import Figure  # noqa: PLC0415  # lazy: matplotlib only when plots are drawn

        self.fig = fig = Figure(figsize=(7.0, 5.6), dpi=90)
        FigureCanvasAgg(fig)
        self.top, self.bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
        self.lines = {key: self.top.plot([], [], color=color, linewidth=1.6)[0]
                      for key, color in (("mean_control", CONTROL_COLOR), ("mean_treatment", TREATMENT_COLOR))}
        self.diff = self.bottom.plot([], [], color=DIFF_COLOR, linewidth=1.6)[0]
        self.bottom.axhline(0.0, color="black", linewidth=0.8, linestyle="--")
        self.top.set_ylabel(f"{cv['metric']} (pointwise 95% CI)")
        self.bottom.set_xlabel(cv["x"])
        # rising curves (accuracy) leave the lower right empty, falling ones (loss) the upper right
        self.legend = self.top.legend(list(self.lines.values()), ["control", "treatment"], fontsize=8,
                                      frameon=False, loc="lower right" if cv["goal"] == "maximize" else "upper right")
        self.direction = "higher is better" if cv["goal"] == "maximize" else "lower is better"
        self.title = self.top.set_title("", fontsize=9, y=1.0)  # y given: no search for a free position
        self.ylabel = self.bottom.set_ylabel("", fontsize=9)
        self.filled: list[Any] = []
        fig.subplots_adjust(left=0.13, right=0.97, top=0.94, bottom=0.09, hspace=0.08)

    def draw(self, c: Mapping[str, Any]) -> bytes:
        """One treatment's plot as PNG bytes."""
        for art in self.filled:  # the previous treatment's bands and shading
            art.remove()
        x = c["x"]
        top, bottom = self.top, self.bottom
        self.filled = []
        for key, ci, color in (("mean_control", "ci_control", CONTROL_COLOR),
                               ("mean_treatment", "ci_treatment", TREATMENT_COLOR)):
            self.lines[key].set_data(x, c[key])
            self.filled.append(top.fill_between(x, c[ci][0], c[ci][1], color=color, alpha=0.2, linewidth=0))
        self.diff.set_data(x, c["diff"])
        self.filled.append(bottom.fill_between(x, c["low"], c["high"], color=DIFF_COLOR, alpha=0.25, linewidth=0))
        self.filled += _shade(top, c["regions"]) + _shade(bottom, c["regions"])
        top.set_xlim(*_padded([x[0], x[-1]]))
        top.set_ylim(*_padded([*c["mean_control"], *c["mean_treatment"], *c["ci_control"][0], *c["ci_control"][1],
                               *c["ci_treatment"][0], *c["ci_treatment"][1]]))
        bottom.set_ylim(*_padded([0.0, *c["low"], *c["high"], *c["diff"]]))
        texts = self.legend.get_texts()
        texts[0].set_text(f"control (mean, N = {c['n'][1]})")
        texts[1].set_text(f"{c['arm']} (mean, N = {c['n'][0]})")
        self.ylabel.set_text(f"Δ, simultaneous {c['level']:.1%} band")
        # the title stays short (its glyphs are most of a plot's drawing time); the sentence is in verdict.md
        self.title.set_text(f"{c['arm']} vs control ({self.direction}); shaded: where the band excludes 0")
        buf = io.BytesIO()
        # zlib level 1: a quarter of the drawing time went to PNG compression at the default level 6; 8% larger
        self.fig.savefig(buf, format="png", pil_kwargs={"compress_level": 1})
        return buf.getvalue()


#: The plot's colours: the control's mean, the treatment's, the difference.
CONTROL_COLOR, TREATMENT_COLOR, DIFF_COLOR = "#57606a", "#0969da", "#8250df"


def _padded(values: Sequence[float]) -> tuple[float, float]:
    """The axis limits matplotlib's autoscaling gives ``values`` (5% margins; a flat range widened), non-finite
    values left out."""
    finite = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    pad = 0.05 * (hi - lo) if hi > lo else (0.05 * abs(lo) or 0.05)
    return lo - pad, hi + pad


def _shade(ax: Any, regions: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Shade the better (worse) regions, one collection per word (many patches were most of the drawing time);
    returns the collections."""
    out = []
    for word, color in REGION_COLORS.items():
        spans = [(r["from"], r["to"]) for r in regions if r["word"] == word]
        if not spans:
            continue
        xs = [v for a, b in spans for v in (a, b, b)]
        inside = [v for _ in spans for v in (True, True, False)]
        out.append(ax.fill_between(xs, 0, 1, where=inside, color=color, alpha=0.12, linewidth=0, step="post",
                                   transform=ax.get_xaxis_transform()))
    return out


def curve_plots(verdict: Mapping[str, Any]) -> dict[str, bytes]:
    """Treatment arm -> its curve plot as PNG bytes (none without curves, or for a treatment without a band), all
    drawn on one :class:`CurveFigure`."""
    cv = verdict.get("curves")
    out: dict[str, bytes] = {}
    fig = None
    for c in (cv or {}).get("comparisons") or []:
        if "insufficient" in c:
            continue
        fig = fig or CurveFigure(cv)  # type: ignore[arg-type]
        out[str(c["arm"])] = fig.draw(c)
    return out


def curve_column(verdict: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ablation table's and forest plot's curve column: per treatment, the chosen summary's Δ (raw, metric
    units; x units for ``time_to``) with its simultaneous CI and reading (None without curves).

    Returns
    -------
    dict or None
        ``{"summary", "header", "level", "cells": {arm: {"delta", "ci", "word", "level"}}}``.
    """
    cv = verdict.get("curves")
    if not cv:
        return None
    name = str(cv.get("summary") or "final")
    thr = cv.get("threshold")
    header = {"final": f"curve: final {cv['metric']}", "auc": f"curve: area of {cv['metric']}",
              "time_to": f"curve: {cv['x']} to {cv['metric']} {thr:g}" if thr is not None else "curve: time to"}[name]
    cells = {}
    for c in cv.get("comparisons") or []:
        s = (c.get("summaries") or {}).get(name)
        word = "insufficient data" if c.get("insufficient") else "not computed"
        cells[str(c["arm"])] = ({"delta": s["diff"], "ci": list(s["ci"]), "word": s["word"], "level": c["level"]}
                                if s else {"delta": None, "ci": None, "word": word, "level": c.get("level")})
    return {"summary": name, "header": f"Δ {header} [CI]", "level": min((c["level"] for c in cells.values()
                                                                        if c.get("level")), default=None),
            "cells": cells}


def curve_cell_text(cell: Mapping[str, Any] | None, dec: int) -> str:
    """One curve cell as the table prints it: ``-0.092 [-0.127, -0.057] better``."""
    if not cell or not isinstance(cell.get("delta"), int | float):
        return "–" if not cell else str(cell.get("word") or "–")
    lo, hi = cell["ci"]
    return f"{cell['delta']:+.{dec}f} [{lo:+.{dec}f}, {hi:+.{dec}f}] {cell['word']}"
