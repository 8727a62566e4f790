"""The verdict on a real ablation (real git + DVC project, real torch training on digits; the group-sequential
looks on the pure-Python task), and ``ablate verdict DIR`` recomputing it with new options without touching a
trial."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablate.record.sweepdir import PLOTS_HOLDER, SweepDir
from ablate.stats.multiplicity import stage_levels
from tests.helpers import ablate_cli, ablate_in, add_pure_task

pytestmark = pytest.mark.slow
FAST = ["task.epochs=2", "launcher=inline"]


def _sweep(project: Path) -> Path:
    (sd,) = sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))
    return sd


def _hashes(sd: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((sd / "trials").rglob("*"))
            if p.is_file()}


def test_real_ablation_verdict_and_recompute(project: Path) -> None:
    res = ablate_cli(project, "-m", "variable=lr", "seeds=3", "plots=true", *FAST)  # its PNG is read
    assert res.returncode == 0, res.stderr
    sd = _sweep(project)
    v = json.loads((sd / "verdict.json").read_text())
    assert v["metric"] == "val_acc" and v["goal"] == "maximize" and v["alpha"] == 0.05
    assert v["invalid"] is False and v["confounds"]["complete"] is True and v["dirty"] is False
    assert [a["arm"] for a in v["arms"]] == ["control", "lr=0.005", "lr=0.2"]
    control = [v["arms"][0]["values"][str(s)] for s in range(3)]
    assert len(v["comparisons"]) == 2
    for c in v["comparisons"]:
        treat = [v["arms"][[a["arm"] for a in v["arms"]].index(c["arm"])]["values"][str(s)] for s in range(3)]
        # a fn task under determinism=seeded: ablate seeds python, numpy and torch from the trial seed, so the
        # design shares randomness across arms and pairing=auto pairs by seed (whatever N)
        assert c["paired"] and c["pairing"]["seeds"] == [0, 1, 2] and c["pairing"]["pair_from"] is None
        assert c["pairing"]["reason"].startswith("paired by seed: pairing=auto: the design shares randomness across "
                                                 "arms (a fn task under determinism=seeded")
        # the digits task's 3 seeds are never constant: the scipy cross-checks always run
        assert c["verdict"] != "insufficient data" and c["pairing"]["rho"] is not None
        assert c["pairing"]["rho"] == pytest.approx(float(np.corrcoef(treat, control)[0, 1]), rel=1e-9)
        assert c["pvalue"] == pytest.approx(stats.ttest_rel(treat, control).pvalue, rel=1e-9)
        assert c["verdict"] in ("better", "worse", "inconclusive")
        assert c["reason"] and "nan" not in c["reason"].lower()
    md = (sd / "verdict.md").read_text()
    assert md.startswith("# Ablation of `task.optim.lr`: val_acc, higher is better")
    assert "None found (9 trial manifests compared)." in md
    assert "## Provenance" in md and "- code: commit `" in md and "(clean tree)" in md
    assert "- data: `data/digits.npz` md5:" in md
    assert "only large effects are detectable at N = 3" in md  # the small-N flag
    # `ablate -m` returned with the text; a detached drawer holding the sweep dir's lock draws the PNGs and
    # rewrites verdict.md to show them: taking the lock waits for it (as any later ablate command does)
    assert (sd / ".lock").read_text().endswith(PLOTS_HOLDER)  # handed to the drawer (its line stays after it)
    lock = SweepDir(sd)
    lock.acquire()
    lock.release()
    assert (sd / "verdict_values.png").stat().st_size > 1000
    assert "](verdict_values.png)" in (sd / "verdict.md").read_text()
    assert json.loads((sd / "verdict.json").read_text())["plots"]["values"] == "verdict_values.png"

    before = _hashes(sd)
    res = ablate_in(project, "verdict", str(sd), "--alpha", "0.01")  # starts no trial: in this process
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(sd / "verdict.md")
    assert _hashes(sd) == before
    v2 = json.loads((sd / "verdict.json").read_text())
    assert v2["alpha"] == 0.01
    assert [c["pvalue"] for c in v2["comparisons"]] == [c["pvalue"] for c in v["comparisons"]]
    # each CI is at the level Holm decided it at (α/2 at the first step, α at the second, the stopping
    # step's level for the rest), so it excludes 0 exactly when the verdict is better or worse
    levels = stage_levels([math.nan if c["pvalue"] is None else c["pvalue"] for c in v2["comparisons"]], "holm", 0.01)
    assert len(levels) == 2
    for c, lv in zip(v2["comparisons"], levels, strict=True):
        assert c["ci"] is not None
        assert c["ci_level"] == pytest.approx(1 - lv / c["guard_factor"]) and lv in (pytest.approx(0.005),
                                                                                     pytest.approx(0.01))
        assert (c["ci"][0] > 0 or c["ci"][1] < 0) == (c["verdict"] in ("better", "worse"))
    assert "| α | 0.01 family-wise over 2 treatment(s) |" in (sd / "verdict.md").read_text()

    res = ablate_in(project, "verdict", str(sd), "--alpha", "2")
    assert res.returncode == 2 and "`alpha`" in res.stderr


def test_sequential_group_runs_in_looks(project: Path) -> None:
    add_pure_task(project)  # the looks are under test, not training: the pure-Python task (no torch)
    res = ablate_in(project, "-m", "variable=lr", "task=pure", "sequential=group", "looks=[3,6]", "seeds=6",
                    "variable.values=[0.2]", *FAST)
    assert res.returncode == 0, res.stderr
    sd = _sweep(project)
    v = json.loads((sd / "verdict.json").read_text())
    (c,) = v["comparisons"]
    seq = c["sequential"]
    assert seq["looks"] == [3, 6] and seq["look"] in (1, 2)
    ran = sorted(int(p.parent.name.split("=")[1]) for p in (sd / "trials" / "lr=0.2").glob("seed=*/result.json"))
    assert ran == list(range(seq["n"]))  # a treatment that stopped at look 1 never ran seeds 3-5
    assert v["multiplicity"] == "group sequential"
    md = (sd / "verdict.md").read_text()
    assert "| sequential | group: looks at N = 3, 6 seeds per arm" in md


def test_the_command_the_bottom_line_names_runs(project: Path, tmp_path: Path) -> None:
    """An indicative verdict names `ablate extend DIR seeds=20`, and where no sweep dir can be extended `ablate -m
    variable=lr seeds=20`: that command, run as written (plus the
    overrides of the first run and dry_run=true), plans the ablation with 20 seeds per arm."""
    import re

    from ablate.judge.report import render_markdown
    from ablate.judge.verdict import write_verdict
    from ablate.record.sweepdir import SweepDir
    from tests.helpers import make_sweep

    c = [0.712, 0.695, 0.731, 0.704, 0.719]
    t = [0.728, 0.741, 0.716, 0.739, 0.733]  # Welch p = 0.0387 at 5 seeds per arm: better, indicative
    root = make_sweep(tmp_path / "sw", {"control": c, "lr=0.2": t})
    write_verdict(SweepDir.open(root), {"plots": False})
    md = (root / "verdict.md").read_text()
    assert f"Next: `ablate extend {root} seeds=20`" in md  # this sweep dir, extended (tests/integration/test_extend.py)
    v = json.loads((root / "verdict.json").read_text())
    v.pop("extend_dir")  # where no sweep dir can be extended (`ablate audit`): the ablation again, with 20 seeds
    (cmd,) = re.findall(r"Next: `ablate (-m variable=lr seeds=\d+)`", render_markdown(v))
    args = cmd.split()
    assert args == ["-m", "variable=lr", "seeds=20"]
    res = ablate_in(project, *args, "variable.values=[0.2]", "dry_run=true", *FAST)
    assert res.returncode == 0, res.stderr
    assert "20 seeds" in res.stdout or "seeds=20" in res.stdout or "20 per arm" in res.stdout, res.stdout[-2000:]
