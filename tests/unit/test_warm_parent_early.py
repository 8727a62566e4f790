"""What the early warm parent may import before the code is pinned (ablate/trials/warm/early.py).

Real files in a temp project (a git work tree) and a temp site dir; the lists are read by hand from the files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ablate.trials.warm.early import installed, shadowed, task_imports
from tests.helpers import run


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "pkg" / "sub").mkdir(parents=True)
    run(["git", "init", "-q"], proj)
    return proj


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_task_module_s_top_imports_in_order_through_its_packages_and_own_modules(tree: Path) -> None:
    _write(tree, {
        "pkg/__init__.py": '"""Package."""\nimport json\n__all__ = ["x"]\n',
        "pkg/sub/__init__.py": "",
        "pkg/sub/task.py": ("from __future__ import annotations\nimport numpy as np\nfrom torch import nn\n"
                            "from . import helpers\nfrom .model import Net\nimport scipy.stats\n\n\n"
                            "def train(cfg: Any) -> dict:\n    import pandas\n    return {}\n"),
        "pkg/sub/helpers.py": "import yaml\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import rich\n",
        "pkg/sub/model.py": "import torch.nn.functional\nfrom pkg import other\n",
        "pkg/other.py": "import tqdm\n",
    })
    names = task_imports({"fn": "pkg.sub.task:train"}, str(tree))
    # pkg/__init__ runs first (json), then task.py: numpy, torch, helpers (yaml, typing), model (torch.nn.functional,
    # pkg.other: tqdm), then scipy.stats; nothing inside a function, nothing under `if TYPE_CHECKING:`
    assert names == ["json", "numpy", "torch", "yaml", "typing", "torch.nn.functional", "tqdm", "scipy.stats"]


def test_the_list_ends_at_the_first_statement_that_could_change_a_later_import(tree: Path) -> None:
    _write(tree, {"task.py": "import os\nos.environ['OMP_NUM_THREADS'] = '4'\nimport torch\n",
                  "app.py": "import hydra\nimport helper\nimport torch\n",
                  "helper.py": "import numpy\nnumpy.seterr(all='raise')\n",
                  "guarded.py": "try:\n    import torch\nexcept ImportError:\n    torch = None\nimport numpy\n",
                  "deco.py": "import functools\n\n@functools.cache\ndef f():\n    pass\n\nimport torch\n"})
    assert task_imports({"fn": "task:train"}, str(tree)) == ["os"]  # torch comes after the environment is set
    assert task_imports({"app": "app.py"}, str(tree)) == ["hydra", "numpy"]  # helper's call: torch after it
    assert task_imports({"fn": "guarded:train"}, str(tree)) == []
    assert task_imports({"fn": "deco:train"}, str(tree)) == ["functools"]
    assert task_imports({"command": "python train.py"}, str(tree)) == []
    assert task_imports({"fn": "missing:train"}, str(tree)) == ["missing"]  # not the project's: checked there


def test_installed_packages_may_be_imported_early_the_project_s_own_never(tree: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    _write(site, {"outside_pkg/__init__.py": "", "clash.py": ""})
    _write(tree, {"clash/__init__.py": "", "inside/vendored.py": ""})
    monkeypatch.syspath_prepend(str(tree / "inside"))  # a sys.path entry inside the work tree (`src/`, say)
    monkeypatch.syspath_prepend(str(site))
    assert installed("outside_pkg.mod", str(tree))  # found on sys.path, outside the work tree
    assert installed("json", str(tree)) and installed("sys", str(tree))  # the standard library, a builtin
    assert installed("omegaconf", str(tree))  # site-packages
    assert not installed("clash", str(tree))  # the project has its own `clash`: the snapshot's comes first
    assert not installed("vendored", str(tree))  # its file is the project's: only the snapshot's may be imported
    assert not installed("no_such_module_here", str(tree))
    assert shadowed(["clash.x", "json"], str(tree)) == ["clash.x"]


def test_a_venv_inside_the_project_is_still_installed(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package in the interpreter's own installation (``sys.prefix``) counts as installed even when that venv
    lies inside the project's work tree (``.venv/``, git-ignored, never in the snapshot); the same files under
    another prefix are the project's."""
    venv = tree / ".venv"
    _write(venv / "lib" / "site-packages", {"venvpkg/__init__.py": ""})
    monkeypatch.syspath_prepend(str(venv / "lib" / "site-packages"))
    monkeypatch.setattr(sys, "prefix", str(venv))
    assert installed("venvpkg", str(tree))
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    assert not installed("venvpkg", str(tree))


def test_the_warm_parent_imports_early_only_the_prefix_it_may(tree: Path) -> None:
    """``parent.import_early`` stops at the first name it may not import (the task imports what follows after it),
    and says nothing is refused when what it imported left no thread behind."""
    _write(tree, {"ownmod.py": ""})
    code = ("import json, sys\nfrom ablate.trials.warm import parent\n"
            "out = parent.import_early(sys.argv[1:])\n"
            "print(json.dumps({**out, 'held': [m for m in ('colorsys', 'wave') if m in sys.modules]}))")
    out = json.loads(run([sys.executable, "-c", code, "colorsys", "ownmod", "wave"], tree).stdout)
    assert out["imported"] == ["colorsys"] and out["held"] == ["colorsys"] and out["refused"] is None
