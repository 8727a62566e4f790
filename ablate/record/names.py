"""Names and labels: config values as text, file-name-safe names, arm names (pure: no I/O).

Arm names are directory names (``trials/<arm>/``) and appear in every table, so they must be
readable for any value (unicode keys and values stay as written) and unique: a value whose text
had to change to become a safe name (``N/A``, a newline, a name over the length limit, two values
that differ only in letter case on a case-insensitive file system) gets a short hash of the value
appended (``x=N_A~3f2a1c``), so no arm name ever looks like another value's.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

#: Name of the control arm.
CONTROL = "control"
#: Longest file-name-safe name, in characters.
MAX_NAME = 80
#: Characters kept in names: unicode letters and digits, ``_ . = + -``; runs of others become ``_``.
_UNSAFE = re.compile(r"[^\w.=+-]+")


def format_value(v: Any) -> str:
    """Format a config value the way YAML / Hydra overrides write it (``null``, ``true``, ``1e-05``).

    Parameters
    ----------
    v : Any
        A plain config value (None, bool, int, float, str, list, mapping).
    """
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(format_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {format_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def value_label(v: Any) -> str:
    """A value as shown in tables and verdict lines: :func:`format_value`, with strings that would be
    invisible or misread (empty, surrounding blanks, control characters) written as quoted literals."""
    text = format_value(v)
    if isinstance(v, str) and (not v or v != v.strip() or not v.isprintable()):
        return json.dumps(v, ensure_ascii=False)
    return text


def safe_name(text: str, max_len: int = MAX_NAME) -> str:
    """Turn ``text`` into a file-name-safe string (NFC-normalised; runs of other characters become ``_``).

    Parameters
    ----------
    text : str
    max_len : int
        Longest result, in characters.
    """
    out = _UNSAFE.sub("_", unicodedata.normalize("NFC", text)).strip("_.") or "_"
    return out[:max_len]


def unique_name(text: str, taken: set[str]) -> str:
    """:func:`safe_name` of ``text``, with ``-2``, ``-3`` ... appended until no name in ``taken`` equals it
    case-insensitively; adds the result to ``taken``.

    Parameters
    ----------
    text : str
    taken : set of str
        Names already used for sibling dirs; updated in place.
    """
    folded = {t.casefold() for t in taken}
    base = name = safe_name(text, MAX_NAME - 4)
    i = 2
    while name.casefold() in folded:
        name = f"{base}-{i}"
        i += 1
    taken.add(name)
    return name


def value_hash(v: Any, n: int = 6) -> str:
    """First ``n`` hex digits of the SHA-256 of ``v``'s canonical JSON (type-aware: ``1`` and ``"1"`` differ)."""
    blob = json.dumps([type(v).__name__, v], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:n]


def arm_name(key: str, value: Any, taken: set[str]) -> str:
    """A unique, readable, file-name-safe name for the treatment arm ``key=value``; adds it to ``taken``.

    Parameters
    ----------
    key : str
        The variable's key (dotted, or a config group path); only its last part is used.
    value : Any
        The treatment's value (or the group option).
    taken : set of str
        Names already given in this plan; updated in place.

    Returns
    -------
    str
        ``<leaf>=<value>`` when that text is already safe and free; otherwise the safe text plus
        ``~`` and :func:`value_hash` of the value (and ``-2``, ``-3`` ... in the unlikely case that
        is taken too). Names are compared case-insensitively, so two arms never share a directory
        on a case-insensitive file system.
    """
    leaf = key.replace("/", ".").rsplit(".", 1)[-1]
    text = f"{leaf}={format_value(value)}"
    base = safe_name(text)
    folded = {t.casefold() for t in taken} | {CONTROL}
    if base != text or value_label(value) != format_value(value) or base.casefold() in folded:
        base = f"{safe_name(text, MAX_NAME - 7)}~{value_hash(value)}"
    name, i = base, 2
    while name.casefold() in folded:
        name = f"{base}-{i}"
        i += 1
    taken.add(name)
    return name
