"""Issue 35, item 16: two arms 5.6e-17 apart (float ``range()`` values: ``0.1 + 0.2`` beside ``0.3``) were accepted
without a word, as two arms of one setting. Refused in one line naming both values, in-process; the fix runs."""

from __future__ import annotations

import numpy as np
import pytest

import ablate
from ablate.errors import ConfigError
from tests.helpers import REPO

CONF = REPO / "conf"


def _values(vals: list[float]) -> str:
    return "variable.values=[" + ",".join(repr(float(v)) for v in vals) + "]"


@pytest.mark.parametrize(("control", "values", "where", "other"), [
    (0.3, [0.1, 0.1 + 0.2], "variable.values[1]", "the control value 0.3"),
    (0.05, [0.1, 0.2, 0.1 + 0.2, 0.3], "variable.values[3]", "variable.values[2] 0.30000000000000004"),
    (0.05, [*np.arange(0.1, 0.4, 0.1), 0.3], "variable.values[4]", "variable.values[2] 0.30000000000000004"),
    (0.05, [sum([0.1] * 10), 1.0], "variable.values[1]", "variable.values[0] 0.9999999999999999"),
])
def test_float_rounding_twins_are_refused(control: float, values: list[float], where: str, other: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError) as err:
        ablate.run(CONF, variable="lr", overrides=[f"task.optim.lr={control}", _values(values), "dry_run=true"])
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"`{where}`: ") and f"away from {other}: float rounding" in msg
    fixed = sorted({round(float(v), 12) for v in values} - {control})
    assert ablate.run(CONF, variable="lr", overrides=[f"task.optim.lr={control}", _values(fixed),
                                                      "dry_run=true"]) is None  # the fix: the decimals meant
    assert "dry run: nothing launched" in capsys.readouterr().out


def test_values_that_differ_by_more_than_rounding_are_arms() -> None:
    assert ablate.run(CONF, variable="lr", overrides=["task.optim.lr=0.3", _values([0.3000001, 0.31]),
                                                      "dry_run=true"]) is None
