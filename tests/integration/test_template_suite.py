"""The Lightning-Hydra template's key + group suite gives a valid verdict (issue 35, items 1 and 2).

tests/fixtures/template_app is laid out as the public template is (src/train.py; configs/ with callbacks/,
paths/, logger/, hydra/ ...; ``PROJECT_ROOT`` set at import; callbacks instantiated from their group, a
ModelCheckpoint whose ``dirpath`` is ``${paths.output_dir}/checkpoints``), pure Python. Ablated as it is with
``variable=tpl_lr,tpl_callbacks`` (a key and the ``callbacks`` group): every arm changes exactly its own key, so no
confound is found, although each trial's checkpoint dir, output dir and working dir name its own trial dir and
the lr arm's are compared with the control's. ``callbacks=none`` does not change the metric: it is named as a
treatment that changed nothing, never "run more seeds". One suite for the module, run warm (the default).
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ablate_cli, commit_all, only_sweep

pytestmark = pytest.mark.slow
FIXTURE = REPO / "tests" / "fixtures" / "template_app"
TASK = {"app": "src/train.py", "metric": "val/acc", "goal": "maximize"}
ARMS = ("control", "lr=0.5", "callbacks=none")


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def suite(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    project = tmp_path_factory.mktemp("template_suite") / "proj"
    shutil.copytree(project_template, project, symlinks=True)
    for part in ("src", "configs"):
        shutil.copytree(FIXTURE / part, project / part, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "conf" / "task" / "tpl.yaml").write_text(yaml.safe_dump(TASK, sort_keys=False))
    (project / "conf" / "variable" / "tpl_lr.yaml").write_text("key: model.optimizer.lr\nvalues: [0.5]\n")
    (project / "conf" / "variable" / "tpl_callbacks.yaml").write_text("group: callbacks\nvalues: [none]\n")
    commit_all(project, "the template app")
    res = ablate_cli(project, "-m", "task=tpl", "variable=tpl_lr,tpl_callbacks", "seeds=3", "launcher.max_parallel=2")
    assert res.returncode == 0, res.stderr[-3000:]
    for part in ("src", "configs"):
        assert _digest(project / part) == _digest(FIXTURE / part)  # ablated as it is
    return project, only_sweep(project)


def test_the_key_and_group_suite_is_valid(suite: tuple[Path, Path]) -> None:
    _, sd = suite
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["invalid"] is False and verdict["invalid_reasons"] == []
    assert verdict["confounds"]["findings"] == [] and verdict["confounds"]["complete"] is True
    assert "INVALID" not in (sd / "verdict.md").read_text()
    per_seed = {a["arm"]: a["values"] for a in verdict["arms"]}
    for arm in ARMS:
        for seed in (1, 2, 3):
            t = sd / "trials" / arm / f"seed={seed}"
            with open(next((t / "run").glob("csv/version_0/metrics.csv")), newline="") as fh:
                (row,) = list(csv.DictReader(fh))
            assert per_seed[arm][str(seed)] == float(row["val/acc"])  # the app's own log


def test_each_trial_wrote_into_its_own_dirs_and_was_compared_as_equal(suite: tuple[Path, Path]) -> None:
    _, sd = suite
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    (cb,) = [a for a in plan["arms"] if a["name"] == "callbacks=none"]
    # the callbacks arm changes the checkpoint dir (it removes it), so the lr arm's is checked against control's
    assert "task.params.callbacks.model_checkpoint.dirpath" in cb["changes"]
    for arm in ARMS:
        for seed in (1, 2, 3):
            t = sd / "trials" / arm / f"seed={seed}"
            params = json.loads((t / "manifest.json").read_text())["config"]["task"]["params"]
            assert params["paths"]["output_dir"] == str(t / "run") and params["paths"]["work_dir"] == str(t / "work")
            assert params["trainer"]["default_root_dir"] == str(t / "run")
            if arm == "callbacks=none":
                assert params["callbacks"] is None or "model_checkpoint" not in params["callbacks"]
                assert not (t / "run" / "checkpoints").exists()
            else:
                assert params["callbacks"]["model_checkpoint"]["dirpath"] == str(t / "run" / "checkpoints")
                assert (t / "run" / "checkpoints" / "last.ckpt").is_file()


def test_the_callbacks_arm_changed_nothing_and_is_named_so(suite: tuple[Path, Path]) -> None:
    _, sd = suite
    verdict = json.loads((sd / "verdict.json").read_text())
    comps = {c["arm"]: c for c in verdict["comparisons"]}
    assert "unchanged" not in comps["lr=0.5"]
    same = comps["callbacks=none"]["unchanged"]
    assert same["seeds"] == [1, 2, 3] and same["metrics"] == ["val/acc"]
    assert ("Likely causes: (1) the option of `callbacks` the treatment selects differs from the control's only in "
            "what does not reach this metric (callbacks, loggers, checkpointing)") in same["message"]
    bottom = (sd / "verdict.md").read_text().split("## Bottom line", 1)[1].split("\n## ", 1)[0]
    (line,) = [x for x in bottom.splitlines() if x.startswith("- **callbacks=none**")]
    assert line.endswith(": it changed nothing the task reports (every seed equals the control's, bit for bit); "
                         "likely: its `callbacks` option does not reach the metric.")
    assert len(line.replace("**", "").split()) <= 31 and "seeds per arm" not in line
