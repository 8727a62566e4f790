"""A key that depends on the variable through a resolver the app registers inside ``main()`` (issue 35, item 8).

It used to be refused ("register the resolver at the top level"), so the user had to edit the app. Now the
ablation runs, and the verdict proves from what each trial's app resolved (``ablate_seen.json``, the manifest's
``config``) that the arms differ in the variable alone: one value of the key per arm. Where that proof fails (a
resolver that draws at random), the verdict is invalid, naming the key and the fix. A pure-Python app, two task
configs of it (``config`` and ``noisy``), one ablation each, for the module.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, commit_all

pytestmark = pytest.mark.slow
APP = '''"""An app that registers its resolvers inside main(), as many do."""
import math
import random

import hydra
from omegaconf import OmegaConf


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg):
    OmegaConf.register_new_resolver("batches", lambda n, per: math.ceil(int(n) / int(per)), replace=True)
    OmegaConf.register_new_resolver("jitter", lambda n: int(n) + random.random(), replace=True)
    steps = cfg.trainer.steps_per_epoch * cfg.trainer.max_epochs
    return {"val_acc": 0.5 + cfg.lr * steps / 100 + random.Random(cfg.seed).random() / 100}


if __name__ == "__main__":
    main()
'''
CONFIG = {"seed": None, "lr": 0.1, "trainer": {"max_epochs": 2, "limit_train_batches": 8, "per": 2,
                                                "steps_per_epoch": "${batches:${trainer.limit_train_batches},"
                                                                   "${trainer.per}}"}}
NOISY = {"defaults": ["config", "_self_"], "trainer": {"warmup": "${jitter:${trainer.limit_train_batches}}"}}
KEY = "task.params.trainer.steps_per_epoch"


@pytest.fixture(scope="module")
def sweeps(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    project = tmp_path_factory.mktemp("trial_resolved") / "proj"
    shutil.copytree(project_template, project, symlinks=True)
    (project / "proofapp" / "conf").mkdir(parents=True)
    (project / "proofapp" / "app.py").write_text(APP)
    (project / "proofapp" / "conf" / "config.yaml").write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    (project / "proofapp" / "conf" / "noisy.yaml").write_text(yaml.safe_dump(NOISY, sort_keys=False))
    for name, extra in (("proof", {}), ("proof_noisy", {"config_name": "noisy"})):
        (project / "conf" / "task" / f"{name}.yaml").write_text(yaml.safe_dump(
            {"app": "proofapp/app.py", **extra, "metric": "val_acc", "goal": "maximize"}, sort_keys=False))
    (project / "conf" / "variable" / "ltb.yaml").write_text("key: trainer.limit_train_batches\nvalues: [4]\n")
    commit_all(project, "an app with resolvers registered in main()")
    out = {}
    for name, rc in (("proof", 0), ("proof_noisy", 1)):
        res = ablate_cli(project, "-m", f"task={name}", "variable=ltb", "seeds=3", f"hydra.sweep.dir=outputs/{name}")
        assert res.returncode == rc, res.stderr[-3000:]
        out[name] = project / "outputs" / name, res.stderr
    return out


def test_it_runs_and_the_trials_records_prove_the_one_key_difference(sweeps: dict[str, tuple[Path, str]]) -> None:
    sd, _ = sweeps["proof"]
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    assert plan["trial_dependent"] == {"limit_train_batches=4": [KEY]}
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["invalid"] is False and verdict["confounds"]["findings"] == []
    for arm, ltb, steps in (("control", 8, 4), ("limit_train_batches=4", 4, 2)):
        for seed in (1, 2, 3):
            manifest = json.loads((sd / "trials" / arm / f"seed={seed}" / "manifest.json").read_text())
            trainer = manifest["config"]["task"]["params"]["trainer"]  # as the app resolved it, in its own process
            assert trainer["limit_train_batches"] == ltb and trainer["steps_per_epoch"] == steps
            assert manifest["seen"]["by"] == "the task's own process"
            rec = json.loads((sd / "trials" / arm / f"seed={seed}" / "result.json").read_text())
            assert rec["status"] == "ok" and rec["metrics"]["val_acc"] > 0.5


def test_a_key_the_records_do_not_prove_makes_the_verdict_invalid_naming_it(
        sweeps: dict[str, tuple[Path, str]]) -> None:
    sd, stderr = sweeps["proof_noisy"]
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["invalid"]
    (finding,) = [f for f in verdict["confounds"]["findings"] if f["field"] == "task.params.trainer.warmup"]
    msg = finding["message"]
    assert msg.startswith("config `task.params.trainer.warmup` is resolved only in the trial (a resolver the app "
                          "registers inside main()), and it took 3 values within arm control (")
    assert msg.endswith("it depends on more than the variable, so the arms are not shown to differ in their "
                        "variable alone. Fix: register the resolver at the top level of the app's module (ablate "
                        "imports it before composing, so the plan resolves the key and proves the arms itself), or "
                        "ablate a key no such value reads")
    assert not any(f["field"] == KEY for f in verdict["confounds"]["findings"])  # that one is proved
    assert "task.params.trainer.warmup" in stderr and "register the resolver at the top level" in stderr
