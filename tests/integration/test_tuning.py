"""Tuned ablations (issue 40) on a pure-Python ``fn`` task (training is not the point).

The task's accuracy is a peak per architecture minus a penalty for the distance, in decades, between the learning
rate and the architecture's best one, plus per-trial noise (sd 0.002):

- ``spurious``: both architectures peak at 0.90; the control's best lr is 0.03, the treatment's 0.1, and the
  control inherits lr = 0.1. The plain ablation says the treatment is better (0.90 against 0.90 - 0.2·log10(0.1 /
  0.03)² = 0.8455); tuned over [0.01, 0.03, 0.1, 0.3], each arm chooses its own best lr, inside the grid, and the
  verdict on fresh seeds is equivalent (margin 0.01).
- ``true``: the treatment peaks at 0.95 and the control at 0.90, both best at lr 0.03: the treatment wins at every lr,
  and keeps its win when tuned.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ablate.record.sweepdir import SweepDir
from tests.helpers import ablate_cli, ablate_in, commit_all

pytestmark = pytest.mark.slow

TASK = '''
import math
import os
import random
import time


def accuracy(arch, lr, seed, kind):
    """The fixture's accuracy: the architecture's peak, minus 0.2 per squared decade from its best lr, plus noise."""
    peak = {"a": 0.90, "b": 0.95 if kind == "truewin" else 0.90}[arch]
    best = {"a": 0.03, "b": 0.03 if kind == "truewin" else 0.1}[arch]
    noise = random.Random(f"{kind}-{arch}-{lr}-{seed}").gauss(0.0, 0.002)
    return peak - 0.2 * math.log10(lr / best) ** 2 + noise


def train(cfg):
    if cfg.task.log:  # the kill/resume test: which trials started, and time to kill the orchestrator mid-run
        with open(cfg.task.log, "a") as fh:
            fh.write(f"{cfg.task.arch} {cfg.task.lr} {cfg.seed} {os.getpid()}\\n")
        time.sleep(cfg.task.slow_s)
    return {"val_acc": accuracy(cfg.task.arch, cfg.task.lr, cfg.seed, cfg.task.kind)}
'''
GRID = "[0.01,0.03,0.1,0.3]"
SEEDS = 5


def accuracy(arch: str, lr: float, seed: int, kind: str) -> float:
    """The task's own formula, recomputed here."""
    import random

    peak = {"a": 0.90, "b": 0.95 if kind == "truewin" else 0.90}[arch]
    best = {"a": 0.03, "b": 0.03 if kind == "truewin" else 0.1}[arch]
    noise = random.Random(f"{kind}-{arch}-{lr}-{seed}").gauss(0.0, 0.002)
    return peak - 0.2 * math.log10(lr / best) ** 2 + noise


