"""Suites (the pure part): several one-variable ablations against one shared control, in one sweep dir.

``ablate -m variable=lr,dropout,warmup seeds=10`` (Hydra's choice syntax over the ``variable`` group)
composes the config once per variable, checks that every composition gives the same control, plans
each variable against that control (each treatment proved to differ from the control in its own key
only, :func:`ablate.plan.arms.make_plan`), and merges the plans: the control arm runs once, so 3 variables
x 1 treatment x 10 seeds is 10 control trials + 30 treatment trials = 40 trials, not 60.

Multiplicity is declared over the whole suite (``family=suite``, the default: Holm over every treatment
of every variable) or per variable (``family=variable``: one Holm family per variable). The verdict
says which.

Everything downstream (trials, ``status``, ``resume``, ``collect``, SLURM, trackers, ``ablate.load``)
reads the merged plan from ``ablation.yaml`` like any other: the arms carry the name of their variable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate.errors import ConfigError
from ablate.plan.arms import Arm, Plan, Variable, change_lines, flatten, format_seeds, format_value
from ablate.record.names import unique_name

SUITE_SEPARATOR = "+"


@dataclass
class SuitePlan(Plan):
    """A :class:`~ablate.plan.arms.Plan` whose treatments come from several variables.

    Attributes
    ----------
    variables : list of Variable
        The suite's variables, in the order given on the command line. ``variable`` (inherited) is a
        summary Variable named ``lr+dropout`` whose key lists every variable's key.
    """

    variables: list[Variable] = field(default_factory=list)


def split_suite(overrides: Sequence[str]) -> tuple[list[str] | None, list[str]]:
    """Take ``variable=a,b,c`` (or ``variable=choice(a,b,c)``) out of the overrides.

    Parameters
    ----------
    overrides : sequence of str
        The command line's overrides, in Hydra syntax.

    Returns
    -------
    names : list of str or None
        The variables of the suite, or None when ``variable`` is not a sweep.
    rest : list of str
        The other overrides, unchanged.

    Raises
    ------
    ConfigError
        For a ``variable`` sweep that is not a list of choices (``range``, ``glob``), repeats a
        name, or names one variable only.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from hydra.errors import HydraException  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import

    parser = OverridesParser.create()
    names: list[str] | None = None
    rest: list[str] = []
    for ov in overrides:
        try:
            parsed = parser.parse_override(ov)
        except HydraException:
            rest.append(ov)  # reported by the composer with its own message
            continue
        if parsed.get_key_element() != "variable" or not parsed.is_sweep_override():
            rest.append(ov)
            continue
        if not parsed.is_choice_sweep():
            raise ConfigError(f"{ov!r} is not a list of variable names", where="variable",
                              fix="name them: `variable=lr,dropout` (one ablation per variable, one shared control)")
        got = [str(x) for x in parsed.sweep_string_iterator()]
        dup = sorted({n for n in got if got.count(n) > 1})
        if dup:
            raise ConfigError(f"names {', '.join(dup)} twice", where="variable", fix="list each variable once")
        if names is not None:
            raise ConfigError("is given twice", where="variable", fix="give one `variable=a,b,c`")
        names = got
    if names is not None and len(names) < 2:
        raise ConfigError(f"{names} is a suite of one variable", where="variable",
                          fix=f"run it as an ablation: `variable={names[0] if names else '<name>'}`")
    return names, rest


def suite_variable(variables: Sequence[Variable]) -> Variable:
    """The summary Variable of a suite: name ``lr+dropout``, key ``task.optim.lr, model.dropout``."""
    return Variable(name=SUITE_SEPARATOR.join(v.name for v in variables),
                    key=", ".join(v.key for v in variables),
                    values=tuple(x for v in variables for x in v.values))


