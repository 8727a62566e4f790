"""The command form of a task: ablate runs an existing, unmodified Hydra training script.

The script (tests/fixtures/hydra_train/train.py + its own conf/) is copied into a real git + DVC
project byte for byte; every test checks it was not edited. The script always runs as its own process; the
orchestrator of an inline run whose launcher is not under test (a crashing script, a key the script lacks) and
the refusals run ablate's CLI entry in this process (:func:`tests.helpers.ablate_in`), the other runs the
console script.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from tests.helpers import REPO, ablate_cli, ablate_in, commit_all, only_sweep, run

pytestmark = pytest.mark.slow
FIXTURE = REPO / "tests" / "fixtures" / "hydra_train"
SCRIPT_SHA = hashlib.sha256((FIXTURE / "train.py").read_bytes()).hexdigest()
TRICKY = "it's a, b=c #1 ${oc.env:HOME} \\"

TASK = {
    "command": "python hydra_train/train.py",
    "data": ["data/digits.npz"],
    "metric": "val_acc",
    "goal": "maximize",
    "metrics_file": "metrics.json",
    "params": {"data_file": "data/digits.npz", "epochs": 3, "run_name": TRICKY.replace("${", "\\${"),
               "tags": ["a b", "c,d", None], "optim": {"lr": 0.01, "weight_decay": 0.0001}},
}


def write_project(root: Path, task: dict, values: list, name: str = "script_lr",
                  key: str = "task.params.optim.lr") -> None:
    (root / "conf" / "task" / "hydra_train.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    (root / "conf" / "variable" / f"{name}.yaml").write_text(yaml.safe_dump({"key": key, "values": values}))
    commit_all(root, "command task")


@pytest.fixture
def script_project(project: Path) -> Path:
    shutil.copytree(FIXTURE, project / "hydra_train", ignore=shutil.ignore_patterns("__pycache__", "outputs"))
    write_project(project, TASK, [0.001, 0.1])
    return project


def assert_script_untouched(project: Path) -> None:
    assert hashlib.sha256((project / "hydra_train" / "train.py").read_bytes()).hexdigest() == SCRIPT_SHA


def test_unmodified_hydra_script_runs_as_a_task(script_project: Path) -> None:
    res = ablate_in(script_project, "-m", "task=hydra_train", "variable=script_lr", "seeds=3",
                    "variable.values=[0.1]", "launcher.max_parallel=2")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(script_project)
    assert_script_untouched(script_project)
    metrics = {}
    for arm, lr in (("control", 0.01), ("lr=0.1", 0.1)):
        for seed in (1, 2, 3):  # seeds=3 means 1..3 for a script task: 0 reads as "no seed" to `if cfg.get("seed")`
            t = sd / "trials" / arm / f"seed={seed}"
            result = json.loads((t / "result.json").read_text())
            assert result["status"] == "ok", result
            assert 0.5 < result["metrics"]["val_acc"] <= 1.0
            metrics[arm, seed] = result["metrics"]
            # The script's own record of the config it ran: exactly the trial's params, seed and run dir.
            seen = OmegaConf.to_container(OmegaConf.load(t / "run" / ".hydra" / "config.yaml"), resolve=True)
            params = yaml.safe_load((t / "config.yaml").read_text())["task"]["params"]
            assert seen == {**params, "seed": seed}
            assert seen["optim"]["lr"] == lr and seen["run_name"] == TRICKY and seen["tags"] == ["a b", "c,d", None]
            cmd = json.loads((t / "command.json").read_text())
            assert cmd["returncode"] == 0
            assert cmd["cwd"] == str(t / "work")  # the trial's own mirror of the pinned snapshot, not the live tree
            assert (t / "work" / "hydra_train" / "train.py").resolve() == sd / "code" / "hydra_train" / "train.py"
            assert cmd["env"]["ABLATE_SEED"] == str(seed) and cmd["env"]["PYTHONHASHSEED"] == str(seed)
            assert "HOME" not in cmd["env"]  # only what ablate set is recorded, never the whole environment
            assert f"seed={seed}" in cmd["argv"] and f"hydra.run.dir='{t / 'run'}'" in cmd["argv"]
            assert "digits linear" not in (t / "stdout.log").read_text()
            assert TRICKY.split(" $")[0] in (t / "stdout.log").read_text()  # the script's print went to the log
    assert metrics["control", 1] != metrics["control", 2]  # the seed reached the script
    verdict = json.loads((sd / "verdict.json").read_text())
    assert [c["arm"] for c in verdict["comparisons"]] == ["lr=0.1"]


def test_crashing_script_is_a_failed_trial_and_ok_trials_match_a_direct_run(script_project: Path) -> None:
    # sklearn refuses eta0 <= 0: the script crashes in that arm only; the control still runs.
    res = ablate_in(script_project, "-m", "task=hydra_train", "variable=script_lr", "variable.values=[-1.0]",
                    "seeds=3", "launcher=inline")
    assert res.returncode == 1, res.stderr  # the whole treatment arm failed: the verdict is invalid, not silent
    assert "3 of 3 trials failed" in res.stderr
    sd = only_sweep(script_project)
    bad = json.loads((sd / "trials" / "lr=-1.0" / "seed=1" / "result.json").read_text())
    assert bad["status"] == "failed"
    assert "exited with code 1" in bad["error"] and "eta0" in bad["error"], bad["error"]
    t = sd / "trials" / "control" / "seed=1"
    ok = json.loads((t / "result.json").read_text())
    assert ok["status"] == "ok"
    # Weak reproducibility: the same argv run by hand, outside ablate, gives the same metrics.
    argv = json.loads((t / "command.json").read_text())["argv"]
    argv = [a if not a.startswith("hydra.run.dir=") else "hydra.run.dir=outputs/by_hand" for a in argv]
    run(argv, script_project)
    assert json.loads((script_project / "outputs/by_hand/metrics.json").read_text()) == ok["metrics"]
    assert_script_untouched(script_project)


def test_key_the_script_lacks_stops_the_ablation(script_project: Path) -> None:
    task = {**TASK, "params": {**TASK["params"], "dropout": 0.1}}
    write_project(script_project, task, [0.2, 0.3], name="drop", key="task.params.dropout")
    res = ablate_in(script_project, "-m", "task=hydra_train", "variable=drop", "seeds=3", "launcher=inline")
    assert res.returncode == 2, res.stderr
    err = res.stderr.strip().splitlines()[-1]
    assert "`task.params.dropout`" in err and "the script's config has no key 'dropout'" in err
    sd = only_sweep(script_project)
    assert len(list(sd.glob("trials/*/*/result.json"))) == 1  # stopped at the first trial


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param({"lr": 0.1}, "`task.lr`: lr is not a setting of a command task", id="key-outside-params"),
        pytest.param({"command": "python hydra_train/nope.py"}, "the script hydra_train/nope.py does not exist",
                     id="missing-script"),
        pytest.param({"command": "no-such-program-xyz train"}, "'no-such-program-xyz' is not on PATH",
                     id="missing-program"),
        pytest.param({"command": "python 'unclosed"}, "`task.command`: cannot be split", id="unclosed-quote"),
        pytest.param({"env": [1, 2]}, "`task.env`: must be a mapping", id="env-not-mapping"),
    ],
)
def test_bad_command_task_is_refused_before_launch(script_project: Path, change: dict, expected: str) -> None:
    write_project(script_project, {**TASK, **change}, [0.001])
    res = ablate_in(script_project, "-m", "task=hydra_train", "variable=script_lr", "seeds=3", "launcher=inline")
    assert res.returncode == 2
    assert expected in res.stderr, res.stderr
    assert not list(script_project.glob("outputs/ablate/*/*/trials"))


def test_variable_the_script_never_sees_is_refused(script_project: Path) -> None:
    # metrics_key is a setting of ablate's command form (which JSON key to read), not of the script
    write_project(script_project, TASK, ["x"], name="mkey", key="task.metrics_key")
    res = ablate_in(script_project, "-m", "task=hydra_train", "variable=mkey", "seeds=3", "launcher=inline",
                    "+task.metrics_key=a", "variable.values=[b]")
    assert res.returncode == 2
    assert "none of which the script receives" in res.stderr, res.stderr


SCRIPTS = {
    "env": "import json, os; json.dump({'score': int(os.environ['ABLATE_SEED']) + 0.5}, "
           "open(os.environ['ABLATE_METRICS_FILE'], 'w'))",
    "sleep": "import os, time, pathlib\n"
             "pathlib.Path(os.environ['ABLATE_TRIAL_DIR'], 'pid').write_text(str(os.getpid()))\n"
             "time.sleep(60 if os.environ['ABLATE_SEED'] == '8' else 0)\n"
             "score = int(os.environ['ABLATE_SEED']) + 0.25  # seed-dependent: a constant reads as a seed ignored\n"
             "open(os.environ['ABLATE_METRICS_FILE'], 'w')"
             ".write('{\"score\": %s, \"extra\": {\"nested\": 1}}' % score)",
}


@pytest.mark.parametrize(("launcher", "timeout_min"), [("inline", 0.05), ("local", 0.15)])
def test_plain_script_metrics_via_env_and_timeout(project: Path, launcher: str, timeout_min: float) -> None:
    """A non-Hydra program: metrics through $ABLATE_METRICS_FILE; timeout_min kills it and its process."""
    for name, src in SCRIPTS.items():
        (project / f"{name}.py").write_text(src + "\n")
    task = {"seed_key": None, "output_dir_key": None, "metric": "score", "params": {"mode": "env"},
            "command": ["python", "-c", "import runpy, sys; runpy.run_path(sys.argv[1][5:].strip(chr(39)) + '.py')"]}
    write_project(project, task, ["sleep"], name="mode", key="task.params.mode")
    res = ablate_in(project, "-m", "task=hydra_train", "variable=mode", "seeds=[7,8,9]", f"launcher={launcher}",
                    f"timeout_min={timeout_min}")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    ok = json.loads((sd / "trials/control/seed=7/result.json").read_text())
    assert ok["status"] == "ok" and ok["metrics"] == {"score": 7.5}
    nested = json.loads((sd / "trials/mode=sleep/seed=7/result.json").read_text())
    assert nested["metrics"] == {"score": 7.25, "extra.nested": 1.0}  # nested objects flatten to dotted names
    slow = json.loads((sd / "trials/mode=sleep/seed=8/result.json").read_text())
    assert slow["status"] == "timeout", slow
    pid = int((sd / "trials/mode=sleep/seed=8/pid").read_text())
    assert not alive(pid)  # the script was killed with its trial, not left running


def alive(pid: int) -> bool:
    """True when ``pid`` runs (a zombie, dead but not yet reaped by an init that does not reap, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_single_run_of_a_command_task(script_project: Path) -> None:
    """`ablate` without -m runs the control once, like a Hydra single run, for command tasks too."""
    res = ablate_cli(script_project, "task=hydra_train", "seed=4", "hydra.run.dir=outputs/single")  # the console script
    assert res.returncode == 0, res.stderr
    result = json.loads((script_project / "outputs/single/result.json").read_text())
    assert result["status"] == "ok" and 0.5 < result["metrics"]["val_acc"] <= 1
    assert yaml.safe_load((script_project / "outputs/single/run/.hydra/overrides.yaml").read_text())[-1] == "seed=4"
    assert_script_untouched(script_project)
