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


#: Variables ablate itself sets in a trial's environment (besides every ``ABLATE_*``): a setting may not replace them.
OWN_ENV = ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "PYTHONUNBUFFERED", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
           "OPENBLAS_NUM_THREADS", "PL_GLOBAL_SEED")
#: Variables the script's process (its interpreter, loader, shell, scheduler) reads for itself.
SYSTEM_ENV = ("PATH", "HOME", "SHELL", "USER", "LOGNAME", "PWD", "IFS", "TMPDIR", "TEMP", "TMP", "LANG", "TERM", "TZ",
              "CUDA_VISIBLE_DEVICES")
SYSTEM_PREFIXES = ("LD_", "DYLD_", "PYTHON", "LC_", "SLURM_", "SUBMITIT_", "DVC_", "GIT_", "HYDRA_")


def env_clash(name: str, *, system: bool = True) -> str | None:
    """What the environment variable ``name`` already is to a trial (ablate's own, or the process's), or None
    when a setting may take that name. ``system=False`` checks ablate's own variables only (``task.env``, where
    the user names the variable itself)."""
    if name.startswith("ABLATE_") or name in OWN_ENV:
        return "ablate sets itself in every trial (the seed, the determinism mode, the trial's files, threads)"
    if system and (name in SYSTEM_ENV or name.startswith(SYSTEM_PREFIXES)):
        return "the script's own process reads (its program search path, loader, interpreter, locale or scheduler)"
    return None


def check_env_names(settings: Mapping[str, str], env_prefix: str) -> None:
    """Refuse ``args: env`` settings whose variable (``env_prefix`` + the key, upper-cased) is one ablate or the
    script's process uses: ``ablate_seed`` would replace ``ABLATE_SEED`` (every trial would see one seed),
    ``path`` would replace ``PATH``. ``settings`` maps each setting's key to where it is declared.

    Raises
    ------
    ConfigError
        The first clash, with the fix: an ``env_prefix`` that namespaces every setting, or a new prefix.
    """
    for key, where in settings.items():
        name = env_name(key, env_prefix)
        why = env_clash(name)
        if why is None:
            continue
        fix = (f"choose another `env_prefix` (e.g. `env_prefix: TRAIN_`, so the script reads TRAIN_{env_name(key)})"
               if env_prefix else f"set `env_prefix: TRAIN_` in the task, so every setting reaches the script as "
               f"TRAIN_<KEY> (this one as TRAIN_{env_name(key)}), and read it there under that name")
        raise ConfigError(f"with `args: env` the setting {key!r} becomes the environment variable {name}, which "
                          f"{why}: it would replace that variable", where=where, fix=fix)


def check_task_env(env: Mapping[str, Any]) -> None:
    """Refuse a ``task.env`` variable that ablate sets itself in every trial (``ABLATE_SEED``, ``PYTHONHASHSEED``,
    the thread counts): the script would see the task's value, not the trial's. ``PATH`` and the like are the
    user's to set there (the name is written as it is, on purpose).

    Raises
    ------
    ConfigError
        The first such variable, with the fix.
    """
    for name in env:
        if env_clash(str(name), system=False) is None:
            continue
        how = ("the plan's `threads` sets the thread counts of every trial (e.g. `threads=4`)" if "NUM_THREADS" in
               str(name) else "the script reads ablate's value under that name (the trial's seed, files and mode)")
        raise ConfigError(f"sets {name}, which ablate sets itself in every trial, so every trial would see the "
                          "task's value instead of its own", where=f"task.env.{name}",
                          fix=f"remove {name} from `task.env`: {how}")


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