@pytest.fixture(scope="module")
def proj(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("tuning") / "proj"
    shutil.copytree(project_template, dest, symlinks=True)
    (dest / "tuned.py").write_text(TASK)
    for kind in ("spurious", "truewin"):
        (dest / "conf" / "task" / f"{kind}.yaml").write_text(yaml.safe_dump(
            {"fn": "tuned:train", "metric": "val_acc", "goal": "maximize", "arch": "a", "lr": 0.1, "kind": kind,
             "log": None, "slow_s": 0.0},
            sort_keys=False))
    (dest / "conf" / "variable" / "arch.yaml").write_text(yaml.safe_dump({"key": "task.arch", "values": ["b"]}))
    commit_all(dest, "a task whose best lr depends on the architecture")
    return dest


def sweep_of(root: Path, *args: str, console: bool = False) -> Path:
    """``ablate -m variable=arch ... ARGS`` in this process (ablate's CLI entry), or through the console script when
    ``console``; its new sweep dir, once no process holds its lock."""
    before = set(root.glob("outputs/ablate/*/*"))
    run = ablate_cli if console else ablate_in
    res = run(root, "-m", "variable=arch", f"seeds={SEEDS}", "margin=0.01", *args)
    assert res.returncode == 0, f"{args}\n{res.stdout}\n{res.stderr}"
    (new,) = set(root.glob("outputs/ablate/*/*")) - before
    lock = SweepDir(new)
    lock.acquire()
    lock.release()
    return new


TUNE = ("tune.key=task.lr", f"tune.values={GRID}", "tune.seeds=2")


@pytest.fixture(scope="module")
def plain(proj: Path) -> Path:
    return sweep_of(proj, "task=spurious", "launcher=inline")


@pytest.fixture(scope="module")
def tuned(proj: Path) -> Path:
    return sweep_of(proj, "task=spurious", "launcher=inline", *TUNE)


@pytest.fixture(scope="module")
def true_win(proj: Path) -> Path:
    return sweep_of(proj, "task=truewin", "launcher=local", *TUNE)


def comparison(sd: Path) -> dict:
    (c,) = json.loads((sd / "verdict.json").read_text())["comparisons"]
    return c


def test_plain_ablation_says_better_only_because_of_the_inherited_lr(plain: Path) -> None:
    c = comparison(plain)
    assert c["verdict"] == "better", c["reason"]
    want = sum(accuracy("b", 0.1, s, "spurious") - accuracy("a", 0.1, s, "spurious") for s in range(SEEDS)) / SEEDS
    assert c["diff"] == pytest.approx(want, rel=1e-9)


def test_tuned_ablation_says_equivalent_with_both_choices_inside_the_grid(tuned: Path) -> None:
    v = json.loads((tuned / "verdict.json").read_text())
    (c,) = v["comparisons"]
    assert c["verdict"] == "equivalent", c["reason"]
    t = v["tuning"]
    chosen = {a["arm"]: a["setting"] for a in t["arms"]}
    assert chosen == {"control": {"task.lr": 0.03}, "arch=b": {"task.lr": 0.1}}
    assert all(a["edge"] == [] for a in t["arms"])  # 0.03 and 0.1 are inside [0.01, 0.3]
    # the choice: each setting's mean over the tuning seeds, from the task's own formula
    seeds = t["seeds"]
    assert seeds == [SEEDS, SEEDS + 1]  # after the evaluation seeds 0..4: disjoint
    for a, arch in zip(t["arms"], ("a", "b"), strict=True):
        want = [sum(accuracy(arch, lr, s, "spurious") for s in seeds) / 2 for lr in (0.01, 0.03, 0.1, 0.3)]
        assert a["means"] == pytest.approx(want, rel=1e-12)
    # the verdict's arms are the chosen settings on the evaluation seeds
    arms = {a["arm"]: a for a in v["arms"]}
    assert list(arms) == ["control+lr=0.03", "arch=b+lr=0.1"]
    assert set(arms["control+lr=0.03"]["values"]) == {str(s) for s in range(SEEDS)}
    assert arms["control+lr=0.03"]["mean"] == pytest.approx(
        sum(accuracy("a", 0.03, s, "spurious") for s in range(SEEDS)) / SEEDS, rel=1e-12)


def test_plan_records_settings_and_disjoint_seeds_before_any_trial(tuned: Path) -> None:
    plan = yaml.safe_load((tuned / "ablation.yaml").read_text())
    assert plan["tuning"]["eval_seeds"] == list(range(SEEDS))
    assert plan["tuning"]["seeds"] == plan["seeds"] == [SEEDS, SEEDS + 1]
    assert not set(plan["tuning"]["seeds"]) & set(plan["tuning"]["eval_seeds"])
    assert [a["name"] for a in plan["arms"]][:4] == ["control+lr=0.01", "control+lr=0.03", "control+lr=0.1",
                                                     "control+lr=0.3"]
    rec = json.loads((tuned / "tuning.json").read_text())
    assert rec["chosen"] == rec["own"] == {"control": "control+lr=0.03", "arch=b": "arch=b+lr=0.1"}
    # each arm prefers its own lr by far more than 2 SE of a difference (0.0546 against 2·√2·0.002/√2): apart
    assert "common" not in rec


def test_results_csv_has_every_trial_with_its_role(tuned: Path) -> None:
    rows = list(csv.DictReader((tuned / "results.csv").read_text().splitlines()))
    roles = [r["role"] for r in rows]
    assert roles.count("tuning") == 2 * 4 * 2 and roles.count("evaluation") == 2 * SEEDS
    assert all(r["status"] == "ok" for r in rows)
    ev = [r for r in rows if r["role"] == "evaluation"]
    assert {r["arm"] for r in ev} == {"control+lr=0.03", "arch=b+lr=0.1"}
    assert {r["setting"] for r in ev} == {"lr=0.03", "lr=0.1"}
    assert all(float(r["val_acc"]) == pytest.approx(accuracy(
        "a" if r["arm"].startswith("control") else "b", float(r["setting"][3:]), int(r["seed"]), "spurious"),
        rel=1e-12) for r in rows)


def test_verdict_md_tuning_section(tuned: Path) -> None:
    md = (tuned / "verdict.md").read_text()
    assert "## Tuning" in md
    assert "| control | lr=0.03 |" in md and "| arch=b | lr=0.1 |" in md
    assert "**biased**" in md and "Dodge et al. 2019" in md
    assert "Cost: 16 tuning trials (2 arms x 4 settings x 2 seeds) and 10 evaluation trials" in md
    assert "Edge of the range" not in md
    # the seed advice counts the tuning a new run repeats; `ablate extend` refuses a tuned dir, so it is never advised
    (c,) = json.loads((tuned / "verdict.json").read_text())["comparisons"]
    n = int((c.get("seed_advice") or {}).get("n_needed") or 0) or SEEDS
    assert (f"a new run tunes every arm again first: {n} evaluation seeds per arm = {n} x 2 arms + 16 tuning trials "
            f"= {2 * n + 16} trials.") in md
    assert "ablate extend" not in md


def test_true_win_keeps_its_win_when_tuned(true_win: Path) -> None:
    v = json.loads((true_win / "verdict.json").read_text())
    (c,) = v["comparisons"]
    assert c["verdict"] == "better", c["reason"]
    assert c["diff"] == pytest.approx(0.05, abs=0.01)
    chosen = {a["arm"]: a["setting"] for a in v["tuning"]["arms"]}
    assert chosen == {"control": {"task.lr": 0.03}, "arch=b": {"task.lr": 0.03}}
    # both chose lr=0.03 on their own: one common setting, the same one, said in verdict.md with its reason
    assert v["tuning"]["common"]["arms"] == ["control", "arch=b"]
    md = (true_win / "verdict.md").read_text()
    assert ("**One common setting**: control, arch=b are judged at lr=0.03 (control's own best was lr=0.03; "
            "arch=b's own best was lr=0.03)") in md
    (n,) = v["tuning"]["naive"]
    assert n["flips"] == []  # the treatment leads at every budget
    assert all(d > 0 for d in n["lead"])


def test_edge_of_the_range_is_flagged(proj: Path, tmp_path: Path) -> None:
    # a grid that stops below the control's best lr: its choice is the grid's largest value
    # the console script, this file's proof of it (its cheapest complete ablation)
    sd = sweep_of(proj, "task=truewin", "launcher=inline", "tune.key=task.lr", "tune.values=[0.001,0.01]",
                  "tune.seeds=1", "seeds=3", console=True)
    md = (sd / "verdict.md").read_text()
    assert "Edge of the range" in md and "lr=0.01 is the largest value tried" in md


def test_dry_run_prints_the_trial_count(proj: Path) -> None:
    res = ablate_in(proj, "-m", "variable=arch", "task=spurious", "seeds=5", "dry_run=true", *TUNE)
    assert res.returncode == 0, res.stderr
    assert "trials: 26 = 16 tuning (2 arms x 4 settings x 2 seeds) + 10 evaluation" in res.stdout
    assert "tuning seeds 5, 6; evaluation seeds 0..4 (disjoint)" in res.stdout


@pytest.mark.parametrize(("args", "where", "what"), [
    (("tune.key=task.lrr", "tune.values=[0.1,0.2]"), "tune", "not a key of the control config"),
    (("tune.key=task.arch", "tune.values=[a,b]"), "tune", "is the variable under test"),
    (("tune.key=task.lr", "tune.values=[0.1,0.2]", "sequential=group"), "tune", "sequential=group"),
    (("tune.key=task.lr", "tune.values=[0.1,0.2]", "curve.enabled=true"), "tune", "curve.enabled=true"),
    (("tune.key=task.lr", "tune.values=[0.1,0.2]", "scale.key=task.slow_s", "scale.values=[0.0,0.001]"), "tune",
     "cannot tune the arms of a transfer check yet"),
])
def test_refusals_are_one_line(proj: Path, args: tuple[str, ...], where: str, what: str) -> None:
    before = set(proj.glob("outputs/ablate/*/*"))
    res = ablate_in(proj, "-m", "variable=arch", "task=spurious", "seeds=5", *args)
    assert res.returncode == 2
    assert f"`{where}`" in res.stderr and what in res.stderr and "Traceback" not in res.stderr
    assert set(proj.glob("outputs/ablate/*/*")) == before  # nothing created


def test_the_transfer_refusal_s_fix_runs(proj: Path) -> None:
    """The fix of tune + scale.key: one tuned ablation per scale, the scale's value an ordinary override."""
    res = ablate_in(proj, "-m", "variable=arch", "task=spurious", "seeds=5", "tune.key=task.lr",
                    "tune.values=[0.1,0.2]", "scale.key=task.slow_s", "scale.values=[0.0,0.001]")
    assert "drop `scale.key` and `scale.values` and run one tuned ablation per scale, e.g. with `task.slow_s=0.0`" \
        in res.stderr, res.stderr
    ok = ablate_in(proj, "-m", "variable=arch", "task=spurious", "seeds=5", "tune.key=task.lr",
                   "tune.values=[0.1,0.2]", "task.slow_s=0.0", "dry_run=true")
    assert ok.returncode == 0, ok.stderr
    assert "trials: 18 = 8 tuning (2 arms x 2 settings x 2 seeds) + 10 evaluation" in ok.stdout, ok.stdout


def test_verdict_with_curves_of_a_tuned_dir_is_refused_and_its_fix_runs(tuned: Path, proj: Path) -> None:
    res = ablate_in(proj, "verdict", str(tuned), "--curve")
    assert res.returncode == 2 and "`--curve`" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert f"run `ablate verdict {tuned}` without --curve" in res.stderr
    ok = ablate_in(proj, "verdict", str(tuned))
    assert ok.returncode == 0, ok.stderr


def test_kill_during_evaluation_then_resume_loses_nothing(proj: Path, tmp_path: Path) -> None:
    log = tmp_path / "starts.log"
    exe = str(Path(sys.executable).with_name("ablate"))
    before_dirs = set(proj.glob("outputs/ablate/*/*"))
    proc = subprocess.Popen(
        [exe, "-m", "variable=arch", "task=spurious", "seeds=3", "launcher=local", "launcher.max_parallel=2",
         "tune.key=task.lr", "tune.values=[0.03,0.1]", "tune.seeds=1", f"task.log={log}", "task.slow_s=1.0"],
        cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, sd = time.time() + 180, None
    while time.time() < deadline:  # wait until the choice is recorded and an evaluation trial is mid-run
        for d in set(proj.glob("outputs/ablate/*/*")) - before_dirs:
            running = [m for m in d.glob("trials/*/seed=[0-2]/manifest.json")
                       if not (m.parent / "result.json").exists()]
            if (d / "tuning.json").exists() and running:
                sd = d
        if sd is not None or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert sd is not None, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    time.sleep(0.5)  # PR_SET_PDEATHSIG delivers SIGKILL to the running trials
    chosen = (sd / "tuning.json").read_text()
    tuned_before = {p.parent: p.read_text() for p in sd.glob("trials/*/seed=3/result.json")}
    assert len(tuned_before) == 4  # every tuning trial ended before the choice
    status = ablate_in(proj, "status", str(sd))
    assert "interrupted" in status.stdout, status.stdout
    res = ablate_in(proj, "resume", str(sd))
    assert res.returncode == 0, res.stderr
    assert (sd / "tuning.json").read_text() == chosen  # the recorded choice is kept
    for t, text in tuned_before.items():  # tuning trials are never re-run
        assert (t / "result.json").read_text() == text
    starts = [line.split() for line in log.read_text().splitlines()]
    assert sum(s[2] == "3" for s in starts) == 4  # each tuning trial started once
    rows = list(csv.DictReader((sd / "results.csv").read_text().splitlines()))
    assert len(rows) == 4 + 2 * 3 and all(r["status"] == "ok" for r in rows), rows
    ev = {(r["arm"], r["seed"]) for r in rows if r["role"] == "evaluation"}
    # one tuning seed per setting: the noise of the choice cannot be estimated, so both arms are judged at one
    # common setting (stats.choose), recorded before the kill and kept by the resume
    rec = json.loads(chosen)
    assert rec["common"]["arms"] == ["control", "arch=b"] and "one tuning seed" in rec["common"]["reason"]
    assert rec["own"] == {"control": "control+lr=0.03", "arch=b": "arch=b+lr=0.1"}
    assert len({a.split("+", 1)[1] for a in rec["chosen"].values()}) == 1
    assert ev == {(a, str(s)) for a in rec["chosen"].values() for s in range(3)}
    v = json.loads((sd / "verdict.json").read_text())
    assert [a["n"] for a in v["arms"]] == [3, 3]


def test_repro_reruns_an_evaluation_trial(tuned: Path, proj: Path) -> None:
    res = ablate_in(proj, "repro", str(tuned), "--trial", "arch=b+lr=0.1/seed=2")
    assert res.returncode == 0, res.stdout + res.stderr
    a = json.loads((tuned / "trials" / "arch=b+lr=0.1" / "seed=2" / "result.json").read_text())
    b = json.loads((tuned / "repro" / "arch=b+lr=0.1" / "seed=2" / "1" / "result.json").read_text())
    assert a["metrics"]["val_acc"] == b["metrics"]["val_acc"] == pytest.approx(accuracy("b", 0.1, 2, "spurious"))


def test_verdict_and_status_on_a_tuned_sweep_dir(tuned: Path, proj: Path) -> None:
    before = json.loads((tuned / "verdict.json").read_text())
    res = ablate_in(proj, "verdict", str(tuned), "--alpha", "0.1", "--no-plots")
    assert res.returncode == 0, res.stderr
    v = json.loads((tuned / "verdict.json").read_text())
    assert v["alpha"] == 0.1 and v["tuning"]["arms"] == before["tuning"]["arms"]
    assert [a["arm"] for a in v["arms"]] == ["control+lr=0.03", "arch=b+lr=0.1"]
    status = ablate_in(proj, "status", str(tuned))
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line.split()[1:] for line in status.stdout.splitlines() if "+lr=" in line}
    assert len(rows) == 8, status.stdout  # every tuned arm, its done count: 2 tuning (+ 5 evaluation if chosen)
    done = {arm: int(cells[2]) for arm, cells in rows.items()}
    assert done == {a: 2 + SEEDS * (a in ("control+lr=0.03", "arch=b+lr=0.1")) for a in done}
    assert all(cells[0] == "0" for cells in rows.values())  # nothing pending
    ablate_in(proj, "verdict", str(tuned), "--reset", "--no-plots")


def test_trackers_get_every_trial_with_its_role(tuned: Path) -> None:
    from ablate.trackers.base import read_ablation

    rec = read_ablation(SweepDir(tuned))
    roles = [t.tags["ablate.tuning"] for t in rec.trials]
    assert roles.count("tuning") == 16 and roles.count("evaluation") == 2 * SEEDS
    assert {t.arm for t in rec.trials if t.tags["ablate.tuning"] == "evaluation"} == {"control+lr=0.03",
                                                                                    "arch=b+lr=0.1"}


def test_dry_run_of_a_seeded_random_search(proj: Path) -> None:
    args = ("-m", "variable=arch", "task=spurious", "seeds=3", "dry_run=true", "tune.key=task.lr",
            "tune.values='log_uniform(0.001,0.1)'", "tune.budget=4", "tune.seeds=1", "tune.sampler_seed=7")
    res = ablate_in(proj, *args)
    assert res.returncode == 0, res.stderr
    assert "random search: 4 settings drawn by a sampler seeded with 7" in res.stdout
    assert "trials: 14 = 8 tuning (2 arms x 4 settings x 1 seeds) + 6 evaluation" in res.stdout
    assert ablate_in(proj, *args).stdout == res.stdout  # the same draws every time


def test_extend_refuses_a_tuned_ablation(tuned: Path, proj: Path) -> None:
    plan = (tuned / "ablation.yaml").read_text()
    res = ablate_in(proj, "extend", str(tuned), "seeds=10")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "this ablation is tuned" in res.stderr and "Traceback" not in res.stderr
    assert (tuned / "ablation.yaml").read_text() == plan  # nothing recorded


def test_a_recorded_choice_the_plan_does_not_hold_is_refused_on_resume(tuned: Path, proj: Path) -> None:
    # tuning.json is a record: a chosen name edited to something the plan has no tuned arm for is one line, not run
    path = tuned / "tuning.json"
    original = path.read_text()
    try:
        for chosen in ({"control": "control+lr=9", "arch=b": "arch=b+lr=0.1"},  # no such setting
                       {"control": "arch=b+lr=0.1", "arch=b": "arch=b+lr=0.1"}):  # another arm's tuned arm
            path.write_text(json.dumps({**json.loads(original), "chosen": chosen}))
            res = ablate_in(proj, "resume", str(tuned))
            assert res.returncode == 2, res.stderr
            (line,) = res.stderr.strip().splitlines()[-1:]
            assert "records a choice the plan's tuned arms do not hold (control: " in line, line
            assert f"`ablate resume {tuned}`" in line, line
    finally:
        path.write_text(original)
    assert len(list(tuned.glob("trials/*/seed=*/result.json"))) == 8 * 2 + 2 * SEEDS  # nothing new ran
