"""Tracker settings are checked before anything launches, with one-line errors naming the fix."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ablate import trackers
from ablate.errors import ConfigError
from ablate.trackers import check_tracker


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        pytest.param({"name": "neptune"}, "`tracker`: unknown tracker 'neptune'. Fix: use one of: tracker=mlflow, "
                     "tracker=wandb", id="unknown-name"),
        pytest.param({"name": "mlflow", "uri": "x"}, "`tracker.uri`: unknown option(s) uri for tracker=mlflow. Fix: "
                     "valid options: tracking_uri (default None)", id="unknown-option"),
        pytest.param({"name": "wandb", "mode": "sometimes"}, "`tracker.mode`: must be one of online, offline, "
                     "disabled or null", id="bad-mode"),
        pytest.param({"name": "mlflow", "tracking_uri": "https://me:hunter2@mlflow.example"},
                     "`tracker.tracking_uri`: holds a password", id="password-in-uri"),
    ],
)
def test_bad_tracker_settings(cfg: dict, message: str) -> None:
    pytest.importorskip(trackers.TRACKERS[cfg["name"]][2] if cfg["name"] in trackers.TRACKERS else "yaml")
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_tracker(cfg)


def test_missing_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(trackers.TRACKERS, "mlflow", ("ablate.trackers.mlflow", "MlflowTracker",
                                                      "mlflow_is_not_installed_here", "mlflow"))
    with pytest.raises(ConfigError, match=re.escape("Fix: pip install 'hydra-ablate[mlflow]'")):
        check_tracker({"name": "mlflow"})


def test_off_by_default() -> None:
    assert check_tracker(None) is None


def test_help_and_tracker_checks_import_no_heavy_library() -> None:
    """`ablate --help` stays fast, and checking a tracker setting never imports the tracker library."""
    code = (
        "import sys, contextlib, io\n"
        "from ablate.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'])\n"
        "from ablate.trackers import TRACKERS, check_tracker\n"
        "import importlib.util\n"
        "for name in TRACKERS:\n"
        "    if importlib.util.find_spec(name):\n"
        "        check_tracker({'name': name})\n"
        "print(sorted(m for m in ('mlflow', 'wandb', 'pandas', 'torch', 'matplotlib', 'dvc') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
