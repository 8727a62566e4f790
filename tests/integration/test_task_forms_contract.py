"""One contract for the three task forms (fn, command, app): the same ablation, the same numbers.

Each form runs a tiny task whose metric is a known function of what it received,
``score = x * (1 + seed / 100)``, so every trial's recorded value can be checked by hand: the arm's
value of the variable and the trial's seed reached the task, the metric was read back, and the manifest
records the config and seed the trial ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, commit_all

pytestmark = pytest.mark.slow

FN = '''
from pathlib import Path

def train(cfg):
    (Path(cfg.task.out) / "marker.txt").write_text(str(cfg.seed))
    return {"score": cfg.task.x * (1 + cfg.seed / 100)}
'''
COMMAND = '''
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
score = float(args["x"]) * (1 + int(args["seed"]) / 100)
with open(os.environ["ABLATE_METRICS_FILE"], "w") as fh:
    json.dump({"score": score}, fh)
'''
APP = '''
import hydra

@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg):
    with open(cfg.out + "/marker.txt", "w") as fh:
        fh.write(str(cfg.seed))
    return {"score": cfg.x * (1 + cfg.seed / 100)}

if __name__ == "__main__":
    main()
'''
FORMS = {
    "fn": ({"fn": "contract_fn:train", "x": 1.0, "out": "${hydra:runtime.output_dir}"}, "task.x", [0, 1, 2]),
    "command": ({"command": "python contract_cmd.py", "params": {"x": 1.0}, "output_dir_key": None},
                "task.params.x", [1, 2, 3]),
    "app": ({"app": "contract_app/app.py"}, "x", [1, 2, 3]),
}


def setup(root: Path, form: str) -> None:
    (root / "contract_fn.py").write_text(FN)
    (root / "contract_cmd.py").write_text(COMMAND)
    (root / "contract_app" / "conf").mkdir(parents=True)
    (root / "contract_app" / "app.py").write_text(APP)
    (root / "contract_app" / "conf" / "config.yaml").write_text("x: 1.0\nseed: 0\nout: ${hydra:runtime.output_dir}\n")
    task, key, _ = FORMS[form]
    (root / "conf" / "task" / "contract.yaml").write_text(yaml.safe_dump({**task, "metric": "score"}))
    (root / "conf" / "variable" / "cx.yaml").write_text(yaml.safe_dump({"key": key, "values": [3.0]}))
    commit_all(root, f"contract {form}")


@pytest.mark.parametrize(("form", "launcher"), [("fn", "inline"), ("command", "inline"), ("app", "inline"),
                                                ("fn", "local"), ("app", "local")])
def test_every_task_form_runs_the_same_ablation(project: Path, form: str, launcher: str) -> None:
    setup(project, form)
    res = ablate_cli(project, "-m", "task=contract", "variable=cx", "seeds=3", f"launcher={launcher}")
    assert res.returncode == 0, res.stderr
    (sd,) = [p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml")]
    seeds = FORMS[form][2]  # ablate seeds an fn task itself (0 included); a script seeds itself (from 1)
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["seeds"] == seeds
    per_seed = {a["arm"]: a["values"] for a in verdict["arms"]}
    for arm, x in (("control", 1.0), ("x=3.0", 3.0)):
        for seed in seeds:
            t = sd / "trials" / arm / f"seed={seed}"
            result = json.loads((t / "result.json").read_text())
            assert result["status"] == "ok", result
            assert result["metrics"]["score"] == per_seed[arm][str(seed)] == x * (1 + seed / 100)
            manifest = json.loads((t / "manifest.json").read_text())
            assert manifest["seed"] == seed and manifest["config"]["seed"] == seed
            if form != "command":  # ${hydra:runtime.output_dir} is the trial's own run dir, on every launcher
                assert (t / "run" / "marker.txt").read_text() == str(seed)
    assert verdict["confounds"]["findings"] == []
