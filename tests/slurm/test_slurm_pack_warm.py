"""Packed SLURM jobs through the warm parent (issue 15): a real cluster runs k trials per job as forks of
one warm parent per job start; a crash in one is that trial's failure only; module state never leaks; and
the ablation's one PYTHONHASHSEED is the same under launcher=slurm (packed or not) as under launcher=local."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, clean_env, commit_all
from tests.slurm.helpers import result

pytestmark = pytest.mark.slurm

#: Keeps module state, records its process and hash, and notes every import of itself (one per warm parent).
PROBE = '''
import json
import os
import random

CALLS = []  # module state a trial mutates: must never reach another trial
with open(os.path.join(os.environ["PROBE_OUT"], f"import-{os.getpid()}"), "w"):
    pass  # one file per process that imported the task


def train(cfg):
    CALLS.append(cfg.seed)
    print(f"probe stdout {cfg.task.mode} seed={cfg.seed}", flush=True)
    print(f"probe stderr {cfg.task.mode} seed={cfg.seed}", file=__import__("sys").stderr, flush=True)
    if cfg.task.mode == "exit" and cfg.seed == 1:
        os._exit(3)  # a hard crash: no result written, no cleanup
    info = {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "calls": len(CALLS),
            "hash": hash("ablate-warm"), "draw": random.random(), "hashseed": os.environ.get("PYTHONHASHSEED"),
            "job": os.environ.get("SLURM_ARRAY_JOB_ID", "") + "_" + os.environ.get("SLURM_ARRAY_TASK_ID", "")}
    with open(os.path.join(cfg.task.out, f"{cfg.task.mode}-{cfg.seed}.json"), "w") as fh:
        json.dump(info, fh)
    return {"val_acc": 0.5 + 0.01 * cfg.seed}
'''


def _add_warm_probe(project: Path) -> Path:
    (project / "warmprobe.py").write_text(PROBE)
    (project / "conf" / "task" / "warmprobe.yaml").write_text(
        "fn: warmprobe:train\nmetric: val_acc\ngoal: maximize\nmode: plain\nout: /nonexistent\n")
    (project / "conf" / "variable" / "mode.yaml").write_text("key: task.mode\nvalues: [exit]\n")
    commit_all(project, "warm probe task")
    return project


@pytest.fixture
def warm_project(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return _add_warm_probe(project)


@pytest.fixture(scope="module")
def local_warm_reference(project_template: Path, tmp_path_factory: pytest.TempPathFactory
                         ) -> tuple[Path, dict[tuple[str, int], dict]]:
    """The probe ablation under launcher=local (warm): the reference every launcher is compared with, run once
    per module (it was run once per launcher case); its sweep dir and what each trial saw."""
    root = tmp_path_factory.mktemp("local-warm-ref")
    proj = shutil.copytree(project_template, root / "proj", symlinks=True)
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        mp.chdir(proj)
        mp.setenv("PROBE_OUT", str(root))
        _add_warm_probe(proj)
        return _run(proj, root / "local-warm", "launcher=local")


def _run(project: Path, out: Path, *args: str) -> tuple[Path, dict[tuple[str, int], dict]]:
    """Run the probe ablation (seeds 0-2, arms plain and exit) writing what each trial saw to ``out``;
    returns its sweep dir and (arm value, seed) -> what that trial saw."""
    out.mkdir()
    before = set(project.glob("outputs/ablate/*/*/ablation.yaml"))
    res = ablate_cli(project, "-m", "variable=mode", "task=warmprobe", "seeds=3", f"task.out={out}", *args,
                     timeout=600)
    (plan,) = set(project.glob("outputs/ablate/*/*/ablation.yaml")) - before
    assert res.returncode in (0, 1), res.stderr  # 1 of 3 trials of one arm failed: whatever the verdict says
    seen = {(p.stem.split("-")[0], int(p.stem.split("-")[1])): json.loads(p.read_text()) for p in out.glob("*-*.json")}
    return plan.parent, seen


def _hash_under(seed: str, text: str) -> int:
    """``hash(text)`` in a fresh interpreter started with ``PYTHONHASHSEED=seed`` (the reference)."""
    out = subprocess.run([sys.executable, "-c", f"print(hash({text!r}))"], env={"PYTHONHASHSEED": seed},
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


def _hash_seeds(sd: Path) -> set[str | None]:
    return {json.loads(m.read_text())["environment"]["env"].get("PYTHONHASHSEED")
            for m in sd.glob("trials/*/seed=*/manifest.json")}


def test_packed_trials_are_forks_of_one_warm_parent_per_job(warm_project: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "slurm-warm"
    monkeypatch.setenv("PROBE_OUT", str(out))  # the jobs inherit the submitting environment (sbatch --export=ALL)
    sd, seen = _run(warm_project, out, "launcher=slurm", "launcher.trials_per_job=3")
    results = {(d.parent.name, int(d.name.split("=")[1])): result(sd, d.parent.name, int(d.name.split("=")[1]))
               for d in sd.glob("trials/*/seed=*")}
    assert len(results) == 6
    crashed = results[("mode=exit", 1)]  # the os._exit(3) is that trial's failure, recorded, and only its own
    assert crashed["status"] == "failed" and "exited with code 3" in crashed["error"], crashed
    assert crashed["slurm"]["job_id"], crashed
    assert all(r["status"] == "ok" for k, r in results.items() if k != ("mode=exit", 1)), results
    assert len(seen) == 5
    jobs: dict[str, list[dict]] = {}
    for s in seen.values():
        jobs.setdefault(s["job"], []).append(s)
    assert sorted(len(v) for v in jobs.values()) == [2, 3], jobs  # 2 jobs of 3 trials (one crashed)
    parents = set()
    for trials in jobs.values():
        (parent,) = {s["ppid"] for s in trials}  # every trial of a job: a fork of one warm parent
        parents.add(parent)
        assert len({s["pid"] for s in trials}) == len(trials)  # each its own process ...
        assert all(s["pgid"] == s["pid"] for s in trials)  # ... leading its own process group
    assert len(parents) == 2  # one warm parent per job
    imports = sorted(int(p.name.split("-")[1]) for p in out.glob("import-*"))
    assert sorted(parents) == imports  # the task module was imported once per job: in its warm parent only
    assert all(s["calls"] == 1 for s in seen.values())  # module state never leaks into the next trial
    for (arm, seed), s in seen.items():  # seeded after the fork: the trial's own seed, not the parent's state
        assert s["draw"] == random.Random(seed).random(), (arm, seed)
        manifest = json.loads((sd / "trials" / ("control" if arm == "plain" else f"mode={arm}") / f"seed={seed}"
                               / "manifest.json").read_text())
        assert manifest["warm_parent"] == s["ppid"]
    for (arm, seed), rec in results.items():  # a fork writes to its job's own logs, as a fresh process does
        mode = "plain" if arm == "control" else "exit"
        err = Path(rec["log"]).read_text()
        assert f"probe stderr {mode} seed={seed}" in err, err[-2000:]
        assert f"probe stdout {mode} seed={seed}" in Path(rec["log"][:-len(".err")] + ".out").read_text()
    assert _hash_seeds(sd) == {"0"}  # the ablation's (its first seed), recorded in every manifest
    assert {s["hashseed"] for s in seen.values()} == {"0"}
    assert {s["hash"] for s in seen.values()} == {_hash_under("0", "ablate-warm")}


@pytest.mark.parametrize("launcher", [("launcher=slurm", "launcher.trials_per_job=3", "launcher.warm=false"),
                                      ("launcher=slurm",), ("launcher=local", "launcher.warm=false")],
                         ids=["slurm-packed-fresh", "slurm-one-per-job", "local-fresh"])
def test_hash_seed_is_the_ablations_under_every_launcher(warm_project: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, launcher: tuple,
                                                         local_warm_reference: tuple) -> None:
    """The same ablation under launcher=local (warm, the reference) and another launcher: the same one
    PYTHONHASHSEED recorded in every manifest, the same string hashes, the same metrics."""
    monkeypatch.setenv("PROBE_OUT", str(tmp_path))
    ref_sd, ref_seen = local_warm_reference
    sd, seen = _run(warm_project, tmp_path / "other", *launcher)
    assert _hash_seeds(ref_sd) == _hash_seeds(sd) == {"0"}
    assert set(seen) == set(ref_seen) and len(seen) == 5
    for key in seen:
        assert seen[key]["hash"] == ref_seen[key]["hash"] == _hash_under("0", "ablate-warm"), key
        assert seen[key]["draw"] == ref_seen[key]["draw"], key
    for d in sd.glob("trials/*/seed=*"):
        arm, seed = d.parent.name, int(d.name.split("=")[1])
        assert result(sd, arm, seed)["metrics"] == result(ref_sd, arm, seed)["metrics"], (arm, seed)


def test_task_that_cannot_be_forked_is_refused_in_the_job_and_every_trial_says_why(project: Path) -> None:
    """A task module that starts a thread at import: the job's warm parent refuses (a fork keeps only the
    forking thread), and each trial of the job is recorded as failed with the reason and the fix."""
    (project / "threaded.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n\n\n"
        "def train(cfg):\n    return {'val_acc': 0.5}\n")
    (project / "conf" / "task" / "threaded.yaml").write_text("fn: threaded:train\nmetric: val_acc\nk: 1\n")
    (project / "conf" / "variable" / "k.yaml").write_text("key: task.k\nvalues: [2]\n")
    commit_all(project, "threaded task")
    res = ablate_cli(project, "-m", "variable=k", "task=threaded", "seeds=3", "launcher=slurm",
                     "launcher.trials_per_job=6", timeout=600)
    assert res.returncode == 1, res.stderr  # every trial failed: the verdict is invalid
    (plan,) = project.glob("outputs/ablate/*/*/ablation.yaml")
    for d in plan.parent.glob("trials/*/seed=*"):
        rec = result(plan.parent, d.parent.name, int(d.name.split("=")[1]))
        assert rec["status"] == "failed", rec
        assert "started 1 thread(s)" in rec["error"] and "launcher.warm=false" in rec["error"], rec
    assert len(list(plan.parent.glob("trials/*/seed=*/result.json"))) == 6


def test_packed_jobs_learn_imports_and_call_a_warm_app_in_its_forks(project: Path) -> None:
    """One packed job of 6 trials: the plain fixture app is imported once by the job's warm parent and each
    fork calls its main(); what the first trial imported anew the later ones find preloaded; the per-seed
    values equal the app's own history.jsonl."""
    from tests.integration.test_app_task import FIXTURES, PLAIN_TASK, write

    shutil.copytree(FIXTURES / "plain_app", project / "plain", ignore=shutil.ignore_patterns("__pycache__"))
    write(project, "plain", PLAIN_TASK, {"plain_lr": {"key": "lr", "values": [0.2]}})
    res = ablate_cli(project, "-m", "task=plain", "variable=plain_lr", "seeds=3", "launcher=slurm",
                     "launcher.trials_per_job=6", timeout=600)
    assert res.returncode == 0, res.stderr
    (sd,) = sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))
    trials = [(json.loads((d / "manifest.json").read_text()), d) for d in sd.glob("trials/*/seed=*")]
    assert len(trials) == 6
    (parent,) = {m["warm"]["parent"] for m, _ in trials}  # one job, one warm parent
    for m, d in trials:
        rec = result(sd, d.parent.name, int(d.name.split("=")[1]))
        assert rec["status"] == "ok", rec
        command = json.loads((d / "command.json").read_text())
        assert command["in_process"]["warm_parent"] == parent and command["in_process"]["pid"] == m["pid"]
        history = [json.loads(x) for x in (d / "run" / "history.jsonl").read_text().splitlines()]
        assert rec["metrics"]["val_acc"] == history[-1]["val_acc"]
    # one job, one after another: the first trial imported torch (the app imports it inside main()) and the
    # warm parent learned it; every later trial found it preloaded
    importers = [m for m, _ in trials if "torch" in m["warm"]["imported"]]
    assert len(importers) == 1, [m["warm"] for m, _ in trials]
    assert importers[0]["warm"]["preloaded"]["learned"] == []
    assert all("torch" in m["warm"]["preloaded"]["learned"] for m, _ in trials if m is not importers[0])
