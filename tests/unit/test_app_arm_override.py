"""An app trial's arm override is built from the arm's own variable: in a suite, never from the suite's summary."""

from __future__ import annotations

import pytest

from ablate.errors import ConfigError
from ablate.trials.tasks.app import arm_override, arm_variable

LR = {"name": "lr", "key": "task.params.model.optimizer.lr", "values": [0.01], "is_group": False}
CALLBACKS = {"name": "callbacks", "key": "task/params/callbacks", "values": ["none"], "is_group": True}
OUTDIR = {"name": "outdir", "key": "task.params.paths.output_dir", "values": ["${hydra:runtime.output_dir}/alt"],
          "is_group": False}


def suite(*variables: dict) -> dict:
    """A suite's plan record as pipeline.plan_record writes it: the summary variable and the suite's own."""
    return {"variable": {"name": "+".join(v["name"] for v in variables),
                         "key": ", ".join(v["key"] for v in variables), "is_group": False},
            "suite": {"variables": list(variables)}}


@pytest.mark.parametrize("order", [(LR, CALLBACKS), (CALLBACKS, OUTDIR)])
def test_each_suite_treatment_gets_its_own_override(order: tuple[dict, ...]) -> None:
    # the two cases of issue 22: `lr,callbacks` gave `model.optimizer.lr, task/params/callbacks=0.01`;
    # `callbacks,outdir` gave no override at all (every arm ran the control)
    plan = suite(*order)
    want = {"lr": ["model.optimizer.lr=0.01"], "callbacks": ["callbacks=none"],
            "outdir": ["paths.output_dir='${hydra:runtime.output_dir}/alt'"]}
    for v in order:
        arm = {"name": f"{v['name']}-arm", "value": v["values"][0], "variable": v["name"]}
        assert arm_override(arm_variable(plan, arm), arm) == want[v["name"]]
    assert arm_override(arm_variable(plan, {"name": "control"}), {"name": "control"}) == []


def test_single_ablation_uses_the_plans_variable() -> None:
    arm = {"name": "lr=0.01", "value": 0.01}
    assert arm_override(arm_variable({"variable": LR}, arm), arm) == ["model.optimizer.lr=0.01"]


def test_a_treatment_naming_no_variable_of_the_suite_is_refused() -> None:
    with pytest.raises(ConfigError, match="names variable 'dropout', which is not one of the suite's"):
        arm_variable(suite(LR, CALLBACKS), {"name": "dropout=0.1", "value": 0.1, "variable": "dropout"})


def test_a_tuned_arm_adds_its_setting_and_its_control_only_the_setting() -> None:
    # issue 40: `control+momentum=0.5` is the control at a setting; `lr=0.01+momentum=0.5` the treatment at it
    setting = {"task.params.model.optimizer.momentum": 0.5}
    control = {"name": "control+momentum=0.5", "base": "control", "value": 0.05, "setting": setting}
    treat = {"name": "lr=0.01+momentum=0.5", "base": "lr=0.01", "value": 0.01, "setting": setting}
    plan = {"variable": LR}
    assert arm_override(arm_variable(plan, control), control) == ["model.optimizer.momentum=0.5"]
    assert arm_override(arm_variable(plan, treat), treat) == ["model.optimizer.lr=0.01",
                                                              "model.optimizer.momentum=0.5"]
