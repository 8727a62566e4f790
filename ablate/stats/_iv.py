"""Input validation shared by :mod:`ablate.stats` (the ``_<name>_iv`` helpers build on these).

Every check names the parameter in backticks and states the rule, e.g.
"`alpha`: must be a number in (0, 0.5], got 0.7." (the shape of :class:`ablate.errors.UserError`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ablate.errors import UserError

GOALS = ("maximize", "minimize")
MULTIPLICITY = ("holm", "dunnett", "bh", "none")


class StatsInputError(UserError):
    """An argument to an :mod:`ablate.stats` function breaks its stated rule (a ``ValueError``)."""


def fail(param: str, rule: str, got: Any) -> StatsInputError:
    """The error for parameter ``param`` breaking ``rule`` (``got`` is shown with ``repr``)."""
    shown = repr(got)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return StatsInputError(f"{rule}, got {shown}", where=param)


def values_1d(x: Any, param: str, *, allow_nan: bool = True) -> np.ndarray:
    """``x`` as a 1-D float array. NaN marks a failed trial and is kept when ``allow_nan``; inf is refused."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise fail(param, "must be a 1-D sequence of numbers (NaN for a failed trial)", x) from None
    if arr.ndim != 1:
        raise fail(param, "must be 1-D (one value per seed)", f"array of shape {arr.shape}")
    if np.isinf(arr).any():
        raise fail(param, "must not contain inf (a diverged trial is NaN, counted as failed)", x)
    if not allow_nan and np.isnan(arr).any():
        raise fail(param, "must not contain NaN", x)
    return arr


def values_2d(x: Any, param: str) -> np.ndarray:
    """``x`` as a float array of shape (batch, n_seeds); NaN allowed (failed trials), inf refused."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise fail(param, "must be an array of numbers of shape (batch, n_seeds)", x) from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise fail(param, "must have shape (batch, n_seeds) or (n_seeds,)", f"array of shape {arr.shape}")
    if np.isinf(arr).any():
        raise fail(param, "must not contain inf (a diverged trial is NaN, counted as failed)", "inf values")
    return arr


def alpha(a: Any, param: str = "alpha") -> float:
    """A significance level in (0, 0.5]."""
    if isinstance(a, bool) or not isinstance(a, int | float | np.floating) or not 0 < float(a) <= 0.5:
        raise fail(param, "must be a number in (0, 0.5]", a)
    return float(a)


def goal(g: Any) -> float:
    """``goal`` -> sign (+1 maximize, -1 minimize)."""
    if g not in GOALS:
        raise fail("goal", f"must be one of {', '.join(GOALS)}", g)
    return 1.0 if g == "maximize" else -1.0


def positive_int(n: Any, param: str, *, lo: int = 1) -> int:
    """An integer >= ``lo``."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or int(n) < lo:
        raise fail(param, f"must be an integer >= {lo}", n)
    return int(n)


def margin(m: Any) -> float | str | None:
    """``margin``: None, a positive number (metric units) or a percentage string such as ``"2%"``."""
    if m is None:
        return None
    if isinstance(m, str):
        if re.fullmatch(r"\s*\d+(\.\d+)?\s*%\s*", m) and float(m.strip().rstrip("%")) > 0:
            return m.strip()
        raise fail("margin", "must be a positive number or a percentage of the control mean such as '2%'", m)
    if isinstance(m, bool) or not isinstance(m, int | float | np.floating) or not (math.isfinite(m) and m > 0):
        raise fail("margin", "must be a positive number or a percentage of the control mean such as '2%'", m)
    return float(m)


def resolve_margin(m: float | str | None, control_mean: float) -> float | None:
    """The margin in metric units: a percentage applies to ``|control_mean|`` (None if that is 0 or NaN)."""
    if m is None:
        return None
    if isinstance(m, str):
        pct = float(m.strip().rstrip("%"))
        if not math.isfinite(control_mean) or control_mean == 0:
            return None
        return pct / 100.0 * abs(control_mean)
    return float(m)


def choice(v: Any, param: str, allowed: Sequence[str]) -> str:
    """One of ``allowed``."""
    if v not in allowed:
        raise fail(param, f"must be one of {', '.join(allowed)}", v)
    return str(v)


def rng(r: Any) -> np.random.Generator:
    """``rng``: None (fresh entropy), an int seed, or a ``numpy.random.Generator``."""
    if r is None or (isinstance(r, int | np.integer) and not isinstance(r, bool)):
        return np.random.default_rng(r)
    if isinstance(r, np.random.Generator):
        return r
    raise fail("rng", "must be None, an integer seed or a numpy.random.Generator", r)
