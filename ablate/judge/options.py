"""The verdict's own settings: the allowed pairing, multiplicity, sequential and family words, and the margin.

They are read at plan time (:mod:`ablate.orchestrate.options`) and again when ``ablate verdict DIR --...``
recomputes a verdict with other options (:func:`ablate.judge.verdict.resolve_options`).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from ablate.errors import ConfigError

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
