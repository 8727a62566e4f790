"""Checks of one setting's value (a choice, a bool, a number in range), each raising a
:class:`~ablate.errors.ConfigError` that names the setting: ablate's own options are validated with these before
anything is launched (:mod:`ablate.orchestrate.options`, :mod:`ablate.judge.options`)."""

from __future__ import annotations

import math
from typing import Any

from ablate.errors import ConfigError


def choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    """``value`` if it is one of ``allowed`` (an unquoted YAML ``off``, read as false, is ``off``)."""
    if value is False and "off" in allowed:  # YAML 1.1 reads an unquoted `off` as false
        value = "off"
    if value not in allowed:
        raise ConfigError(f"must be one of {', '.join(allowed)}, got {value!r}", where=where,
                          fix=f"e.g. `{where}={allowed[0]}`")
    return str(value)


def boolean(value: Any, where: str) -> bool:
    """``value`` if it is a bool (never a truthy string or number)."""
    if isinstance(value, bool):
        return value
    raise ConfigError(f"must be true or false, got {value!r}", where=where, fix=f"e.g. `{where}=true`")


def number(value: Any, where: str, *, lo: float | None = None, hi: float | None = None,
            integer: bool = False, allow_none: bool = False, example: Any = None) -> Any:
    """``value`` if it is a number (not a bool, not NaN) in [lo, hi]; an int when ``integer``; None when ``allow_none``.

    The error's fix shows ``example`` (the setting's default, where the caller has one), else ``lo``."""
    if value is None and allow_none:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and math.isnan(value):  # NaN passes every comparison: `alpha=nan`, `futility=nan`
        ok = False
    if integer:
        ok = ok and float(value).is_integer()
    if ok and lo is not None and value < lo:
        ok = False
    if ok and hi is not None and value > hi:
        ok = False
    if not ok:
        kind = "an integer" if integer else "a number"
        rng = f" in [{lo}, {hi}]" if lo is not None and hi is not None else (f" >= {lo}" if lo is not None else "")
        shown = example if example is not None else (lo if lo is not None else (hi if hi is not None else 1))
        if integer and isinstance(shown, float) and shown.is_integer():
            shown = int(shown)
        raise ConfigError(f"must be {kind}{rng}{' or null' if allow_none else ''}, got {value!r}", where=where,
                          fix=f"e.g. `{where}={shown}`")
    return int(value) if integer else value
