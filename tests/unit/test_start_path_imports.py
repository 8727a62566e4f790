"""What `ablate -m` imports before its early warm parent starts (issue 42).

Until the warm parent is started (:func:`ablate.orchestrate.pipeline.prepare`), one core is all the ablation uses: the
modules imported before then are on the critical path. numpy, ablate.stats and scipy are the verdict's, needed only
after the trials; imported later, they load while the warm parent imports the task, on the other core. DVC is
not imported at all where ``dvc.lock`` answers the data pins (:func:`ablate.pin.pins._lock_pin`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.errors import PinError
from ablate.pin import digest
from ablate.pin.pins import pin_data

#: The modules `ablate -m variable=... seeds=...` imports on its way to the early warm parent: the command line's
#: (ablate.cli.main._hydra_main's multirun branch) and planning's (pipeline.prepare).
START_PATH = ("ablate.cli.main", "ablate.api", "ablate.orchestrate.suite", "ablate.orchestrate.transfer",
              "ablate.plan.compose", "ablate.plan.overrides", "ablate.plan.suite", "ablate.trials.tasks.interface",
              "ablate.orchestrate.pipeline", "ablate.orchestrate.options", "ablate.trials.launchers",
              "ablate.plan.arms", "ablate.plan.hydra_semantics", "ablate.trackers", "ablate.pin.pins")


def test_start_path_leaves_the_verdicts_libraries_for_later() -> None:
    code = ("import importlib, sys\n"
            f"for name in {START_PATH!r}:\n"
            "    importlib.import_module(name)\n"
            "print(sorted(m for m in ('numpy', 'scipy', 'ablate.stats', 'ablate.judge.verdict', 'dvc')\n"
            "             if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


#: Pins the README example's data in a fresh process: prints the pins as JSON, then whether DVC was imported.
PIN_DATA = ("import json, sys\n"
            "from ablate.pin.pins import pin_data\n"
            "print(json.dumps(pin_data(['data/digits.npz'], sys.argv[1])))\n"
            "print('dvc' in sys.modules)\n")


def _pin_in_fresh_process(project: Path) -> tuple[dict, bool]:
    out = subprocess.run([sys.executable, "-c", PIN_DATA, str(project)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return json.loads(out[0]), out[1] == "True"


#: Prints the hash DVC itself records for data/digits.npz (its repo index, read from dvc.lock): the expected value,
#: from DVC, in a process of its own (DVC stays out of the test process).
DVC_OWN = ("import sys\n"
           "from pathlib import Path\n"
           "from dvc.repo import Repo\n"
           "repo = Repo(sys.argv[1])\n"
           "out = next(o for o in repo.index.outs if Path(o.fs_path) == Path(sys.argv[1], 'data', 'digits.npz'))\n"
           "print(f'{out.hash_info.name}:{out.hash_info.value}')\n")


def _dvc_own_pin(project: Path) -> str:
    return subprocess.run([sys.executable, "-c", DVC_OWN, str(project)], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_pinning_the_readme_examples_data_leaves_dvc_unimported(project_template: Path) -> None:
    """Issue 42: dvc.lock's md5 answers the pin of a stage's output file (DVC's import, repo and index are 0.6-0.9 s
    of the orchestrator's CPU); the pin is DVC's own, and the md5 of the file's bytes."""
    data = project_template / "data" / "digits.npz"
    pins, dvc_imported = _pin_in_fresh_process(project_template)
    assert not dvc_imported
    assert pins == {"data/digits.npz": {"hash": _dvc_own_pin(project_template), "output": "data/digits.npz",
                                        "recorded_in": "dvc.lock", "content": digest.digest(data)["digest"]}}
    assert pins["data/digits.npz"]["hash"] == "md5:" + hashlib.md5(data.read_bytes()).hexdigest()


def test_a_dvcignore_pattern_leaves_the_pin_to_dvc(project_template: Path, tmp_path: Path) -> None:
    """A .dvcignore with a pattern could hide the output from DVC: DVC decides (and gives the same pin here)."""
    proj = shutil.copytree(project_template, tmp_path / "proj", symlinks=True)
    (proj / ".dvcignore").write_text("# scratch files\n*.tmp\n")
    pins, dvc_imported = _pin_in_fresh_process(proj)
    assert dvc_imported
    assert pins["data/digits.npz"]["hash"] == _dvc_own_pin(proj)
    assert pins["data/digits.npz"]["recorded_in"] == "dvc.lock"


def test_a_modified_data_file_is_refused_in_dvcs_words(project_template: Path, tmp_path: Path) -> None:
    """The lock answers only a match: a file whose md5 differs from dvc.lock's is DVC's refusal, with its fix."""
    proj = shutil.copytree(project_template, tmp_path / "proj", symlinks=True)
    with open(proj / "data" / "digits.npz", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(PinError) as err:
        pin_data(["data/digits.npz"], proj)
    assert "data/digits.npz differs from what dvc.lock records (dvc status: modified" in str(err.value)
    assert "dvc checkout --force data/digits.npz" in str(err.value)
