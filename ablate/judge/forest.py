"""The forest plot: Δ vs control with its CI, one row per treatment (the ablation table's primary column).

matplotlib is imported here only, on the Agg canvas without pyplot (no global figure state, no display).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ablate.stats.compare import level_text
from ablate.stats.core import verdict_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Marker colour per verdict word.
COLORS = {"better": "#1a7f37", "worse": "#cf222e", "equivalent": "#0969da", "inconclusive": "#6e7781",
          "insufficient data": "#afb8c1"}


def forest_plot(verdict: Mapping[str, Any]) -> bytes | None:
    """The forest plot as PNG bytes (:func:`forest_figure`), or None when no treatment has a Δ."""
    fig = forest_figure(verdict)
    if fig is None:
        return None
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def forest_figure(verdict: Mapping[str, Any]) -> Figure | None:
    """Δ = treatment − control (metric units, the metric's own sign, the direction on the axis) with its CI at the
    level its decision used, one row per treatment.

    Parameters
    ----------
    verdict : mapping
        The verdict with its ``table`` (:func:`ablate.judge.table.build_table`).

    Returns
    -------
    matplotlib.figure.Figure or None
        The figure (Agg canvas), or None when no treatment has a Δ. The legend words are verdict.md's: an
        indicative better/worse is ``better (indicative)``, drawn as a hollow marker. With curve verdicts
        (``table["curve"]``), a second panel shows each treatment's ``curve.summary`` Δ with its simultaneous CI.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415  # lazy: matplotlib only when plots are drawn
    from matplotlib.figure import Figure  # noqa: PLC0415  # lazy: matplotlib only when plots are drawn

    table = verdict["table"]
    primary = table["primary"]
    rows = [r for r in table["rows"][1:] if r["cells"][primary].get("delta") is not None]
    if not rows:
        return None
    curve = table.get("curve")
    fig = Figure(figsize=(6.0 + (4.0 if curve else 0.0), 1.2 + 0.45 * len(rows)), dpi=100)
    FigureCanvasAgg(fig)
    ax, *more = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [3, 2]}) if curve else [fig.add_subplot()]
    for i, r in enumerate(rows):
        c = r["cells"][primary]
        y = len(rows) - 1 - i
        color = COLORS.get(r["verdict"], "#6e7781")
        ci = c.get("delta_ci")
        if ci:
            ax.plot(ci, [y, y], color=color, linewidth=2)
        label = verdict_label(r["verdict"], r.get("firm"))
        ax.plot([c["delta"]], [y], "o", color=color, markersize=7, label=label,
                markerfacecolor="white" if label != r["verdict"] else color)
    ax.axvline(0.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["arm"] for r in reversed(rows)])
    levels = table.get("delta_ci_levels") or []
    lvl = f"{level_text(levels[0])} CI" if len(levels) == 1 else "CI"
    direction = "higher is better" if table.get("goal") == "maximize" else "lower is better"
    ax.set_xlabel(f"Δ {primary} vs control, with {lvl} ({direction})")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    ax.legend(uniq.values(), uniq.keys(), loc="best", fontsize=8, frameon=False)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    if curve:
        _curve_panel(more[0], curve, [r["arm"] for r in rows])
    fig.subplots_adjust(left=0.28 if not curve else 0.17, right=0.97,
                        bottom=max(0.12, 0.5 / (1.2 + 0.45 * len(rows))), top=0.95)
    return fig


def _curve_panel(ax: Any, curve: Mapping[str, Any], arms: list[str]) -> None:
    """The curve column (``curve.summary``): each treatment's summary Δ with its simultaneous CI."""
    for i, arm in enumerate(arms):
        cell = curve["cells"].get(arm) or {}
        if not isinstance(cell.get("delta"), int | float):
            continue
        y = len(arms) - 1 - i
        color = COLORS.get(cell["word"], "#6e7781")
        ax.plot(cell["ci"], [y, y], color=color, linewidth=2)
        ax.plot([cell["delta"]], [y], "s", color=color, markersize=6)
    ax.axvline(0.0, color="black", linewidth=0.8, linestyle="--")
    level = f", simultaneous {curve['level']:.1%}" if curve.get("level") else ""
    ax.set_xlabel(curve["header"].replace(" [CI]", "") + level, fontsize=8)
