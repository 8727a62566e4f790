"""Curve verdicts on ``fn`` tasks (issue 38): a warmup-like fixture whose final verdict is inconclusive and whose
curve verdict finds the early region where the treatment is better, with per-step values equal to the trial's
own logs (``ablate.log_step``), and a returned history.

One real ablation per launcher (module-scoped), pure-Python tasks (training is not the point), several tests
asserting on each. The curve comes from ``ablate.log_step(step, val_loss=...)``: its values are stored exactly
(``float.hex``), so the verdict's per-arm means are checked against the task's own numbers, recomputed here.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
import shutil
from pathlib import Path

import pytest
import yaml

import ablate
from ablate.record.sweepdir import SweepDir
from ablate.trackers.base import read_ablation
from tests.helpers import ablate_cli, ablate_in, commit_all, results

pytestmark = pytest.mark.slow

TASK = '''
import math
import random

import ablate


def loss_at(step, tau, seed, arm_offset):
    """The fixture's validation loss: an exponential decay to a plateau, with a seed-level offset and noise."""
    rng = random.Random(seed * 1000 + arm_offset)
    level = rng.gauss(0.0, 0.02)
    return [2.0 * math.exp(-s / tau) + 0.5 + level + rng.gauss(0.0, 0.03) for s in step]


def train(cfg):
    steps = list(range(0, 610, 10))
    tau = (30.0 if cfg.task.warmup else 60.0) * cfg.task.tau_scale
    losses = loss_at(steps, tau, cfg.seed, 1 if cfg.task.warmup else 0)
    for s, v in zip(steps, losses):
        ablate.log_step(s, val_loss=v)
    return {"val_loss": losses[-1]}


def train_history(cfg):
    steps = list(range(0, 610, 10))
    tau = 30.0 if cfg.task.warmup else 60.0
    losses = loss_at(steps, tau, cfg.seed, 1 if cfg.task.warmup else 0)
    return {"val_loss": losses[-1], "history": {"step": steps, "val_loss": losses}}
