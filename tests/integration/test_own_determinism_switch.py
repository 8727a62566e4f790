"""Issue 35, item 16: ablating the task's own determinism switch (it calls ``torch.use_deterministic_algorithms``
itself) ran every trial, then declared the verdict invalid without pointing to ``variable=determinism``. It
stops after the first trial of each arm, in one line naming the flags and that fix; the fix runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from tests.issue35 import inside, plain_project

pytestmark = pytest.mark.slow

TASK = '''
import torch

def train(cfg):
    if cfg.task.det:  # the task's own switch
        {switch}
    x = torch.ones(3) * (0.5 + 0.01 * cfg.seed)
    return {{"val_acc": float(x.mean())}}
'''


@pytest.mark.parametrize(("switch", "flag"), [
    ("torch.use_deterministic_algorithms(True)", "use_deterministic_algorithms"),
    ("torch.backends.cudnn.benchmark = True", "cudnn.benchmark"),
])
def test_a_tasks_own_determinism_switch_stops_early_pointing_to_variable_determinism(
        project_template: Path, tmp_path: Path, switch: str, flag: str) -> None:
    import ablate

    proj = plain_project(project_template, tmp_path / "proj", source=TASK.format(switch=switch), name="det",
                         extra="det: false\n")
    (proj / "conf" / "variable" / "det.yaml").write_text("key: task.det\nvalues: [true]\n")
    args = {"seeds": 4, "launcher": "inline"}
    with inside(proj), pytest.raises(ConfigError) as err:
        ablate.run(proj / "conf", variable="det", **args, overrides=["task=det", "progress=off",
                                                                       "hydra.sweep.dir=outputs/own"])
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("`variable.key`: the arms ran with different torch determinism flags")
    assert f"control: {flag}=False" in msg and f"det=true: {flag}=True" in msg
    assert "`ablate -m variable=determinism`" in msg
    assert len(list((proj / "outputs" / "own").glob("trials/*/*/result.json"))) == 2  # not all 8
    with inside(proj):  # the fix it names: ablate sets the mode, the task's switch left off
        verdict = ablate.run(proj / "conf", variable="determinism", **args,
                             overrides=["task=det", "progress=off", "hydra.sweep.dir=outputs/fixed"])
    assert not verdict.invalid
    recs = [json.loads(p.read_text()) for p in (proj / "outputs" / "fixed").glob("trials/*/*/result.json")]
    assert len(recs) == 8 and {r["status"] for r in recs} == {"ok"}
