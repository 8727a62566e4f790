"""An ``fn`` arm's config built once and reused per trial (the warm parent's template, inline's per-process
template): each trial's config, as the task gets it, as config.yaml and as the manifest record it, is what a
trial in a fresh process (``launcher.warm=false``) has, even when the task changes its config in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.record.sweepdir import dump_yaml
from tests.helpers import ablate_cli, add_mode_task

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


@pytest.mark.parametrize("launcher", [("launcher=inline",), ("launcher=local", "launcher.max_parallel=1")],
                         ids=["inline", "warm"])
def test_a_reused_config_is_each_trials_own_as_in_a_fresh_process(project: Path, tmp_path: Path,
                                                                   launcher: tuple[str, ...]) -> None:
    out = add_mode_task(project, "mutate", MUTATE, tmp_path / "seen", mode="a", values="[b]",
                        extra="layers: [8, 8]\n", message="a task that changes its config")
    runs = {}
    for name, extra in (("reused", launcher), ("fresh", ("launcher=local", "launcher.warm=false"))):
        res = ablate_cli(project, "-m", "variable=mode", "task=mutate", "seeds=5", *extra)
        assert res.returncode == 0, res.stderr
        (sd,) = [p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml") if p.parent not in runs.values()]
        runs[name] = sd
        seen = sorted(out.glob("*.json"))
        assert len(seen) == 10, seen
        for f in seen:
            _mode, seed, _pid = f.stem.split("-")
            got = json.loads(f.read_text())
            assert got == {"seed": int(seed), "layers": [8, 8], "keys": sorted(["fn", "metric", "goal", "mode",
                                                                                "layers", "out"])}, (name, f.name)
            f.unlink()
    reused, fresh = runs["reused"], runs["fresh"]
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
