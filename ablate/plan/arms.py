"""Plan an ablation: control + variable -> arms, each treatment proved to differ only in the variable.

Pure: no file or process I/O. The only effectful input is the optional ``compose`` callable used for
config-group variables (it asks Hydra to compose the config with one more override).

A treatment is derived by setting the variable's ``key`` on a copy of the control config. Both are
then resolved (interpolations evaluated) and diffed leaf by leaf. A difference is allowed only at
``key`` (or below it) and at keys whose *unresolved* value interpolates, directly or through other
such keys, from ``key``: those are listed as derived changes. Anything else (for example a resolver
that reads the clock or the environment) is a confound and stops the ablation before launch.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate.errors import ConfigError, PlanError, close_matches
from ablate.plan.app_config import APP_NODE, app_params, resolve_container, to_app_key
from ablate.plan.overrides import format_value as override_value
from ablate.record.names import CONTROL, arm_name, format_value, value_label

#: Top-level keys of the composed config that belong to ablate itself, not to the task.
ABLATE_KEYS = frozenset(
    {
        "variable", "seeds", "seed", "launcher", "determinism", "dry_run", "allow_dirty", "wait",
        "on_failure", "max_retries", "alpha", "margin", "pairing", "multiplicity", "sequential",
        "looks", "tracker", "timeout_min", "progress", "sweep_dir_mode", "plots", "resubmit",
        "family", "metrics", "scale", "threads", "tune", "effect", "futility",
    }
)
MAX_SEED = 2**32 - 1
#: The most seeds per arm: a sweep dir holds a dir per trial, and a larger N (``seeds=200000000`` for 20) built its
#: list of seeds until memory ran out (a MemoryError traceback, or the machine's memory) before anything was said.
MAX_SEEDS = 100_000


def too_many_seeds(n: int, fix: str, where: str = "seeds") -> ConfigError:
    """The one-line refusal of ``n`` > :data:`MAX_SEEDS` seeds per arm, with ``fix``, at setting ``where``."""
    return ConfigError(f"{n} seeds per arm is more than {MAX_SEEDS}, the most a sweep dir holds (one dir per trial): "
                       "taken for a typo", where=where, fix=fix)
#: What :func:`select` returns for a key the config does not have (None is a value).
MISSING = object()
#: Keys a variable may not change: ablate's own settings (the seed varies by trial; the others set up the
#: ablation itself), and the task keys that define what the verdict compares. ``determinism`` is allowed:
#: ablating it measures the cost of strict mode.
RESERVED_KEYS = (ABLATE_KEYS - {"determinism"}) | {"hydra", "task.metric", "task.goal", "task.data"}


@dataclass(frozen=True)
class Variable:
    """The one thing an ablation changes.

    Attributes
    ----------
    name : str
        The option name in ``conf/variable/`` (e.g. ``lr``).
    key : str
        Dotted path in the composed config (``task.optim.lr``), or for a group variable the config
        group (``task/optim``).
    values : tuple
        Treatment values, in order. Plain Python values (float, int, str, bool, None, list, dict).
    is_group : bool
        True when ``key`` names a config group whose option is swapped (``task/optim=adam``).
    """

    name: str
    key: str
    values: tuple[Any, ...]
    is_group: bool = False


@dataclass
class Arm:
    """One arm of the ablation.

    Attributes
    ----------
    name : str
        File-name-safe id, ``control`` or e.g. ``lr=0.1``; the trial dirs are ``trials/<name>/``.
    label : str
        Human label used in tables (``lr=0.1 (control)``).
    value : Any
        The variable's value in this arm.
    config : dict
        The arm's config as a plain container, interpolations unresolved (the trial resolves it).
    changes : dict
        Dotted key -> (control value, this arm's value) for every resolved leaf that differs from
        control: the variable itself plus derived changes. Empty for control.
    derived : list of str
        The keys in ``changes`` that differ because they interpolate from the variable.
    presence : dict
        Key -> ``"added"`` (only this arm has it) or ``"removed"`` (only control has it), for keys of
        ``changes`` that one side lacks (``changes`` writes the missing side as None).
    variable : str or None
        In a suite (:mod:`ablate.plan.suite`), the name of the variable this treatment ablates; None otherwise.
    resolved_from : tuple of (dict, dict) or None
        ``(config, resolved)``: the config object :func:`make_plan` resolved (in the plan's ``${hydra:...}``
        context) and the result, so that ``ablation.yaml``'s record does not resolve it again (issue 42); read
        through :meth:`resolved`, which answers only while ``config`` is still that object. Not compared.
    """

    name: str
    label: str
    value: Any
    config: dict[str, Any]
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    derived: list[str] = field(default_factory=list)
    presence: dict[str, str] = field(default_factory=dict)
    variable: str | None = None
    resolved_from: tuple[dict[str, Any], dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def resolved(self) -> dict[str, Any] | None:
        """The config as :func:`make_plan` resolved it, or None when it was not, or ``config`` has been replaced
        since (a suite's arms get their ``variable`` node after planning): the caller resolves it then."""
        if self.resolved_from is not None and self.resolved_from[0] is self.config:
            return self.resolved_from[1]
        return None


@dataclass
class Plan:
    """Arms x seeds, ready to pin and launch.

    Attributes
    ----------
    variable : Variable
    arms : list of Arm
        Control first, then one treatment per value, in the order declared.
    seeds : list of int
        The seed list; every arm runs every seed, so trials can be paired by seed.
    """

    variable: Variable
    arms: list[Arm]
    seeds: list[int]

    @property
    def control(self) -> Arm:
        return self.arms[0]

    @property
    def treatments(self) -> list[Arm]:
        return self.arms[1:]

    def trials(self) -> list[tuple[str, int]]:
        """All (arm name, seed) pairs, seed-major (seed 0 of every arm first), so early seeds of
        every arm finish first and a partial ablation is still balanced."""
        return [(a.name, s) for s in self.seeds for a in self.arms]


def _values_fix(values: Any) -> str:
    """The way out for a ``variable.values`` that is not a list: a quoted list loses its quotes, a scalar
    becomes a one-element list, both written as Hydra overrides that parse back to the intended values."""
    if isinstance(values, str):
        from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import

        try:  # what Hydra reads when the same text comes unquoted
            parsed = OverridesParser.create().parse_override(f"variable.values={values}").value()
        except Exception:  # not valid override syntax: no list to suggest
            parsed = None
        if isinstance(parsed, list) and parsed:
            return (f"drop the quotes around the list: `variable.values={override_value(parsed)}` (quoted, it is "
                    "one string)")
        if parsed is not None and not isinstance(parsed, list | dict):
            values = parsed  # `'0.1'` -> [0.1]: the value as Hydra reads it unquoted
    try:
        return f"write it as a list: `variable.values=[{override_value(values)}]`"
    except TypeError:
        return "write it as a list: `variable.values=[...]`"


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "mapping"}.get(
        type(v), type(v).__name__
    )


# -- inputs ----------------------------------------------------------------------------------------
#: Seeds per arm a verdict needs: a mean, a spread (SD) and a test need at least 3 values per arm. The same
#: number as the verdict's ``ablate.stats.core.MIN_SEEDS`` (kept here so planning does not import numpy;
#: tests/unit/test_plan.py checks the two agree).
MIN_SEEDS = 3
#: Why, in the words of the refusal.
MIN_SEEDS_WHY = (f"a verdict needs at least {MIN_SEEDS} seeds per arm for a mean, a spread and a test; with fewer, "
                 "every trial would run and the verdict could only say \"insufficient data\"")


def _list_fix(seeds: Sequence[int]) -> str:
    """``seeds=[...]`` extending ``seeds`` with the smallest unused seeds up to :data:`MIN_SEEDS`."""
    out = list(seeds)
    s = max(out, default=-1) + 1
    while len(out) < MIN_SEEDS:
        if s not in out and 0 <= s <= MAX_SEED:
            out.append(s)
        s = s + 1 if s < MAX_SEED else 0
    return "seeds=[" + ",".join(str(x) for x in out) + "]"


def parse_seeds(seeds: Any) -> list[int]:
    """Validate ``seeds``: an int N >= :data:`MIN_SEEDS` (seeds 0..N-1) or a list of >= MIN_SEEDS distinct ints.

    Fewer than :data:`MIN_SEEDS` (3) seeds per arm are refused here, at plan time, before any trial runs:
    the verdict could only say "insufficient data" (``ablate.stats.core.MIN_SEEDS``).

    Raises
    ------
    ConfigError
        When ``seeds`` is not an integer (or list of integers), is below :data:`MIN_SEEDS`, repeats a seed
        or lists a seed outside [0, 2**32 - 1].
    """
    if isinstance(seeds, bool) or seeds is None:
        raise ConfigError(f"must be an integer >= {MIN_SEEDS}, got {seeds!r}", where="seeds", fix="e.g. `seeds=10`")
    if isinstance(seeds, int):
        if seeds > MAX_SEEDS:  # seeds 0..N-1 then also fit in 32 bits
            raise too_many_seeds(seeds, "e.g. `seeds=10`")
        if seeds < MIN_SEEDS:
            raise ConfigError(
                f"{seeds} seed{'' if seeds == 1 else 's'} per arm is below the minimum of {MIN_SEEDS}: {MIN_SEEDS_WHY}",
                where="seeds",
                fix=f"use `seeds={MIN_SEEDS}` or more (10 to detect effects near one standard deviation)",
            )
        return list(range(seeds))
    if isinstance(seeds, list | tuple):
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise ConfigError(f"must be a list of integers, got {seeds!r}", where="seeds", fix="e.g. `seeds=[0,1,2]`")
        if len(seeds) > MAX_SEEDS:
            raise too_many_seeds(len(seeds), "e.g. `seeds=[0,1,2]`")
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"repeats a seed: {list(seeds)}", where="seeds", fix="list each seed once")
        bad = [s for s in seeds if not 0 <= s <= MAX_SEED]
        if bad:
            raise ConfigError(f"seeds must be in [0, {MAX_SEED}] (numpy and torch take 32-bit seeds), got {bad[:5]}",
                              where="seeds", fix="e.g. `seeds=[0,1,2]`")
        if len(seeds) < MIN_SEEDS:
            raise ConfigError(
                f"lists {len(seeds)} seed{'s' if len(seeds) != 1 else ''} {list(seeds)}, below the minimum of "
                f"{MIN_SEEDS} per arm: {MIN_SEEDS_WHY}",
                where="seeds",
                fix=f"list at least {MIN_SEEDS} seeds, e.g. `{_list_fix(seeds)}`",
            )
        return [int(s) for s in seeds]
    raise ConfigError(
        f"must be an integer >= {MIN_SEEDS}, got {seeds!r} ({_type_name(seeds)})",
        where="seeds",
        fix="e.g. `seeds=10` (seeds 0..9 in every arm)",
    )


