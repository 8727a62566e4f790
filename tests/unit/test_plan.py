"""Plan derivation: arms, the proof that treatments differ only in the variable, and value types."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from omegaconf import OmegaConf

from ablate.errors import ConfigError, PlanError
from ablate.plan.arms import Variable, describe, format_value, make_plan, parse_seeds, parse_variable


def base_cfg() -> dict[str, Any]:
    return {
        "seed": 0,
        "seeds": 3,
        "task": {
            "fn": "m:f",
            "optim": {"lr": 0.05, "momentum": 0.9, "name": "sgd"},
            "hidden": 64,
            "layers": [64, 64],
            "tag": "abc",
            "sched": None,
            "warmup_lr": "${task.optim.lr}",
            "scaled": "${oc.select:task.warmup_lr,0}",
            "run_name": "lr_${task.optim.lr}_h${task.hidden}",
            "use_bn": True,
        },
    }


def plan_for(key: str, values: list[Any], cfg: dict[str, Any] | None = None):
    return make_plan(cfg or base_cfg(), Variable("v", key, tuple(values)), [0, 1, 2])


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("task.optim.lr", 1e-3, id="float-1e-3"),
        pytest.param("task.optim.lr", 1, id="int-for-float-key"),
        pytest.param("task.layers", [128, 32, 8], id="list"),
        pytest.param("task.sched", "cosine", id="string-for-null-key"),
        pytest.param("task.tag", "a,b", id="string-with-comma"),
        pytest.param("task.tag", "k=v", id="string-with-equals"),
        pytest.param("task.tag", "x#y", id="string-with-hash"),
        pytest.param("task.tag", "it's \"quoted\"", id="string-with-quotes"),
        pytest.param("task.tag", "12e45", id="string-that-looks-like-a-number"),
        pytest.param("task.tag", None, id="null"),
        pytest.param("task.use_bn", False, id="bool"),
        pytest.param("task.hidden", 128, id="int"),
    ],
)
def test_value_types_survive(key: str, value: Any) -> None:
    plan = plan_for(key, [value])
    treat = plan.treatments[0]
    got = OmegaConf.select(OmegaConf.create(treat.config), key)
    got = OmegaConf.to_container(got) if OmegaConf.is_config(got) else got
    expected = float(value) if key == "task.optim.lr" else value
    assert got == expected
    assert type(got) is type(expected)
    assert treat.value == expected and type(treat.value) is type(expected)
    assert treat.changes[key][1] == expected


def test_arms_control_first_and_named() -> None:
    plan = plan_for("task.optim.lr", [0.1, 0.001])
    assert [a.name for a in plan.arms] == ["control", "lr=0.1", "lr=0.001"]
    assert plan.control.value == 0.05
    assert plan.seeds == [0, 1, 2]
    assert plan.trials()[:3] == [("control", 0), ("lr=0.1", 0), ("lr=0.001", 0)]


def test_derived_changes_listed() -> None:
    plan = plan_for("task.optim.lr", [0.1])
    t = plan.treatments[0]
    assert set(t.changes) == {"task.optim.lr", "task.warmup_lr", "task.scaled", "task.run_name"}
    assert t.derived == ["task.run_name", "task.scaled", "task.warmup_lr"]
    assert t.changes["task.run_name"] == ("lr_0.05_h64", "lr_0.1_h64")
    text = describe(plan)
    assert "task.warmup_lr: 0.05 -> 0.1  (derived)" in text
    assert "task.optim.lr: 0.05 -> 0.1" in text


def test_relative_interpolation_is_derived() -> None:
    cfg = base_cfg()
    cfg["task"]["optim"]["wd"] = "${.lr}"
    t = plan_for("task.optim.lr", [0.2], cfg).treatments[0]
    assert "task.optim.wd" in t.derived


def test_unstable_resolver_is_refused() -> None:
    counter = itertools.count()
    OmegaConf.register_new_resolver("ablate_test_counter", lambda: next(counter), replace=True)
    cfg = base_cfg()
    cfg["task"]["run_id"] = "${ablate_test_counter:}"
    with pytest.raises(PlanError, match=r"task\.run_id"):
        plan_for("task.optim.lr", [0.1], cfg)


def test_missing_key_lists_close_matches() -> None:
    with pytest.raises(ConfigError, match=r"'task.optim.lrr' is not in the composed config.*task\.optim\.lr"):
        plan_for("task.optim.lrr", [0.1])


def test_key_pointing_at_mapping_suggests_group() -> None:
    with pytest.raises(ConfigError, match=r"is a mapping.*group: task/optim"):
        plan_for("task.optim", [{"lr": 1}])


def test_value_equal_to_control_refused() -> None:
    with pytest.raises(ConfigError, match=r"variable\.values\[1\].*control value"):
        plan_for("task.optim.lr", [0.1, 0.05])


@pytest.mark.parametrize(
    ("key", "value", "pattern"),
    [
        pytest.param("task.hidden", "big", r"`variable.values\[0\]`: is big \(string\), but `task.hidden` holds a int",
                     id="int-key-given-string"),
        pytest.param("task.hidden", 0.5, r"holds a int", id="int-key-given-float"),
        pytest.param("task.tag", 1.2e46, r"quote them", id="string-key-given-number"),
        pytest.param("task.optim.lr", "None", r"spell the null value `null`", id="python-None"),
        pytest.param("task.use_bn", 1, r"holds a bool", id="bool-key-given-int"),
        pytest.param("task.layers", 3, r"holds a list", id="list-key-given-int"),
    ],
)
def test_wrong_type_refused(key: str, value: Any, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        plan_for(key, [value])


@pytest.mark.parametrize(
    ("seeds", "expected"),
    [(3, [0, 1, 2]), (5, [0, 1, 2, 3, 4]), ([3, 7, 9], [3, 7, 9]), ((9, 0, 4), [9, 0, 4])],
)
def test_parse_seeds(seeds: Any, expected: list[int]) -> None:
    assert parse_seeds(seeds) == expected


@pytest.mark.parametrize(
    ("seeds", "pattern"),
    [(1, "1 seed per arm is below the minimum of 3"), (0, "below the minimum of 3"),
     (2, "2 seeds per arm is below the minimum of 3"), ("ten", "must be an integer"), (2.5, "must be an integer"),
     (True, "must be an integer"), ([1, 1], "repeats a seed"), ([1], r"lists 1 seed \[1\], below the minimum of 3"),
     ([4, 7], r"lists 2 seeds \[4, 7\], below the minimum of 3"), ([], "lists 0 seeds"),
     (None, "must be an integer")],
)
def test_bad_seeds(seeds: Any, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        parse_seeds(seeds)


@pytest.mark.parametrize(
    ("seeds", "fix"),
    [(2, "use `seeds=3` or more"), (0, "use `seeds=3` or more"), ([4, 7], "`seeds=[4,7,8]`"),
     ([9, 3], "`seeds=[9,3,10]`"), ([5], "`seeds=[5,6,7]`"), ([], "`seeds=[0,1,2]`"),
     ([4294967295, 0], "`seeds=[4294967295,0,1]`")],
)
def test_too_few_seeds_says_why_and_how_to_fix(seeds: Any, fix: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_seeds(seeds)
    msg = str(exc.value)
    assert msg.startswith("`seeds`: ")
    assert 'a verdict needs at least 3 seeds per arm for a mean, a spread and a test' in msg
    assert '"insufficient data"' in msg
    assert f"Fix: {'list at least 3 seeds, e.g. ' if isinstance(seeds, list) else ''}{fix}" in msg
    if isinstance(seeds, list):  # the suggested list is itself accepted
        parse_seeds([int(x) for x in fix.split("[")[1].split("]")[0].split(",")])


def test_plan_minimum_is_the_verdicts() -> None:
    from ablate.plan.arms import MIN_SEEDS
    from ablate.stats import core, power

    assert MIN_SEEDS == core.MIN_SEEDS == power.MIN_SEEDS == 3


@pytest.mark.parametrize(
    ("node", "pattern"),
    [
        ({"key": "a.b", "values": []}, "is empty"),
        ({"key": "a.b"}, "is missing"),
        ({"key": "a.b", "values": 0.1}, r"must be a list.*variable.values=\[0.1\]"),
        ({"key": "a.b", "values": [1, 1]}, "twice"),
        ({"values": [1]}, "exactly one of `key`"),
        (None, "no variable chosen.*available: lr, wd"),
    ],
)
def test_bad_variable(node: Any, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        parse_variable(node, "x" if node else None, ["lr", "wd"])


def test_format_value() -> None:
    assert [format_value(v) for v in (None, True, 1e-3, [1, "a"], "s")] == ["null", "true", "0.001", "[1, a]", "s"]


@pytest.mark.parametrize(("raw", "expected"), [(None, None), (0.01, 0.01), ("0.01", 0.01), ("2%", "2%"),
                                                (" 2.5 % ", "2.5 %")])
def test_parse_margin(raw: Any, expected: Any) -> None:
    from ablate.judge.options import parse_margin

    assert parse_margin(raw) == expected


@pytest.mark.parametrize("raw", ["abc", -1, "2 percent", True])  # 0 clears the margin (issue 14)
def test_parse_margin_refuses(raw: Any) -> None:
    from ablate.judge.options import parse_margin

    with pytest.raises(ConfigError, match="`margin`"):
        parse_margin(raw)
