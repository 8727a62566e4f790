"""One equality for "the same config value" in the plan's proof and the app form's Hydra check of the arms
(issue 34: the app form kept its own copy, in which ``1 == True``; the plan's keeps bools apart)."""

from __future__ import annotations

import math

import pytest

from ablate.plan.arms import _same
from ablate.trials.tasks import app


@pytest.mark.parametrize(("a", "b", "same"), [
    (1, True, False), (0, False, False), (True, True, True),  # a bool is not the number it equals in Python
    (1, 1.0, True), (math.nan, math.nan, True),  # an int and its float are one value; .nan is itself
    (1, 2, False), ("1", 1, False), (None, None, True),
])
def test_the_app_check_compares_values_as_the_plan_does(a: object, b: object, same: bool) -> None:
    assert app.same_value(a, b) is same
    assert _same(a, b) is same
