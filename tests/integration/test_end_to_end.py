"""End to end on real data: real git + DVC project, real torch training on scikit-learn's digits.

The inline and the local ablation each run once per module (:func:`inline_run`, :func:`local_run`); the tests
read them. The inline one runs the console script (this file's proof of it, with ``--help``'s fast path); the local
one, the single run, the dry run and Hydra's commands run ablate's CLI entry in this process
(:func:`tests.helpers.ablate_in`)."""

from __future__ import annotations

import csv
import json
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from ablate.orchestrate.repro import is_timing_metric
from ablate.plan.compose import compose
from tests.helpers import ablate_cli, ablate_in, clean_env, copy_project

pytestmark = pytest.mark.slow
FAST = ["task.epochs=2"]


def sweep_dirs(project: Path) -> list[Path]:
    return sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        pytest.param("variable.values=[1e-3]", [0.001], id="float"),
        pytest.param("variable.values=[0.1,0.001]", [0.1, 0.001], id="two-floats"),
        pytest.param("variable.values=[[1,2]]", [[1, 2]], id="list"),
        pytest.param("variable.values=[null]", [None], id="null"),
        pytest.param("variable.values=['a,b','k=v','x#y']", ["a,b", "k=v", "x#y"], id="strings"),
        pytest.param("variable.values=['12e45']", ["12e45"], id="quoted-number-string"),
        pytest.param("""variable.values=["it's"]""", ["it's"], id="quote-in-string"),
    ],
)
def test_override_value_types_reach_the_plan(project: Path, override: str, expected: list) -> None:
    c = compose(["variable=lr", override], config_path=str(project / "conf"))
    assert c.cfg["variable"]["values"] == expected
    assert [type(v) for v in c.cfg["variable"]["values"]] == [type(v) for v in expected]
    assert c.variable_name == "lr"
    assert c.variables == ["determinism", "hidden", "lr", "lr_hi", "momentum"]


