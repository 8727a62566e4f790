"""Attack (issue 35, item 9): a library that changes version between arms is a confound whatever its name, not
only when it is on a fixed list (torchvision, timm were not). Each trial records every installed distribution it
imported, with its version; the verdict compares each between the trials that imported it.

Real distributions (a ``*.dist-info`` beside the package, found by ``importlib.metadata``), a real ablation, then
the library "upgraded" and the treatment re-run with ``ablate resume``, as a user upgrading mid-ablation would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.judge.confounds import check
from tests.issue35 import plain_project

pytestmark = pytest.mark.slow

TASK = '''
import fakevision  # an installed library every arm imports

def train(cfg):
    if cfg.task.mode == "b":
        import onlyb  # a library only the treatment imports: no version to compare it with
    return {"val_acc": 0.5 + cfg.seed * 0.01 + (0.02 if cfg.task.mode == "b" else 0.0)}
'''


def _dist(site: Path, name: str, version: str) -> None:
    for old in site.glob(f"{name}-*.dist-info"):
        shutil.rmtree(old)
    (site / name).mkdir(exist_ok=True)
    (site / name / "__init__.py").write_text(f"VERSION = {version!r}\n")
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "top_level.txt").write_text(f"{name}\n")


def _ablate(cwd: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "DVC_NO_ANALYTICS": "1"}
    return subprocess.run([str(Path(sys.executable).with_name("ablate")), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def upgraded(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imported")
    site = root / "site"
    site.mkdir()
    _dist(site, "fakevision", "0.20.0")
    _dist(site, "onlyb", "1.0")
    proj = plain_project(project_template, root / "proj", source=TASK)
    res = _ablate(proj, site, "-m", "variable=mode", "task=plain", "seeds=3", "launcher=inline",
                  "hydra.sweep.dir=outputs/sd")
    assert res.returncode == 0, res.stderr[-3000:]
    sd = proj / "outputs" / "sd"
    manifest = json.loads((sd / "trials" / "control" / "seed=0" / "manifest.json").read_text())
    assert manifest["environment"]["imported"]["fakevision"] == "0.20.0"
    assert "onlyb" not in manifest["environment"]["imported"]
    treated = json.loads((sd / "trials" / "mode=b" / "seed=0" / "manifest.json").read_text())
    assert treated["environment"]["imported"]["onlyb"] == "1.0"
    verdict = json.loads((sd / "verdict.json").read_text())
    assert not verdict["invalid"] and not [f for f in verdict["confounds"]["findings"]
                                           if "imported" in f["field"]]  # onlyb: no confound
    _dist(site, "fakevision", "0.21.0")  # upgraded between the arms
    shutil.rmtree(sd / "trials" / "mode=b")
    res = _ablate(proj, site, "resume", str(sd))
    assert res.returncode == 1, res.stderr[-3000:]  # the verdict is invalid: confounded
    return sd


def test_a_version_change_between_arms_invalidates_the_verdict(upgraded: Path) -> None:
    verdict = json.loads((upgraded / "verdict.json").read_text())
    assert verdict["invalid"] is True
    (finding,) = [f for f in verdict["confounds"]["findings"] if f["field"] == "imported.fakevision"]
    assert finding["severity"] == "invalid" and finding["aligned"] is True
    assert finding["split"] == {"control": {"0.20.0": 3}, "mode=b": {"0.21.0": 3}}
    assert "environment `imported.fakevision` aligned with the arms" in finding["message"]
    assert "imported.fakevision" in (upgraded / "verdict.md").read_text()


@pytest.mark.parametrize(("versions", "severity"), [
    ({"control": ["1.0", "1.0"], "b": ["2.0", "2.0"]}, "invalid"),
    ({"control": ["1.0", "2.0"], "b": ["1.0", "2.0"]}, "warning"),
    ({"control": ["1.0", None], "b": [None, "1.0"]}, None),  # only some trials imported it: nothing to compare
    ({"control": [None, None], "b": ["3.1", "3.1"]}, None),
])
def test_each_distribution_is_compared_among_the_trials_that_imported_it(versions: dict, severity: str | None
                                                                           ) -> None:
    plan = {"arms": [{"name": "control", "changes": {}}, {"name": "b", "changes": {"task.mode": ["a", "b"]}}]}
    manifests = {}
    for arm, vs in versions.items():
        for seed, v in enumerate(vs):
            manifests[(arm, seed)] = {"code": {"commit": "c"}, "config": {"seed": seed},
                                      "environment": {"imported": {"timm": v} if v else {}}}
    out = check(plan, manifests, list(manifests))
    found = [f for f in out["findings"] if f["field"] == "imported.timm"]
    assert [f["severity"] for f in found] == ([severity] if severity else [])
