"""How a command task's script takes its settings: the argument style and the rendering of values.

A command task declares ``args`` (how each setting reaches the script) and ``values`` (how a value is
written, in the script's own language)::

    args: hydra          # key=value Hydra overrides (the default)
    args: --key=value    # one argument per setting: --dropout=0.1 (nanoGPT's configurator, absl, fire)
    args: --key value    # two arguments per setting: --lr 0.1 (argparse, HfArgumentParser)
    args: env            # environment variables: DROPOUT=0.1 (``env_prefix`` prepended; dots become _)
    values: python       # Python literals, for scripts that ``ast.literal_eval`` them: False, None, 'a b'
    values: json         # JSON: false, null, "a b", [1, 2]
    values: plain        # as text: 0.1, a b, true (a list gives one argument per element with --key value)

``values`` defaults to ``python`` for ``--key=value`` and ``plain`` for ``--key value`` and ``env``. Config
files a script takes as positional arguments go in the command itself (``command: python train.py
config/small.py``). :func:`render` turns ``{key: value}`` into argv entries and environment variables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ablate.errors import ConfigError
from ablate.plan.overrides import format_override

#: The argument styles a command task may declare, and the value rendering each defaults to.
STYLES: dict[str, str] = {"hydra": "hydra", "--key=value": "python", "--key value": "plain", "env": "plain"}
VALUE_STYLES = ("python", "json", "plain")
_ALIASES = {"equals": "--key=value", "space": "--key value", "flags": "--key value", "overrides": "hydra"}


def check_style(args: Any, values: Any) -> tuple[str, str]:
    """The declared (``args``, ``values``) pair, defaults filled in.

    Raises
    ------
    ConfigError
        An unknown style or value rendering (the valid ones are listed).
    """
    style = _ALIASES.get(str(args), str(args)) if args is not None else "hydra"
    if style not in STYLES:
        raise ConfigError(f"{args!r} is not an argument style", where="task.args",
                          fix="one of: hydra (key=value), '--key=value', '--key value', env")
    vals = STYLES[style] if values is None else str(values)
    if style == "hydra" and values not in (None, "hydra"):
        raise ConfigError("Hydra overrides have their own value syntax", where="task.values",
                          fix="drop `values:` for `args: hydra`, or choose another `args` style")
    if style != "hydra" and vals not in VALUE_STYLES:
        raise ConfigError(f"{values!r} is not a value rendering", where="task.values",
                          fix=f"one of: {', '.join(VALUE_STYLES)}")
    return style, vals


def render_value(value: Any, how: str) -> str:
    """One value as the script's parser reads it back (``python``: :func:`repr`; ``json``; ``plain``)."""
    if how == "python":
        return repr(value)
    if how == "json":
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, list | tuple | Mapping):
        return json.dumps(value)
    return str(value)


def env_name(key: str, prefix: str = "") -> str:
    """The environment variable of a setting: ``optim.lr`` -> ``OPTIM_LR`` (after ``prefix``)."""
    return prefix + re.sub(r"[^A-Za-z0-9_]", "_", key).upper()


def render(settings: Mapping[str, Any], style: str, how: str, *, env_prefix: str = "",
           hydra_prefix: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """Settings (flat ``{key: value}``) as argv entries and environment variables, in ``style``.

    Parameters
    ----------
    settings : mapping
        Flat dotted key -> value, in the order they are passed.
    style : str
        One of :data:`STYLES`.
    how : str
        One of :data:`VALUE_STYLES` (ignored for ``hydra``).
    env_prefix : str
        Prepended to each variable's name in the ``env`` style.
    hydra_prefix : mapping, optional
        Key -> Hydra override prefix (``+``) for keys the script's config lacks.

    Returns
    -------
    argv, env : list of str, dict
    """
    argv: list[str] = []
    env: dict[str, str] = {}
    for key, value in settings.items():
        if style == "hydra":
            argv.append(format_override(key, value, (hydra_prefix or {}).get(key, "")))
        elif style == "env":
            env[env_name(key, env_prefix)] = render_value(value, how)
        elif style == "--key=value":
            argv.append(f"--{key}={render_value(value, how)}")
        elif how == "plain" and isinstance(value, list | tuple):
            argv += [f"--{key}", *(render_value(v, how) for v in value)]
        else:
            argv += [f"--{key}", render_value(value, how)]
    return argv, env
