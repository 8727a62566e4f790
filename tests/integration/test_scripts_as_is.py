"""Training scripts ablated as they are: no wrapper, no adapter, no edit (issue 28).

Three fixture scripts in the shape of widely used public ones, copied byte for byte into a real git + DVC
project (every test checks they were not edited):

- tests/fixtures/argparse_train: argparse, ``--lr 0.1 --seed 3``, prints ``epoch 3 | ... | val_acc 0.912``;
- tests/fixtures/configurator_train: nanoGPT's shape, ``train.py config/small.py --dropout=0.1
  --compile=False`` (a configurator that ``ast.literal_eval``s each ``--key=value`` and asserts the type and
  the key), seeding itself from a module constant unless ``--seed=N`` is passed, printing ``step N: train
  loss X, val loss Y``, writing its checkpoint to ``out_dir``;
- tests/fixtures/trainer_style: a dataclass argument parser (HfArgumentParser's shape: unknown arguments are
  refused), ``--learning_rate 5e-4 --seed 3 --output_dir DIR``, ``eval_results.json`` with timing keys.

Per-seed values are checked against the script's own output, parsed here independently of ablate. A script
always runs as its own process; the orchestrator runs ablate's CLI entry in this process
(:func:`tests.helpers.ablate_in`: inline and local trials alike), but for one ablation that runs the console script,
the proof of it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ablate_cli, ablate_in, commit_all, only_sweep

pytestmark = pytest.mark.slow
FIXTURES = REPO / "tests" / "fixtures"
SCRIPTS = {"argparse_train": "train.py", "configurator_train": "train.py", "trainer_style": "run_classification.py"}

ARGPARSE_TASK = {
    "command": "python argparse_train/train.py --epochs 3",
    "args": "--key value",
    "params": {"lr": 0.5, "hidden": 16},
    "metric_pattern": r"val_acc (?P<val_acc>[0-9.]+)",
    "metric": "val_acc",
    "goal": "maximize",
}
NANOGPT_PATTERN = r"step (?P<step>\d+): train loss (?P<train_loss>[0-9.]+), val loss (?P<val_loss>[0-9.]+)"
CONFIGURATOR_TASK = {
    "command": "python train.py config/small.py",
    "args": "--key=value",
    "params": {"dropout": 0.0, "compile": False, "max_iters": 100},
    "seed_key": None,  # as published: the script seeds itself from its own constant
    "output_dir_key": "out_dir",
    "metric_pattern": NANOGPT_PATTERN,
    "metric": "val_loss",
    "goal": "minimize",
}
TRAINER_TASK = {
    "command": "python trainer_style/run_classification.py --num_train_epochs 2",
    "args": "--key value",
    "params": {"learning_rate": 0.05},
    "output_dir_key": "output_dir",
    "metric": "eval_accuracy",
    "goal": "maximize",
}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ablate_as_is(project: Path, scripts: list[Path], *args: str, rc: int = 0,
                 console: bool = False) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run ``ablate *args`` in ``project`` (in this process, or the console script when ``console``), assert its exit
    code and that no script file changed; the run and its sweep dir."""
    before = [sha(p) for p in scripts]
    res = ablate_cli(project, *args) if console else ablate_in(project, *args)
    assert res.returncode == rc, res.stderr[-3000:]
    assert [sha(p) for p in scripts] == before
    return res, only_sweep(project)


