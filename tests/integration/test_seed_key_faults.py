"""A seed key the script does not take: refused at planning (app), or named as the script's own refusal.

An app in the Lightning-template shape (tests/fixtures/lit_app's configs, with its src/train.py's seeding and
return in pure Python: :data:`PURE_TRAIN`; these tests are about the seed key, not training, and torch cost about
38 s of CPU in the two fix runs) whose config has no ``seed`` key, as many Hydra projects have: every trial would
fail in Hydra (``Could not override 'seed'``), so planning and the dry run refuse it in one line that names
``task.seed_key`` and the fixes, and the fixes the message names are run here. A failing app trial's recorded
error is the app's own (the end of its stderr), never a settings check of another task form.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ablate_cli, ablate_in, commit_all, only_sweep

pytestmark = pytest.mark.slow
LIT = REPO / "tests" / "fixtures" / "lit_app"
#: plain_app's shape without torch: the failing trial's error is the app's own whatever the app trains
LIGHT = REPO / "tests" / "fixtures" / "light_app"
#: The fix runs' launcher: warm forks of a parent that imported the app once, as by default; the
#: refusals above name the same fixes under any launcher (their dry runs stay inline, in this process)
WARM = ("launcher=local", "launcher.max_parallel=2", "launcher.warm=true")
TASK = {"app": "src/train.py", "overrides": ["trainer=cpu", "trainer.max_epochs=1", "+trainer.limit_train_batches=3"],
        "metric": "val/acc", "goal": "maximize", "data": ["data/digits.npz"]}


#: tests/fixtures/lit_app/src/train.py without torch: the same decorator, configs, ``PROJECT_ROOT``, seeding only
#: ``if cfg.get("seed")``, data read, metrics.csv and return of ``optimized_metric``; its "training" is a
#: ``random`` draw from the lr, the data's bytes and the (seeded or not) generator.
PURE_TRAIN = '''import csv
import hashlib
import os
import random
from pathlib import Path

import hydra

os.environ["PROJECT_ROOT"] = str(Path(__file__).resolve().parents[1])


@hydra.main(version_base="1.3", config_path="../configs", config_name="train.yaml")
def main(cfg):
    if cfg.get("seed"):
        random.seed(cfg.seed)
    data = hashlib.sha256(Path(cfg.data.file).read_bytes()).hexdigest()
    acc = 0.5 + cfg.model.optimizer.lr * random.Random(data).random() + random.random() / 100
    metrics = {"val/acc": acc, "val/loss": 1 - acc, "epoch": cfg.trainer.max_epochs - 1, "step": 1}
    out = Path(cfg.logger.csv.save_dir) / cfg.logger.csv.name / "version_0"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "metrics.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=sorted(metrics))
        writer.writeheader()
        writer.writerow(metrics)
    print(f"finished {cfg.task_name} ({cfg.model.name}): {metrics}")
    return metrics.get(cfg.get("optimized_metric"))


if __name__ == "__main__":
    main()
'''


def _no_seed_app(project: Path) -> None:
    shutil.copytree(LIT / "configs", project / "configs", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "src").mkdir()
    (project / "src" / "train.py").write_text(PURE_TRAIN)
    cfg = project / "configs" / "train.yaml"
    cfg.write_text("".join(x for x in cfg.read_text().splitlines(keepends=True) if not x.startswith("seed:")))
    (project / "conf" / "task" / "noseed.yaml").write_text(yaml.safe_dump(TASK, sort_keys=False))
    (project / "conf" / "variable" / "noseed_lr.yaml").write_text("key: model.optimizer.lr\nvalues: [0.2]\n")
    commit_all(project, "an app with no seed key")


def test_an_app_without_the_seed_key_is_refused_at_planning_with_the_fixes(project: Path) -> None:
    _no_seed_app(project)
    args = ("-m", "task=noseed", "variable=noseed_lr", "seeds=3", "launcher=inline")
    for extra in (("dry_run=true",), ()):
        res = ablate_in(project, *args, *extra)
        assert res.returncode != 0, res.stdout
        err = res.stderr.strip()
        assert len(err.splitlines()) == 1, err
        assert "Traceback" not in err, err
        assert "task.seed_key" in err, err
        assert "'seed'" in err and "configs/train.yaml" in err, err
        assert "seed: 0" in err and "task.seed_key=null" in err, err
        assert "not a setting" not in err, err
    assert not list(project.glob("outputs/ablate/*/*/ablation.yaml"))
    single = ablate_in(project, "task=noseed", "seed=1")  # a single run (no -m) is refused alike, before it runs
    assert single.returncode != 0 and "task.seed_key" in single.stderr and "seed: 0" in single.stderr, single.stderr
    assert "Traceback" not in single.stderr, single.stderr
    # the fix the message names: `+task.seed_key=null` (ablate passes no seed; the app seeds as it does alone),
    # run in warm forks (WARM), as by default
    res = ablate_in(project, *args[:-1], *WARM, "+task.seed_key=null")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    done = [json.loads(p.read_text()) for p in sd.glob("trials/*/*/result.json")]
    assert len(done) == 6 and all(r["status"] == "ok" for r in done), done


def test_the_fix_adding_the_seed_key_to_the_apps_config_runs(project: Path) -> None:
    _no_seed_app(project)
    cfg = project / "configs" / "train.yaml"
    cfg.write_text(cfg.read_text() + "seed: 0\n")
    commit_all(project, "seed: 0 in the app's config, as the error says")
    res = ablate_in(project, "-m", "task=noseed", "variable=noseed_lr", "seeds=3", *WARM)
    assert res.returncode == 0, res.stderr
    done = [json.loads(p.read_text()) for p in only_sweep(project).glob("trials/*/*/result.json")]
    assert len(done) == 6 and all(r["status"] == "ok" for r in done), done
    # the seed ablate passes reached the app: its config's `seed: 0` is overridden per trial
    seeds = {json.loads(p.read_text())["config"]["task"]["params"]["seed"]
             for p in only_sweep(project).glob("trials/*/*/manifest.json")}
    assert seeds == {1, 2, 3}, seeds


@pytest.mark.parametrize("launch", [("launcher=inline",), ("launcher=local", "launcher.max_parallel=2",
                                                             "launcher.warm=true")], ids=["spawned", "warm_fork"])
def test_a_failing_app_trial_records_the_apps_own_error(project: Path, launch: tuple[str, ...]) -> None:
    shutil.copytree(LIGHT, project / "plain", ignore=shutil.ignore_patterns("__pycache__"))
    task = {"app": "plain/app.py", "metric": "val_acc", "goal": "maximize", "data": ["data/digits.npz"],
            "overrides": ["epochs=1"]}
    (project / "conf" / "task" / "plain.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    (project / "conf" / "variable" / "data_file.yaml").write_text("key: data_file\nvalues: [data/absent.npz]\n")
    commit_all(project, "a treatment the app cannot run")
    res = ablate_in(project, "-m", "task=plain", "variable=data_file", "seeds=3", *launch)
    assert list(project.glob("outputs/ablate/*/*/ablation.yaml")), (res.stdout, res.stderr)
    sd = only_sweep(project)
    done = {p.parent.parent.name + "/" + p.parent.name: json.loads(p.read_text())
            for p in sd.glob("trials/*/*/result.json")}
    assert all(r["status"] == "ok" for k, r in done.items() if k.startswith("control/")), done
    failed = [r for k, r in done.items() if not k.startswith("control/")]
    assert failed, (res.stdout, res.stderr)
    for rec in failed:
        assert rec["status"] == "failed", rec
        err = json.dumps(rec)
        assert "not a setting" not in err, err
        # the app's own exception, as its stderr.log ends
        assert "FileNotFoundError" in err and "absent.npz" in err, err


NO_SEED_SCRIPT = '''"""An argparse script that takes no seed (it seeds itself from $ABLATE_SEED when set, else 0)."""
import argparse
import os
import random

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.1)
args = p.parse_args()
random.seed(int(os.environ.get("ABLATE_SEED", "0")))
print(f"val_acc {args.lr + random.random() / 100:.6f}")
'''


def test_a_command_tasks_seed_argument_the_script_refuses_is_named_with_the_scripts_own_words(project: Path) -> None:
    (project / "noseed.py").write_text(NO_SEED_SCRIPT)
    task = {"command": "python noseed.py", "args": "--key value", "params": {"lr": 0.1},
            "metric_pattern": r"val_acc (?P<val_acc>[0-9.]+)", "metric": "val_acc", "goal": "maximize"}
    (project / "conf" / "task" / "noseed_cmd.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    (project / "conf" / "variable" / "noseed_cmd_lr.yaml").write_text("key: task.params.lr\nvalues: [0.2]\n")
    commit_all(project, "a script that takes no seed")
    args = ("-m", "task=noseed_cmd", "variable=noseed_cmd_lr", "seeds=3", "launcher=inline")
    res = ablate_in(project, *args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("ablate: error:")]
    assert "noseed.py: error: unrecognized arguments: --seed 1" in line, line  # argparse's own words
    assert "`task.seed_key`" in line and "+task.seed_key=null" in line, line
    assert "not a setting" not in line, line
    # the fix it names: the seed is then only in $ABLATE_SEED, which this script reads
    shutil.rmtree(project / "outputs")
    res = ablate_cli(project, *args, "+task.seed_key=null")  # the console script: this file's proof of it
    assert res.returncode == 0, res.stderr
    done = {(p.parent.parent.name, p.parent.name): json.loads(p.read_text())
            for p in only_sweep(project).glob("trials/*/*/result.json")}
    assert len(done) == 6 and all(r["status"] == "ok" for r in done.values()), done
    import random
    for (arm, seed), rec in done.items():
        lr = 0.1 if arm == "control" else 0.2
        random.seed(int(seed.split("=")[1]))
        assert rec["metrics"]["val_acc"] == float(f"{lr + random.random() / 100:.6f}"), rec
