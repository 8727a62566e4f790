"""A task that re-seeds itself (issue 35, item 3), with real Lightning.

Lightning's ``seed_everything()`` with no argument seeds from ``$PL_GLOBAL_SEED``, else 0 (since 2.1): every trial
sets ``PL_GLOBAL_SEED`` to its seed, in every form and launcher, so such a task gets one run per seed (the value
equals what the trial's seed gives). A task that seeds itself from a constant (``seed_everything(42)``) gives one
value for every seed: the ignored-seed check, which used to skip ``fn`` tasks, names it in the bottom line, with
the fix. One ablation with real Lightning for the module (warm, the default), plus the variable's value in each form.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, commit_all, only_sweep

pytestmark = pytest.mark.slow
LIT_TASK = '''
import lightning as L
import torch


def train(cfg):
    if cfg.task.reseed < 0:
        L.seed_everything()  # no argument: $PL_GLOBAL_SEED, else 0
    else:
        L.seed_everything(cfg.task.reseed)
    return {"val_acc": float(torch.rand(1))}
'''


@pytest.fixture(scope="module")
def lit(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    pytest.importorskip("lightning", reason="lightning is in the dev extra (pip install -e '.[dev]')")
    project = tmp_path_factory.mktemp("lit_seed") / "proj"
    shutil.copytree(project_template, project, symlinks=True)
    (project / "lit_seed.py").write_text(LIT_TASK)
    (project / "conf" / "task" / "lit_seed.yaml").write_text(
        "fn: lit_seed:train\nmetric: val_acc\ngoal: maximize\nreseed: -1\n")
    (project / "conf" / "variable" / "reseed.yaml").write_text("key: task.reseed\nvalues: [42]\n")
    commit_all(project, "a task seeded by Lightning")
    res = ablate_in(project, "-m", "task=lit_seed", "variable=reseed", "seeds=3")
    assert res.returncode == 1, res.stderr[-3000:]  # invalid: the treatment's seeds were one run
    return only_sweep(project), res.stderr


def _reference(seed: int) -> float:
    import torch

    torch.manual_seed(seed)
    return float(torch.rand(1))


def test_seed_everything_without_an_argument_takes_the_trials_seed(lit: tuple[Path, str]) -> None:
    sd, _ = lit
    values = {a["arm"]: a["values"] for a in json.loads((sd / "verdict.json").read_text())["arms"]}
    assert values["control"] == {str(s): _reference(s) for s in (0, 1, 2)}
    assert len(set(values["control"].values())) == 3  # three seeds, three runs (not seed 0's value three times)


def test_a_constant_seed_is_named_in_the_bottom_line(lit: tuple[Path, str]) -> None:
    sd, stderr = lit
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["invalid"] and verdict["seed_ignored"]["arms"][0]["arm"] == "reseed=42"
    (c,) = verdict["comparisons"]
    assert c["verdict"] == "insufficient data" and c["seed_ignored"] is True
    want = ("the task ignored its seed: arm 42 gave bit-identical metrics for seeds 0, 1, 2 "
            f"(val_acc {_reference(42)!r}), so its seeds are one run repeated")
    assert c["insufficient_reason"].startswith(want)
    assert "Lightning's `seed_everything(42)`" in c["insufficient_reason"]
    bottom = (sd / "verdict.md").read_text().split("## Bottom line", 1)[1].split("\n## ", 1)[0]
    (line,) = [x for x in bottom.splitlines() if x.startswith("- **reseed=42**")]
    assert line.endswith("**insufficient data**: its seeds were one run: the task re-seeds from a constant (e.g. "
                         "Lightning's `seed_everything(42)`).")
    assert "paired differences are constant" not in line
    warning = (sd / "verdict.md").read_text().split("## Bottom line", 1)[0]  # the cause in full, and the fix
    assert want in warning and "call `seed_everything(cfg.seed)`" in warning
    assert "the task ignored its seed" in stderr


# -- PL_GLOBAL_SEED in every form ------------------------------------------------------------------------------
FN = '''
import os


def train(cfg):
    return {"val_acc": 0.5 + int(os.environ["PL_GLOBAL_SEED"]) / 100, "ablate_seed": float(os.environ["ABLATE_SEED"])}
'''
SCRIPT = '''
import os

print(f"done val_acc: {0.5 + int(os.environ['PL_GLOBAL_SEED']) / 100} ablate_seed: {os.environ['ABLATE_SEED']}")
'''
APP = '''
import os

import hydra


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg):
    return {"val_acc": 0.5 + int(os.environ["PL_GLOBAL_SEED"]) / 100, "ablate_seed": float(os.environ["ABLATE_SEED"])}


if __name__ == "__main__":
    main()
'''


@pytest.mark.parametrize(("form", "args"), [
    ("fn", ("launcher=inline",)), ("fn", ()), ("fn", ("launcher.warm=false",)), ("command", ()), ("app", ()),
], ids=["fn-inline", "fn-warm", "fn-fresh", "command", "app-warm"])
def test_every_form_hands_its_seed_to_lightning(project: Path, form: str, args: tuple[str, ...]) -> None:
    if form == "fn":
        (project / "envseed.py").write_text(FN)
        task = {"fn": "envseed:train", "lr": 0.1}
    elif form == "command":
        (project / "envseed.py").write_text(SCRIPT)
        task = {"command": "python envseed.py", "params": {"lr": 0.1}}
    else:
        (project / "envapp" / "conf").mkdir(parents=True)
        (project / "envapp" / "app.py").write_text(APP)
        (project / "envapp" / "conf" / "config.yaml").write_text("lr: 0.1\nseed: null\n")
        task = {"app": "envapp/app.py"}
    key = "task.lr" if form == "fn" else "task.params.lr" if form == "command" else "lr"
    (project / "conf" / "task" / "envseed.yaml").write_text(yaml.safe_dump(
        {**task, "metric": "val_acc", "goal": "maximize"}, sort_keys=False))
    (project / "conf" / "variable" / "envseed_lr.yaml").write_text(f"key: {key}\nvalues: [0.2]\n")
    commit_all(project, f"a {form} task reading its seed's variables")
    # in this process, but for the inline function task: the console script (this file's proof of it)
    ablate = ablate_cli if args == ("launcher=inline",) else ablate_in
    res = ablate(project, "-m", "task=envseed", "variable=envseed_lr", "seeds=3", *args)
    assert res.returncode == 0, res.stderr[-3000:]
    seeds = (0, 1, 2) if form == "fn" else (1, 2, 3)
    for arm in ("control", "lr=0.2"):
        for seed in seeds:
            rec = json.loads((only_sweep(project) / "trials" / arm / f"seed={seed}" / "result.json").read_text())
            assert rec["metrics"]["val_acc"] == 0.5 + seed / 100 and rec["metrics"]["ablate_seed"] == seed, rec
