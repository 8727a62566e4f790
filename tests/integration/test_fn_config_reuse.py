"""An ``fn`` arm's config built once and reused per trial (the warm parent's template, inline's per-process
template): each trial's config, as the task gets it, as config.yaml and as the manifest record it, is what a
trial in a fresh process (``launcher.warm=false``) has, even when the task changes its config in place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ablate.record.sweepdir import dump_yaml
from tests.helpers import ablate_cli, ablate_in, add_mode_task, clean_env

pytestmark = pytest.mark.slow

#: A task that records the config it got, then changes it in place (the seed, a list, a new key).
MUTATE = '''
import json
import os


def train(cfg):
    seen = {"seed": cfg.seed, "layers": list(cfg.task.layers), "keys": sorted(cfg.task.keys())}
    out = os.path.join(cfg.task.out, f"{cfg.task.mode}-{cfg.seed}-{os.getpid()}.json")
    cfg.seed = -1
    cfg.task.layers.append(99)
    cfg.task.extra = "added by the task"
    with open(out, "w") as fh:
        json.dump(seen, fh)
    return {"val_acc": 0.5 + 0.01 * seen["seed"]}
'''


def _seen(out: Path, name: str) -> None:
    """Check what each of a run's 10 trials recorded it got (before it changed its config), then clear ``out``."""
    seen = sorted(out.glob("*.json"))
    assert len(seen) == 10, seen
    for f in seen:
        _mode, seed, _pid = f.stem.split("-")
        got = json.loads(f.read_text())
        assert got == {"seed": int(seed), "layers": [8, 8], "keys": sorted(["fn", "metric", "goal", "mode",
                                                                            "layers", "out"])}, (name, f.name)
        f.unlink()


@pytest.fixture(scope="module")
def fresh_run(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """``(project, out, sweep dir)``: the mutating task run once in fresh processes (``launcher.warm=false``), the
    reference both launchers' runs are compared with (it was run once per launcher until issue 34: 10 more fresh
    trial processes, each importing ablate)."""
    root = tmp_path_factory.mktemp("fn_config_reuse")
    project = root / "proj"
    shutil.copytree(project_template, project, symlinks=True)
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        out = add_mode_task(project, "mutate", MUTATE, root / "seen", mode="a", values="[b]",
                            extra="layers: [8, 8]\n", message="a task that changes its config")
        res = ablate_cli(project, "-m", "variable=mode", "task=mutate", "seeds=5", "launcher=local",
                         "launcher.warm=false", "hydra.sweep.dir=outputs/fresh")
    assert res.returncode == 0, res.stderr
    _seen(out, "fresh")
    return project, out, project / "outputs" / "fresh"


@pytest.mark.parametrize("launcher", [("launcher=inline",), ("launcher=local", "launcher.max_parallel=1")],
                         ids=["inline", "warm"])
def test_a_reused_config_is_each_trials_own_as_in_a_fresh_process(fresh_run: tuple[Path, Path, Path],
                                                                   launcher: tuple[str, ...]) -> None:
    project, out, fresh = fresh_run
    name = launcher[0].split("=")[1]
    res = ablate_in(project, "-m", "variable=mode", "task=mutate", "seeds=5", *launcher,
                    f"hydra.sweep.dir=outputs/{name}")
    assert res.returncode == 0, res.stderr
    _seen(out, name)
    reused = project / "outputs" / name
    trials = sorted(p.relative_to(fresh) for p in fresh.glob("trials/*/seed=*"))
    assert len(trials) == 10
    for rel in trials:
        a, b = reused / rel, fresh / rel
        assert json.loads((a / "result.json").read_text())["status"] == "ok"
        if "launcher=local" in launcher:  # forked from the warm parent that built the arm's template
            assert "warm" in json.loads((a / "manifest.json").read_text())
        ca, cb = (json.loads((d / "manifest.json").read_text())["config"] for d in (a, b))
        for d, c in ((a, ca), (b, cb)):  # config.yaml: the dump of the config the manifest records, byte for byte
            assert (d / "config.yaml").read_text() == dump_yaml(c), d
        ca.pop("launcher"), cb.pop("launcher")  # the one setting the two runs differ in
        assert ca == cb and ca["seed"] == int(str(rel).rsplit("=", 1)[1]) and ca["task"]["layers"] == [8, 8], rel
        assert "extra" not in ca["task"]
