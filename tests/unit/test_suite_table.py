"""Suites (planning, families, per-arm confounds) and the ablation table (numbers, bold, markers, LaTeX, CSV),
on pure inputs and synthetic sweep dirs; every number is checked against scipy or statsmodels."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ablate.errors import ConfigError
from ablate.judge.table import build_table, latex, tex_escape, to_csv
from ablate.plan.arms import Variable, make_plan
from ablate.plan.suite import families, merge_plans, split_suite
from ablate.stats.multiplicity import stage_levels
from tests.helpers import make_sweep

CFG = {"task": {"fn": "m:f", "metric": "acc", "a": {"lr": 0.1}, "b": {"lr": 0.1}, "wd": 0.0, "hidden": 64,
                "width": "${task.hidden}"}}


@pytest.mark.parametrize("overrides, names, rest", [
    (["variable=lr,wd", "seeds=3"], ["lr", "wd"], ["seeds=3"]),
    (["task.x=1", "variable=choice(a,b,c)"], ["a", "b", "c"], ["task.x=1"]),
    (["variable=lr", "seeds=3"], None, ["variable=lr", "seeds=3"]),
    (["seeds=3"], None, ["seeds=3"]),
])
def test_split_suite(overrides: list[str], names: list[str] | None, rest: list[str]) -> None:
    assert split_suite(overrides) == (names, rest)


@pytest.mark.parametrize("overrides, message", [
    (["variable=lr,lr"], "names lr twice"),
    (["variable=range(1,3)"], "is not a list of variable names"),
    (["variable=lr,wd", "variable=a,b"], "is given twice"),
])
def test_split_suite_refuses(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        split_suite(overrides)


def _plans(*variables: Variable, seeds: int = 5) -> list:
    return [make_plan(CFG, v, list(range(seeds))) for v in variables]


def test_merge_shares_one_control_and_counts_trials() -> None:
    vs = [Variable("lr", "task.a.lr", (0.2, 0.3)), Variable("wd", "task.wd", (0.1,)),
          Variable("hidden", "task.hidden", (32,))]
    suite = merge_plans(_plans(*vs, seeds=10))
    assert [a.name for a in suite.arms] == ["control", "lr=0.2", "lr=0.3", "wd=0.1", "hidden=32"]
    assert [a.variable for a in suite.arms] == [None, "lr", "lr", "wd", "hidden"]
    # 4 treatments x 10 seeds + 10 control trials = 50, where one ablation per variable runs 80 (3 controls)
    assert len(suite.trials()) == 50
    assert suite.control.value == {"task.a.lr": 0.1, "task.wd": 0.0, "task.hidden": 64}
    # each treatment is proved to differ in its own key (and what derives from it) only
    assert suite.arms[4].changes == {"task.hidden": (64, 32), "task.width": (64, 32)}
    assert suite.arms[4].derived == ["task.width"]
    assert list(suite.arms[3].changes) == ["task.wd"]


def test_merge_renames_clashing_arm_names_and_refuses_duplicate_treatments() -> None:
    suite = merge_plans(_plans(Variable("lr_a", "task.a.lr", (0.2,)), Variable("lr_b", "task.b.lr", (0.2,))))
    assert [a.name for a in suite.arms] == ["control", "lr=0.2", "lr_b-lr=0.2"]
    with pytest.raises(ConfigError, match="the same treatment twice"):
        merge_plans(_plans(Variable("x", "task.a.lr", (0.2,)), Variable("y", "task.a.lr", (0.2, 0.5))))


def _suite_sweep(root: Path, values: dict[str, list], variable_of: dict[str, str], family: str = "suite") -> Path:
    sd = make_sweep(root, values, options={"family": family})
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    by_var: dict[str, list[str]] = {}
    for a in plan["arms"][1:]:
        a["variable"] = variable_of[a["name"]]
        by_var.setdefault(a["variable"], []).append(a["name"])
    plan["suite"] = {"variables": [{"name": n, "key": f"task.{n}", "values": [], "is_group": False, "arms": arms}
                                   for n, arms in by_var.items()]}
    (sd / "ablation.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    return sd


VALUES = {"control": [0.80, 0.82, 0.81, 0.79, 0.80],
          "lr=0.2": [0.84, 0.85, 0.83, 0.84, 0.86], "lr=0.3": [0.81, 0.80, 0.83, 0.80, 0.82],
          "wd=0.1": [0.78, 0.80, 0.79, 0.77, 0.79], "wd=0.2": [0.79, 0.83, 0.80, 0.80, 0.80]}
OF = {"lr=0.2": "lr", "lr=0.3": "lr", "wd=0.1": "wd", "wd=0.2": "wd"}


@pytest.mark.parametrize("family", ["suite", "variable"])
def test_suite_multiplicity_family(tmp_path: Path, family: str) -> None:
    from ablate.judge.verdict import write_verdict
    from ablate.record.sweepdir import SweepDir

    sd = _suite_sweep(tmp_path / "sd", VALUES, OF, family)
    v = write_verdict(SweepDir.open(sd), {"plots": False})
    # 5 seeds per arm: pairing=auto runs Welch's test (it pairs from N0 = 36 seeds per arm at α/4, 27 at α/2)
    raw = {c["arm"]: stats.ttest_ind(VALUES[c["arm"]], VALUES["control"], equal_var=False).pvalue
           for c in v["comparisons"]}
    assert {c["arm"]: c["pvalue"] for c in v["comparisons"]} == pytest.approx(raw, rel=1e-9)
    groups = [list(raw)] if family == "suite" else [["lr=0.2", "lr=0.3"], ["wd=0.1", "wd=0.2"]]
    for g in groups:
        expect = multipletests([raw[a] for a in g], method="holm")[1]
        got = [next(c["pvalue_adjusted"] for c in v["comparisons"] if c["arm"] == a) for a in g]
        assert got == pytest.approx(list(expect), rel=1e-9)
        # each CI is at the level its Holm step decided it at within the family (issue 14), so it excludes 0
        # exactly when the verdict is better or worse
        levels = stage_levels([raw[a] for a in g], "holm", 0.05)
        for a, lv in zip(g, levels, strict=True):
            c = next(c for c in v["comparisons"] if c["arm"] == a)
            assert c["ci_level"] == pytest.approx(1 - lv)
            assert (c["ci"][0] > 0 or c["ci"][1] < 0) == (c["verdict"] in ("better", "worse"))
    assert v["suite"]["family"] == family
    assert f"(family={family})" in (sd / "verdict.md").read_text()
    assert families(yaml.safe_load((sd / "ablation.yaml").read_text()), family) == groups


def test_suite_per_arm_confound(tmp_path: Path) -> None:
    from ablate.judge.verdict import write_verdict
    from ablate.record.sweepdir import SweepDir

    sd = _suite_sweep(tmp_path / "sd", {k: VALUES[k] for k in ("control", "lr=0.2", "wd=0.1")}, OF)
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    plan["arms"][0]["resolved"] = {"task": {"lr": 0.05, "wd": 0.0}}
    plan["arms"][1]["changes"] = {"task.lr": [0.05, 0.2]}
    plan["arms"][2]["changes"] = {"task.wd": [0.0, 0.1]}
    (sd / "ablation.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    for arm, cfg in (("control", {"lr": 0.05, "wd": 0.0}), ("lr=0.2", {"lr": 0.2, "wd": 0.0}),
                     ("wd=0.1", {"lr": 0.05, "wd": 0.1})):
        for s in range(5):
            m = sd / "trials" / arm / f"seed={s}" / "manifest.json"
            rec = json.loads(m.read_text())
            rec["config"] = {"seed": s, "task": dict(cfg)}
            if arm == "wd=0.1" and s == 3:
                rec["config"]["task"]["lr"] = 0.2  # this trial also ran lr's treatment value
            m.write_text(json.dumps(rec))
    v = write_verdict(SweepDir.open(sd), {"plots": False})
    assert v["invalid"] is True
    (f,) = [f for f in v["confounds"]["findings"] if f["field"] == "task.lr"]
    assert "wd=0.1/seed=3" in f["message"] and "ablates wd only" in f["message"]


def _verdict(goal: str, verdicts: list[str], diffs: list[float]) -> dict:
    rng = np.random.default_rng(0)
    arms = [{"arm": "control", "value": 0.1, "n": 5, "mean": 1.0, "ci": [0.9, 1.1]}]
    comps = []
    for i, (word, d) in enumerate(zip(verdicts, diffs, strict=True)):
        raw = d if goal == "maximize" else -d
        arms.append({"arm": f"a_{i}", "value": i, "n": 5, "mean": 1.0 + raw, "ci": [0.9 + raw, 1.1 + raw]})
        comps.append({"arm": f"a_{i}", "verdict": word, "diff": d, "ci": [d - 0.05, d + 0.05], "ci_level": 0.975,
                      "paired": True, "diff_raw": raw})
    rows = [{"arm": a["arm"], "seed": s, "status": "ok", "acc": float(rng.normal()), "loss%": float(rng.normal())}
            for a in arms for s in range(5)]
    return {"metric": "acc", "goal": goal, "arms": arms, "comparisons": comps, "seeds": list(range(5)),
            "variable": {"key": "task.my_lr"}}, rows


@pytest.mark.parametrize("goal", ["maximize", "minimize"])
def test_table_numbers_bold_and_markers(goal: str) -> None:
    v, rows = _verdict(goal, ["better", "inconclusive"], [0.2, 0.3])
    t = build_table(v, rows, ["acc", "loss%"])
    assert [r["arm"] for r in t["rows"]] == ["control", "a_0", "a_1"]
    sign = 1 if goal == "maximize" else -1
    # raw Δ = treatment − control, the CI turned back from the verdict's sign-normalised one
    assert t["rows"][1]["cells"]["acc"]["delta"] == pytest.approx(sign * 0.2)
    assert t["rows"][1]["cells"]["acc"]["delta_ci"] == pytest.approx(sorted([sign * 0.15, sign * 0.25]))
    # the best mean is a_1, inconclusive: nothing is bold
    assert not any(r["bold"] for r in t["rows"])
    assert [r["marker"] for r in t["rows"]] == ["", "↑", "○"]
    # descriptive column: scipy's paired t interval at the comparison's level
    by = {(r["arm"], r["seed"]): r["loss%"] for r in rows}
    ci = stats.ttest_rel([by[("a_0", s)] for s in range(5)], [by[("control", s)] for s in range(5)]
                         ).confidence_interval(0.975)
    assert t["rows"][1]["cells"]["loss%"]["delta_ci"] == pytest.approx([ci.low, ci.high], rel=1e-12)
    tex = latex(t, v)
    assert r"loss\%" in tex and r"task.my\_lr" in tex and r"\toprule" in tex and r"$\circ$" in tex
    assert r"\textbf" not in tex
    back = list(csv.DictReader(io.StringIO(to_csv(t))))
    assert len(back) == 6 and float(back[2]["delta"]) == t["rows"][1]["cells"]["acc"]["delta"]


def test_table_bolds_the_best_arm_when_better() -> None:
    v, rows = _verdict("maximize", ["better", "inconclusive"], [0.3, 0.1])
    t = build_table(v, rows)
    assert [r["bold"] for r in t["rows"]] == [False, True, False]
    assert r"\textbf{a\_0}" in latex(t, v)


@pytest.mark.parametrize("text, tex", [("a_b", r"a\_b"), ("5%", r"5\%"), ("x&y", r"x\&y"), ("{#}", r"\{\#\}"),
                                       ("~^", r"\textasciitilde{}\textasciicircum{}"), ("$", r"\$")])
def test_tex_escape(text: str, tex: str) -> None:
    assert tex_escape(text) == tex


def test_tracker_tags_name_the_arm_variable(tmp_path: Path) -> None:
    from ablate.trackers.base import read_ablation

    sd = _suite_sweep(tmp_path / "sd", {k: VALUES[k] for k in ("control", "lr=0.2", "wd=0.1")}, OF)
    rec = read_ablation(sd)
    tags = {(t.arm, t.seed): t.tags for t in rec.trials}
    assert tags[("wd=0.1", 0)]["ablate.arm_variable"] == "wd" and "ablate.arm_variable" not in tags[("control", 0)]


def test_suite_with_a_config_group_variable() -> None:
    # the second variable swaps a config group option; compose() gives the config with that option chosen
    adam = {"task": {**CFG["task"], "a": {"lr": 0.001, "beta": 0.9}}}

    def compose(override: str) -> dict:
        assert override == "task/a=adam"
        return adam

    plans = [make_plan(CFG, Variable("wd", "task.wd", (0.1,)), [0, 1, 2]),
             make_plan(CFG, Variable("opt", "task/a", ("adam",), is_group=True), [0, 1, 2], compose=compose,
                       choices={"task/a": "sgd"})]
    suite = merge_plans(plans)
    assert [(a.name, a.variable) for a in suite.arms] == [("control", None), ("wd=0.1", "wd"), ("a=adam", "opt")]
    assert suite.arms[2].changes == {"task.a.beta": (None, 0.9), "task.a.lr": (0.1, 0.001)}
    assert suite.control.value == {"task.wd": 0.0, "task.a": "sgd"}


@pytest.mark.parametrize("key, value, message", [
    ("family", "both", "`family`: must be one of suite, variable"),
    ("metrics", 3, "`metrics`: must be a list of metric names"),
    ("metrics", ["acc", ""], "`metrics`: must be a list of metric names"),
])
def test_suite_and_table_options_refused(key: str, value: object, message: str) -> None:
    from ablate.orchestrate.options import parse_options

    with pytest.raises(ConfigError, match=message):
        parse_options({"task": {"metric": "acc"}, "launcher": {"name": "inline"}, "seeds": 3, key: value})


def test_metrics_option_puts_the_primary_first_and_missing_metrics_are_named() -> None:
    from ablate.judge.table import markdown
    from ablate.orchestrate.options import parse_options

    opts = parse_options({"task": {"metric": "acc"}, "launcher": {"name": "inline"}, "seeds": 3,
                          "metrics": ["loss", "acc", "loss"]})
    assert opts.metrics == ["acc", "loss"]
    v, rows = _verdict("maximize", ["better"], [0.2])
    t = build_table(v, rows, ["acc", "val_los"])
    assert t["missing_metrics"] == ["val_los"]
    assert any("No completed trial returned val_los" in line for line in markdown(t, v))
