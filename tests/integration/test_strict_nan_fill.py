"""Issue 35, item 16: under ``determinism=strict`` torch fills memory it allocates without initialising with NaN,
so a task that reads ``torch.empty`` gives NaN in every trial. That cause is named (in each trial and in the one
line that stops the ablation after the first trials of two arms, instead of running every trial), and the fix it
names (``determinism=seeded``) runs. A task NaN for another reason is stopped early too, without that cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from tests.issue35 import inside, plain_project

pytestmark = pytest.mark.slow

EMPTY = '''
import torch

def train(cfg):
    buf = torch.empty(64)          # never written: NaN under torch's deterministic fill
    if torch.are_deterministic_algorithms_enabled():
        return {"val_acc": float(buf.sum())}  # reads what it never wrote
    return {"val_acc": 0.5 + 0.01 * cfg.seed + (0.02 if cfg.task.mode == "b" else 0.0)}
'''

LOG_ZERO = '''
import math

def train(cfg):
    return {"val_acc": math.log(1.0) * float("inf")}  # 0 * inf: NaN whatever the mode
'''


def _run(proj: Path, *extra: str) -> object:
    import ablate

    with inside(proj):
        return ablate.run(proj / "conf", variable="mode", seeds=4, launcher="inline",
                          overrides=["task=nantask", "progress=off", *extra])


def test_strict_nan_fill_is_named_the_ablation_stops_early_and_the_fix_runs(project_template: Path,
                                                                           tmp_path: Path) -> None:
    proj = plain_project(project_template, tmp_path / "proj", source=EMPTY, name="nantask")
    with pytest.raises(ConfigError) as err:
        _run(proj, "determinism=strict", "hydra.sweep.dir=outputs/strict")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("`determinism`: the metric 'val_acc' was NaN or inf in the first "
                                              "trials of control, mode=b")
    assert "`torch.utils.deterministic.fill_uninitialized_memory`" in msg and "`determinism=seeded`" in msg
    recs = [json.loads(p.read_text()) for p in (proj / "outputs" / "strict").glob("trials/*/*/result.json")]
    assert len(recs) == 2  # stopped after the first trial of each arm, not 8 trials
    assert all(r["status"] == "diverged" and "fills memory it allocates without initialising" in r["error"]
               for r in recs)
    verdict = _run(proj, "determinism=seeded", "hydra.sweep.dir=outputs/seeded")  # the fix it names
    assert {a["arm"]: a["n"] for a in verdict["arms"]} == {"control": 4, "mode=b": 4}


def test_a_metric_nan_for_another_reason_stops_early_without_naming_the_fill(project_template: Path,
                                                                              tmp_path: Path) -> None:
    proj = plain_project(project_template, tmp_path / "proj", source=LOG_ZERO, name="nantask")
    with pytest.raises(ConfigError) as err:
        _run(proj, "determinism=seeded", "hydra.sweep.dir=outputs/nan")
    msg = str(err.value)
    assert msg.startswith("`task`: the metric 'val_acc' was NaN or inf") and "fill_uninitialized_memory" not in msg
    assert len(list((proj / "outputs" / "nan").glob("trials/*/*/result.json"))) == 2
