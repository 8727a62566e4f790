"""Issue 35, item 16: the dry run says when no seed will be passed to the script or app (``seed_key: null`` and
no ``seed_env``): the argv it prints has none, and nothing said so. The fix it names (a ``seed_env``) is dry-run
too: the line goes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ablate.cli.main import main
from tests.helpers import commit_all

pytestmark = pytest.mark.slow

SCRIPT = '''
import json, os
json.dump({"val_acc": 0.5}, open(os.environ["ABLATE_METRICS_FILE"], "w"))
'''


@pytest.fixture
def proj(project_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    p = tmp_path / "proj"
    shutil.copytree(project_template, p, symlinks=True)
    (p / "train.py").write_text(SCRIPT)
    (p / "conf" / "task" / "script.yaml").write_text(
        "command: python train.py\nargs: '--key value'\nmetric: val_acc\ngoal: maximize\nparams: {lr: 0.1}\n")
    (p / "conf" / "variable" / "slr.yaml").write_text("key: task.params.lr\nvalues: [0.2]\n")
    commit_all(p, "script")
    monkeypatch.chdir(p)
    return p


@pytest.mark.parametrize(("extra", "said"), [
    (["+task.seed_key=null"], True),
    (["+task.seed_key=null", "+task.seed_env=SEED"], False),  # the fix it names
    ([], False),  # --seed 1 in the argv
    (["+task.seed_key=random_seed"], False),
    (["+task.seed_key=null", "task.args=env"], True),
])
def test_the_dry_run_says_when_no_seed_is_passed(proj: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                                                said: bool) -> None:
    assert main(["-m", "variable=slr", "task=script", "seeds=3", "dry_run=true", *extra]) == 0
    out = capsys.readouterr().out
    line = "  seed: NOT passed to the script (`seed_key: null`, no `seed_env`)"
    assert (line in out) is said, out
    if said:
        assert "`seed_env: <the variable it reads>`" in out


APP = '''
import hydra


@hydra.main(version_base=None, config_path="appconf", config_name="config")
def main(cfg):
    return {"val_acc": 0.5 + cfg.lr}


if __name__ == "__main__":
    main()
'''


@pytest.mark.parametrize(("extra", "said"), [(["+task.seed_key=null"], True), ([], False)])
def test_the_dry_run_says_when_no_seed_is_passed_to_an_app(proj: Path, capsys: pytest.CaptureFixture[str],
                                                          extra: list[str], said: bool) -> None:
    (proj / "app.py").write_text(APP)
    (proj / "appconf").mkdir()
    (proj / "appconf" / "config.yaml").write_text("seed: 1\nlr: 0.1\n")
    (proj / "conf" / "task" / "myapp.yaml").write_text("app: app.py\nmetric: val_acc\ngoal: maximize\n")
    (proj / "conf" / "variable" / "alr.yaml").write_text("key: lr\nvalues: [0.2]\n")
    commit_all(proj, "app")
    assert main(["-m", "variable=alr", "task=myapp", "seeds=3", "dry_run=true", *extra]) == 0
    out = capsys.readouterr().out
    assert ("  seed: NOT passed to the app (`seed_key: null`)" in out) is said, out
