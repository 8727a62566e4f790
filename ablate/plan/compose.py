"""Compose ablate's config with Hydra, the way ``@hydra.main`` would, and turn Hydra's composition
errors into one-line :class:`~ablate.errors.ConfigError` messages with close matches.

Config search path, in order: Hydra's own configs; the project's config dir (``--config-path``, or
``./conf`` when it exists); ablate's built-in configs (``pkg://ablate.conf``, added by the
``hydra_plugins.ablate_searchpath`` plugin); dirs added with ``--config-dir``. The primary config is
``ablate``: a project's ``conf/ablate.yaml`` shadows the built-in one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError, close_matches
from ablate.plan.arms import flatten

CONFIG_NAME = "ablate"



@dataclass
class Composed:
    """A composed config and what is needed to compose variants of it.

    Attributes
    ----------
    cfg : dict
        The composed config as a plain container, interpolations unresolved, without ``hydra``.
    sweep_dir : str
        ``hydra.sweep.dir``, resolved.
    variable_name : str or None
        The chosen option of the ``variable`` group.
    variables : list of str
        Every option of the ``variable`` group on the search path.
    compose : callable
        ``compose(extra_override) -> dict``: the same composition with one more override (for
        config-group variables).
    config_dirs : list of str
        The project's config directories on the search path (hashed at launch to detect drift).
    choices : dict
        The option chosen in every config group (``hydra.runtime.choices``), e.g. ``{"task": "digits_mlp"}``.
    """

    cfg: dict[str, Any]
    sweep_dir: str
    variable_name: str | None
    variables: list[str]
    compose: Callable[[str], Mapping[str, Any]]
    config_dirs: list[str] = field(default_factory=list)
    choices: dict[str, Any] = field(default_factory=dict)


def _search_path(config_path: str | None, config_dirs: Sequence[str]) -> Any:
    from hydra._internal.utils import create_config_search_path  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from hydra.core.config_search_path import SearchPathQuery  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import

    if config_path is not None and not os.path.isdir(config_path):
        raise ConfigError(f"config directory {config_path} does not exist", where="--config-path",
                          fix="pass the directory holding your ablate.yaml / task/ / variable/ configs")
    sp = create_config_search_path(str(Path(config_path).absolute()) if config_path else None)
    for d in config_dirs:
        if not os.path.isdir(d):
            raise ConfigError(f"config directory {os.path.abspath(d)} does not exist", where="--config-dir",
                              fix="check the path (relative paths are from the current directory)")
        sp.prepend(provider="command-line", path=f"file://{os.path.abspath(d)}",
                   anchor=SearchPathQuery(provider="schema"))
    return sp


#: ablate's settings that take a list: ``seeds=1,2,3`` (a Hydra sweep) means ``seeds=[1,2,3]``.
LIST_SETTINGS = ("seeds", "looks", "metrics", "scale.values", "variable.values", "launcher.preload")


def reject_seed(overrides: Sequence[str]) -> None:
    """Refuse ``seed=N`` under ``-m``: ablate sets ``seed`` for each trial from ``seeds``, so ``seed=10`` (for
    ``seeds=10``) would run the default 5 seeds without a word.

    Raises
    ------
    ConfigError
        With the fix: ``seeds=N`` (N seeds per arm) or ``seeds=[N]`` (that one seed).
    """
    for ov in overrides:
        key, _, value = ov.partition("=")
        if key.lstrip("+") == "seed":
            raise ConfigError(f"{ov!r} under -m: ablate sets `seed` for each trial from `seeds` (the seed list), "
                              "so this would be ignored and the default seeds would run", where="seed",
                              fix=f"`seeds={value}` for {value} seeds per arm (`seeds=[...]` for a list of seeds)")


def reject_sweeps(overrides: Sequence[str]) -> None:
    """Refuse Hydra sweep syntax (``a=1,2``, ``range(...)``): an ablation varies one declared variable.

    Raises
    ------
    ConfigError
        For malformed overrides (Hydra's parse message) or sweep overrides.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from hydra.errors import HydraException  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import

    parser = OverridesParser.create()
    for ov in overrides:
        try:
            parsed = parser.parse_override(ov)
        except HydraException as exc:
            first = str(exc).splitlines()[0] if str(exc) else "cannot be parsed"
            raise ConfigError(f"the override {ov!r} is malformed ({first})", where=ov.split("=", 1)[0],
                              fix="write key=value; quote values with spaces or special characters, e.g. "
                              "key='a b', and lists as key=[1,2]") from None
        if parsed.is_sweep_override():
            key = parsed.get_key_element()
            bare = key.lstrip("+~")
            if bare in LIST_SETTINGS or bare.endswith(".values"):  # a list written without its brackets
                value = ov.split("=", 1)[1]
                raise ConfigError(f"{ov!r} gives {bare} several values as a Hydra sweep (one run per value)",
                                  where=bare, fix=f"write the list in brackets: `{key}=[{value}]`")
            raise ConfigError(
                f"{ov!r} is a Hydra sweep; ablate changes one declared variable against a control",
                where=key,
                fix=f"declare it: `variable.key={key}` with `variable.values=[...]` in conf/variable/<name>.yaml, "
                "then `ablate -m variable=<name>`; or give one value",
            )


def compose(overrides: Sequence[str], *, config_path: str | None, config_dirs: Sequence[str] = (),
            multirun: bool = True, config_name: str | None = None) -> Composed:
    """Compose the ``ablate`` config with ``overrides``, as Hydra does for ``ablate -m ...``.

    Raises
    ------
    ConfigError
        For malformed overrides, unknown keys or config options (close matches listed), or a missing
        primary config.
    """
    from hydra._internal.hydra import Hydra  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from hydra.core.global_hydra import GlobalHydra  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from hydra.types import RunMode  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from omegaconf import OmegaConf  # noqa: PLC0415  # lazy: OmegaConf off this module's import

    overrides = list(overrides)
    name = config_name or CONFIG_NAME
    reject_sweeps(overrides)
    if multirun:
        reject_seed(overrides)
    sp = _search_path(config_path, config_dirs)
    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2(task_name="ablate", config_search_path=sp)
    mode = RunMode.MULTIRUN if multirun else RunMode.RUN
    def load(extra: Sequence[str] = ()) -> Any:
        try:
            return hydra.compose_config(name, [*overrides, *extra], run_mode=mode,
                                        with_log_configuration=False)
        except Exception as exc:
            raise _translate(exc, hydra, overrides, name) from None

    try:
        cfg = load()
    except ConfigError as exc:
        if config_path or config_dirs:
            raise
        # No project config at all: the user's key is unknown because only ablate's built-in configs were
        # searched, not because it is misspelt. Say that, instead of suggesting `+key=`.
        raise ConfigError(f"{exc.what.rstrip('.')} (there is no conf/ in {os.getcwd()}, so only ablate's built-in "
                          "configs were searched)", where=exc.where,
                          fix="run ablate from your project's root (the directory holding conf/), or pass "
                          "`--config-path /path/to/project/conf`") from None
    finally:
        GlobalHydra.instance().clear()  # the loader keeps working; `@hydra.main` may initialise again
    HydraConfig.instance().set_config(cfg)
    try:
        sweep_dir = str(cfg.hydra.sweep.dir)
    except Exception:
        sweep_dir = "outputs/ablate/ablation"
    choice = OmegaConf.select(cfg, "hydra.runtime.choices.variable")
    variables = sorted(hydra.config_loader.get_group_options("variable"))
    container = OmegaConf.to_container(cfg, resolve=False)
    container.pop("hydra", None)  # type: ignore[union-attr]

    def compose_with(extra: str) -> Mapping[str, Any]:
        c = OmegaConf.to_container(load([extra]), resolve=False)
        c.pop("hydra", None)  # type: ignore[union-attr]
        return c  # type: ignore[return-value]

    project_dirs = [str(Path(d).absolute()) for d in ([config_path] if config_path else []) + list(config_dirs)]
    return Composed(cfg=container, sweep_dir=sweep_dir, variable_name=choice, variables=variables,  # type: ignore[arg-type]
                    compose=compose_with, config_dirs=project_dirs,
                    choices=dict(OmegaConf.to_container(cfg.hydra.runtime.choices)))  # type: ignore[arg-type]


def _translate(exc: Exception, hydra: Any, overrides: Sequence[str], config_name: str = CONFIG_NAME) -> ConfigError:
    """Turn a Hydra composition error into a ConfigError that names the key and the fix."""
    msg = str(exc).strip()
    first = msg.splitlines()[0] if msg else type(exc).__name__
    m = re.search(r"Could not override '([^']+)'\. No match in the defaults list", msg)
    if m:  # a config group the primary config's defaults list does not name: Hydra appends it only with `+`
        group = m.group(1)
        given = next((o for o in overrides if o.split("=", 1)[0] == group), f"{group}=<option>")
        option = given.split("=", 1)[1] if "=" in given else "<option>"
        return ConfigError(f"`{given}` replaces the {group!r} entry of the defaults list of {config_name}.yaml, and "
                           "it has none", where=group,
                           fix=f"append it with `+{given}`, or make it the default: add `- {group}: {option}` to the "
                           f"defaults list of conf/{config_name}.yaml (before `_self_`)")
    m = re.search(r"Could not override '([^']+)'", msg) or re.search(r"Key '([^']+)' is not in struct", msg)
    if m:
        key = m.group(1)
        groups = sorted(_groups(hydra))
        group_choices = [o for o in overrides if "=" in o and o.split("=", 1)[0].lstrip("+~") in groups]
        keys = _known_keys(hydra, config_name, group_choices)
        if key in _known_keys(hydra, config_name, []):
            head = key.split(".")[0]
            chosen = next((o for o in group_choices if o.split("=", 1)[0].lstrip("+") == head), None)
            return ConfigError(
                f"{key!r} is not a key of the config with {chosen or 'these choices'}; it belongs to another option "
                f"of the {head!r} group", where=key,
                fix=f"drop it, or choose the option that has it (`ablate --cfg job {chosen or ''}` lists the keys)")
        near = close_matches(key, keys + groups)
        hint = f". Close matches: {', '.join(near)}" if near else ""
        fix = f"check the spelling (`ablate --cfg job` lists every key), or add a new key with +{key}=..."
        if near and near[0] in groups:
            fix = f"choose a config group option with `{near[0]}=<option>`"
        return ConfigError(f"{key!r} is not a key of the config{hint}", where=key, fix=fix)
    if "Config group override must be a string" in msg:
        return ConfigError(f"a config group was given something other than an option name ({first})",
                           where="overrides",
                           fix=f"choose a group option by name, e.g. `variable=lr` "
                           f"(groups: {', '.join(_groups(hydra))})")
    m = re.search(r"Could not find '([^']+)/([^']+)'", msg)
    if m:
        group, option = m.group(1), m.group(2)
        opts = sorted(hydra.config_loader.get_group_options(group))
        near = close_matches(option, opts)
        hint = f"Close matches: {', '.join(near)}. " if near else ""
        return ConfigError(
            f"there is no {group} named {option!r}. {hint}Available: {', '.join(opts) or 'none'}",
            where=group,
            fix=f"use one of the available options, or add conf/{group}/{option}.yaml",
        )
    m = re.search(r"You must specify '([^']+)'", msg)
    if m:
        group = m.group(1)
        opts = sorted(hydra.config_loader.get_group_options(group))
        avail = ", ".join(opts) or f"none: add conf/{group}/<name>.yaml"
        return ConfigError(f"no {group} chosen", where=group,
                           fix=f"add `{group}=<option>` (available: {avail}), or set a default in conf/ablate.yaml")
    if "Cannot find primary config" in msg:
        return ConfigError(f"no primary config named {config_name!r} found ({first})", where="--config-name",
                           fix="drop --config-name (ablate's primary config is `ablate`), or point --config-path at "
                           "the conf/ directory that holds it")
    return ConfigError(f"the config cannot be composed: {first}", where="overrides",
                       fix="check the override named above (`ablate --cfg job` shows the composed config)")


def _groups(hydra: Any) -> list[str]:
    """Top-level config group names on the search path (``task``, ``variable``, ``launcher`` ...)."""
    try:
        return sorted(g for g in hydra.config_loader.list_groups("") if g != "hydra")
    except Exception:
        return []


def _known_keys(hydra: Any, config_name: str = CONFIG_NAME, overrides: Sequence[str] = ()) -> list[str]:
    from hydra.types import RunMode  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from omegaconf import OmegaConf  # noqa: PLC0415  # lazy: OmegaConf off this module's import

    try:
        cfg = hydra.compose_config(config_name, list(overrides), run_mode=RunMode.RUN, with_log_configuration=False)
    except Exception:
        return []
    c = OmegaConf.to_container(cfg, resolve=False)
    c.pop("hydra", None)
    return list(flatten(c))