@pytest.fixture(scope="module")
def inline_run(project_template: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``ablate -m variable=lr seeds=3 launcher=inline`` on the digits example (3 arms x 3 seeds), once per module."""
    proj = copy_project(project_template, tmp_path_factory.mktemp("inline") / "proj")
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        res = ablate_cli(proj, "-m", "variable=lr", "seeds=3", "launcher=inline", *FAST)  # the console script
    return res, proj


@pytest.fixture(scope="module")
def local_run(project_template: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The control and lr=0.2 at 3 seeds under ``launcher=local`` (2 slots), with two GPUs declared
    (``CUDA_VISIBLE_DEVICES=0,1``; the task runs on the CPU), once per module."""
    proj = copy_project(project_template, tmp_path_factory.mktemp("local") / "proj")
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        mp.setenv("CUDA_VISIBLE_DEVICES", "0,1")
        res = ablate_in(proj, "-m", "variable=lr", "variable.values=[0.2]", "seeds=3", "launcher=local",
                        "launcher.max_parallel=2", *FAST)
    return res, proj


def test_inline_ablation_writes_sweep_dir(inline_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    res, project = inline_run
    assert res.returncode == 0, res.stderr
    (sd,) = sweep_dirs(project)
    assert res.stdout.strip().splitlines()[-1] == str(sd / "verdict.md")
    assert stat.S_IMODE(sd.stat().st_mode) == 0o700
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    assert [a["name"] for a in plan["arms"]] == ["control", "lr=0.005", "lr=0.2"]
    assert plan["seeds"] == [0, 1, 2]
    assert plan["arms"][1]["changes"] == {"task.optim.lr": [0.05, 0.005]}
    for arm in ("control", "lr=0.005", "lr=0.2"):
        for seed in range(3):
            t = sd / "trials" / arm / f"seed={seed}"
            result = json.loads((t / "result.json").read_text())
            assert result["status"] == "ok", result
            assert 0.0 < result["metrics"]["val_acc"] <= 1.0
            assert result["metrics"]["val_loss"] > 0
            resolved = yaml.safe_load((t / "config.yaml").read_text())
            assert resolved["seed"] == seed
            assert resolved["task"]["optim"]["lr"] == {"control": 0.05, "lr=0.005": 0.005, "lr=0.2": 0.2}[arm]
            manifest = json.loads((t / "manifest.json").read_text())
            assert manifest["config"] == resolved
    rows = list(csv.DictReader((sd / "results.csv").read_text().splitlines()))
    assert len(rows) == 9
    assert {r["status"] for r in rows} == {"ok"}
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["metric"] == "val_acc"
    assert [c["arm"] for c in verdict["comparisons"]] == ["lr=0.005", "lr=0.2"]
    md = (sd / "verdict.md").read_text()
    assert "task.optim.lr" in md


def test_same_seed_same_metrics_across_launchers(inline_run: tuple[subprocess.CompletedProcess[str], Path],
                                               local_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """Weak reproducibility: a trial gives the same final metrics in-process and in a child process (the arms
    both runs have: control and lr=0.2, seeds 0-2, the same config)."""
    (a, pa), (b, pb) = inline_run, local_run
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    (da,), (db,) = sweep_dirs(pa), sweep_dirs(pb)
    for arm in ("control", "lr=0.2"):
        for seed in range(3):
            ra = json.loads((da / "trials" / arm / f"seed={seed}" / "result.json").read_text())
            rb = json.loads((db / "trials" / arm / f"seed={seed}" / "result.json").read_text())
            learned = {k: v for k, v in ra["metrics"].items() if not is_timing_metric(k)}  # not samples_per_s
            assert learned == {k: rb["metrics"][k] for k in learned}
            assert set(learned) == {"val_acc", "val_loss"}
    # different seeds give different runs
    r0 = json.loads((db / "trials/control/seed=0/result.json").read_text())["metrics"]
    r1 = json.loads((db / "trials/control/seed=1/result.json").read_text())["metrics"]
    assert r0 != r1


def test_local_launcher_gives_each_trial_its_own_gpu(local_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """No GPU here: CUDA_VISIBLE_DEVICES=0,1 declares two, and each trial must get exactly one of them.
    (The task runs on the CPU; only the assignment is under test.)"""
    res, project = local_run
    assert res.returncode == 0, res.stderr
    (sd,) = sweep_dirs(project)
    seen = []
    for t in sd.glob("trials/*/seed=*/manifest.json"):
        env = json.loads(t.read_text())["environment"]["env"]
        seen.append(env["CUDA_VISIBLE_DEVICES"])
    assert len(seen) == 6
    assert set(seen) == {"0", "1"}


def test_dry_run_launches_nothing(project: Path) -> None:
    res = ablate_in(project, "-m", "variable=lr", "seeds=4", "dry_run=true", "variable.values=[0.1,0.001]")
    assert res.returncode == 0, res.stderr
    assert "arms (3): control, lr=0.1, lr=0.001" in res.stdout
    assert "seeds (4 per arm): [0, 1, 2, 3]" in res.stdout
    assert "task.optim.lr: 0.05 -> 0.001" in res.stdout
    assert sweep_dirs(project) == []


def test_single_run_without_multirun(project: Path) -> None:
    res = ablate_in(project, "seed=3", *FAST)
    assert res.returncode == 0, res.stderr
    result_path = Path(res.stdout.strip().splitlines()[-1])
    result = json.loads(result_path.read_text())
    assert result["status"] == "ok" and result["seed"] == 3
    assert set(result["metrics"]) == {"val_acc", "val_loss", "samples_per_s", "samples_per_cpu_s", "train_s"}


def test_cfg_job_and_help_are_hydras(project: Path) -> None:
    res = ablate_in(project, "--cfg", "job", "variable=lr")
    assert res.returncode == 0, res.stderr
    cfg = yaml.safe_load(res.stdout)
    assert cfg["task"]["optim"]["lr"] == 0.05 and cfg["variable"]["key"] == "task.optim.lr"
    res = ablate_cli(project, "--help")  # fast path, no Hydra start
    assert res.returncode == 0
    assert "ablate -m variable=<name> seeds=<N>" in res.stdout
    assert "variable: determinism, hidden, lr, lr_hi, momentum" in res.stdout
    assert "launcher: inline, local, slurm" in res.stdout
    assert "seeds: 5" in res.stdout and "# seeds per arm" in res.stdout
    res = ablate_in(project, "--help", "seeds=7")  # with overrides: Hydra's app help, composed config
    assert res.returncode == 0, res.stderr
    assert "seeds: 7" in res.stdout and "== Config groups ==" in res.stdout
