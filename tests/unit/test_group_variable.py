"""Config-group variables: select the group option the Hydra way and list what the swap changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.orchestrate.pipeline import prepare
from ablate.plan.arms import describe
from ablate.plan.compose import compose

FILES = {
    "ablate.yaml": "defaults:\n  - ablate_base\n  - task: t\n  - _self_\n",
    "task/t.yaml": "defaults:\n  - model: small\nfn: m:f\nmetric: acc\nname: run_${task.model.width}\n",
    "task/model/small.yaml": "width: 8\ndepth: 2\n",
    "task/model/large.yaml": "width: 64\ndepth: 2\ndropout: 0.1\n",
    "variable/model.yaml": "group: task/model\nvalues: [large]\n",
}


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        p = tmp_path / "conf" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path / "conf"


def test_group_swap_lists_changes(conf: Path) -> None:
    c = compose(["variable=model"], config_path=str(conf))
    plan, _ = prepare(c.cfg, variable_name=c.variable_name, compose=c.compose, choices=c.choices)
    assert plan.control.label == "small (control)"
    (t,) = plan.treatments
    assert t.name == "model=large"
    assert t.changes == {"task.model.dropout": (None, 0.1), "task.model.width": (8, 64),
                         "task.name": ("run_8", "run_64")}
    assert t.derived == ["task.name"]
    assert t.config["task"]["model"] == {"width": 64, "depth": 2, "dropout": 0.1}
    text = describe(plan)
    assert "config group 'model'" in text and "task.model.width: 8 -> 64" in text


def test_group_control_choice_refused(conf: Path) -> None:
    c = compose(["variable=model", "variable.values=[small]"], config_path=str(conf))
    with pytest.raises(ConfigError, match=r"the control's choice for task/model"):
        prepare(c.cfg, variable_name=c.variable_name, compose=c.compose, choices=c.choices)


def test_unknown_group_option(conf: Path) -> None:
    c = compose(["variable=model", "variable.values=[huge]"], config_path=str(conf))
    with pytest.raises(ConfigError, match=r"no task/model named 'huge'.*Available: large, small"):
        prepare(c.cfg, variable_name=c.variable_name, compose=c.compose, choices=c.choices)


PRESENCE_FILES = {
    **FILES,
    "task/model/small.yaml": "width: 8\ndepth: 2\nact: null\n",
    "task/model/large.yaml": "width: 64\ndepth: 2\ndropout: 0.1\nact: relu\n",
    "task/model/tiny.yaml": "width: 4\nact: null\n",
    "task/model/deep.yaml": "width: 8\ndepth: 9\nact: null\nextra: {a: 1, b: null}\n",
}


@pytest.mark.parametrize(("option", "lines", "presence"), [
    ("large", ["task.model.dropout: added (0.1)", "task.model.act: null -> relu", "task.model.width: 8 -> 64"],
     {"task.model.dropout": "added"}),
    ("tiny", ["task.model.depth: removed (was 2)", "task.model.width: 8 -> 4"], {"task.model.depth": "removed"}),
    ("deep", ["task.model.extra.a: added (1)", "task.model.extra.b: added (null)", "task.model.depth: 2 -> 9"],
     {"task.model.extra.a": "added", "task.model.extra.b": "added"}),
])
def test_group_diff_says_added_and_removed(tmp_path: Path, option: str, lines: list[str],
                                           presence: dict[str, str]) -> None:
    for rel, text in PRESENCE_FILES.items():
        p = tmp_path / "conf" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    c = compose(["variable=model", f"variable.values=[{option}]"], config_path=str(tmp_path / "conf"))
    plan, _ = prepare(c.cfg, variable_name=c.variable_name, compose=c.compose, choices=c.choices)
    (t,) = plan.treatments
    assert t.presence == presence
    text = describe(plan)
    for line in lines:
        assert f"    {line}" in text, text
    assert "null -> 0.1" not in text and "2 -> null" not in text
    # a suite's dry run describes the same treatment with the same words
    import dataclasses

    from ablate.plan.suite import SuitePlan, describe_suite

    arms = [plan.control, *(dataclasses.replace(a, variable="model") for a in plan.treatments)]
    suite = SuitePlan(**{f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)} | {"arms": arms},
                      variables=[plan.variable])
    text = describe_suite(suite)
    for line in lines:
        assert f"    {line}" in text, text
    assert "null -> 0.1" not in text and "2 -> null" not in text
