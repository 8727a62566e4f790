"""What a warm parent's import must not read (issue 35, item 7): a trial's own variables (its seed, its dirs) are
unset there, so an import that reads one is each trial's to make. The recording view of ``os.environ`` and the
refusal it leads to, for the task module itself (a learned import is left to the trials instead)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ablate.trials import seeding
from ablate.trials.warm import hazards
from ablate.trials.warm.starter import unsafe_fix, unsafe_reason


def test_reads_are_noted_however_the_variable_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ABLATE_SEED", "3")
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    real = os.environ
    with hazards.env_reads(seeding.TRIAL_ENV) as read:
        assert os.getenv("PL_GLOBAL_SEED") is None  # unset, as in a warm parent: noted all the same
        assert "ABLATE_RUN_DIR" not in os.environ
        assert os.environ.get("ABLATE_SEED") == "3"
        assert os.environ["HOME"] == real["HOME"]  # not a trial's variable: not noted
        os.environ["ABLATE_WARM_PROBE_X"] = "1"  # writes reach the real environment (putenv too)
        child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['ABLATE_WARM_PROBE_X'])"],
                               capture_output=True, text=True, check=True).stdout.strip()
    assert read == ["PL_GLOBAL_SEED", "ABLATE_RUN_DIR", "ABLATE_SEED"]
    assert os.environ is real and real.pop("ABLATE_WARM_PROBE_X") == "1" and child == "1"


def test_a_task_module_that_reads_one_at_import_refuses_warm_with_the_fix() -> None:
    report = {"trial_env_read": ["ABLATE_SEED", "PL_GLOBAL_SEED"], "imported": ["my_task:train"], "threads": 1}
    assert unsafe_reason(report) == (
        "importing my_task:train read $ABLATE_SEED, $PL_GLOBAL_SEED, which each trial sets to its own value (its "
        "seed, its dirs): in the warm parent every trial is forked from it is unset, so every trial would keep that "
        "one read, where a fresh process reads its own")
    assert unsafe_fix(report) == ("read it inside the task function (each trial sets it before the task runs), or run "
                                  "each trial in a fresh process with `launcher.warm=false`")
    assert unsafe_reason({"trial_env_read": [], "imported": ["my_task:train"], "threads": 1}) is None
