"""String hashing under each launcher (issue 17, item 2): the manifest records the hash seed in force, inline warns
when it is random, and `ablate repro` names it as the cause. Real processes; the reference values come from
fresh interpreters started with the same PYTHONHASHSEED."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, commit_all

pytestmark = pytest.mark.slow

ORDER = '''
WORDS = ["alpha", "be", "gamma", "delta", "epsilonn", "zeta", "etaaaaa", "theta", "io", "kappa", "lambdaaa"]


def score():
    return float(sum(i * len(w) for i, w in enumerate(set(WORDS))))


def train(cfg):
    return {"val_acc": score() + cfg.seed}
'''


def reference(hash_seed: str, seed: int) -> float:
    """The task's metric computed by a fresh interpreter started with PYTHONHASHSEED=hash_seed."""
    code = ORDER + f"\nprint(repr(train(type('C', (), {{'seed': {seed}}})())['val_acc']))"
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONHASHSEED": hash_seed}, capture_output=True,
                         text=True, check=True)
    return float(out.stdout)


@pytest.fixture
def order_project(project: Path) -> Path:
    (project / "order.py").write_text(ORDER)
    (project / "conf" / "task" / "order.yaml").write_text("fn: order:train\nmetric: val_acc\ngoal: maximize\nk: 1\n")
    (project / "conf" / "variable" / "k.yaml").write_text("key: task.k\nvalues: [2]\n")
    commit_all(project, "order task")
    return project


def sweeps(project: Path) -> list[Path]:
    return sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))


def trial_files(sd: Path, arm: str, seed: int) -> tuple[dict, dict]:
    d = sd / "trials" / arm / f"seed={seed}"
    return json.loads((d / "manifest.json").read_text()), json.loads((d / "result.json").read_text())


def test_inline_with_random_hashing_warns_records_and_repro_names_it(order_project: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    # the console script: inline trials hash as the orchestrator's own fresh process does (this file's proof of it)
    res = ablate_cli(order_project, "-m", "variable=k", "task=order", "seeds=3", "launcher=inline")
    assert res.returncode == 0, res.stderr
    assert "string hashing is randomised" in res.stderr and "PYTHONHASHSEED=0 ablate" in res.stderr
    (sd,) = sweeps(order_project)
    for arm in ("control", "k=2"):
        for seed in (0, 1, 2):
            man, _ = trial_files(sd, arm, seed)
            assert man["determinism"]["hash_seed"] == "random"
    rep = ablate_in(order_project, "repro", str(sd), "--trial", "control/1")
    assert rep.returncode in (0, 1), rep.stderr
    assert "string hashing (determinism.hash_seed): random (original) -> 0 (re-run)" in rep.stdout, rep.stdout
    report = json.loads(next((sd / "repro").rglob("report.json")).read_text())
    repro_value = next(m["repro"] for m in report["metrics"] if m["name"] == "val_acc")
    # the re-run used the ablation's PYTHONHASHSEED (its first seed, 0), as launcher=local and slurm do
    assert repro_value == reference("0", 1)


@pytest.mark.parametrize("hash_seed", ["0", "123"])
def test_inline_with_fixed_hashing_is_recorded_and_repeatable(order_project: Path, monkeypatch: pytest.MonkeyPatch,
                                                              hash_seed: str) -> None:
    monkeypatch.setenv("PYTHONHASHSEED", hash_seed)
    for _ in range(2):  # the console script: inline trials hash as its own process started with PYTHONHASHSEED
        res = ablate_cli(order_project, "-m", "variable=k", "task=order", "seeds=3", "launcher=inline")
        assert res.returncode == 0, res.stderr
        assert "string hashing is randomised" not in res.stderr
    for sd in sweeps(order_project):
        for seed in (0, 1, 2):
            man, rec = trial_files(sd, "control", seed)
            assert man["determinism"]["hash_seed"] == hash_seed
            assert rec["metrics"]["val_acc"] == reference(hash_seed, seed)


@pytest.mark.parametrize("warm", ["true", "false"])
def test_local_records_the_hash_seed_in_force(order_project: Path, monkeypatch: pytest.MonkeyPatch,
                                               warm: str) -> None:
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    res = ablate_in(order_project, "-m", "variable=k", "task=order", "seeds=3", "launcher=local",
                    f"launcher.warm={warm}")
    assert res.returncode == 0, res.stderr
    assert "string hashing is randomised" not in res.stderr
    (sd,) = sweeps(order_project)
    for seed in (0, 1, 2):
        man, rec = trial_files(sd, "k=2", seed)
        want = "0"  # one per ablation, warm or not (as under launcher=slurm): the plan's first seed
        assert man["determinism"]["hash_seed"] == want
        assert rec["metrics"]["val_acc"] == reference(want, seed)
