"""The transfer check's curves (``scale.key`` with ``curve.enabled``): each scale's curve verdict, compared at
matched x (the range every scale's grid covers), and whether a treatment's band says "better" at one scale and
"worse" at another at the same x (the curve analogue of an effect that changes sign across scales).

Pure: reads the scales' verdict.json ``curves`` objects; :mod:`ablate.orchestrate.transfer` writes the result
into transfer.json (``curves``) and transfer.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _word_at(regions: Sequence[Mapping[str, Any]], x: float) -> str | None:
    """The band's reading at ``x``: the region holding it (between two grid points, the earlier point's)."""
    word = None
    for r in regions:
        if r["from"] <= x:
            word = r["word"]
    return word if regions and x <= regions[-1]["to"] else None


def transfer_curves(values: Sequence[Any], verdicts: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Per treatment: each scale's curve sentence, the matched x range, and the x ranges where one scale's band
    says better and another's worse (None when the scales' verdicts hold no curves).

    Returns
    -------
    dict or None
        ``{"x", "results": [{"arm", "scales": [{"scale", "sentence", "regions"}], "matched": [lo, hi] or None,
        "contradictions": [[lo, hi], ...], "flag"}]}``; ``flag`` is ``"flips along the curve"`` or
        ``"no contradiction"`` (or ``"not comparable"``: a scale without a band, or no shared range of x).
    """
    if not verdicts or not all(v.get("curves") for v in verdicts):
        return None
    results = []
    for comp in verdicts[0]["curves"]["comparisons"]:
        arm = comp["arm"]
        per = []
        for v, val in zip(verdicts, values, strict=True):
            c = next((x for x in v["curves"]["comparisons"] if x["arm"] == arm), None)
            per.append({"scale": val, "sentence": None if c is None else c.get("sentence") or c.get("insufficient"),
                        "regions": (c or {}).get("regions"), "x": (c or {}).get("x")})
        results.append({"arm": arm, **_matched(per)})
    return {"x": verdicts[0]["curves"]["x"], "results": results}


def _matched(per: list[dict[str, Any]]) -> dict[str, Any]:
    scales = [{"scale": p["scale"], "sentence": p["sentence"], "regions": p["regions"]} for p in per]
    if any(not p["regions"] for p in per):
        return {"scales": scales, "matched": None, "contradictions": [], "flag": "not comparable"}
    lo = max(p["x"][0] for p in per)
    hi = min(p["x"][-1] for p in per)
    if not hi >= lo:
        return {"scales": scales, "matched": None, "contradictions": [], "flag": "not comparable"}
    xs = sorted({x for p in per for x in p["x"] if lo <= x <= hi})
    bad = [x for x in xs if {"better", "worse"} <= {_word_at(p["regions"], x) for p in per}]
    spans: list[list[float]] = []
    for x in bad:  # consecutive matched x values with a contradiction form one span
        if spans and xs.index(x) == xs.index(spans[-1][1]) + 1:
            spans[-1][1] = x
        else:
            spans.append([x, x])
    return {"scales": scales, "matched": [lo, hi], "contradictions": spans,
            "flag": "flips along the curve" if spans else "no contradiction"}


def transfer_curves_md(curves: Mapping[str, Any] | None, key: str) -> list[str]:
    """transfer.md's "Curves across scales" section (no lines without curves)."""
    if not curves:
        return []
    x = curves["x"]
    L = ["## Curves across scales", "",
         f"Each scale's curve verdict (simultaneous band, verdict.md there), compared at matched `{x}`: the range "
         "every scale's grid covers. A contradiction is an x where one scale's band is above 0 and another's below.",
         ""]
    for r in curves["results"]:
        m = r["matched"]
        where = "; ".join(f"{a:g} to {b:g}" for a, b in r["contradictions"])
        L.append(f"- **{r['arm']}**: {r['flag']}" + (f" (matched {x} {m[0]:g} to {m[1]:g})" if m else "")
                 + (f"; better at one scale and worse at another at {x} {where}" if where else "") + ".")
        L += [f"  - {key}={s['scale']}: {s['sentence']}" for s in r["scales"]]
    return [*L, ""]
