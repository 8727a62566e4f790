"""A suite's bottom line names the control's value of a group variable's own key (found while testing issue 35's
template suite: ``variable=lr,callbacks`` printed every key of the control, so the line ran past 30 words)."""

from __future__ import annotations

from ablate.judge.bottom_line import control_value


def test_the_control_value_of_a_group_variable_in_a_suite() -> None:
    v = {"arms": [{"name": "control", "value": {"task.params.model.optimizer.lr": 0.05,
                                                "task.params.callbacks": "default"}}],
         "suite": {"variables": [{"name": "tpl_lr", "key": "task.params.model.optimizer.lr"},
                                 {"name": "tpl_callbacks", "key": "task/params/callbacks"}]}}
    assert control_value(v, {"variable": "tpl_callbacks"}) == "default"
    assert control_value(v, {"variable": "tpl_lr"}) == "0.05"
