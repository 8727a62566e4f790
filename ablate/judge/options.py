"""The verdict's own settings, their defaults (:data:`DEFAULTS`, the one place they are stated in code; ablate's
``ablate_base.yaml`` states them for users and a test holds the two equal), the allowed words, and the margin.

They are read at plan time (:mod:`ablate.orchestrate.options`) and again when ``ablate verdict DIR --...``
recomputes a verdict with other options (:func:`resolve_options`).
"""

from __future__ import annotations

import contextlib
import math
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
    effect: float | None = None  # planned effect, SDs of one seed's metric: enables futility stops (sequential)
    futility: float = 0.10  # conditional power below which a sequential treatment stops for futility


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
        family=parse_family(o.get("family", d.family), o.get("sequential", d.sequential)),
        against=None if o.get("against") is None else str(o["against"]),
        curve=parse_curve(o.get("curve"), str(plan.get("metric") or "")),
        effect=parse_effect(o.get("effect"), o.get("sequential", d.sequential), looks),
        futility=parse_futility(o.get("futility"), o.get("effect")),
    )


#: The largest planned effect ``effect=`` takes, SDs of one seed's metric: an effect that large is seen in 2 seeds
#: at any look, and the dry run's simulation of it (squares of seeds shifted by it) stays finite.
MAX_EFFECT = 100.0


def parse_family(value: Any, sequential: str) -> str:
    """``family``: ``suite`` or ``variable``; ``variable`` is refused with ``sequential=group``, whose looks spend α/m
    over every treatment of the suite (Bonferroni, :func:`ablate.judge.verdict.sequential_state`), so a family per
    variable would be a claim the looks do not keep."""
    family = choice(value, FAMILIES, "family")
    if family == "variable" and sequential == "group":
        raise ConfigError("family=variable cannot apply with sequential=group: the looks spend α/m over every "
                          "treatment of the suite (Bonferroni), not per variable", where="family",
                          fix="drop `family=variable` (`--family variable` for `ablate verdict`): the looks keep the "
                          "family-wise error over the whole suite; to adjust per variable, run without "
                          "`sequential=group`")
    return family


def parse_effect(value: Any, sequential: Any, looks: Any = None) -> float | None:
    """``effect``: the planned effect in SDs of one seed's metric (both arms' pooled SD), in (0, :data:`MAX_EFFECT`],
    for futility stops; only with ``sequential=group``.

    Raises
    ------
    ConfigError
        When it is not a number in (0, :data:`MAX_EFFECT`] (NaN, inf, a bool, a list, a word), given without
        ``sequential=group``, or with ``looks`` of one look (futility stops come at looks before the last).
    """
    if value is None:
        return None
    if sequential != "group":
        raise ConfigError("is the planned effect of a sequential design's futility stops, but sequential is "
                          f"{sequential!r}", where="effect", fix="add `sequential=group` (and `looks=[...]`), or drop "
                          "`effect=`")
    try:
        e = float(value)
    except (TypeError, ValueError):
        e = math.nan
    if isinstance(value, bool) or not (0 < e <= MAX_EFFECT):
        raise ConfigError(f"must be a positive number of SDs of one seed's metric, at most {MAX_EFFECT:g}, got "
                          f"{value!r}", where="effect",
                          fix="e.g. `effect=0.5` (half an SD: the smallest effect worth the seeds)")
    if isinstance(looks, list | tuple) and len(looks) < 2:
        raise ConfigError(f"futility stops come at looks before the last, but looks={list(looks)} has one look: "
                          "nothing would ever stop for futility", where="effect",
                          fix="add earlier looks, e.g. `looks=[5,10,15,20]`, or drop `effect=`")
    return e


def parse_futility(value: Any, effect: Any, *, given: bool = False) -> float:
    """``futility``: the conditional power below which a sequential treatment stops (γ; None means the default,
    0.10). A value other than the default needs ``effect`` (without it nothing stops for futility); with
    ``given`` (the plan-time options, read from a config whose shipped default is null, so ``value`` is the user's
    own) any value does, the default's included. A recorded plan holds the default without ``effect``. A number
    in [1e-6, 0.999], or one written as a string.

    Raises
    ------
    ConfigError
        When it is outside (0, 1), or given without a planned effect.
    """
    if value is None:
        return DEFAULT_FUTILITY
    if isinstance(value, str):  # `futility='0.2'` (a quoted number), as `effect='0.5'` is read
        with contextlib.suppress(ValueError):
            value = float(value)
    if effect is None and (given or value != DEFAULT_FUTILITY):
        raise ConfigError("futility stops need the planned effect: conditional power is computed under it",
                          where="futility", fix="add `effect=0.5` (in SDs of one seed's metric) before the run, or "
                          "drop `futility=`")
    return float(number(value, "futility", lo=1e-6, hi=0.999, example=DEFAULT_FUTILITY))


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
#: γ, the default conditional-power threshold of a futility stop (ablate.stats.futility.FUTILITY_CP).
DEFAULT_FUTILITY = DEFAULTS.futility
