"""Override rendering: every value parses back, through Hydra's parser and OmegaConf, to itself."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from ablate.errors import ConfigError
from ablate.plan.overrides import flatten_params, format_override, format_value
from ablate.trials.tasks.command import build_argv, split_command, task_settings

PARSER = OverridesParser.create()


def roundtrip(value: Any) -> Any:
    """Parse ``k=<value>`` as a Hydra script would, assign it to a config and resolve it."""
    parsed = PARSER.parse_override(format_override("k", value))
    cfg = OmegaConf.create({"k": None})
    cfg.k = parsed.value()
    return OmegaConf.to_container(cfg, resolve=True)["k"]


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("it's", id="quote"),
        pytest.param("a, b=c #d", id="comma-equals-hash"),
        pytest.param("with space", id="space"),
        pytest.param("", id="empty"),
        pytest.param("1e3", id="number-like"),
        pytest.param("true", id="bool-like"),
        pytest.param("null", id="null-like"),
        pytest.param("a\\", id="trailing-backslash"),
        pytest.param("a\\'b", id="backslash-quote"),
        pytest.param("${oc.env:HOME}", id="interpolation-text"),
        pytest.param("\\${x}", id="backslash-interpolation"),
        pytest.param("line\nbreak\ttab", id="newline-tab"),
        pytest.param("ü€ 漢字", id="unicode"),
        pytest.param([1, "a b", None, [2.5, True]], id="nested-list"),
        pytest.param({"a": 1, "b": ["x,y"]}, id="mapping"),
        pytest.param(None, id="null"),
        pytest.param(1e-5, id="small-float"),
        pytest.param(-3, id="negative-int"),
        pytest.param(math.inf, id="inf"),
        pytest.param([], id="empty-list"),
    ],
)
def test_value_roundtrips(value: Any) -> None:
    assert roundtrip(value) == value
    assert type(roundtrip(value)) is type(value)


def test_nan_roundtrips() -> None:
    assert math.isnan(roundtrip(math.nan))


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_roundtrips(text: str) -> None:
    assert roundtrip(text) == text


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3), max_leaves=8))
def test_any_list_roundtrips(value: Any) -> None:
    assert roundtrip(value) == value


def test_format_value_refuses_objects() -> None:
    with pytest.raises(TypeError, match="cannot write a object"):
        format_value(object())


def test_flatten_params() -> None:
    assert flatten_params({"a": {"b": 1, "c": {"d": [1]}}, "e": {}, "f": None}) == {
        "a.b": 1, "a.c.d": [1], "e": {}, "f": None}


def test_build_argv_order_and_python(tmp_path: Any) -> None:
    import sys

    task = {"command": "python train.py --flag", "params": {"optim": {"lr": 0.1}, "name": "a b"},
            "determinism_key": "trainer.deterministic", "metrics_key": "out"}
    argv = build_argv(task, seed=3, determinism="strict", run_dir=tmp_path / "run", metrics_path=tmp_path / "m.json")
    assert argv == [sys.executable, "train.py", "--flag", "optim.lr=0.1", "name='a b'", "seed=3",
                    "trainer.deterministic=true", f"hydra.run.dir='{tmp_path / 'run'}'", f"out='{tmp_path / 'm.json'}'"]


@pytest.mark.parametrize(
    ("task", "message"),
    [
        pytest.param({"command": "x", "lr": 1}, "`task.lr`: lr is not a setting of a command task", id="unknown-key"),
        pytest.param({"command": "x", "params": 3}, "`task.params`: must be a mapping", id="params"),
        pytest.param({"command": "x", "seed_key": 3}, "`task.seed_key`: must be a non-empty string", id="seed-key"),
    ],
)
def test_task_settings_refuses(task: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        task_settings(task)


@pytest.mark.parametrize("command", ["", "  ", [], "a 'b", 3, [{"a": 1}]])
def test_split_command_refuses(command: Any) -> None:
    with pytest.raises(ConfigError, match=r"task\.command"):
        split_command(command)


def test_split_command_forms() -> None:
    assert split_command("python 'my script.py' -x") == ["python", "my script.py", "-x"]
    assert split_command(["python", "t.py", 3]) == ["python", "t.py", "3"]



def as_written(text: str) -> Any:
    """``k: <text>`` read as a config file's value would be: interpolations resolved against the config."""
    return OmegaConf.to_container(OmegaConf.create({"a": "A", "k": text}), resolve=True)["k"]


def passed_interpolating(text: str) -> Any:
    """``k=<text>`` passed with interpolate=True, assigned in the script's config and resolved there."""
    cfg = OmegaConf.create({"a": "A", "k": None})
    cfg.k = PARSER.parse_override(format_override("k", text, interpolate=True)).value()
    return OmegaConf.to_container(cfg, resolve=True)["k"]


@pytest.mark.parametrize("text", ["${a}/alt", "x${a}y${a}", "it's ${a}", "\\${a}", "\\\\${a}", "a\\", "plain",
                                  "a, b=c #d ${a}", "${oc.select:a,none}"])
def test_interpolating_value_resolves_in_the_script_as_written(text: str) -> None:
    # an app arm's value (the plan's raw text) reaches the app as the same value a config file would hold
    assert passed_interpolating(text) == as_written(text)
    assert passed_interpolating("${a}/alt") == "A/alt" and roundtrip("${a}/alt") == "${a}/alt"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="a${}\\' ,=.:", max_size=12))
def test_any_interpolating_text_resolves_as_written(text: str) -> None:
    try:
        want: Any = as_written(text)
    except Exception:
        want = "refused"
    try:
        got: Any = passed_interpolating(text)
    except Exception:
        got = "refused"
    assert got == want
