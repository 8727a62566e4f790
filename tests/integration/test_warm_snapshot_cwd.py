"""Warm and fresh trials see the same files and the same variables when modules are imported (issue 35, item 7).

The task module reads a git-ignored file at import (``local.cfg``: the live project has one, the code snapshot
has not). A fresh trial imports it in its own mirror of the snapshot; the warm parent now imports it in the
snapshot too (it used to import it in the live project root: 6 of 6 warm trials saw the live copy). The task
function imports two modules the warm parent then learns: ``lazy_file`` reads files relative to its working dir
at import (the snapshot, with the task's data linked in, never the live project), and ``lazy_env`` reads
``$ABLATE_SEED`` at import, which each trial sets to its own seed: the warm parent does not import it (each trial
does), so every trial reads its own seed, as a fresh one does (trials 2-6 used to read none). One warm and one fresh
ablation of the same task, compared value for value.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, commit_all, results

pytestmark = pytest.mark.slow
TASK = '''
from pathlib import Path

LOCAL = Path("local.cfg").read_text() if Path("local.cfg").exists() else ""


def train(cfg):
    import lazy_file  # imported by the first trial: the warm parent learns it
    import lazy_env  # reads this trial's $ABLATE_SEED at import

    return {"val_acc": 0.5 + 0.01 * cfg.seed + cfg.task.lr, "local_len": float(len(LOCAL)),
            "lazy_file_len": float(len(lazy_file.TEXT)), "lazy_data": float(lazy_file.DATA),
            "lazy_seed": lazy_env.SEED}
'''
LAZY_FILE = '''
from pathlib import Path

TEXT = Path("local.cfg").read_text() if Path("local.cfg").exists() else ""
DATA = Path("data/digits.npz").is_file()  # the task's data, linked into the dir a trial imports in
'''
LAZY_ENV = '''
import os

SEED = float(os.environ.get("ABLATE_SEED", "-1"))
'''


@pytest.fixture(scope="module")
def runs(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    project = tmp_path_factory.mktemp("warm_cwd") / "proj"
    shutil.copytree(project_template, project, symlinks=True)
    for name, text in (("readimport.py", TASK), ("lazy_file.py", LAZY_FILE), ("lazy_env.py", LAZY_ENV)):
        (project / name).write_text(text)
    (project / ".gitignore").write_text((project / ".gitignore").read_text() + "local.cfg\n")
    (project / "conf" / "task" / "ri.yaml").write_text(
        "fn: readimport:train\nmetric: val_acc\ngoal: maximize\nlr: 0.1\ndata: [data/digits.npz]\n")
    (project / "conf" / "variable" / "ri_lr.yaml").write_text("key: task.lr\nvalues: [0.2]\n")
    commit_all(project, "a task that reads files and its seed at import")
    (project / "local.cfg").write_text("the live project's own copy, git-ignored\n")
    out = {}
    for mode in ("warm", "fresh"):
        res = ablate_cli(project, "-m", "task=ri", "variable=ri_lr", "seeds=3", "launcher.max_parallel=1",
                         f"launcher.warm={str(mode == 'warm').lower()}", f"hydra.sweep.dir=outputs/{mode}")
        assert res.returncode == 0, res.stderr[-3000:]
        out[mode] = project / "outputs" / mode
    return out


def test_warm_and_fresh_trials_see_the_same_files_and_seeds(runs: dict[str, Path]) -> None:
    warm, fresh = results(runs["warm"]), results(runs["fresh"])
    assert set(warm) == set(fresh) == {(a, s) for a in ("control", "lr=0.2") for s in (0, 1, 2)}
    for key, rec in warm.items():
        assert rec["metrics"] == fresh[key]["metrics"], key
        assert rec["metrics"]["local_len"] == 0.0 and rec["metrics"]["lazy_file_len"] == 0.0  # never the live copy
        assert rec["metrics"]["lazy_data"] == 1.0 and rec["metrics"]["lazy_seed"] == key[1]


def test_the_warm_parent_learned_the_file_reader_and_left_the_seed_reader_to_each_trial(runs: dict[str, Path]) -> None:
    sd = runs["warm"]
    log = (sd / "warm-parent.log").read_text()
    assert ("not preloading lazy_env (imported by a trial): importing lazy_env read $ABLATE_SEED, which each trial "
            "sets to its own value") in log
    learned = [json.loads((sd / "trials" / arm / f"seed={s}" / "manifest.json").read_text())["warm"]["preloaded"]
               ["learned"] for arm in ("control", "lr=0.2") for s in (0, 1, 2)]
    assert learned[0] == [] and all(x == ["lazy_file"] for x in learned[1:])  # learned after the first trial
