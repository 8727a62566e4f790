"""A task module that draws random numbers when imported, under the warm launcher (the default).

A warm parent imports the task once, unseeded, and forks every trial from it: a draw at the module's top
(``TOP = random.random()``) would be one value for every seed, and another on the next run, where a fresh
process draws it after ablate seeded it from the trial's seed. The warm launcher refuses such a task, naming
the generator and the fix; a module only a trial imports (learned by the warm parent) that draws at import is
left to each trial, so warm trials compute what fresh ones do.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import ablate
from tests.helpers import ablate_cli, ablate_in, commit_all

pytestmark = pytest.mark.slow

TOP_TASK = '''
import random

TOP = random.random()


def train(cfg):
    return {"val_acc": 0.5 + 0.1 * TOP + 0.001 * cfg.task.x}
'''

LAZY_TASK = '''
def train(cfg):
    from rngtask import lazy  # imported by each trial: the warm parent learns it unless it draws at import

    return {"val_acc": 0.5 + 0.1 * lazy.L + 0.001 * cfg.task.x}
'''

LAZY = '''
import numpy as np

L = float(np.random.rand())
'''


def _task(project: Path, body: str, lazy: bool = False) -> None:
    pkg = project / "rngtask"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text(body)
    if lazy:
        (pkg / "lazy.py").write_text(LAZY)
    (project / "conf" / "task" / "rng.yaml").write_text("fn: rngtask.task:train\nmetric: val_acc\ngoal: maximize\n"
                                                        "x: 0\n")
    (project / "conf" / "variable" / "x.yaml").write_text("key: task.x\nvalues: [1]\n")
    commit_all(project, "a task drawing random numbers at import")


def _values(sweep: Path) -> dict[tuple[str, int], float]:
    rows = ablate.load(sweep)
    return {(a, int(s)): float(v) for a, s, v in zip(rows["arm"], rows["seed"], rows["val_acc"], strict=True)}


TORCH_TOP_TASK = '''
import torch

W = torch.randn(4)


def train(cfg):
    return {"val_acc": 0.5 + 0.1 * float(W.sum()) + 0.001 * cfg.task.x}
'''

NUMPY_TOP_TASK = '''
import numpy as np

IDS = np.random.permutation(10)


def train(cfg):
    return {"val_acc": 0.5 + 0.001 * float(IDS[0]) + 0.001 * cfg.task.x}
'''


@pytest.mark.parametrize("body, rng", [(TORCH_TOP_TASK, "torch's default generator"),
                                       (NUMPY_TOP_TASK, "numpy's global generator (`np.random`)")])
def test_other_generators_drawn_at_import_are_refused_warm(project: Path, body: str, rng: str) -> None:
    """The same kind with torch's and numpy's global generators (torch and numpy imported by the early warm
    parent before the task module, or by the task module itself)."""
    _task(project, body)
    # in this process (the warm parent that finds the draw is its own process either way); the console script's
    # refusal of the same kind is the next test's
    res = ablate_in(project, "-m", "variable=x", "task=rng", "seeds=3", "launcher=local")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith(f"ablate: error: `launcher.warm`: importing rngtask.task:train drew random numbers from "
                           f"{rng} in the warm parent"), line


def test_a_task_module_drawing_at_import_is_refused_warm_and_runs_fresh(project: Path) -> None:
    _task(project, TOP_TASK)
    res = ablate_cli(project, "-m", "variable=x", "task=rng", "seeds=3", "launcher=local")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("ablate: error: `launcher.warm`: importing rngtask.task:train drew random numbers from "
                           "python's `random` in the warm parent")
    assert "Fix: draw them inside the task function (seeded there), or run each trial in a fresh process with " \
           "`launcher.warm=false`" in line
    # the fix it names: a fresh process per trial, which draws after its seeding (python's random.seed(seed))
    res = ablate_cli(project, "-m", "variable=x", "task=rng", "seeds=3", "launcher=local", "launcher.warm=false",
                     "hydra.sweep.dir=outputs/fresh")
    assert res.returncode == 0, res.stderr[-2000:]
    got = _values(project / "outputs" / "fresh")
    want = {(arm, s): 0.5 + 0.1 * random.Random(s).random() + 0.001 * x
            for arm, x in (("control", 0), ("x=1", 1)) for s in range(3)}
    assert got == pytest.approx(want, abs=1e-12)


def test_a_learned_module_drawing_at_import_stays_the_trials_own(project: Path) -> None:
    """Warm trials of a task whose trials import a module that draws from numpy's global generator at import
    give the values fresh trials give (numpy seeded with the trial's seed first), and the warm parent says
    it did not preload that module; numpy itself (no draw) is still learned."""
    _task(project, LAZY_TASK, lazy=True)
    runs = {}
    for warm in ("true", "false"):
        res = ablate_cli(project, "-m", "variable=x", "task=rng", "seeds=3", "launcher=local",
                         "launcher.max_parallel=1", f"launcher.warm={warm}", f"hydra.sweep.dir=outputs/warm-{warm}")
        assert res.returncode == 0, res.stderr[-2000:]
        runs[warm] = _values(project / "outputs" / f"warm-{warm}")
    import numpy as np

    want = {(arm, s): 0.5 + 0.1 * float(np.random.RandomState(s).rand()) + 0.001 * x
            for arm, x in (("control", 0), ("x=1", 1)) for s in range(3)}
    assert runs["false"] == pytest.approx(want, abs=1e-12)
    assert runs["true"] == pytest.approx(want, abs=1e-12)
    logs = "".join(p.read_text() for p in (project / "outputs" / "warm-true").glob("*.log"))
    assert "not preloading rngtask.lazy (imported by a trial): importing rngtask.lazy drew random numbers from " \
           "numpy's global generator" in logs
