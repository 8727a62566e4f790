"""Two config keys that flatten to one tracker param name both keep their value (issue 35, item 5): a literal key
with a dot (``"opt.lr"``) beside a nested one (``opt: {lr}``) gets its own quoted name."""

from __future__ import annotations

from typing import Any

import pytest

from ablate.trackers.limits import flat_params


@pytest.mark.parametrize(("config", "params", "merged"), [
    ({"task": {"opt": {"lr": 0.1}, "opt.lr": 0.5}},  # the report's shape
     {"task.opt.lr": 0.1, 'task["opt.lr"]': 0.5}, {"task.opt.lr": ['task["opt.lr"]']}),
    ({"task": {"opt.lr": 0.5, "opt": {"lr": 0.1}}},  # the literal key first: the nested one still keeps the name
     {'task["opt.lr"]': 0.5, "task.opt.lr": 0.1}, {"task.opt.lr": ['task["opt.lr"]']}),
    ({"a.b": {"c": 1}, "a": {"b.c": 2, "b": {"c": 3}}},  # three ways to one name
     {'["a.b"].c': 1, 'a["b.c"]': 2, "a.b.c": 3}, {"a.b.c": ['["a.b"].c', 'a["b.c"]']}),
    ({"task": {"opt.lr": 0.5, "opt": {"momentum": 0.9}, "tags": ["a", "b"], "empty": {}}},  # nothing meets
     {"task.opt.lr": 0.5, "task.opt.momentum": 0.9, "task.tags": ["a", "b"], "task.empty": {}}, {}),
])
def test_every_value_gets_a_name_of_its_own(config: dict[str, Any], params: dict[str, Any],
                                            merged: dict[str, list[str]]) -> None:
    assert flat_params(config) == (params, merged)
