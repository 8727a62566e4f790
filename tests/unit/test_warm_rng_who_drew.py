"""Issue 35, items 9 and 15: the warm parent's random-draw check at import.

- It compares each generator's whole state, not its position: a numpy draw of a multiple of 624 words at import
  (which leaves the Mersenne Twister's position where it was) is seen.
- It decides by who drew: an installed library's own draw at import (``rich`` draws ``getrandbits(24)`` for its
  style ids) is accepted, the task's own code drawing is refused; the same decision whether or not the library
  was already imported (by the early warm parent) when the task was.

Each case imports a real task module from a code root in a fresh interpreter, inside the same watch as the warm
parent (:class:`ablate.trials.warm.hazards.Watch`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CODE = '''
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
for name in json.loads(sys.argv[2]):  # what an early warm parent imported before the task (installed packages)
    importlib.import_module(name)
from ablate.trials.warm import hazards
with hazards.Watch(sys.argv[1]) as watch:
    importlib.import_module("task")
print(json.dumps({"own": watch.rng_own, "library": watch.rng_library}))
'''


def _watch(tmp_path: Path, source: str, early: list[str] | None = None, files: dict[str, str] | None = None) -> dict:
    root = tmp_path / "code"
    root.mkdir(exist_ok=True)
    (root / "task.py").write_text(source)
    for name, text in (files or {}).items():
        (root / name).write_text(text)
    res = subprocess.run([sys.executable, "-c", CODE, str(root), json.dumps(early or [])], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


@pytest.mark.parametrize("draw", ["np.random.rand(312)", "np.random.rand(624)", "np.random.bytes(2496)",
                                  "np.random.shuffle(list(range(10)))", "np.random.rand(1)"])
@pytest.mark.parametrize("early", [[], ["numpy"]])
def test_a_numpy_draw_of_any_size_by_the_task_is_seen(tmp_path: Path, draw: str, early: list[str]) -> None:
    out = _watch(tmp_path, f"import numpy as np\nX = {draw}\n\ndef train(cfg):\n    return {{}}\n", early)
    assert out["own"] == ["numpy"] and out["library"] == []


def test_a_numpy_draw_with_numpy_random_loaded_before_is_seen(tmp_path: Path) -> None:
    out = _watch(tmp_path, "import numpy as np\nX = np.random.rand(312)\n", ["numpy.random"])
    assert out["own"] == ["numpy"]


@pytest.mark.parametrize("early", [[], ["rich.style"], ["rich.console"]])
def test_richs_own_draw_at_import_is_a_librarys_whatever_was_imported_early(tmp_path: Path,
                                                                            early: list[str]) -> None:
    out = _watch(tmp_path, "import rich.console\nfrom rich.progress import track\n\ndef train(cfg):\n"
                           "    return {}\n", early)
    assert out["own"] == []  # the same decision every launch: not the task's draw
    assert all(d["module"].startswith("rich") and d["generator"] == "random" for d in out["library"])
    assert (out["library"] != []) == (early == [])  # named when it happened in this import


@pytest.mark.parametrize(("source", "files", "gen"), [
    ("import rich\nimport random\nX = random.random()\n", {}, "random"),  # after a library's import line
    ("import random\nrandom.shuffle(list(range(5)))\nimport rich\n", {}, "random"),  # before one
    ("from helpers import W\n", {"helpers.py": "import torch\nW = torch.randn(3)\n"}, "torch"),  # its own module
    ("import helpers\n", {"helpers.py": "import numpy as np\nI = np.random.permutation(624)\n"}, "numpy"),
])
def test_the_tasks_own_draw_is_refused_beside_a_librarys(tmp_path: Path, source: str, files: dict, gen: str) -> None:
    out = _watch(tmp_path, source, files=files)
    assert out["own"] == [gen]