'''
SEEDS = 8


def expected(seed: int, warmup: bool) -> list[float]:
    """The task's own losses, recomputed here (the fixture's formula)."""
    rng = random.Random(seed * 1000 + (1 if warmup else 0))
    level = rng.gauss(0.0, 0.02)
    tau = 30.0 if warmup else 60.0
    return [2.0 * math.exp(-s / tau) + 0.5 + level + rng.gauss(0.0, 0.03) for s in range(0, 610, 10)]


@pytest.fixture(scope="module")
def proj(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("curves") / "proj"
    shutil.copytree(project_template, dest, symlinks=True)
    (dest / "warm.py").write_text(TASK)
    for name, fn in (("warmup", "warm:train"), ("warmup_history", "warm:train_history")):
        (dest / "conf" / "task" / f"{name}.yaml").write_text(yaml.safe_dump(
            {"fn": fn, "metric": "val_loss", "goal": "minimize", "warmup": False, "tau_scale": 1.0}, sort_keys=False))
    (dest / "conf" / "variable" / "warmup.yaml").write_text(yaml.safe_dump({"key": "task.warmup", "values": [True]}))
    (dest / "conf" / "variable" / "slow.yaml").write_text(yaml.safe_dump({"key": "task.tau_scale", "values": [3.0]}))
    commit_all(dest, "a warmup-like task")
    return dest


def sweep_of(root: Path, *args: str, variable: str = "variable=warmup", console: bool = False) -> Path:
    """Run the ablation in this process (ablate's CLI entry), or through the console script when ``console``."""
    before = set(root.glob("outputs/ablate/*/*"))
    argv = ("-m", variable, f"seeds={SEEDS}", "curve.enabled=true", *args)
    res = ablate_cli(root, *argv) if console else ablate_in(root, *argv)
    assert res.returncode == 0, f"{args}\n{res.stdout}\n{res.stderr}"
    (new,) = set(root.glob("outputs/ablate/*/*")) - before
    lock = SweepDir(new)  # the PNGs are drawn by a detached process holding the lock: wait for it
    lock.acquire()
    lock.release()
    return new


@pytest.fixture(scope="module")
def inline(proj: Path) -> Path:
    # its PNGs are read; the console script (this file's proof of it)
    return sweep_of(proj, "task=warmup", "launcher=inline", "plots=true", console=True)


def test_final_inconclusive_curve_finds_the_early_region(inline: Path) -> None:
    v = json.loads((inline / "verdict.json").read_text())
    (comp,) = v["comparisons"]
    assert comp["verdict"] == "inconclusive", comp["reason"]
    (cc,) = v["curves"]["comparisons"]
    assert cc["paired"] and cc["n"] == [SEEDS, SEEDS] and cc["exact"] and cc["n_permutations"] == 2 ** (SEEDS - 1)
    # both arms start at the same loss (step 0), the treatment drops faster, both reach the same plateau
    start, early, late = cc["regions"]
    assert (start["word"], start["from"], start["to"]) == ("indistinguishable", 0.0, 0.0)
    assert early["word"] == "better" and early["from"] == 10.0 and 100 <= early["to"] <= 300
    assert late["word"] == "indistinguishable" and late["to"] == 600.0
    assert cc["sentence"] == (f"indistinguishable at step 0; better from 10 to {early['to']:.0f}; "
                              "indistinguishable after")
    assert cc["pointwise_marked"] >= early["points"]  # the uncorrected t-test marks at least as many
    # the final value inside the curve family: the final verdict's Δ, and its word
    final = cc["summaries"]["final"]
    assert final["agrees"] and final["diff"] == pytest.approx(comp["diff_raw"], rel=1e-12)
    assert final["verdict"] == "inconclusive" and final["word"] == "indistinguishable"
    assert cc["summaries"]["auc"]["word"] == "better"  # less loss under the curve


def test_per_step_values_equal_the_trials_own_logs(inline: Path) -> None:
    v = json.loads((inline / "verdict.json").read_text())
    (cc,) = v["curves"]["comparisons"]
    assert cc["grid"]["rule"] == "shared" and cc["grid"]["points"] == 61 and cc["grid"]["range"] == [0.0, 600.0]
    assert cc["x"] == [float(s) for s in range(0, 610, 10)]
    for arm, warmup, key in (("control", False, "mean_control"), ("warmup=true", True, "mean_treatment")):
        own = [expected(s, warmup) for s in range(SEEDS)]
        want = [sum(col) / SEEDS for col in zip(*own, strict=True)]
        assert cc[key] == pytest.approx(want, rel=1e-12, abs=1e-15)
        for seed in range(SEEDS):
            rec = json.loads((inline / "trials" / arm / f"seed={seed}" / "curve.json").read_text())
            assert rec["source"] == "log_step" and rec["x"] == "step" and rec["stride"] == 1
            assert rec["ys"] == own[seed]  # exact: log_step stores float.hex
    recs = results(inline)
    assert all("history" not in r["metrics"] for r in recs.values())


def test_verdict_md_has_the_curves_section_and_plot(inline: Path) -> None:
    md = (inline / "verdict.md").read_text()
    assert "## Curves" in md
    assert "better from 10 to" in md
    png = inline / "verdict_curve_warmup=true.png"
    assert png.is_file() and png.stat().st_size > 1000
    assert "](verdict_curve_warmup=true.png)" in md
    assert json.loads((inline / "verdict.json").read_text())["plots"]["curves"] == {
        "warmup=true": "verdict_curve_warmup=true.png"}


def test_returned_history_gives_the_same_curve(proj: Path, inline: Path) -> None:
    sd = sweep_of(proj, "task=warmup_history", "launcher=local", "launcher.warm=false")  # fresh processes
    a = json.loads((inline / "verdict.json").read_text())["curves"]["comparisons"][0]
    b = json.loads((sd / "verdict.json").read_text())["curves"]["comparisons"][0]
    assert b["mean_control"] == a["mean_control"] and b["mean_treatment"] == a["mean_treatment"]
    assert b["regions"] == a["regions"]
    rec = json.loads((sd / "trials" / "control" / "seed=0" / "curve.json").read_text())
    assert rec["source"] == "history"
    assert all(r["status"] == "ok" and "history" not in r["metrics"] for r in results(sd).values())


def test_table_forest_api_and_trackers_carry_the_curve(inline: Path) -> None:
    v = json.loads((inline / "verdict.json").read_text())
    (cc,) = v["curves"]["comparisons"]
    final = cc["summaries"]["final"]
    md = (inline / "verdict.md").read_text()
    table = md.split("## Ablation table", 1)[1].split("\n\n", 2)[1]
    head, _rule, control, treatment = table.splitlines()
    assert head.endswith("| Δ curve: final val_loss [CI] |")  # curve.summary: final (the default)
    # in the primary column's decimals (3 here, from its CIs)
    lo, hi = final["ci"]
    assert treatment.endswith(f"| {final['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] indistinguishable |")
    assert control.endswith("|  |")
    with (inline / "ablation_table.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["role"] == "curve"]
    assert [(r["arm"], r["metric"], r["verdict"]) for r in rows] == [
        ("warmup=true", "val_loss:curve:final", "indistinguishable")]
    assert float(rows[0]["delta"]) == final["diff"] and float(rows[0]["delta_ci_level"]) == cc["level"]
    assert r"curve: final val\_loss" in (inline / "ablation_table.tex").read_text()
    assert (inline / "verdict_forest.png").stat().st_size > 1000
    verdict = ablate.Verdict.open(inline)
    assert verdict.curves == v["curves"]
    assert verdict.curve_words == {"warmup=true": cc["sentence"]}
    summary = read_ablation(inline).summary_metrics()
    assert summary["warmup=true.curve.auc.diff"] == cc["summaries"]["auc"]["diff"]
    assert summary["warmup=true.curve.better_points"] == sum(r["points"] for r in cc["regions"]
                                                             if r["word"] == "better")
    assert summary["warmup=true.curve.worse_points"] == 0
    assert inline / "verdict_curve_warmup=true.png" in read_ablation(inline).artifacts


def test_suite_gives_each_treatment_its_curve_at_the_familys_level(proj: Path) -> None:
    sd = sweep_of(proj, "task=warmup", "launcher=local", "plots=true", variable="variable=warmup,slow")
    v = json.loads((sd / "verdict.json").read_text())
    by_arm = {c["arm"]: c for c in v["curves"]["comparisons"]}
    assert set(by_arm) == {"warmup=true", "tau_scale=3.0"}
    for c in by_arm.values():  # Bonferroni over the suite's two treatments, as the final verdict's CIs
        assert c["n_comparisons"] == 2 and c["level"] == pytest.approx(0.975)
    assert by_arm["warmup=true"]["regions"][1]["word"] == "better"
    assert by_arm["tau_scale=3.0"]["regions"][1]["word"] == "worse"  # a slower decay: more loss early
    md = (sd / "verdict.md").read_text()
    assert "](verdict_curve_tau_scale=3.0.png)" in md and "](verdict_curve_warmup=true.png)" in md


def test_transfer_check_compares_curves_at_matched_x(proj: Path) -> None:
    before = set(proj.glob("outputs/ablate/*/*"))
    res = ablate_in(proj, "-m", "variable=warmup", "seeds=6", "task=warmup", "launcher=local", "curve.enabled=true",
                    "scale.key=task.tau_scale", "scale.values=[1.0,2.0]")
    assert res.returncode == 0, res.stdout + res.stderr
    (parent,) = set(proj.glob("outputs/ablate/*/*")) - before
    report = json.loads((parent / "transfer.json").read_text())
    (r,) = report["curves"]["results"]
    assert r["arm"] == "warmup=true" and r["matched"] == [0.0, 600.0]
    assert r["flag"] == "no contradiction" and r["contradictions"] == []
    assert [s["scale"] for s in r["scales"]] == [1.0, 2.0]
    # both scales: the same start, better early (6 seeds: the region may come in pieces), never worse
    for s in r["scales"]:
        assert s["sentence"].startswith("indistinguishable ") and "worse" not in s["sentence"], s
        assert re.search(r"; better (from|between) \d+ ", s["sentence"]), s
    assert "## Curves across scales" in (parent / "transfer.md").read_text()
