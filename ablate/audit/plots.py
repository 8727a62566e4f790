"""The audit's plots for audit.md: the two sides' metric curves (every run's logged series, by step) and the per-run
values the statistics compare (one dot per run, each side's mean). matplotlib on the Agg canvas without pyplot,
as verdict.md's plots (:mod:`ablate.judge.plots`)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

#: The two sides' colours: A (control) grey-blue, B (treatment) orange, as trackers draw two runs.
COLOURS = ("#4c72b0", "#dd8452")
#: Runs drawn per side at most (the plot of 10,000 curves says no more than the plot of 200).
MAX_CURVES = 200


def _figure(width: float = 6.4) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415  # lazy: matplotlib only when plots are drawn
    from matplotlib.figure import Figure  # noqa: PLC0415  # lazy: matplotlib only when plots are drawn

    fig = Figure(figsize=(width, 3.6), dpi=100)
    fig.subplots_adjust(left=0.13, right=0.97, bottom=0.16, top=0.88)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def curves_plot(sides: Sequence[tuple[str, str, list[list[tuple[int | None, float]]]]]) -> bytes | None:
    """Each side's runs' series (``(name, metric, [series per run])`` per side) against the step logged (the
    position where none was), one colour per side; None when no run logged more than one value."""
    if not any(len(s) > 1 for _, _, runs in sides for s in runs):
        return None
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    for (name, metric, runs), colour in zip(sides, COLOURS, strict=False):
        for i, series in enumerate(runs[:MAX_CURVES]):
            xs = [s if s is not None else j for j, (s, _) in enumerate(series)]
            ax.plot(xs, [v for _, v in series], color=colour, alpha=0.55, linewidth=1.1,
                    label=f"{name}: {metric} ({len(runs)} runs)" if i == 0 else None)
    ax.set_xlabel("step")
    metrics = {m for _, m, _ in sides}
    ax.set_ylabel(" / ".join(sorted(metrics)))
    ax.set_title("Metric curves of the two sides")
    ax.legend(loc="best", fontsize=8)
    return _png(fig)


def values_plot(sides: Sequence[tuple[str, Sequence[float]]], metric: str) -> bytes | None:
    """The per-run values the statistics compare, one dot per run and a bar at each side's mean."""
    if not all(vals for _, vals in sides):
        return None
    fig = _figure(4.2)
    ax = fig.add_subplot(1, 1, 1)
    for i, ((_, vals), colour) in enumerate(zip(sides, COLOURS, strict=False)):
        n = len(vals)
        xs = [i + (-0.15 + 0.3 * j / (n - 1) if n > 1 else 0.0) for j in range(n)]
        ax.scatter(xs, vals, color=colour, s=18, zorder=3)
        mean = sum(vals) / n
        ax.hlines(mean, i - 0.25, i + 0.25, color="black", linewidth=1.5, zorder=4)
    ax.set_xticks(range(len(sides)), [name for name, _ in sides])
    ax.set_xlim(-0.6, len(sides) - 0.4)
    ax.set_ylabel(metric)
    ax.set_title("Per-run values (bar: mean)")
    return _png(fig)