def parse_variable(var_cfg: Any, name: str | None, available: Sequence[str] = ()) -> Variable:
    """Read the ``variable`` node of the composed config into a :class:`Variable`.

    Parameters
    ----------
    var_cfg : mapping or None
        The composed ``variable`` node: ``key`` (dotted path) or ``group`` (config group), ``values``.
    name : str or None
        The chosen option of the ``variable`` config group (``lr``).
    available : sequence of str
        The options of the ``variable`` group, listed when none was chosen.

    Raises
    ------
    ConfigError
        No variable chosen, no ``key``/``group``, or ``values`` missing, empty, not a list, or
        repeating a value.
    """
    if var_cfg is None or not isinstance(var_cfg, Mapping):
        opts = ", ".join(available) if available else "none found: add conf/variable/<name>.yaml"
        raise ConfigError(
            "no variable chosen for the ablation",
            where="variable",
            fix=f"pick one with `variable=<name>`; available: {opts}",
        )
    name = name or str(var_cfg.get("name") or "variable")
    key = var_cfg.get("key")
    group = var_cfg.get("group")
    if (key is None) == (group is None):
        raise ConfigError(
            f"conf/variable/{name}.yaml must set exactly one of `key` (a dotted config path, e.g. "
            "task.optim.lr) or `group` (a config group to swap, e.g. task/optim)",
            where=f"variable={name}",
            fix=f"add `key: <dotted.path>` or `group: <group>` to conf/variable/{name}.yaml (`ablate --cfg job` "
            "lists the keys)",
        )
    values = var_cfg.get("values")
    where = "variable.values"
    if values is None:
        raise ConfigError("is missing", where=where,
                          fix="list the treatment values, e.g. `variable.values=[0.1,0.001]`")
    if not isinstance(values, list | tuple):
        raise ConfigError(
            f"must be a list of treatment values, got {format_value(values)} ({_type_name(values)})",
            where=where, fix=_values_fix(values),
        )
    if len(values) == 0:
        raise ConfigError("is empty: an ablation needs at least one treatment value", where=where,
                          fix="e.g. `variable.values=[0.1,0.001]`")
    seen: list[Any] = []
    for i, v in enumerate(values):
        if any(_same(v, s) for s in seen):
            raise ConfigError(f"lists {format_value(v)} twice (position {i})", where=where, fix="list each value once")
        seen.append(v)
    k = str(group if group is not None else key)
    if group is None and k.startswith("task.params."):  # a script's flag (`--dropout`) names its setting (dropout)
        k = re.sub(r"(?<=\.)--?(?=[A-Za-z_])", "", k)
    seg = r"[A-Za-z_][\w\-]*"
    if not k or not re.fullmatch(rf"{seg}(?:[./](?:{seg}|\d+))*", k):
        raise ConfigError(f"{k!r} is not a dotted config path", where=f"variable.{'group' if group else 'key'}",
                          fix="e.g. `task.optim.lr`; a list element by its index: `task.layers.1`")
    return Variable(name=name, key=k, values=tuple(copy.deepcopy(list(values))), is_group=group is not None)


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps types apart (1 != True, 1 == 1.0 counts as the same value)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


