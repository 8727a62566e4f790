"""An app that turns warnings into errors ablates as it is (issue 35, item 4).

``warnings.simplefilter("error")`` at the app's top made Hydra 1.3's warning about a callback without
``on_run_start`` ("Callback SaveReturn.on_run_start raised AttributeError") an error in every trial: ablate's
injected callback now subclasses Hydra's own ``Callback``. Run warm (the app imported once, its filter with it)
and fresh (``python <app>`` per trial)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, commit_all, only_sweep

pytestmark = pytest.mark.slow
APP = '''"""An app that makes every warning an error, at its top."""
import random
import warnings

warnings.simplefilter("error")

import hydra  # noqa: E402


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg):
    return {"val_acc": 0.5 + cfg.lr * random.Random(cfg.seed).random()}


if __name__ == "__main__":
    main()
'''


@pytest.fixture(scope="module", params=["warm", "fresh"])
def strict(request: pytest.FixtureRequest, project_template: Path,
           tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    project = tmp_path_factory.mktemp(f"strict_{request.param}") / "proj"
    shutil.copytree(project_template, project, symlinks=True)
    (project / "strictapp" / "conf").mkdir(parents=True)
    (project / "strictapp" / "app.py").write_text(APP)
    (project / "strictapp" / "conf" / "config.yaml").write_text("lr: 0.1\nseed: null\n")
    (project / "conf" / "task" / "strict.yaml").write_text("app: strictapp/app.py\nmetric: val_acc\ngoal: maximize\n")
    (project / "conf" / "variable" / "strict_lr.yaml").write_text("key: lr\nvalues: [0.3]\n")
    commit_all(project, "an app that turns warnings into errors")
    res = ablate_cli(project, "-m", "task=strict", "variable=strict_lr", "seeds=3",
                     f"launcher.warm={str(request.param == 'warm').lower()}")
    assert res.returncode == 0, res.stderr[-3000:]
    assert (project / "strictapp" / "app.py").read_text() == APP
    return project, only_sweep(project)


def test_every_trial_runs_with_its_warnings_as_errors(strict: tuple[Path, Path]) -> None:
    _, sd = strict
    for arm, lr in (("control", 0.1), ("lr=0.3", 0.3)):
        for seed in (1, 2, 3):
            t = sd / "trials" / arm / f"seed={seed}"
            rec = json.loads((t / "result.json").read_text())
            assert rec["status"] == "ok", rec.get("error")
            assert rec["metrics"]["val_acc"] == 0.5 + lr * random.Random(seed).random()
            assert rec["metric_source"]["kind"] == "return"
            logs = "".join(p.read_text() for p in t.glob("*.log")) + "".join(p.read_text() for p in t.glob("std*"))
            assert "raised AttributeError" not in logs and "Callback SaveReturn" not in logs
