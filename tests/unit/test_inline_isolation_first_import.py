"""Issue 35, item 9: an inline trial that imported numpy (or torch) itself and changed its print options (or
torch's thread count) has the change named and put back, to the state numpy (torch) had when it was imported.
Each case runs in a fresh interpreter, where neither is imported yet, as in an ablate process before its first
inline trial."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CODE = '''
import json, sys
from ablate.trials import isolation
assert "numpy" not in sys.modules and "torch" not in sys.modules
before = isolation.snapshot()
baseline = isolation.snapshot()
import {module}
{change}
named = isolation.restore(before, baseline)
import numpy as np
out = {{"named": named, "printoptions": np.get_printoptions(), "geterr": np.geterr()}}
if "torch" in sys.modules:
    out["threads"] = sys.modules["torch"].get_num_threads()
print(json.dumps(out, default=str))
'''


def _run(module: str, change: str, threads: int = 1) -> dict:
    env = {"OMP_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, "-c", CODE.format(module=module, change=change)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


@pytest.mark.parametrize(("change", "shown"), [
    ("numpy.set_printoptions(precision=3)", "'precision': 3"),
    ("numpy.set_printoptions(threshold=5, linewidth=200)", "'threshold': 5"),
    ("numpy.set_printoptions(suppress=True); numpy.seterr(all='raise')", "'suppress': True"),
])
def test_numpy_print_options_set_by_a_trial_that_imported_numpy_are_named_and_restored(change: str,
                                                                                      shown: str) -> None:
    out = _run("numpy", change)
    (line,) = [n for n in out["named"] if n.startswith("numpy print options")]
    assert shown in line
    assert out["printoptions"]["precision"] == 8 and out["printoptions"]["threshold"] == 1000
    assert out["printoptions"]["suppress"] is False and out["printoptions"]["linewidth"] == 75
    assert out["geterr"] == {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}


@pytest.mark.parametrize("threads", [1, 2])
def test_torch_threads_set_by_a_trial_that_imported_torch_are_named_and_restored(threads: int) -> None:
    out = _run("torch", "torch.set_num_threads(3); import numpy; numpy.set_printoptions(precision=4)", threads)
    assert f"torch threads ({threads} -> 3)" in out["named"]
    assert out["threads"] == threads
    assert out["printoptions"]["precision"] == 8 and any(n.startswith("numpy print options") for n in out["named"])


def test_nothing_changed_nothing_named() -> None:
    out = _run("torch", "import numpy; numpy.zeros(3)")
    assert out["named"] == [] and out["threads"] == 1
