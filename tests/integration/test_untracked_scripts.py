"""A ``command`` or ``app`` task whose script imports an untracked module: the failed trial's error (and the
verdict's Failures section) names the file as in the live tree but not committed, with the fix, which the
test runs. The script runs from the code snapshot (committed files only), so Python's own error is only
"No module named 'helper'"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, commit_all, git, only_sweep

pytestmark = pytest.mark.slow

SCRIPT = '''"""Prints val_acc from a helper module beside it."""
import argparse

import helper

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--seed", type=int, default=0)
args = p.parse_args()
print(f"val_acc {helper.VALUE + args.lr + args.seed / 1000}")
'''
APP = '''"""A Hydra app that reads a helper module beside it."""
import hydra
from omegaconf import DictConfig

import helper


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    return {"val_acc": helper.VALUE + cfg.lr + cfg.seed / 1000}


if __name__ == "__main__":
    main()
'''
TASKS = {
    "command": {"command": "python scripts/train.py", "args": "--key value", "params": {"lr": 0.1},
                "metric_pattern": r"val_acc (?P<val_acc>[0-9.]+)", "metric": "val_acc", "goal": "maximize"},
    "app": {"app": "scripts/app.py", "metric": "val_acc", "goal": "maximize"},
}
VARIABLES = {"command": "key: task.params.lr\nvalues: [0.2]\n", "app": "key: lr\nvalues: [0.2]\n"}


@pytest.mark.parametrize("form", ["command", "app"])
def test_a_script_importing_an_untracked_module_fails_naming_it_as_uncommitted(project: Path, form: str) -> None:
    scripts = project / "scripts"
    (scripts / "conf").mkdir(parents=True)
    (scripts / "train.py").write_text(SCRIPT)
    (scripts / "app.py").write_text(APP)
    (scripts / "conf" / "config.yaml").write_text("seed: 0\nlr: 0.1\n")
    (project / "conf" / "task" / "uscript.yaml").write_text(yaml.safe_dump(TASKS[form], sort_keys=False))
    (project / "conf" / "variable" / "uscript_lr.yaml").write_text(VARIABLES[form])
    commit_all(project, "a script and its task")
    (scripts / "helper.py").write_text("VALUE = 0.5\n")  # in the live tree only: the snapshot lacks it
    args = ("-m", "task=uscript", "variable=uscript_lr", "seeds=3", "launcher=inline")
    res = ablate_in(project, *args)
    assert res.returncode != 0, res.stdout
    sd = only_sweep(project)
    failed = [json.loads(p.read_text()) for p in sd.glob("trials/*/*/result.json")]
    assert failed and all(r["status"] == "failed" for r in failed), failed
    why = ("scripts/helper.py exists in the live tree but is not committed, so the trial's code snapshot lacks it. "
           "Fix: `git add scripts/helper.py && git commit`, then run again.")
    for rec in failed:
        assert "No module named 'helper'" in rec["error"], rec["error"]
        assert why in rec["error"], rec["error"]
        assert why in rec["failure_line"], rec["failure_line"]
    assert "git add scripts/helper.py && git commit" in res.stderr, res.stderr
    verdict = ablate_in(project, "verdict", str(sd))
    md = (sd / "verdict.md").read_text()
    failures = md.split("## Failures", 1)[1]
    assert "git add scripts/helper.py && git commit" in failures, (verdict.stderr, md)
    # the fix it names
    git(project, "add", "scripts/helper.py")
    git(project, "commit", "-q", "-m", "the helper")
    # in this process, but for the command form's: the console script (this file's proof of it)
    res = (ablate_cli if form == "command" else ablate_in)(project, *args, "hydra.sweep.dir=outputs/second")
    assert res.returncode == 0, res.stderr
    done = [json.loads(p.read_text()) for p in (project / "outputs" / "second").glob("trials/*/*/result.json")]
    assert len(done) == 6 and all(r["status"] == "ok" for r in done), done
    for rec in done:
        lr = 0.1 if rec["arm"] == "control" else 0.2
        assert rec["metrics"]["val_acc"] == pytest.approx(0.5 + lr + rec["seed"] / 1000)
