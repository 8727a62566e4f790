"""What a reader sees (issue 27, "What a reader sees" and item 7): one word per outcome, the control labelled
once, axis titles and variable-qualified ticks, the LaTeX verdict column named, no outlier flag at 3 seeds, the
robust p never below its floor."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.judge.plots import axis_title, tick_label
from ablate.judge.report import _robust
from ablate.judge.verdict import write_verdict
from ablate.record.sweepdir import SweepDir
from ablate.stats import compare
from tests.helpers import make_sweep

C = [0.712, 0.695, 0.731, 0.704, 0.719]
STRONG = [0.778, 0.791, 0.766, 0.789, 0.783]
# 8 seeds per arm, the fewest at which a continuous metric's better/worse can be firm (stop 48)
C8 = [*C, 0.710, 0.724, 0.700]
STRONG8 = [*STRONG, 0.763, 0.759, 0.777]


def test_control_tick_is_marked_once_and_suite_ticks_name_the_variable() -> None:
    control = {"arm": "control", "label": "0.05 (control)"}
    assert tick_label(control, "control", False) == "0.05 (control)"
    assert tick_label({"arm": "control", "label": "0.05"}, "control", False) == "0.05 (control)"
    assert tick_label({"arm": "lr=0.1", "label": "0.1"}, "control", False) == "0.1"
    assert tick_label({"arm": "lr=0.1", "label": "0.1"}, "control", True) == "lr=0.1"
    assert axis_title({"variable": {"key": "task.optim.lr"}}) == "task.optim.lr"
    suite = {"suite": {"variables": [{"name": "lr", "key": "task.optim.lr"}, {"name": "dropout", "key": "task.p"}]}}
    assert axis_title(suite) == "arm (variable=value), one shared control: task.optim.lr, task.p"


def test_robust_p_is_never_printed_below_its_floor() -> None:
    assert _robust({"robust_test": "Wilcoxon", "robust_pvalue": 0.01, "robust_min_pvalue": 0.0625}) == \
        "0.0625 (floor 0.0625)"
    assert _robust({"robust_test": "Mann-Whitney", "robust_pvalue": 0.148, "robust_min_pvalue": 0.00794}) == \
        "0.148 (floor 0.00794)"
    assert _robust({"robust_test": ""}) == "–"


def test_no_outlier_flag_at_three_seeds() -> None:
    """With 3 (or 4) seeds the median and MAD cannot tell an outlier; from 5 seeds they can."""
    three = compare([0.70, 0.71, 0.95], [0.70, 0.705, 0.71])
    assert not any(f.code == "outliers" for f in three.flags)
    five = compare([0.70, 0.71, 0.705, 0.708, 0.95], [0.70, 0.705, 0.71, 0.702, 0.707])
    assert any(f.code == "outliers" for f in five.flags)


def test_one_word_per_outcome_and_the_latex_header(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C8, "lr=0.2": STRONG8})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    (c,) = v["comparisons"]
    assert c["verdict"] == "better" and c["firm"] is True
    md = (root / "verdict.md").read_text()
    assert "): **better**, firm." in md  # the bottom line
    assert ": better, firm." in md  # the line for the paper
    assert "↑ better" in md  # the ablation table
    assert "reject it" not in md and "adopt" not in md  # the word says it; no advice that could outrun the evidence
    tex = (root / "ablation_table.tex").read_text()
    header = next(line for line in tex.splitlines() if line.startswith("Arm"))
    assert header.rstrip(" \\").endswith("& Verdict")


def test_minimize_delta_has_one_sign_everywhere(tmp_path: Path) -> None:
    """val_loss lower in the treatment by 0.0192 (spec C1's dataset U, arms swapped): Δ = −0.0192 in the bottom
    line, the line for the paper, the comparisons table (t and g too) and the ablation table (treatment − control,
    the metric's own sign, "lower is better" said in the heading), and the verdict is better (indicative at 5 seeds
    per arm, in every place alike)."""
    from scipy import stats

    t = [0.712, 0.695, 0.731, 0.704, 0.719]
    c = [0.728, 0.741, 0.716, 0.739, 0.733]
    root = make_sweep(tmp_path / "sw", {"control": c, "lr=0.1": t}, goal="minimize", metric="val_loss")
    write_verdict(SweepDir.open(root), {"plots": False})
    md = (root / "verdict.md").read_text()
    ref = stats.ttest_ind(t, c, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert (ref.statistic, ref.pvalue) == (pytest.approx(-2.516748, rel=1e-6), pytest.approx(0.0386886, rel=1e-6))
    assert (round(ci.low, 4), round(ci.high, 4)) == (-0.0371, -0.0013)
    assert md.startswith("# Ablation of `task.optim.lr`: val_loss, lower is better\n")
    assert ("changed val_loss by -0.0192 (indicative 95% CI -0.0371 to -0.0013): **better (indicative)**, not yet "
            "firm (a lead to confirm).") in md
    assert ("Δ val_loss = -0.0192 (indicative 95% CI -0.0371 to -0.0013; lower is better), Welch's t-test, "
            "p = 0.0387") in md
    assert ("| lr=0.1 | Welch t | 5/5 | -0.0192 | -2.6 | [-0.0371, -0.0013] (95%, indicative) | -2.52 (7.3) | "
            "0.0387 |") in md
    assert "| Hedges' g = -1.44 |" in md  # the effect size in the same sign as Δ
    assert "| **-0.019 [-0.037, -0.001]** | **↑ better (indicative)** |" in md  # one label in every place
    assert "+0.0192" not in md and "+2.52" not in md and "+1.44" not in md


def test_post_hoc_verdict_is_labelled_and_the_preregistered_one_stays(tmp_path: Path) -> None:
    """The plan froze α = 0.05 before any trial ran; `--alpha 0.1` afterwards is post hoc: the bottom line and
    verdict.json say what changed, and the pre-registered verdict (the plan's own options) stays available;
    `--reset` (the command named) brings the pre-registered analysis back, no longer post hoc."""
    import json

    from scipy import stats

    from ablate.cli.commands import dispatch

    t = [0.720, 0.741, 0.716, 0.739, 0.729]
    p = stats.ttest_ind(t, C, equal_var=False).pvalue
    assert 0.05 < p < 0.1  # inconclusive at the planned α, better at 0.1
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": t})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    assert v["post_hoc"] is None and v["preregistered_verdict"] is None
    assert v["preregistered"]["alpha"] == 0.05 and v["preregistered"]["metric"] == "val_acc"
    assert v["preregistered"]["seeds_per_arm"] == 5
    assert dispatch("verdict", [str(root), "--alpha", "0.1", "--no-plots"]) == 0
    v = json.loads((root / "verdict.json").read_text())
    assert v["post_hoc"] == {"changed": {"alpha": {"planned": 0.05, "used": 0.1}}}
    assert v["comparisons"][0]["verdict"] == "better"
    (pre,) = v["preregistered_verdict"]
    assert pre["verdict"] == "inconclusive" and pre["pvalue"] == v["comparisons"][0]["pvalue"]
    md = (root / "verdict.md").read_text()
    assert ("> **Post hoc**: this verdict changes the analysis the plan froze before any trial ran (alpha 0.05 → "
            "0.1); read it as exploratory. The pre-registered verdict: lr=0.1 inconclusive") in md
    assert md.count("Post hoc") == 1  # said once, at the top
    assert dispatch("verdict", [str(root), "--reset", "--no-plots"]) == 0
    v = json.loads((root / "verdict.json").read_text())
    assert v["post_hoc"] is None and v["comparisons"][0]["verdict"] == "inconclusive"
