"""Suites (the entry point): compose once per variable, plan each against the shared control and run the
merged plan in one sweep dir (``ablate -m variable=lr,dropout seeds=10``, or ``ablate.run(variable=[...])``).

What a suite is, and how its plans merge, is :mod:`ablate.plan.suite` (the pure part); the suite's part of the
verdict (multiplicity statement, per-arm confounds) is :mod:`ablate.judge.suite`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ablate.errors import ConfigError
from ablate.orchestrate.pipeline import prepare, start
from ablate.plan.arms import Plan, flatten
from ablate.plan.compose import compose
from ablate.plan.suite import SuitePlan, merge_plans, suite_sweep_dir, without_variable
from ablate.record.sweepdir import SweepDir
from ablate.trials.tasks.interface import with_cli_overrides


def prepare_suite(compositions: Sequence[Any], names: Sequence[str], *, cwd: str | None = None
                  ) -> tuple[SuitePlan, Any]:
    """Validate options and plan a suite from one composition per variable.

    Parameters
    ----------
    compositions : sequence of ablate.plan.compose.Composed
        ``compose(overrides + ["variable=<name>"])`` for each name, in order.
    names : sequence of str
        The variables' names.
    cwd : str, optional
        The project directory (an ``app`` task's config is composed from it).

    Returns
    -------
    (SuitePlan, Options)

    Raises
    ------
    ConfigError
        A variable's file changes the control config (it may set only ``variable.*``), or any error
        :func:`ablate.orchestrate.pipeline.prepare` raises for one variable.
    """
    base = without_variable(compositions[0].cfg)
    base_flat = flatten(base)
    plans: list[Plan] = []
    opts = None
    for comp, name in zip(compositions, names, strict=True):
        other = flatten(without_variable(comp.cfg))
        diff = sorted(k for k in set(base_flat) | set(other) if base_flat.get(k, ...) != other.get(k, ...))
        if diff:
            raise ConfigError(f"choosing variable={name} changes the control config ({', '.join(diff[:5])}), so "
                              f"the suite would have no single control", where=f"variable={name}",
                              fix=f"keep conf/variable/{name}.yaml to `key:`/`group:` and `values:` (no @package "
                              "_global_ or defaults that set other keys)")
        cfg = {**base, "variable": comp.cfg.get("variable")}
        plan, o = prepare(cfg, variable_name=name, available_variables=comp.variables,
                          compose=_compose_without_variable(comp.compose, comp.cfg.get("variable")),
                          choices=comp.choices, cwd=cwd)
        plans.append(plan)
        opts = opts or o
    suite = merge_plans(plans)
    # The shared control's config holds no variable node of its own; every arm gets the same one.
    node = {"suite": list(names)}
    for arm in suite.arms:
        arm.config = {**arm.config, "variable": node}
    return suite, opts


def _compose_without_variable(compose: Callable[[str], Mapping[str, Any]], node: Any
                              ) -> Callable[[str], Mapping[str, Any]]:
    def inner(extra: str) -> Mapping[str, Any]:
        return {**compose(extra), "variable": node}

    return inner




def run_suite(names: Sequence[str], overrides: Sequence[str], *, config_path: str | None,
              config_dirs: Sequence[str] = (), config_name: str | None = None,
              cwd: str | None = None, app_overrides: Sequence[str] = (),
              command: Mapping[str, Any] | None = None) -> SweepDir | None:
    """Compose, plan, pin and run a suite (``ablate -m variable=lr,dropout ...``).

    Parameters
    ----------
    names : sequence of str
        The variables (options of the ``variable`` config group).
    overrides : sequence of str
        The other overrides, in Hydra syntax.
    config_path, config_dirs, config_name
        As for :func:`ablate.plan.compose.compose`.
    cwd : str, optional
        The project directory (default: the current directory).
    app_overrides : sequence of str
        ``app.`` overrides of the command line, for an ``app`` task (:func:`ablate.trials.tasks.app.split_cli`).
    command : mapping, optional
        The command line (:func:`ablate.plan.overrides.command_record`), recorded in the plan.

    Returns
    -------
    SweepDir or None
        The suite's sweep dir (its verdict written unless ``wait=false`` submitted it), None for a dry run.

    Raises
    ------
    ConfigError, PlanError
        Before anything is written, for any variable's invalid input.
    """
    comps = [with_cli_overrides(compose([*overrides, f"variable={n}"], config_path=config_path,
                                        config_dirs=config_dirs, config_name=config_name), app_overrides)
             for n in names]
    if ((comps[0].cfg.get("scale") or {}).get("key")) is not None:
        raise ConfigError("a suite cannot run a transfer check yet", where="scale.key",
                          fix="run the transfer check per variable: `ablate -m variable=<name> scale.key=...`")
    prepared = prepare_suite(comps, names, cwd=cwd)
    sd = start(comps[0].cfg, sweep_dir=suite_sweep_dir(comps[0].sweep_dir, names), variable_name=None, cwd=cwd,
               config_dirs=comps[0].config_dirs, prepared=prepared, command=command)
    return sd
