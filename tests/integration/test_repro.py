"""Determinism modes and `ablate repro` end to end: real git + DVC projects, real torch training (issue 6).

`ablate repro`, the ablations (inline and local trials) and the resume are called in this process
(:func:`tests.helpers.ablate_in`): a re-run is a fresh trial process either way
(:func:`ablate.orchestrate.repro._run_child`), so only the console script's interpreter start and ablate's imports
(about 1.1-1.4 s of CPU per call) are saved; one ablation runs the console script, the proof of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, add_pure_task, commit_all, only_sweep

pytestmark = pytest.mark.slow

#: Softmax regression on the digits data, full batch. Two switches for the tests: ``use_put`` calls an
#: op with no deterministic implementation (``put_``); a file the task reads but ablate does not pin
#: (``perturb_file``, like a stale cache) perturbs the parameters from the step it names.
PROBE = '''
from pathlib import Path

import ablate


def train(cfg):
    import numpy as np
    import torch

    t = cfg.task
    data = np.load(t.data_file)
    x, y = torch.from_numpy(data["x_train"]), torch.from_numpy(data["y_train"])
    xv, yv = torch.from_numpy(data["x_val"]), torch.from_numpy(data["y_val"])
    model = torch.nn.Linear(64, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    if t.use_put:
        torch.zeros(4).put_(torch.tensor([1, 1]), torch.tensor([1.0, 2.0]))
    hidden = Path(t.perturb_file)
    from_step = int(hidden.read_text()) if hidden.exists() else None
    for step in range(t.steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if from_step is not None and step >= from_step:
            with torch.no_grad():
                model.bias[0] += 1e-3  # one class only (a shift of every bias would leave the softmax unchanged)
        ablate.log_step(step, loss=loss.item(), params=model)
    with torch.no_grad():
        val_loss = torch.nn.functional.cross_entropy(model(xv), yv).item()
    return {"val_loss": val_loss, "train_loss": loss.item()}
'''


def result(d: Path) -> dict:
    return json.loads((d / "result.json").read_text())


def manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


@pytest.fixture
def probe_project(project: Path) -> Path:
    (project / "probe.py").write_text(PROBE)
    (project / "conf" / "task" / "probe.yaml").write_text(  # absolute: the task runs in the code snapshot
        "fn: probe:train\ndata: [data/digits.npz]\nmetric: val_loss\ngoal: minimize\ndata_file: data/digits.npz\n"
        f"steps: 6\nuse_put: false\nperturb_file: {project}/perturb.txt\n")
    (project / "conf" / "variable" / "put.yaml").write_text("key: task.use_put\nvalues: [true]\n")
    with open(project / ".gitignore", "a") as fh:
        fh.write("perturb.txt\n")
    commit_all(project, "probe task")
    return project


def test_determinism_as_the_variable_strict_steps_identical_off_diverges(project: Path) -> None:
    """charlm, `ablate -m variable=determinism`: the mode is the treatment (no confound); two strict runs
    log identical per-step fingerprints; two seeded runs end with identical metrics; off diverges at once.

    The warm parent preloads torch and torch._dynamo (``launcher.preload``), which it would otherwise learn from
    the first trials (each of those, and the probe fork that checks the import, paying for it again): where the
    import is paid, not what a trial computes (:class:`ablate.trials.warm.parent.Learner`)."""
    res = ablate_in(project, "-m", "variable=determinism", "variable.values=[off,strict]", "task=charlm",
                    "task.steps=6", "task.val_windows=16", "seeds=3", "launcher=local", "launcher.max_parallel=2",
                    "launcher.preload=[torch,torch._dynamo]")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    for arm, mode in (("control", "seeded"), ("determinism=off", "off"), ("determinism=strict", "strict")):
        for seed in (0, 1, 2):
            t = sd / "trials" / arm / f"seed={seed}"
            assert result(t)["status"] == "ok"
            m = manifest(t)
            assert m["determinism"]["mode"] == mode
            assert m["determinism"]["torch_flags"]["use_deterministic_algorithms"] is (mode == "strict")
            # set by the launcher before the trial's Python (and CUDA) started
            assert m["environment"]["env"].get("CUBLAS_WORKSPACE_CONFIG") == (":4096:8" if mode == "strict" else None)
            assert len((t / "steps.jsonl").read_text().splitlines()) == 6
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["confounds"]["findings"] == [] and verdict["confounds"]["invalid"] is False

    strict = ablate_in(project, "repro", str(sd), "--trial", "determinism=strict/1", "--strong")
    assert strict.returncode == 0, strict.stdout + strict.stderr
    assert "strong reproducibility (per-step fingerprints equal): holds (6 steps identical)" in strict.stdout
    assert "manifests differ" not in strict.stdout  # replayed with the original's threads and variables
    rerun = sd / "repro" / "determinism=strict" / "seed=1" / "1"
    original = sd / "trials" / "determinism=strict" / "seed=1"
    assert (rerun / "steps.jsonl").read_text() == (original / "steps.jsonl").read_text()
    assert manifest(rerun)["determinism"]["mode"] == "strict"

    seeded = ablate_in(project, "repro", str(sd))  # default: the first completed control trial
    assert seeded.returncode == 0, seeded.stdout + seeded.stderr
    assert "control/seed=0 (determinism=seeded)" in seeded.stdout
    a, b = result(sd / "trials" / "control" / "seed=0"), result(sd / "repro" / "control" / "seed=0" / "1")
    assert a["metrics"]["val_loss"] == b["metrics"]["val_loss"]

    off = ablate_in(project, "repro", str(sd), "--trial", "determinism=off/seed=0", "--strong")
    assert off.returncode == 1, off.stdout + off.stderr
    assert "first divergence at step 0 (fingerprint 1 of 6" in off.stdout
    assert "determinism=off seeds nothing" in off.stdout
    report = json.loads((sd / "repro" / "determinism=off" / "seed=0" / "1" / "report.json").read_text())
    assert report["holds"] is False and report["divergence"]["step"] == 0
    rows = (sd / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 9  # re-runs never enter the results


def test_strict_trial_with_an_op_lacking_determinism_fails_with_the_ways_out(probe_project: Path) -> None:
    """Under strict, the arm that calls put_ fails with a message naming the op and the two ways out;
    `ablate repro --strong` then names the step where a perturbed re-run diverges."""
    res = ablate_in(probe_project, "-m", "task=probe", "variable=put", "seeds=3", "launcher=inline",
                    "determinism=strict")
    assert res.returncode == 1, res.stderr  # every put_ trial failed: the verdict is invalid (and says why)
    assert "3 of 3 trials failed" in res.stderr
    sd = only_sweep(probe_project)
    for seed in (0, 1, 2):
        assert result(sd / "trials" / "control" / f"seed={seed}")["status"] == "ok"
        failed = result(sd / "trials" / "use_put=true" / f"seed={seed}")
        assert failed["status"] == "failed"
        assert failed["error"].startswith("`determinism=strict`: the op put_ has no deterministic implementation")
        assert "`determinism=seeded`" in failed["error"] and "warn_only=True" in failed["error"]

    same = ablate_in(probe_project, "repro", str(sd), "--strong")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "weak reproducibility (final metrics bitwise equal): holds" in same.stdout

    (probe_project / "perturb.txt").write_text("3")  # a hidden input changes between the run and the re-run
    original_steps = (sd / "trials" / "control" / "seed=0" / "steps.jsonl").read_text()
    diverged = ablate_in(probe_project, "repro", str(sd), "--trial", "control/0", "--strong")
    assert diverged.returncode == 1, diverged.stdout + diverged.stderr
    out = diverged.stdout
    assert "weak reproducibility (final metrics bitwise equal): DOES NOT HOLD" in out
    assert "val_loss" in out and " != " in out  # both values shown
    assert "first divergence at step 3 (fingerprint 4 of 6 logged by the original, 6 by the re-run; " \
           "the 3 before it are identical)" in out
    assert "    params: " in out
    assert (sd / "trials" / "control" / "seed=0" / "steps.jsonl").read_text() == original_steps  # untouched
    assert sorted(p.name for p in (sd / "repro" / "control" / "seed=0").iterdir()) == ["1", "2"]

    never = ablate_in(probe_project, "repro", str(sd), "--trial", "use_put=true/0")
    assert never.returncode == 2
    assert "trial use_put=true/seed=0 never completed (status failed: `determinism=strict`: the op put_" in never.stderr
    (sd / "trials" / "control" / "seed=1" / "steps.jsonl").unlink()  # as if the task never called log_step
    no_steps = ablate_in(probe_project, "repro", str(sd), "--trial", "control/1", "--strong")
    assert no_steps.returncode == 2
    assert "`--strong`: trial control/seed=1 logged no per-step fingerprints" in no_steps.stderr
    assert "ablate.log_step(step, loss=loss.item(), params=model)" in no_steps.stderr


def test_mode_mismatch_between_arms_is_a_confound(project: Path) -> None:
    """The lr=0.2 arm is re-run under strict after the ablation's setting was edited: the verdict is invalid.

    On the pure-Python task (:data:`tests.helpers.PURE_TASK`; it was the digits example): the check is on the
    modes the manifests record, which ablate writes from the plan whether or not the task imports torch; the
    digits task spent its CPU importing torch twice and, under strict, torch._dynamo (issue 34, item 4)."""
    add_pure_task(project)
    # the console script (this file's proof of it); the other ablations here run in this process
    res = ablate_cli(project, "-m", "variable=lr", "variable.values=[0.2]", "seeds=3", "launcher=inline",
                     "task=pure")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    plan_file = sd / "ablation.yaml"
    plan = yaml.safe_load(plan_file.read_text())
    plan["options"]["determinism"] = "strict"  # edited by hand before resuming
    plan_file.write_text(yaml.safe_dump(plan, sort_keys=False))
    shutil.rmtree(sd / "trials" / "lr=0.2")
    proc = ablate_in(project, "resume", str(sd))
    assert proc.returncode == 1, proc.stderr  # confounded: an invalid verdict fails the ablation
    assert "determinism `mode` aligned with the arms" in proc.stderr
    v = json.loads((sd / "verdict.json").read_text())
    finding = next(f for f in v["confounds"]["findings"] if f["kind"] == "determinism" and f["field"] == "mode")
    assert finding["aligned"] is True and finding["severity"] == "invalid"
    assert finding["split"] == {"control": {"seeded": 3}, "lr=0.2": {"strict": 3}}
    assert v["invalid"] is True
    assert "determinism `mode`" in (sd / "verdict.md").read_text()
