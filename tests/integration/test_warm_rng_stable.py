"""Attack (issue 35, items 9 and 15): the warm launcher's decision on a draw at import is the same every launch.

The Lightning + Hydra template imports ``rich``, which draws ``getrandbits(24)`` at import: some launches refused
warm (rich imported by the task's import, inside the check), others accepted (rich imported before it, by the
early warm parent). Who drew decides now: rich's draw is the library's own (accepted, named in the warm parent's
log), whether the early parent imported it or not; the task's own numpy draw of 624 words (which leaves the
Mersenne Twister's position unchanged) is refused."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, commit_all

pytestmark = pytest.mark.slow

RICH_FIRST = '''
import rich.console  # installed: the early warm parent imports it before the task

def train(cfg):
    import random
    return {"val_acc": 0.5 + 0.1 * random.random() + 0.01 * cfg.task.x}
'''

OWN_FIRST = '''
try:  # an import under `try`: the early warm parent leaves it to the task's own import, inside the check
    import rich.console
except ImportError:
    rich = None

def train(cfg):
    import random
    return {"val_acc": 0.5 + 0.1 * random.random() + 0.01 * cfg.task.x}
'''

NUMPY_624 = '''
try:  # imported by the task itself, inside the check (not by the early warm parent)
    import numpy as np
except ImportError:
    np = None

PERM = np.random.rand(312)  # 624 words: the generator's position is where it was

def train(cfg):
    return {"val_acc": 0.5 + 0.01 * float(PERM[0]) + 0.01 * cfg.task.x}
'''


def _task(project: Path, name: str, body: str) -> None:
    pkg = project / "richtask"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("X = 1\n")
    (pkg / f"{name}.py").write_text(body)
    (project / "conf" / "task" / f"{name}.yaml").write_text(
        f"fn: richtask.{name}:train\nmetric: val_acc\ngoal: maximize\nx: 0\ndata: []\n")
    (project / "conf" / "variable" / "x.yaml").write_text("key: task.x\nvalues: [1]\n")
    commit_all(project, f"task {name}")


@pytest.mark.parametrize("body", [RICH_FIRST, OWN_FIRST], ids=["rich-imported-early", "rich-imported-by-the-task"])
def test_a_librarys_draw_at_import_keeps_the_trials_warm_every_launch(project: Path, body: str) -> None:
    _task(project, "t", body)
    res = ablate_cli(project, "-m", "variable=x", "task=t", "seeds=3", "launcher=local", "hydra.sweep.dir=outputs/w")
    assert res.returncode == 0, res.stderr[-3000:]
    sd = project / "outputs" / "w"
    for arm, x in (("control", 0), ("x=1", 1)):
        for seed in range(3):
            t = sd / "trials" / arm / f"seed={seed}"
            assert "warm_parent" in json.loads((t / "manifest.json").read_text())  # forked from the warm parent
            rec = json.loads((t / "result.json").read_text())
            want = 0.5 + 0.1 * random.Random(seed).random() + 0.01 * x  # seeded after the fork
            assert rec["metrics"]["val_acc"] == pytest.approx(want, abs=1e-12)
    log = (sd / "warm-parent.log").read_text() if (sd / "warm-parent.log").exists() else ""
    if body is OWN_FIRST:  # the draw happened in this warm parent's check: named, not refused
        assert "importing rich.console drew from python's `random`: that library's own draw at import" in log


def test_the_tasks_own_numpy_draw_of_624_words_is_refused_warm(project: Path) -> None:
    _task(project, "n", NUMPY_624)
    # the refusal in this process (the warm parent that finds the draw is its own process either way); the fix
    # below runs through the console script
    res = ablate_in(project, "-m", "variable=x", "task=n", "seeds=3", "launcher=local")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("ablate: error: `launcher.warm`: importing richtask.n:train drew random numbers from "
                           "numpy's global generator (`np.random`) in the warm parent"), line
    res = ablate_cli(project, "-m", "variable=x", "task=n", "seeds=3", "launcher=local", "launcher.warm=false",
                     "hydra.sweep.dir=outputs/fresh")  # the fix it names
    assert res.returncode == 0, res.stderr[-2000:]
