"""Render config values as Hydra command-line overrides (``key=value``), quoted so they parse back exactly.

Used for the overrides a command-form task's script receives (:mod:`ablate.trials.tasks.command`) and for the
keyword arguments of :func:`ablate.run`; :func:`command_record` is the command line a plan records (to run it
again). The rules follow Hydra's override grammar (Hydra 1.3):

- ``None`` -> ``null``; booleans -> ``true`` / ``false``; ints as written; floats with ``repr``
  (``1e-05``, ``inf``, ``nan``);
- strings are always single-quoted, so ``'1e3'``, ``'true'`` and ``'null'`` stay strings; a quote is
  written ``\\'``, a run of backslashes before a quote or at the end is doubled, and ``${`` is escaped
  (``\\${``) so the script's OmegaConf does not read the text as an interpolation;
- lists -> ``[a,b]`` and mappings -> ``{k:v}``, recursively;
- ``interpolate=True`` leaves ``${`` as it is, so the script's OmegaConf resolves the text as the
  interpolation it is (an app arm's value as the plan holds it, unresolved: ``${hydra:runtime.output_dir}/alt``
  reaches the app as that interpolation, which Hydra resolves in the trial).

Every rendered override parses back, through Hydra's own parser and OmegaConf, to the value it came
from (tested on arbitrary text in ``tests/unit/test_overrides.py``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

_BACKSLASHES_BEFORE_INTERP = re.compile(r"(\\*)\$\{")
_BACKSLASHES_BEFORE_QUOTE = re.compile(r"(\\*)('|$)")


def quote_string(text: str, *, interpolate: bool = False) -> str:
    """Quote ``text`` as a Hydra single-quoted string that OmegaConf reads back as exactly ``text``.

    Parameters
    ----------
    text : str
        Any text (spaces, commas, quotes, ``=``, ``#``, backslashes, ``${...}``, newlines).
    interpolate : bool
        Leave ``${...}`` (and ``\\${``) as written: OmegaConf then reads the text as a config value
        written in YAML would be read, interpolations resolved.

    Returns
    -------
    str
        The quoted form, e.g. ``'it\\'s'`` for ``it's``.
    """
    # OmegaConf: `\${` is a literal `${`; backslashes right before it must be doubled to stay literal.
    if not interpolate:
        text = _BACKSLASHES_BEFORE_INTERP.sub(lambda m: m.group(1) * 2 + "\\${", text)
    # Hydra: backslashes before a quote (or the closing quote) are doubled; the quote itself is escaped.
    text = _BACKSLASHES_BEFORE_QUOTE.sub(lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text)
    return f"'{text}'"


def format_value(value: Any, *, interpolate: bool = False) -> str:
    """Render one config value in Hydra override syntax (see the module docstring).

    ``interpolate``: strings keep their ``${...}`` interpolations (see :func:`quote_string`).

    Raises
    ------
    TypeError
        For values a config cannot hold (objects other than str, int, float, bool, None, list, dict).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value)  # 'inf', '-inf', '1e-05', '0.1'
    if isinstance(value, str):
        return quote_string(value, interpolate=interpolate)
    if isinstance(value, list | tuple):
        return "[" + ",".join(format_value(v, interpolate=interpolate) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{format_value(v, interpolate=interpolate)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write a {type(value).__name__} ({value!r}) as a Hydra override value")


def format_override(key: str, value: Any, prefix: str = "", *, interpolate: bool = False) -> str:
    """``key=value`` in Hydra override syntax; ``prefix`` may be ``+`` or ``++`` (add / force-add).

    ``interpolate``: string values keep their ``${...}`` interpolations (see :func:`quote_string`).
    """
    return f"{prefix}{key}={format_value(value, interpolate=interpolate)}"


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested mappings to dotted leaf keys (``{"optim": {"lr": 1}}`` -> ``{"optim.lr": 1}``).

    Lists and scalars are leaves; an empty mapping is a leaf (``{}``), so the script still receives it.
    """
    out: dict[str, Any] = {}
    for k, v in params.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping) and v:
            out.update(flatten_params(v, key))
        else:
            out[key] = v
    return out


def override_key(override: str) -> str:
    """The key an override sets: ``seeds`` for ``seeds=10``, ``+seeds=[1,2]``, ``++seeds=3`` or ``~seeds``."""
    return override.split("=", 1)[0].lstrip("+~")


def command_record(overrides: Sequence[str], *, config_path: str | None = None, config_dirs: Sequence[str] = (),
                   config_name: str | None = None, via: str = "cli") -> dict[str, Any]:
    """The ``command`` entry of ``ablation.yaml``: the command line an ablation was planned from, to run it again
    (verdict.md's "Next:" line, :func:`ablate.judge.rerun.rerun_command`).

    Parameters
    ----------
    overrides : sequence of str
        The overrides as given: ``ablate -m``'s (``app.`` overrides and a suite's ``variable=a,b`` included), or
        those :func:`ablate.run` built from its arguments.
    config_path : str, optional
        The config dir, absolute, when it is not the project's ``conf/`` (``--config-path``).
    config_dirs : sequence of str
        ``--config-dir`` values, absolute.
    config_name : str, optional
        ``--config-name``, when given.
    via : {"cli", "api"}
        ``ablate -m``, or :func:`ablate.run` (whose arguments these overrides are).

    Returns
    -------
    dict
        ``overrides``, ``config_path``, ``config_dirs``, ``config_name``, ``via``.
    """
    path = os.path.abspath(config_path) if config_path else None
    if path is not None and path == os.path.abspath("conf"):  # the project's own conf/, the default
        path = None
    return {"overrides": [str(o) for o in overrides], "config_path": path,
            "config_dirs": [os.path.abspath(d) for d in config_dirs], "config_name": config_name, "via": via}
