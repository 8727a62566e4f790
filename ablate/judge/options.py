"""The verdict's own settings, their defaults (:data:`DEFAULTS`, the one place they are stated in code; ablate's
``ablate_base.yaml`` states them for users and a test holds the two equal), the allowed words, and the margin.

They are read at plan time (:mod:`ablate.orchestrate.options`) and again when ``ablate verdict DIR --...``
recomputes a verdict with other options (:func:`resolve_options`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ablate.errors import ConfigError
from ablate.judge.curve_options import parse_curve
from ablate.plan.checks import choice, number

PAIRING = ("auto", "paired", "unpaired")


MULTIPLICITY = ("holm", "dunnett", "bh", "none")


SEQUENTIAL = ("off", "group")


FAMILIES = ("suite", "variable")


#: Words that clear the margin (``--margin none``); 0 clears it too (a zero margin tests nothing).
NO_MARGIN = ("none", "null", "off", "no", "0", "0%")


def parse_margin(value: Any) -> float | str | None:
    """``margin``: null, a number in metric units (also written as a string, as ``--margin 0.01`` gives
    it), or a percentage of the control mean (``"2%"``). ``none``, ``null``, ``off``, ``0`` clear it."""
    if value is None or value is False or (isinstance(value, int | float) and not isinstance(value, bool)
                                           and value == 0):
        return None
    if isinstance(value, str) and value.strip().lower() in NO_MARGIN:
        return None
    if isinstance(value, str) and not value.strip().endswith("%"):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*%\s*", value):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    raise ConfigError(f"must be a positive number (metric units), a percentage such as '2%', or none, got {value!r}",
                      where="margin", fix="e.g. `margin=0.01`, `margin='2%'` or `--margin none` to clear it")


#: Plan options that ``ablate verdict DIR --...`` may override (``curve``: curve verdicts, asked for after the run:
#: ``--curve [KEY=VALUE ...]``, merged over the plan's ``curve`` settings, or ``off``).
VERDICT_OVERRIDES = ("alpha", "margin", "pairing", "multiplicity", "family", "against", "curve")


@dataclass(frozen=True)
class VerdictOptions:
    """The verdict's settings: ``plan["options"]`` overridden by ``ablate verdict DIR --...``."""

    alpha: float = 0.05
    margin: float | str | None = None
    pairing: str = "auto"
    multiplicity: str = "holm"
    sequential: str = "off"
    looks: list[int] = field(default_factory=lambda: [5, 10, 15, 20])  # seeds per arm at each look
    family: str = "suite"
    against: str | None = None
    curve: dict[str, Any] | None = None  # curve verdicts (ablate.judge.curve_options); None: off


def resolve_options(plan: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> VerdictOptions:
    """Validated verdict options from the plan and the overrides.

    Raises
    ------
    ConfigError
        When an option or override is invalid (names it and how to fix it).
    """
    o = dict(plan.get("options") or {})
    for k, v in (overrides or {}).items():
        if v is not None and k in VERDICT_OVERRIDES:
            o[k] = resolve_curve(o.get("curve"), v) if k == "curve" else v
    d = DEFAULTS
    looks = o.get("looks") or d.looks
    return VerdictOptions(
        alpha=float(number(o.get("alpha", d.alpha), "alpha", lo=1e-6, hi=0.5, example=d.alpha)),
        margin=parse_margin(o.get("margin", d.margin)),
        pairing=choice(o.get("pairing", d.pairing), PAIRING, "pairing"),
        multiplicity=choice(o.get("multiplicity", d.multiplicity), MULTIPLICITY, "multiplicity"),
        sequential=choice(o.get("sequential", d.sequential), SEQUENTIAL, "sequential"),
        looks=[int(x) for x in looks],
        family=choice(o.get("family", d.family), FAMILIES, "family"),
        against=None if o.get("against") is None else str(o["against"]),
        curve=parse_curve(o.get("curve"), str(plan.get("metric") or "")),
    )


def resolve_curve(planned: Any, given: Any) -> dict[str, Any] | None:
    """The curve settings ``ablate verdict DIR --curve ...`` asks for: ``given`` (a mapping of curve settings, as
    :func:`ablate.judge.curve_options.parse_curve` takes them) over the plan's own (``planned``), enabled; or None
    when ``given`` is false (``--curve off``: no curve verdict).

    Raises
    ------
    ConfigError
        When ``given`` is neither a mapping nor false.
    """
    if given is False:
        return None
    if not isinstance(given, Mapping):
        raise ConfigError(f"must be a mapping of curve settings or false, got {given!r}", where="--curve",
                          fix="e.g. `ablate verdict DIR --curve` (the defaults), `--curve x=epoch summary=auc`, or "
                          "`--curve off`")
    return {**(planned if isinstance(planned, Mapping) else {}), **given, "enabled": True}


#: The verdict's defaults.
DEFAULTS = VerdictOptions()
