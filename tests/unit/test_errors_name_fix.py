"""Every user error ablate raises says how to fix it: an AST scan of the package for a user-error class
constructed without ``fix=`` (the guide's rule: say what was wrong, where, and how to fix it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ablate
from ablate import errors
from ablate.plan.checks import number

USER_ERRORS = {name for name, obj in vars(errors).items()
               if isinstance(obj, type) and issubclass(obj, errors.UserError)}


def _constructions() -> list[tuple[str, int, str]]:
    out = []
    for path in sorted(Path(ablate.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in USER_ERRORS:
                out.append((str(path), node.lineno,
                            "ok" if any(k.arg == "fix" or k.arg is None for k in node.keywords) else "no fix"))
    return out


def test_the_scan_sees_the_package_errors() -> None:
    found = _constructions()
    assert len(USER_ERRORS) >= 7 and "ConfigError" in USER_ERRORS
    assert len(found) > 100  # the package raises user errors in well over a hundred places


def test_every_user_error_names_a_fix() -> None:
    missing = [f"{p}:{line}" for p, line, state in _constructions() if state == "no fix"]
    assert missing == []


def test_a_number_out_of_range_shows_a_valid_example() -> None:
    with pytest.raises(errors.ConfigError) as exc:
        number(2, "alpha", lo=1e-6, hi=0.5, example=0.05)
    assert str(exc.value).endswith("Fix: e.g. `alpha=0.05`.")
    with pytest.raises(errors.ConfigError) as exc:
        number(-1, "max_retries", lo=0, integer=True)
    assert "`max_retries=0`" in str(exc.value)
