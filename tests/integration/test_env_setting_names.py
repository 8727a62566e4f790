"""Attack (issue 35, item 12): ``args: env`` settings whose variable is ablate's own (``ablate_seed`` ->
``ABLATE_SEED``: every trial saw seed 7) or the process's (``path`` -> ``PATH``, ``ld_preload`` -> ``LD_PRELOAD``)
are refused at planning in one line with the fix (an ``env_prefix``), and the fix runs: every trial then sees
its own seed. ``task.env`` may not set ablate's own variables either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.trials.tasks import argstyle
from ablate.trials.tasks.command import settings_of, task_settings
from tests.helpers import commit_all
from tests.issue35 import inside

pytestmark = pytest.mark.slow

SCRIPT = '''
import json, os
seed = int(os.environ["ABLATE_SEED"])
mode = os.environ.get("TRAIN_MODE") or os.environ.get("MODE")
json.dump({"val_acc": 0.5 + seed * 0.01 + (0.02 if mode == "b" else 0.0), "seen": seed},
          open(os.environ["ABLATE_METRICS_FILE"], "w"))
'''


@pytest.mark.parametrize(("params", "key", "var"), [
    ({"ablate_seed": 7}, "ablate_seed", "ABLATE_SEED"),
    ({"ablate_metrics_file": "/tmp/m.json"}, "ablate_metrics_file", "ABLATE_METRICS_FILE"),
    ({"path": "/opt/bin"}, "path", "PATH"),
    ({"ld_preload": "/tmp/x.so"}, "ld_preload", "LD_PRELOAD"),
    ({"--pythonpath": "/x"}, "pythonpath", "PYTHONPATH"),
    ({"omp_num_threads": 8}, "omp_num_threads", "OMP_NUM_THREADS"),
    ({"ablate": {"trial_dir": "/x"}}, "ablate.trial_dir", "ABLATE_TRIAL_DIR"),
])
def test_env_settings_named_like_ablate_or_process_variables_are_refused(params: dict, key: str, var: str) -> None:
    task = {"command": "python train.py", "args": "env", "params": {"mode": "a", **params}}
    with pytest.raises(ConfigError) as err:
        task_settings(task)
    msg = str(err.value)
    assert "\n" not in msg and f"the setting {key!r} becomes the environment variable {var}" in msg
    assert msg.startswith(f"`task.params.{next(iter(params))}") and "Fix: set `env_prefix: TRAIN_`" in msg
    s = task_settings({**task, "env_prefix": "TRAIN_"})  # the fix it names
    flat = settings_of(s, seed=1, determinism="seeded", run_dir=Path("/r"), metrics_path=Path("/m"))
    _, env = argstyle.render(flat, s["args"], s["values"], env_prefix="TRAIN_")
    assert set(env) == {"TRAIN_MODE", "TRAIN_SEED", f"TRAIN_{var}"}


@pytest.mark.parametrize(("extra", "where"), [
    ({"seed_key": "ablate_seed"}, "task.seed_key"), ({"output_dir_key": "home"}, "task.output_dir_key"),
    ({"env_prefix": "ABLATE_"}, "task.params.mode"), ({"env_prefix": "LD_"}, "task.params.mode"),
])
def test_ablate_keys_and_prefixes_are_checked_too(extra: dict, where: str) -> None:
    with pytest.raises(ConfigError) as err:
        task_settings({"command": "python train.py", "args": "env", "params": {"mode": "a"}, **extra})
    assert str(err.value).startswith(f"`{where}`")
    if "env_prefix" in extra:
        assert "choose another `env_prefix`" in str(err.value)


@pytest.mark.parametrize("name", ["ABLATE_SEED", "ABLATE_RUN_DIR", "PYTHONHASHSEED", "OMP_NUM_THREADS"])
def test_task_env_may_not_set_ablates_own_variables(name: str) -> None:
    with pytest.raises(ConfigError) as err:
        task_settings({"command": "python train.py", "env": {name: "7"}})
    assert str(err.value).startswith(f"`task.env.{name}`: sets {name}, which ablate sets itself")
    assert f"Fix: remove {name} from `task.env`" in str(err.value)
    assert task_settings({"command": "python train.py", "env": {"PATH": "/usr/bin:/bin"}})["env"]  # the user's


@pytest.fixture(scope="module")
def env_project(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import shutil

    proj = tmp_path_factory.mktemp("envnames") / "proj"
    shutil.copytree(project_template, proj, symlinks=True)
    (proj / "train.py").write_text(SCRIPT)
    (proj / "conf" / "task" / "envtrain.yaml").write_text(
        "command: python train.py\nargs: env\nmetric: val_acc\ngoal: maximize\ndata: []\n"
        "params: {mode: a, ablate_seed: 7}\n")
    (proj / "conf" / "variable" / "mode.yaml").write_text("key: task.params.mode\nvalues: [b]\n")
    commit_all(proj, "env task")
    return proj


def test_planning_refuses_in_one_line_and_the_fix_runs(env_project: Path) -> None:
    import ablate

    args = {"variable": "mode", "seeds": 3, "launcher": "inline"}
    with inside(env_project), pytest.raises(ConfigError) as err:
        ablate.run(env_project / "conf", **args, overrides=["task=envtrain", "progress=off"])
    msg = str(err.value)
    assert "\n" not in msg and "'ablate_seed' becomes the environment variable ABLATE_SEED" in msg
    assert not list(env_project.glob("outputs/ablate/*/*/trials"))  # refused before any trial
    with inside(env_project):  # the fix: every setting namespaced
        verdict = ablate.run(env_project / "conf", **args,
                             overrides=["task=envtrain", "progress=off", "+task.env_prefix=TRAIN_"])
    seen = {(r["arm"], r["seed"]): r["metrics"]["seen"] for r in
            (json.loads(p.read_text()) for p in Path(verdict.sweep_dir).glob("trials/*/*/result.json"))}
    assert seen == {(a, s): s for a in ("control", "mode=b") for s in (1, 2, 3)}  # each trial its own seed