def install(project: Path, name: str, *, at: str | None = None) -> Path:
    """Copy a fixture script into the project (at its root for the configurator, as nanoGPT keeps it)."""
    src = FIXTURES / name
    if at == ".":
        for p in src.rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                (project / p.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, project / p.relative_to(src))
        return project / SCRIPTS[name]
    shutil.copytree(src, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    return project / name / SCRIPTS[name]


def write_task(project: Path, name: str, task: dict, variables: dict[str, dict]) -> None:
    (project / "conf" / "task" / f"{name}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    for vname, var in variables.items():
        (project / "conf" / "variable" / f"{vname}.yaml").write_text(yaml.safe_dump(var))
    commit_all(project, f"task {name}")


def trial_results(sd: Path) -> dict[tuple[str, int], dict]:
    out = {}
    for res in sd.glob("trials/*/seed=*/result.json"):
        out[res.parent.parent.name, int(res.parent.name.split("=")[1])] = json.loads(res.read_text())
    return out


def last_match(pattern: str, text: str, group: str) -> float:
    """The script's own last printed value of ``group`` (parsed here, not by ablate)."""
    values = [float(m.group(group)) for m in re.finditer(pattern, text)]
    assert values, text[-500:]
    return values[-1]


def run_script(cwd: Path, *argv: str) -> str:
    return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, check=True).stdout


# -- (a) an argparse script --------------------------------------------------------------------------
@pytest.fixture
def argparse_project(project: Path) -> Path:
    install(project, "argparse_train")
    write_task(project, "argparse_train", ARGPARSE_TASK,
               {"lr": {"key": "task.params.--lr", "values": [0.05]},
                "hidden": {"key": "task.params.hidden", "values": [4]}})
    return project


def test_argparse_script_single_variable(argparse_project: Path) -> None:
    script = argparse_project / "argparse_train" / "train.py"
    _, sd = ablate_as_is(argparse_project, [script],  # the console script: this file's proof of it
                         "-m", "task=argparse_train", "variable=lr", "seeds=3", console=True)
    results = trial_results(sd)
    assert len(results) == 6
    for (arm, seed), rec in results.items():
        lr = {"control": 0.5, "lr=0.05": 0.05}[arm]
        own = run_script(argparse_project, str(script), "--epochs", "3", "--lr", str(lr), "--seed", str(seed))
        assert rec["status"] == "ok", rec
        assert rec["metrics"]["val_acc"] == last_match(r"val_acc (?P<v>[0-9.]+)", own, "v")
        src = rec["metric_source"]
        assert src["kind"] == "stdout" and src["reduce"] == "last" and src["step"] == 3
        assert src["match"].startswith("line 3: epoch 3 | train_loss ") and src["pattern"] == [ARGPARSE_TASK[
            "metric_pattern"]]
        argv = json.loads((sd / "trials" / arm / f"seed={seed}" / "command.json").read_text())["argv"]
        assert argv[-6:] == ["--lr", repr(lr), "--hidden", "16", "--seed", str(seed)]


def test_argparse_script_two_variable_suite(argparse_project: Path) -> None:
    res = ablate_in(argparse_project, "-m", "task=argparse_train", "variable=lr,hidden", "seeds=3")
    assert res.returncode == 0, res.stderr[-3000:]
    sd = only_sweep(argparse_project)
    results = trial_results(sd)
    assert {a for a, _ in results} == {"control", "lr=0.05", "hidden=4"}
    script = argparse_project / "argparse_train" / "train.py"
    for (arm, seed), rec in results.items():
        extra = {"control": [], "lr=0.05": ["--lr", "0.05"], "hidden=4": ["--hidden", "4"]}[arm]
        own = run_script(argparse_project, str(script), "--epochs", "3", "--lr", "0.5", "--seed", str(seed), *extra)
        assert rec["metrics"]["val_acc"] == last_match(r"val_acc (?P<v>[0-9.]+)", own, "v"), (arm, seed)


# -- (b) a nanoGPT-style configurator script -----------------------------------------------------------
@pytest.fixture
def nanogpt_project(project: Path) -> Path:
    install(project, "configurator_train", at=".")
    write_task(project, "nanogpt", CONFIGURATOR_TASK,
               {"dropout": {"key": "task.params.--dropout", "values": [0.2]},
                "iters": {"key": "task.params.max_iters", "values": [150]}})
    return project


def own_val_loss(project: Path, seed: int | None, **overrides: object) -> float:
    """The script's own last ``val loss``, run by hand the way its README says."""
    settings = {"dropout": 0.0, "compile": False, "max_iters": 100, **overrides}
    argv = ["train.py", "config/small.py", *(f"--{k}={v!r}" for k, v in settings.items())]
    if seed is not None:
        argv.append(f"--seed={seed}")
    out = run_script(project, *argv, f"--out_dir={project / 'outputs' / 'by-hand'}")
    return last_match(NANOGPT_PATTERN, out, "val_loss")


def test_configurator_script_without_seed_flag_ignores_its_seed(nanogpt_project: Path) -> None:
    # every seed gave the same numbers: the ablation refuses to call the difference (exit 1), and says why and what
    res, sd = ablate_as_is(nanogpt_project, [nanogpt_project / "train.py", nanogpt_project / "configurator.py"],
                           "-m", "task=nanogpt", "variable=dropout", "seeds=3", rc=1)
    assert "the task ignored its seed" in res.stderr and "seed_key:" in res.stderr
    results = trial_results(sd)
    for arm, dropout in (("control", 0.0), ("dropout=0.2", 0.2)):
        own = own_val_loss(nanogpt_project, None, dropout=dropout)
        assert {results[arm, s]["metrics"]["val_loss"] for s in (1, 2, 3)} == {own}
        cmd = json.loads((sd / "trials" / arm / "seed=1" / "command.json").read_text())
        assert cmd["argv"][1:6] == ["train.py", "config/small.py", f"--dropout={dropout!r}", "--compile=False",
                                    "--max_iters=100"]
        out_dir = cmd["argv"][6]
        assert out_dir.startswith("--out_dir='") and "=" not in out_dir[len("--out_dir="):]  # a safe alias
        # the checkpoint went to the trial's own run dir (through the alias), not into the shared snapshot
        assert (sd / "trials" / arm / "seed=1" / "run" / "ckpt.npz").is_file()
        assert results[arm, 1]["metric_source"]["step"] == 100
        assert results[arm, 1]["metric_source"]["match"].startswith("line ")
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["invalid"] and verdict["seed_ignored"]["arms"]
    assert all(c["verdict"] == "insufficient data" and c["seed_ignored"] for c in verdict["comparisons"])
    md = (sd / "verdict.md").read_text()
    assert "the task ignored its seed" in md
    setup = next(line for line in md.splitlines() if line.startswith("| seeds |"))
    assert "not passed as a setting (seed_key: null)" in setup and "the warning at the top" in setup
    assert md.count("the task ignored its seed") == 1  # the reason, once: the warning at the top
    assert "seeds itself" not in md
    rep = ablate_in(nanogpt_project, "repro", str(sd), "--trial", "control/1")
    assert rep.returncode == 0, rep.stderr
    assert "says nothing about seeding" in rep.stdout and "the task ignored its seed" in rep.stdout


def test_configurator_script_with_seed_flag_single_and_suite(nanogpt_project: Path) -> None:
    res = ablate_in(nanogpt_project, "-m", "task=nanogpt", "variable=dropout,iters", "seeds=3",
                    "task.seed_key=seed")
    assert res.returncode == 0, res.stderr[-3000:]
    sd = only_sweep(nanogpt_project)
    results = trial_results(sd)
    assert {a for a, _ in results} == {"control", "dropout=0.2", "max_iters=150"}
    for (arm, seed), rec in results.items():
        extra = {"control": {}, "dropout=0.2": {"dropout": 0.2}, "max_iters=150": {"max_iters": 150}}[arm]
        assert rec["metrics"]["val_loss"] == own_val_loss(nanogpt_project, seed, **extra), (arm, seed)
    assert len({results["control", s]["metrics"]["val_loss"] for s in (1, 2, 3)}) == 3
    verdict = json.loads((sd / "verdict.json").read_text())
    assert not verdict.get("seed_ignored") and not verdict["invalid"]
    assert all(c["verdict"] != "insufficient data" for c in verdict["comparisons"])
    setup = next(line for line in (sd / "verdict.md").read_text().splitlines() if line.startswith("| seeds |"))
    assert "passes its seed to the script as `--seed=<seed>`" in setup


def test_same_failure_in_every_arm_stops_early_and_reads_as_it_is(nanogpt_project: Path) -> None:
    # `compile: "no"` is a str where the script's global is a bool: its configurator's bare `assert` fails, in every arm
    (nanogpt_project / "conf" / "task" / "nanogpt.yaml").write_text(yaml.safe_dump(
        {**CONFIGURATOR_TASK, "params": {**CONFIGURATOR_TASK["params"], "compile": "no"}}, sort_keys=False))
    commit_all(nanogpt_project, "a setting of the wrong type")
    res = ablate_in(nanogpt_project, "-m", "task=nanogpt", "variable=dropout", "seeds=3", "launcher=inline")
    assert res.returncode == 2, res.stderr[-2000:]
    err = res.stderr
    assert "all failed the same way before the task's first step" in err and "AssertionError" in err
    assert "ablate status" in err
    sd = only_sweep(nanogpt_project)
    results = trial_results(sd)
    assert sorted(results) == [("control", 1), ("dropout=0.2", 1)]  # two of six trials ran, then it stopped
    # the progress line shows the exception line (the end of the log), not the head of the traceback
    progress = [line for line in err.splitlines() if line.startswith("[1/6] control seed=1 failed")]
    assert progress and progress[0].endswith("AssertionError"), err[-2000:]
    status = ablate_in(nanogpt_project, "status", str(sd))
    line = next(x for x in status.stdout.splitlines() if x.strip().startswith("control seed=1 failed"))
    assert line.endswith("AssertionError"), status.stdout
    # the end of its log follows: the configurator is exec'd, so its frame is `<string>`, line 34 (the assert)
    assert 'File "<string>", line 34, in <module>\n      AssertionError' in status.stdout
    md = (sd / "verdict.md").read_text()
    assert "  - seed 1: the command exited with code 1: AssertionError" in md


# -- a Trainer-style script ------------------------------------------------------------------------------
@pytest.fixture
def trainer_project(project: Path) -> Path:
    install(project, "trainer_style")
    write_task(project, "trainer", TRAINER_TASK, {"lr": {"key": "task.params.learning_rate", "values": [0.2]}})
    return project


def test_trainer_style_script_with_no_adapter_and_repro_holds(trainer_project: Path) -> None:
    script = trainer_project / "trainer_style" / "run_classification.py"
    _, sd = ablate_as_is(trainer_project, [script],
                         "-m", "task=trainer", "variable=lr", "seeds=3")
    for (arm, seed), rec in trial_results(sd).items():
        lr = {"control": 0.05, "learning_rate=0.2": 0.2}[arm]
        own_dir = trainer_project / "outputs" / f"by-hand-{seed}"
        run_script(trainer_project, str(script), "--num_train_epochs", "2", "--learning_rate", str(lr), "--seed",
                   str(seed), "--output_dir", str(own_dir))
        own = json.loads((own_dir / "eval_results.json").read_text())
        assert rec["metrics"]["eval_accuracy"] == own["eval_accuracy"]
        assert rec["metrics"]["eval_loss"] == own["eval_loss"]
        assert rec["metric_source"]["kind"] == "json"
        assert rec["metric_source"]["path"].endswith(f"seed={seed}/run/eval_results.json")
        argv = json.loads((sd / "trials" / arm / f"seed={seed}" / "command.json").read_text())["argv"]
        assert argv[-6:-1] == ["--learning_rate", repr(lr), "--seed", str(seed), "--output_dir"]
    rep = ablate_in(trainer_project, "repro", str(sd), "--trial", "control/2")
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "weak reproducibility (final metrics bitwise equal): holds" in rep.stdout
    for timing_key in ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second"):
        assert re.search(rf"{timing_key} .*\(timing: not compared\)", rep.stdout), rep.stdout


def test_trainer_style_script_given_hydra_overrides_stops_at_once(trainer_project: Path) -> None:
    task = {k: v for k, v in TRAINER_TASK.items() if k != "args"}  # the default: Hydra overrides
    (trainer_project / "conf" / "task" / "trainer.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    commit_all(trainer_project, "no args style")
    res = ablate_in(trainer_project, "-m", "task=trainer", "variable=lr", "seeds=3", "launcher=inline")
    assert res.returncode == 2
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("ablate: error:")]
    # the script's parser got `learning_rate=0.05 seed=1 output_dir=...` as positionals: its own words, and the fix
    assert "run_classification.py: error: the following arguments are required: --output_dir" in line
    assert "the script refused the arguments it was given" in line
    assert "`args: --key value` for argparse" in line
    assert line.count("Fix:") == 1, line  # the trial's own fix is the stop's fix, not quoted inside another
    assert line.startswith("ablate: error: `task.args`: trial "), line
    assert len(trial_results(only_sweep(trainer_project))) == 1


def test_dry_run_prints_each_arms_argv_as_a_shell_needs_it(nanogpt_project: Path) -> None:
    res = ablate_in(nanogpt_project, "-m", "task=nanogpt", "variable=dropout", "seeds=3", "dry_run=true",
                    "task.seed_key=seed")
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    lines = out.splitlines()
    for arm, dropout in (("control", "0.0"), ("dropout=0.2", "0.2")):
        i = lines.index(f"  argv {arm} seed=1:")  # long: one argument a line, continued as a shell reads it
        block = []
        for line in lines[i + 1:]:
            block.append(line.strip().removesuffix(" \\"))
            if not line.endswith(" \\"):
                break
        assert shlex.split(" ".join(block)) == [
            "python", "train.py", "config/small.py", f"--dropout={dropout}", "--compile=False", "--max_iters=100",
            "--seed=1", "--out_dir='<trial dir>/run'"]
        assert "\"--out_dir='<trial dir>/run'\"" in block  # read back by a shell, with no '"'"' runs
    assert not list(nanogpt_project.glob("outputs/ablate/*"))


HYDRA_CONFIG_TASK = '''
from pathlib import Path

from hydra.core.hydra_config import HydraConfig


def train(cfg):
    out = Path(HydraConfig.get().runtime.output_dir)
    (out / "model.txt").write_text(f"{cfg.task.width} {cfg.seed}")
    return {"val_acc": 0.5 + 0.01 * cfg.seed + 0.001 * cfg.task.width}
'''


def test_function_task_reading_hydra_config_output_dir(project: Path) -> None:
    (project / "hc_task.py").write_text(HYDRA_CONFIG_TASK)
    write_task(project, "hc", {"fn": "hc_task:train", "metric": "val_acc", "goal": "maximize", "width": 2},
               {"width": {"key": "task.width", "values": [3]}})
    res = ablate_in(project, "-m", "task=hc", "variable=width", "seeds=3", "launcher=inline")
    assert res.returncode == 0, res.stderr[-2000:]
    sd = only_sweep(project)
    for (arm, seed), rec in trial_results(sd).items():
        width = {"control": 2, "width=3": 3}[arm]
        assert rec["status"] == "ok" and rec["metrics"]["val_acc"] == 0.5 + 0.01 * seed + 0.001 * width
        assert (sd / "trials" / arm / f"seed={seed}" / "run" / "model.txt").read_text() == f"{width} {seed}"


LAYERS_TASK = '''
def train(cfg):
    return {"val_acc": 0.5 + 0.01 * cfg.seed + 0.001 * sum(cfg.task.layers)}
'''


def test_a_list_element_as_the_variable(project: Path) -> None:
    (project / "layers_task.py").write_text(LAYERS_TASK)
    write_task(project, "layers", {"fn": "layers_task:train", "metric": "val_acc", "layers": [8, 16]},
               {"width1": {"key": "task.layers.1", "values": [32]}})
    res = ablate_in(project, "-m", "task=layers", "variable=width1", "seeds=3", "launcher=inline")
    assert res.returncode == 0, res.stderr[-2000:]
    sd = only_sweep(project)
    results = trial_results(sd)
    assert len({a for a, _ in results}) == 2 and len(results) == 6
    for (arm, seed), rec in results.items():
        layers = [8, 16] if arm == "control" else [8, 32]
        assert rec["metrics"]["val_acc"] == 0.5 + 0.01 * seed + 0.001 * sum(layers)
        cfg = yaml.safe_load((sd / "trials" / arm / f"seed={seed}" / "config.yaml").read_text())
        assert cfg["task"]["layers"] == layers


def test_a_pattern_that_takes_part_of_a_number_stops_the_ablation(argparse_project: Path) -> None:
    """`(?P<val_acc>\\d)` on the script's `val_acc 0.8...` takes only its `0`: never recorded as the metric. The
    first trial stops the ablation with one line naming the group, what it took, the whole number and a pattern
    that takes it; no trial is recorded `ok`. The pattern it names then runs, with the script's own values."""
    write_task(argparse_project, "cut", {**ARGPARSE_TASK, "metric_pattern": r"val_acc (?P<val_acc>\d)"}, {})
    res = ablate_in(argparse_project, "-m", "task=cut", "variable=lr", "seeds=3")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("ablate: error: `task.metric_pattern`: trial ") and "shows the task itself is wrong" in line
    assert ": the group 'val_acc' took '0' of the number '0." in line
    assert "Fix: capture the whole number, e.g. `(?P<val_acc>[-+0-9.eE]+)`" in line
    sd = only_sweep(argparse_project)
    assert not [r for r in trial_results(sd).values() if r["status"] == "ok"]
    # the pattern the fix names
    write_task(argparse_project, "whole", {**ARGPARSE_TASK, "metric_pattern": r"val_acc (?P<val_acc>[-+0-9.eE]+)"}, {})
    res = ablate_in(argparse_project, "-m", "task=whole", "variable=lr", "seeds=3",
                    "hydra.sweep.dir=outputs/whole")
    assert res.returncode == 0, res.stderr[-2000:]
    script = argparse_project / "argparse_train" / "train.py"
    for (arm, seed), rec in trial_results(argparse_project / "outputs" / "whole").items():
        lr = {"control": "0.5", "lr=0.05": "0.05"}[arm]
        own = run_script(argparse_project, str(script), "--epochs", "3", "--lr", lr, "--hidden", "16", "--seed",
                         str(seed))
        assert rec["metrics"]["val_acc"] == last_match(r"val_acc (?P<v>[-+0-9.eE]+)", own, "v"), (arm, seed)
