"""Issue 35, item 16: a script whose parser refuses the seed ablate passes (``seed_key: seed``, the default) is
told to set ``seed_key``, never to change ``args`` first, however the parser lists what it refused (argparse's
``unrecognized arguments: --seed 1``, HfArgumentParser's ``['--seed', '1']``, a configurator's ``Unknown config
key: seed``); the fix it names runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.errors import ConfigError
from tests.helpers import commit_all
from tests.issue35 import inside

pytestmark = pytest.mark.slow

WRITE = '''
import json, os
seed = int(os.environ["ABLATE_SEED"])  # how a script without a seed argument gets its seed
json.dump({"val_acc": 0.5 + LR + 0.01 * seed}, open(os.environ["ABLATE_METRICS_FILE"], "w"))
'''

SCRIPTS = {
    "argparse": ("--key value", '''
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, default=0.1)
LR = ap.parse_args().lr
''' + WRITE),
    "hfparser": ("--key value", '''
import argparse, sys
ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, default=0.1)
args, remaining = ap.parse_known_args()
if remaining:
    raise ValueError(f"Some specified arguments are not used by the HfArgumentParser: {remaining}")
LR = args.lr
''' + WRITE),
    "configurator": ("--key=value", '''
import sys
from ast import literal_eval
lr = 0.1
for arg in sys.argv[1:]:
    key, val = arg.split("=")
    key = key[2:]
    if key in globals():
        globals()[key] = literal_eval(val)
    else:
        raise ValueError(f"Unknown config key: {key}")
LR = lr
''' + WRITE),
}


@pytest.mark.parametrize("kind", sorted(SCRIPTS))
def test_a_refused_seed_names_seed_key_and_the_fix_runs(project_template: Path, tmp_path: Path, kind: str) -> None:
    import shutil

    import ablate

    style, source = SCRIPTS[kind]
    proj = tmp_path / "proj"
    shutil.copytree(project_template, proj, symlinks=True)
    (proj / "train.py").write_text(source)
    (proj / "conf" / "task" / "script.yaml").write_text(
        f"command: python train.py\nargs: '{style}'\nmetric: val_acc\ngoal: maximize\ndata: []\nparams: {{lr: 0.1}}\n")
    (proj / "conf" / "variable" / "slr.yaml").write_text("key: task.params.lr\nvalues: [0.2]\n")
    commit_all(proj, "script")
    args = {"variable": "slr", "seeds": 3, "launcher": "inline"}
    with inside(proj), pytest.raises(ConfigError) as err:
        ablate.run(proj / "conf", **args, overrides=["task=script", "progress=off"])
    msg = str(err.value)
    assert msg.startswith("`task.seed_key`: ") and "the script refused the seed argument it was given" in msg, msg
    assert "`args:" not in msg.split("Fix:")[1].split("seed_key")[0]  # the seed first, not the argument style
    assert "`+task.seed_key=null`" in msg
    with inside(proj):  # the fix it names
        verdict = ablate.run(proj / "conf", **args, overrides=["task=script", "progress=off", "+task.seed_key=null",
                                                              "hydra.sweep.dir=outputs/fixed"])
    assert {a["arm"]: a["n"] for a in verdict["arms"]} == {"control": 3, "lr=0.2": 3}