def without_variable(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The config without its `variable` (and `hydra`) nodes: what every variable of a suite must share."""
    return {k: v for k, v in cfg.items() if k not in ("variable", "hydra")}


def merge_plans(plans: Sequence[Plan]) -> SuitePlan:
    """Merge one plan per variable (all from the same control config) into a suite plan.

    Parameters
    ----------
    plans : sequence of Plan
        From :func:`ablate.plan.arms.make_plan`, one per variable, with equal control configs and seeds.

    Returns
    -------
    SuitePlan
        Control first (once), then every variable's treatments in order. Each arm's ``variable`` is
        the name of its variable; a treatment name shared by two variables is prefixed with its
        variable's name (``lr2-lr=0.1``).

    Raises
    ------
    ConfigError
        When two variables give the same treatment (same key and value), the seeds differ, or the plans'
        control configs differ.
    """
    control = plans[0].control
    base = flatten(without_variable(control.config))
    for p in plans[1:]:
        other = flatten(without_variable(p.control.config))
        diff = sorted(k for k in set(base) | set(other) if base.get(k, ...) != other.get(k, ...))
        if diff:  # e.g. a value frozen at plan time (``${now:}``) that differs between the variables' plans
            raise ConfigError(f"the control planned for variable {p.variable.name} differs from the one for "
                              f"{plans[0].variable.name} in {', '.join(diff[:5])}, so the suite would have no "
                              "single control", where="variable",
                              fix="make those keys fixed values, or run the variables as separate ablations")
    control.variable = None
    # the shared control's value: every variable's control value, by key (the arm is the control of each)
    control.value = {p.variable.key.replace("/", "."): p.control.value for p in plans}
    control.label = "control"
    arms: list[Arm] = [control]
    taken = {control.name}
    seen: dict[tuple[str, str], str] = {}
    for p in plans:
        if p.seeds != plans[0].seeds:
            raise ConfigError("the suite's variables were planned with different seeds", where="seeds",
                              fix="give the suite one seed plan (`seeds=N` on the command line)")
        for arm in p.treatments:
            ident = (p.variable.key, format_value(arm.value))
            if ident in seen:
                raise ConfigError(f"variables {seen[ident]} and {p.variable.name} both set `{p.variable.key}` to "
                                  f"{format_value(arm.value)}: the same treatment twice", where="variable",
                                  fix=f"drop that value from one of conf/variable/{p.variable.name}.yaml or "
                                  f"conf/variable/{seen[ident]}.yaml")
            seen[ident] = p.variable.name
            name = arm.name
            if name.casefold() in {t.casefold() for t in taken}:
                            name = unique_name(f"{p.variable.name}-{arm.name}", taken)
            taken.add(name)
            arm.name = name
            arm.variable = p.variable.name
            arms.append(arm)
    variables = [p.variable for p in plans]
    return SuitePlan(variable=suite_variable(variables), arms=arms, seeds=list(plans[0].seeds),
                     variables=variables)


def suite_record(plan: Plan) -> dict[str, Any]:
    """The ``suite`` entry of ``ablation.yaml`` (empty for a one-variable ablation)."""
    if not isinstance(plan, SuitePlan):
        return {}
    return {"suite": {"variables": [
        {"name": v.name, "key": v.key, "values": list(v.values), "is_group": v.is_group,
         "arms": [a.name for a in plan.arms if getattr(a, "variable", None) == v.name]}
        for v in plan.variables]}}


def describe_suite(plan: SuitePlan) -> str:
    """A human description of a suite plan (dry run, and the launch log)."""
    n_trials = len(plan.arms) * len(plan.seeds)
    one_by_one = sum(len(v.values) + 1 for v in plan.variables) * len(plan.seeds)
    lines = [f"Suite of {len(plan.variables)} ablations against one shared control: "
             + ", ".join(f"{v.name} (`{v.key}`)" for v in plan.variables),
             f"  arms ({len(plan.arms)}): " + ", ".join(a.name for a in plan.arms),
             f"  seeds ({len(plan.seeds)} per arm): {format_seeds(plan.seeds)}",
             f"  trials: {n_trials} (the control runs once; {one_by_one} if each variable ran alone)"]
    for arm in plan.treatments:
        lines.append(f"  {arm.name} ({arm.variable}) vs control:")
        lines += change_lines(arm)  # `added (3)` / `removed (was 2)` for keys one side lacks, as single ablations
    return "\n".join(lines)


def suite_sweep_dir(sweep_dir: str, names: Sequence[str]) -> str:
    """The default sweep dir ends in ``_<first variable>``; a suite's ends in ``_suite_lr+dropout``."""
    suffix = f"_{names[0]}"
    if sweep_dir.endswith(suffix):
        return sweep_dir[: -len(suffix)] + "_suite_" + SUITE_SEPARATOR.join(names)
    return sweep_dir


def families(plan: Mapping[str, Any], family: str) -> list[list[str]]:
    """The multiplicity families of a plan record's treatments.

    Parameters
    ----------
    plan : mapping
        The plan record (``ablation.yaml``).
    family : {"suite", "variable"}
        ``suite``: every treatment in one family; ``variable``: one family per variable of a suite (a
        one-variable ablation is always one family).

    Returns
    -------
    list of list of str
        Treatment arm names per family, in plan order.
    """
    treatments = [a for a in plan["arms"][1:]]
    if family != "variable" or not plan.get("suite"):
        return [[a["name"] for a in treatments]] if treatments else []
    out: dict[str, list[str]] = {}
    for a in treatments:
        out.setdefault(str(a.get("variable")), []).append(a["name"])
    return list(out.values())