# -- flattening and interpolation references ------------------------------------------------------
def flatten(container: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts into ``{"a.b.c": leaf}``; lists and scalars are leaves."""
    out: dict[str, Any] = {}
    if isinstance(container, Mapping) and (container or not prefix):
        for k, v in container.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            out.update(flatten(v, p))
    else:
        out[prefix] = container
    return out


_INTERP = re.compile(r"\$\{([^{}]*)\}")
_TOKEN = re.compile(r"(\.*)([A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*|\[\d+\])*)")


def references(raw: str, node_path: str) -> set[str]:
    """Absolute dotted paths an interpolation string may read (an over-approximation).

    Handles nested interpolations, resolver arguments (``${oc.select:a.b,1}``) and relative paths
    (``${.x}``, ``${..x}``) anchored at the node's parent.
    """
    refs: set[str] = set()
    text = raw
    for _ in range(10):  # peel nested ${...} from the inside out
        found = _INTERP.findall(text)
        if not found:
            break
        for inner in found:
            body = inner.split(":", 1)[1] if ":" in inner and not inner.lstrip().startswith(".") else inner
            head = inner.split(":", 1)[0] if ":" in inner else None
            for dots, name in _TOKEN.findall(body):
                if dots:
                    parent = node_path.split(".")[: -len(dots)] if len(dots) <= node_path.count(".") + 1 else []
                    refs.add(".".join([*parent, name]) if parent else name)
                else:
                    refs.add(name)
            if head and not re.fullmatch(r"[\w.]+", head.strip()):
                continue
        text = _INTERP.sub("X", text)
    return {r.replace("[", ".").replace("]", "") for r in refs}


def _touches(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def derived_keys(raw_flat: Mapping[str, Any], roots: set[str]) -> set[str]:
    """Keys whose unresolved value interpolates, directly or transitively, from any of ``roots``.

    Parameters
    ----------
    raw_flat : mapping
        :func:`flatten` of the config with interpolations unresolved.
    roots : set of str
        Dotted keys that changed on purpose (the variable).
    """
    interps = {
        p: references(v, p) for p, v in raw_flat.items() if isinstance(v, str) and "${" in v
    }
    derived: set[str] = set()
    frontier = set(roots)
    while frontier:
        new = {
            p for p, refs in interps.items()
            if p not in derived and p not in roots and any(_touches(r, f) for r in refs for f in frontier)
        }
        derived |= new
        frontier = new
    return derived


# -- typed assignment -----------------------------------------------------------------------------
def check_value_type(key: str, control_value: Any, value: Any, index: int) -> Any:
    """Check a treatment value against the control value's type; return the value to set.

    ints are accepted for float keys (and stored as float). ``null`` is accepted for any key.

    Raises
    ------
    ConfigError
        On a type mismatch, with the fix (quote strings, write ``null`` not ``None``).
    """
    where = f"variable.values[{index}]"
    if value is None or control_value is None:
        return value
    cv, v = control_value, value
    if isinstance(v, str) and v in ("None", "none", "NULL", "Null") and not isinstance(cv, str):
        raise ConfigError(
            f"is the string {v!r}, but `{key}` holds a {_type_name(cv)}; YAML and Hydra spell the null value "
            "`null`",
            where=where,
            fix="write `null` instead of `None`",
        )
    if isinstance(cv, bool):
        ok = isinstance(v, bool)
    elif isinstance(cv, int):
        ok = isinstance(v, int) and not isinstance(v, bool)
        if not ok and isinstance(v, float) and v.is_integer():
            return int(v)
    elif isinstance(cv, float):
        ok = isinstance(v, int | float) and not isinstance(v, bool)
        if ok:
            return float(v)
    elif isinstance(cv, str):
        ok = isinstance(v, str)
        if not ok:
            raise ConfigError(
                f"is {format_value(v)} ({_type_name(v)}), but the control value of `{key}` is the string {cv!r}",
                where=where,
                fix=f"if {cv!r} is a typo, fix `{key}` in the config or its override; if the values are meant to "
                "be strings, quote them (an unquoted 12e45 is read as the float 1.2e+46): "
                "`variable.values=['12e45']`, or values: ['12e45'] in YAML",
            )
    elif isinstance(cv, list):
        ok = isinstance(v, list)
    else:
        ok = type(v) is type(cv)
    if not ok:
        raise ConfigError(
            f"is {format_value(v)} ({_type_name(v)}), but `{key}` holds a {_type_name(cv)} "
            f"(control value {format_value(cv)})",
            where=where,
            fix=f"give a {_type_name(cv)} value, or change the type of `{key}` in its config file",
        )
    return v


def _arm_name(var: Variable, value: Any, taken: set[str]) -> str:
    return arm_name(var.key, value, taken)


# -- the plan --------------------------------------------------------------------------------------
def resolve(cfg_container: dict[str, Any]) -> dict[str, Any]:
    """Resolve every interpolation of a plain config container; PlanError when one fails."""
    try:
        return resolve_container(cfg_container)
    except Exception as exc:  # omegaconf raises many types; report them all as a plan error
        raise PlanError(f"the config cannot be resolved: {exc}", where="config",
                        fix="fix the interpolation named above") from exc


def task_keys(cfg: Mapping[str, Any]) -> list[str]:
    """Dotted leaf keys of the config outside ablate's own settings (candidates for a variable key)."""
    return [k for k in flatten({k: v for k, v in cfg.items() if k not in ABLATE_KEYS and k != "hydra"})]


def make_plan(
    control_cfg: Mapping[str, Any],
    variable: Variable,
    seeds: list[int],
    compose: Callable[[str], Mapping[str, Any]] | None = None,
    choices: Mapping[str, Any] | None = None,
) -> Plan:
    """Derive the arms of an ablation and prove each treatment differs from control only in the variable.

    Parameters
    ----------
    control_cfg : mapping
        The composed config as a plain container (interpolations unresolved), without the ``hydra`` node.
    variable : Variable
        What to change (see :func:`parse_variable`).
    seeds : list of int
        The seed list (see :func:`parse_seeds`).
    compose : callable, optional
        For group variables: ``compose("task/optim=adam")`` returns the composed config with that
        override added. Required when ``variable.is_group``.
    choices : mapping, optional
        The chosen option of each config group (``hydra.runtime.choices``): names the control arm of
        a group variable.

    Returns
    -------
    Plan

    Raises
    ------
    ConfigError
        The key is missing (close matches listed), names a mapping (use ``group:``), or a value has
        the wrong type or equals the control value.
    PlanError
        A treatment differs from control in anything but the variable and keys derived from it.
    """
    control = copy.deepcopy(dict(control_cfg))
    raw_flat = flatten(control)
    control_resolved = resolve(control)
    again = resolve(control)
    again_flat = flatten(again)
    unstable = sorted(k for k, v in flatten(control_resolved).items()
                      if not _equal_leaf(again_flat.get(k, MISSING), v))
    if unstable:
        raise PlanError(
            f"these keys resolve to a different value every time they are read: {', '.join(unstable)} "
            "(a resolver reading the clock, the environment or a random source); arms would differ in them",
            where="config",
            fix="set them to fixed values in the config, or move them out of the task config",
        )
    if variable.is_group:
        return _plan_group(control, control_resolved, variable, seeds, compose, (choices or {}).get(variable.key))

    key = variable.key
    _check_not_reserved(key, variable.name)
    control_value = select(control, key)
    if control_value is MISSING:
        cands = close_matches(key, task_keys(control))
        hint = f" Close matches: {', '.join(cands)}" if cands else ""
        raise ConfigError(
            f"the variable's key {key!r} is not in the composed config.{hint}",
            where=f"variable={variable.name}",
            fix=f"set `key:` in conf/variable/{variable.name}.yaml to an existing dotted path",
        )
    if isinstance(control_value, Mapping):
        raise ConfigError(
            f"the variable's key {key!r} is a mapping (a whole config node, likely chosen from a config "
            "group), not a value; setting it would replace every key below it",
            where=f"variable={variable.name}",
            fix=f"to swap a config group option the Hydra way, write `group: {_group_hint(control, key)}` and "
            "`values: [<option>, ...]` in the variable file; to ablate one value, point `key` at a leaf such "
            f"as {', '.join(sorted(flatten(dict(control_value), key))[:3])}",
        )
    control_value_resolved = select(control_resolved, key)
    arms = [Arm(name=CONTROL, label=f"{value_label(control_value_resolved)} (control)",
                value=control_value_resolved, config=control, resolved_from=(control, control_resolved))]
    taken: set[str] = set()
    seen: list[tuple[str, Any]] = [("the control value", control_value_resolved)]
    for i, raw_value in enumerate(variable.values):
        value = check_value_type(key, control_value_resolved, raw_value, i)
        _refuse_rounding_twin(key, value, i, seen)
        seen.append((f"variable.values[{i}]", value))
        if _same(value, control_value_resolved) and type(value) is type(control_value_resolved):
            raise ConfigError(
                f"is {format_value(value)}, the control value of `{key}`: that treatment would be the control",
                where=f"variable.values[{i}]",
                fix="drop it from the values; the control arm always runs",
            )
        treat = copy.deepcopy(control)
        _assign(treat, key, value)
        t_resolved = resolve(treat)
        changes, derived = prove(control, control_resolved, treat, {key}, raw_flat, t_resolved)
        arms.append(Arm(name=_arm_name(variable, value, taken), label=value_label(value), value=value,
                        config=treat, changes=changes, derived=derived, resolved_from=(treat, t_resolved)))
    return Plan(variable=variable, arms=arms, seeds=list(seeds))


def _refuse_rounding_twin(key: str, value: Any, i: int, seen: list[tuple[str, Any]]) -> None:
    """Refuse a float value that differs from another arm's only by rounding (``0.30000000000000004`` beside
    ``0.3``: 5.6e-17 apart, as a ``range()`` or ``arange`` of floats gives them): two arms of one setting in all
    but name.

    Raises
    ------
    ConfigError
        Naming both values, their difference, and the decimals to write instead.
    """
    if not isinstance(value, float) or isinstance(value, bool):
        return
    for where, other in seen:
        if isinstance(other, float) and not isinstance(other, bool) and other != value and \
                math.isclose(value, other, rel_tol=1e-9, abs_tol=0.0):
            raise ConfigError(
                f"is {value!r}, {abs(value - other):.2g} away from {where} {other!r}: float rounding (a range() of "
                f"floats gives such values), not a setting of `{key}` anyone means, so the two arms would run "
                "the same thing", where=f"variable.values[{i}]",
                fix=f"write the decimals you mean (e.g. {round(value, 12)!r}), or drop one of them")


def _group_hint(control: Mapping[str, Any], key: str) -> str:
    """The ``group:`` a user writes for a mapping key: the app's own group name for an app's config."""
    app_key = to_app_key(key) if app_params(control) is not None else None
    return (app_key or key).replace(".", "/")


def reserved_why(key: str) -> str | None:
    """Why ``key`` is one no arm or tuning setting may change (:data:`RESERVED_KEYS`), or None when it may."""
    reserved = next((r for r in sorted(RESERVED_KEYS) if key == r or key.startswith(r + ".")), None)
    if reserved is None:
        return None
    return {
        "seed": "the seed differs by trial and is paired across arms; vary seeds with `seeds=`",
        "task.metric": "the verdict compares one metric across arms; choose it with `task.metric=`",
        "task.goal": "the goal says which direction of the metric is better; set it with `task.goal=`",
        "task.data": "trials verify the control's declared data only, so ablating the data declaration is "
                     "not supported yet (declare every data file the arms read, and ablate a key that selects one)",
    }.get(reserved, f"`{reserved}` is a setting of ablate itself, not of the task")


def _check_not_reserved(key: str, name: str) -> None:
    why = reserved_why(key)
    if why is None:
        return
    raise ConfigError(f"the variable's key {key!r} cannot be ablated: {why}", where=f"variable={name}",
                      fix="point `key` at a key of your task, e.g. task.optim.lr")


def _plan_group(control: dict[str, Any], control_resolved: dict[str, Any], variable: Variable,
                seeds: list[int], compose: Callable[[str], Mapping[str, Any]] | None, chosen: Any) -> Plan:
    if compose is None:
        raise PlanError("a group variable needs the config composer", where=f"variable={variable.name}",
                        fix="run the ablation from the CLI (`ablate -m variable=...`), which composes each option")
    group = variable.key
    root = group.replace("/", ".")
    arms = [Arm(name=CONTROL, label=f"{chosen} (control)" if chosen else "(control)", value=chosen, config=control,
                resolved_from=(control, control_resolved))]
    taken: set[str] = set()
    raw_flat = flatten(control)
    for i, option in enumerate(variable.values):
        if option == chosen:
            raise ConfigError(f"is {option!r}, the control's choice for {group}: that treatment would be the control",
                              where=f"variable.values[{i}]", fix="drop it from the values; the control arm always runs")
        if not isinstance(option, str):
            raise ConfigError(f"must be the name of an option of config group {group}, got {format_value(option)}",
                              where=f"variable.values[{i}]",
                              fix=f"list option names of {group} (its files conf/{group}/<name>.yaml), quoted if "
                              "YAML would read them as numbers")
        treat = {k: v for k, v in dict(compose(f"{group}={option}")).items() if k != "hydra"}
        t_resolved = resolve(treat)
        changes, derived = prove(control, control_resolved, treat, {root}, raw_flat | flatten(treat), t_resolved)
        touched = sorted({r for r in RESERVED_KEYS for k in changes if k == r or k.startswith(r + ".")})
        if touched:
            raise ConfigError(f"selecting {group}={option} also changes {', '.join(touched)}, which must stay the same "
                              "in every arm (the verdict compares one metric, in one direction, on verified data)",
                              where=f"variable.values[{i}]",
                              fix=f"swap a narrower group (e.g. the model or optimizer inside {group}), or keep those "
                              "keys identical across its options")
        if not changes:
            raise ConfigError(f"selecting {group}={option} changes nothing: it is the control's choice",
                              where=f"variable.values[{i}]", fix="drop it from the values")
        arms.append(Arm(name=_arm_name(variable, option, taken), label=value_label(option), value=option,
                        config=treat, changes=changes, derived=derived,
                        presence=presence(control_resolved, treat, changes, t_resolved),
                        resolved_from=(treat, t_resolved)))
    return Plan(variable=variable, arms=arms, seeds=list(seeds))


def _list_holding(key: str, change: tuple[Any, Any], roots: set[str]) -> bool:
    """Whether ``key`` is a list whose only differing elements are list-element roots (``task.layers.1``)."""
    a, b = change
    if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
        return False
    idx = {int(r[len(key) + 1:].split(".")[0]) for r in roots
           if r.startswith(key + ".") and r[len(key) + 1:].split(".")[0].isdigit()}
    return bool(idx) and all(i in idx for i, (x, y) in enumerate(zip(a, b, strict=True)) if not _equal_leaf(x, y))


def prove(control: dict[str, Any], control_resolved: dict[str, Any], treatment: dict[str, Any],
          roots: set[str], raw_flat: Mapping[str, Any], treatment_resolved: dict[str, Any] | None = None
          ) -> tuple[dict[str, tuple[Any, Any]], list[str]]:
    """Diff a treatment against control and prove every difference comes from ``roots``.

    ``treatment_resolved`` is ``treatment`` already resolved (:func:`resolve`, in the same context), when the
    caller holds it; default: resolved here.

    Returns
    -------
    changes : dict
        Dotted key -> (control value, treatment value), resolved, for every differing leaf.
    derived : list of str
        The changed keys that are not under ``roots`` but interpolate from them.

    Raises
    ------
    PlanError
        Naming every key that differs without deriving from ``roots``.
    """
    t_resolved = resolve(treatment) if treatment_resolved is None else treatment_resolved
    cf, tf = flatten(control_resolved), flatten(t_resolved)
    changes = {
        k: (cf.get(k, MISSING), tf.get(k, MISSING))
        for k in sorted(set(cf) | set(tf))
        if not _equal_leaf(cf.get(k, MISSING), tf.get(k, MISSING))
    }
    allowed = derived_keys(raw_flat, roots) | derived_keys(flatten(treatment), roots)
    allowed |= _app_derived(control, treatment, roots)
    under = lambda k, bases: any(k == b or k.startswith(b + ".") for b in bases)  # noqa: E731
    bad = [k for k in changes if not under(k, roots) and not under(k, allowed)
           and not _list_holding(k, changes[k], roots)]
    if bad:
        shown = "; ".join(f"{k}: " + describe_change(
            changes[k][0], changes[k][1],
            "added" if changes[k][0] is MISSING else "removed" if changes[k][1] is MISSING else None)
            for k in bad[:10])
        raise PlanError(
            f"the treatment differs from control in keys that do not derive from the variable: {shown}",
            where="variable",
            fix="make those keys fixed values, or interpolate them from the variable's key",
        )
    derived = sorted(k for k in changes if not under(k, roots) and not _list_holding(k, changes[k], roots))
    return {k: (None if a is MISSING else a, None if b is MISSING else b) for k, (a, b) in changes.items()}, derived


def presence(control_resolved: Mapping[str, Any], treatment: dict[str, Any],
             changes: Mapping[str, Any], treatment_resolved: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Which changed keys only one side has: key -> ``"added"`` (treatment only) or ``"removed"`` (control only).

    Parameters
    ----------
    control_resolved : mapping
        The control config, resolved.
    treatment : dict
        The treatment config, unresolved.
    changes : mapping
        The keys that differ (from :func:`prove`).
    treatment_resolved : mapping, optional
        ``treatment`` already resolved, when the caller holds it (default: resolved here).
    """
    t_resolved = resolve(treatment) if treatment_resolved is None else treatment_resolved
    cf, tf = flatten(dict(control_resolved)), flatten(dict(t_resolved))
    out: dict[str, str] = {}
    for k in changes:
        if k in tf and k not in cf:
            out[k] = "added"
        elif k in cf and k not in tf:
            out[k] = "removed"
    return out


def describe_change(old: Any, new: Any, how: str | None = None) -> str:
    """``0.1 -> 0.2``, or ``added (3)`` / ``removed (was 3)`` when ``how`` says one side lacks the key."""
    if how == "added":
        return f"added ({format_value(new)})"
    if how == "removed":
        return f"removed (was {format_value(old)})"
    return f"{format_value(old)} -> {format_value(new)}"
def _app_derived(control: Mapping[str, Any], treatment: Mapping[str, Any], roots: set[str]) -> set[str]:
    """Derived keys inside an app's config, whose interpolations are relative to the app's own root."""
    app_roots = {a for a in (to_app_key(r) for r in roots) if a}
    if not app_roots:
        return set()
    found: set[str] = set()
    for cfg in (control, treatment):
        params = app_params(cfg)
        if params is not None:
            found |= derived_keys(flatten(dict(params)), app_roots)
    return {f"{APP_NODE}.{k}" for k in found}




def _equal_leaf(a: Any, b: Any) -> bool:
    """Leaf equality for the plan proof: types kept apart, and nan equal to nan (also inside lists)."""
    if a is MISSING or b is MISSING:
        return a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal_leaf(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal_leaf(a[k], b[k]) for k in a)
    return type(a) is type(b) and _same(a, b)


def select(cfg: Mapping[str, Any], key: str) -> Any:
    """The value at dotted ``key`` in a plain config (list items by index), or :data:`MISSING`."""
    node: Any = cfg
    for part in key.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node


def _assign(cfg: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node: Any = cfg
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = copy.deepcopy(value)
    else:
        node[last] = copy.deepcopy(value)


def format_seeds(seeds: list[int]) -> str:
    """``[0, 1, 2]`` for short lists, ``0..99`` for a long contiguous range."""
    if len(seeds) > 10 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]}"
    return str(seeds)


def describe(plan: Plan) -> str:
    """A human description of the plan: arms, seeds and each treatment's resolved diff (for ``dry_run``)."""
    var = plan.variable
    lines = [
        f"Ablation of `{var.key}` ({'config group' if var.is_group else 'variable'} {var.name!r})",
        f"  arms ({len(plan.arms)}): " + ", ".join(a.name for a in plan.arms),
        f"  seeds ({len(plan.seeds)} per arm): {format_seeds(plan.seeds)}",
        f"  trials: {len(plan.arms) * len(plan.seeds)}",
    ]
    for arm in plan.treatments:
        lines.append(f"  {arm.name} vs control:")
        lines += change_lines(arm)
    return "\n".join(lines)


def change_lines(arm: Arm, indent: str = "    ") -> list[str]:
    """One line per key ``arm`` changes against control (``key: 0.1 -> 0.2``, ``key: added (3)``),
    derived changes tagged; shared by the dry-run descriptions of single ablations and suites."""
    return [f"{indent}{k}: {describe_change(a, b, arm.presence.get(k))}{'  (derived)' if k in arm.derived else ''}"
            for k, (a, b) in arm.changes.items()]


__all__ = [
    "CONTROL", "MIN_SEEDS", "Arm", "Plan", "Variable", "check_value_type", "derived_keys", "describe",
    "flatten", "format_value", "make_plan", "parse_seeds", "parse_variable", "prove", "task_keys",
]
