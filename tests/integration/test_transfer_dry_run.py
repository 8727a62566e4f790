"""Issue 35, item 16: a transfer check's dry run is refused before anything is composed or imported (it was refused
only after importing the app: seconds, and whatever the app does at import), in one line whose fix runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ablate.cli.main import main
from tests.helpers import commit_all

pytestmark = pytest.mark.slow

APP = '''
import os
from pathlib import Path

import hydra

Path(os.environ["APP_IMPORTED_MARK"]).write_text("imported")  # what importing the app does


@hydra.main(version_base=None, config_path="appconf", config_name="config")
def main(cfg):
    return {"val_acc": 0.5 + cfg.lr + 0.001 * cfg.hidden + 0.01 * cfg.seed}


if __name__ == "__main__":
    main()
'''


@pytest.fixture
def app_project(project_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    proj = tmp_path / "proj"
    shutil.copytree(project_template, proj, symlinks=True)
    (proj / "app.py").write_text(APP)
    (proj / "appconf").mkdir()
    (proj / "appconf" / "config.yaml").write_text("seed: 1\nhidden: 16\nlr: 0.1\n")
    (proj / "conf" / "task" / "myapp.yaml").write_text("app: app.py\nmetric: val_acc\ngoal: maximize\n")
    (proj / "conf" / "variable" / "alr.yaml").write_text("key: lr\nvalues: [0.2]\n")
    commit_all(proj, "app")
    monkeypatch.chdir(proj)
    monkeypatch.setenv("APP_IMPORTED_MARK", str(tmp_path / "imported"))
    return proj


@pytest.mark.parametrize(("scale", "fix"), [
    (["scale.key=hidden", "scale.values=[16,32]"], "app.hidden=16"),
    (["scale.key=task.params.hidden", "scale.values=[32,64]"], "app.hidden=32"),
])
def test_a_transfer_dry_run_is_refused_before_the_app_is_imported(app_project: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  scale: list[str], fix: str) -> None:
    code = main(["-m", "variable=alr", "task=myapp", "seeds=3", *scale, "dry_run=true"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("ablate: error: `dry_run`: a transfer check has no dry run yet")
    assert f"`{fix} dry_run=true`" in err[0]
    assert not (tmp_path / "imported").exists()  # refused before the app was imported
    assert main(["-m", "variable=alr", "task=myapp", "seeds=3", fix, "dry_run=true"]) == 0  # the fix it names
    assert "dry run: nothing launched" in capsys.readouterr().out
