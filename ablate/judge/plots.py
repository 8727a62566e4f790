"""PNG plots for verdict.md: per-seed values per arm (mean and CI), and paired differences per treatment.

matplotlib is imported here only, on the Agg canvas without pyplot (no global figure state, no display).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import Any

#: Figure width in inches per arm, and the bounds.
_W_PER_ARM, _W_MIN, _W_MAX = 1.1, 4.0, 14.0


def _figure(n: int) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415  # lazy: matplotlib only when plots are drawn
    from matplotlib.figure import Figure  # noqa: PLC0415  # lazy: matplotlib only when plots are drawn

    fig = Figure(figsize=(min(_W_MAX, max(_W_MIN, _W_PER_ARM * n + 1.5)), 3.8), dpi=100)
    fig.subplots_adjust(left=0.14 if n < 4 else 0.09, right=0.98, bottom=0.24, top=0.9)  # fixed: layout engines cost
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _jitter(n: int) -> list[float]:
    return [0.0] if n <= 1 else [-0.15 + 0.3 * i / (n - 1) for i in range(n)]


def _by_value(items: list[Any]) -> list[Any]:
    """Arms (or comparisons) ordered by the variable's value when every value is a number (lr 0.01, 0.05,
    0.1, ...), so the axis reads as a dose; else in plan order. The control is labelled wherever it lands."""
    vals = [it.get("value") for it in items]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals):
        return [items[i] for i in sorted(range(len(items)), key=lambda i: vals[i])]
    return list(items)


def tick_label(arm: Mapping[str, Any], control: str, suite: bool) -> str:
    """An arm's tick: its label (in a suite the arm's name, which carries the variable: ``lr=0.1``), the control
    marked once (``0.05 (control)``, never ``0.05 (control) (control)``)."""
    text = str(arm["arm"] if suite and arm["arm"] != control else arm["label"])
    if arm["arm"] == control and "control" not in text:
        text += " (control)"
    return text


def axis_title(verdict: Mapping[str, Any]) -> str:
    """The x-axis title: the ablated key (``task.optim.lr``), or the suite's variables."""
    suite = (verdict.get("suite") or {}).get("variables") or []
    if suite:
        return "arm (variable=value), one shared control: " + ", ".join(str(v.get("key", v.get("name"))) for v in suite)
    return str((verdict.get("variable") or {}).get("key") or "arm")


def values_plot(verdict: Mapping[str, Any]) -> bytes | None:
    """Per-seed values of every arm (dots; failed trials as x at the bottom), with mean and 95% CI, arms ordered
    by the variable's value (numbers) so the axis reads as a dose.

    Parameters
    ----------
    verdict : mapping
        The verdict content from :func:`ablate.judge.verdict.analyse` (``arms`` with ``values``, ``mean``, ``ci``).

    Returns
    -------
    bytes or None
        The PNG, or None when no arm has a completed value.
    """
    arms = verdict["arms"]
    if not any(a.get("n") for a in arms):
        return None
    control = arms[0]["arm"]
    arms = _by_value(arms)
    fig = _figure(len(arms))
    ax = fig.add_subplot()
    finite = [v for a in arms for v in a["values"].values() if v is not None]
    low = min(finite) if finite else 0.0
    for i, a in enumerate(arms):
        vals = list(a["values"].values())
        xs = [i + j for j in _jitter(len(vals))]
        ok = [(x, v) for x, v in zip(xs, vals, strict=True) if v is not None]
        bad = [x for x, v in zip(xs, vals, strict=True) if v is None]
        if ok:
            ax.scatter([x for x, _ in ok], [v for _, v in ok], s=16, alpha=0.6, color="C0", zorder=2)
        if bad:
            ax.scatter(bad, [low] * len(bad), marker="x", color="C3", zorder=2, label="failed" if i == 0 else None)
        if a.get("mean") is not None:
            ci = a.get("ci")
            if ci and ci[0] is not None:
                ax.errorbar([i + 0.3], [a["mean"]], yerr=[[a["mean"] - ci[0]], [ci[1] - a["mean"]]], fmt="o",
                            color="k", capsize=4, zorder=3)
            else:
                ax.plot([i + 0.3], [a["mean"]], "o", color="k", zorder=3)
    ax.set_xticks(range(len(arms)), [tick_label(a, control, bool(verdict.get("suite"))) for a in arms],
                  rotation=20 if len(arms) > 4 else 0)
    ax.set_xlabel(axis_title(verdict))
    ax.set_ylabel(f"{verdict['metric']} ({'lower' if verdict.get('goal') == 'minimize' else 'higher'} is better)")
    ax.set_title("per-seed values; black: mean with 95% CI", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def paired_plot(verdict: Mapping[str, Any]) -> bytes | None:
    """Paired differences T - C per seed for each paired comparison, in the metric's own sign (as every line and
    table of verdict.md; the axis says which way is better), with Δ and its CI from the comparison (at the level its
    decision used), ordered by the variable's value.

    Parameters
    ----------
    verdict : mapping
        The verdict content (``arms`` values by seed, ``comparisons`` with ``pairing``, ``diff``, ``ci``).

    Returns
    -------
    bytes or None
        The PNG, or None when no comparison is paired.
    """
    comps = _by_value([c for c in verdict["comparisons"] if c.get("paired")])
    if not comps:
        return None
    sign = 1.0 if verdict["goal"] == "maximize" else -1.0
    by_arm = {a["arm"]: a["values"] for a in verdict["arms"]}
    control = by_arm[verdict["arms"][0]["arm"]]
    fig = _figure(len(comps))
    ax = fig.add_subplot()
    for i, c in enumerate(comps):
        t = by_arm[c["arm"]]
        diffs = [t[str(s)] - control[str(s)] for s in c["pairing"]["seeds"]
                 if t.get(str(s)) is not None and control.get(str(s)) is not None]
        ax.scatter([i + j for j in _jitter(len(diffs))], diffs, s=16, alpha=0.6, color="C0", zorder=2)
        if c.get("diff") is not None:
            ci, d = c.get("ci"), sign * c["diff"]  # verdict.json's are sign-normalised: back to the metric's sign
            if ci and ci[0] is not None and math.isfinite(ci[0]):
                lo, hi = sorted((sign * ci[0], sign * ci[1]))
                ax.errorbar([i + 0.3], [d], yerr=[[d - lo], [hi - d]], fmt="o", color="k", capsize=4, zorder=3)
    ax.axhline(0, color="0.4", lw=0.8)
    ax.set_xticks(range(len(comps)), [f"{c['label']}\n- control" for c in comps])
    ax.set_ylabel(f"Δ {verdict['metric']} ({'lower' if sign < 0 else 'higher'} is better)")
    # lazy: ablate.stats loads numpy and scipy, kept off verdict reuse and `ablate status`
    from ablate.stats.compare import level_text  # noqa: PLC0415  # lazy: as said above

    levels = sorted({level_text(c["ci_level"]) for c in comps if c.get("ci_level")})
    ax.set_title(f"paired differences by seed; black: Δ with its CI ({', '.join(levels) or '95%'}, the level "
                 "of each decision)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)
