"""Issue 35, item 16: a trial ablate stopped is labelled with why ablate stopped (on_failure=abort after a named
trial failed; a trial that showed the task itself is wrong), never "Ctrl-C or on_failure=abort" when neither."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.errors import AblateError
from tests.issue35 import inside, plain_project

pytestmark = pytest.mark.slow

TASK = '''
import time
from pathlib import Path

def train(cfg):
    flags = Path(cfg.task.flags)
    if cfg.seed == 0 and cfg.task.mode == "a":  # fails once another trial runs, so that one is stopped mid-run
        t0 = time.time()
        while not list(flags.glob("started-*")) and time.time() - t0 < 60:
            time.sleep(0.05)
        {failure}
    (flags / f"started-{{cfg.task.mode}}-{{cfg.seed}}").write_text("")
    t0 = time.time()
    while time.time() - t0 < 60:  # held until ablate stops it
        time.sleep(0.05)
    return {{"val_acc": 0.5}}
'''

CASES = {
    "abort": ("raise RuntimeError('boom')", ["on_failure=abort"],
              "stopped by ablate before it finished (on_failure=abort: control/seed=0 ended failed)"),
    "broken-task": ("return [0.5]", [],
                    "stopped by ablate before it finished (control/seed=0 showed the task itself is wrong)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_stopped_trial_says_why_ablate_stopped(project_template: Path, tmp_path: Path, case: str) -> None:
    import ablate

    failure, extra, label = CASES[case]
    flags = tmp_path / "flags"
    flags.mkdir()
    proj = plain_project(project_template, tmp_path / "proj", source=TASK.format(failure=failure), name="stopper",
                         extra=f"flags: {flags}\n")
    with inside(proj), pytest.raises(AblateError):
        ablate.run(proj / "conf", variable="mode", seeds=3, launcher="local",
                   overrides=["task=stopper", "progress=off", "launcher.max_parallel=2", "launcher.warm=false",
                              "hydra.sweep.dir=outputs/sd", *extra])
    recs = [json.loads(p.read_text()) for p in (proj / "outputs" / "sd").glob("trials/*/*/result.json")]
    stopped = [r for r in recs if r["status"] == "interrupted"]
    assert stopped, recs
    for rec in stopped:
        assert rec["error"] == f"{label}; `ablate resume` re-runs it"
        assert "Ctrl-C" not in rec["error"]
