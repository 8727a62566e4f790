"""verdict.md's bottom line and the `ablate verdict` options that can be reset (issue 14 items 2 and 7)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablate.cli.commands import dispatch
from ablate.errors import ConfigError
from ablate.judge.options import parse_margin
from ablate.judge.verdict import VERDICT_OPTIONS, write_verdict
from ablate.record.sweepdir import SweepDir
from tests.helpers import make_sweep

C = [0.712, 0.695, 0.731, 0.704, 0.719]
T = [0.728, 0.741, 0.716, 0.739, 0.733]  # Welch vs C: p = 0.0386886 (spec C1)
STRONG = [v + 0.05 for v in T]
T2 = [0.709, 0.722, 0.700, 0.731, 0.713]
# 8 seeds per arm (the fewest at which a continuous metric's verdict can be firm): C and T with 3 more seeds each,
# Welch p = 0.0382581 (scipy), about spec C1's 0.0387 at 5
C8 = [*C, 0.710, 0.724, 0.700]
T8 = [*T, 0.713, 0.709, 0.727]
STRONG8 = [v + 0.05 for v in T8]


def _verdict(root: Path) -> dict:
    return json.loads((root / "verdict.json").read_text())


@pytest.mark.parametrize("word", ["none", "null", "0", "None", "off"])
def test_margin_can_be_cleared(tmp_path: Path, word: str, capsys: pytest.CaptureFixture) -> None:
    """`--margin 2%` then `--margin none`: the margin is gone from the verdict and from what is remembered. (No
    plots: each call would wait for the previous call's plot drawer, which holds the sweep dir.)"""
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T})
    assert dispatch("verdict", [str(root), "--no-plots", "--margin", "2%"]) == 0
    assert _verdict(root)["options"]["margin"] == "2%"
    assert dispatch("verdict", [str(root), "--no-plots", "--margin", word]) == 0
    v = _verdict(root)
    assert v["options"]["margin"] is None and v["comparisons"][0]["margin"] is None
    assert dispatch("verdict", [str(root), "--no-plots"]) == 0  # a later plain call keeps it cleared
    assert _verdict(root)["options"]["margin"] is None


@pytest.mark.parametrize("value", [None, 0, 0.0, "0%", False])
def test_parse_margin_clears(value: object) -> None:
    assert parse_margin(value) is None


def test_parse_margin_still_refuses_nonsense() -> None:
    with pytest.raises(ConfigError, match=r"`margin`.*or none"):
        parse_margin("much")
    with pytest.raises(ConfigError, match="`margin`"):
        parse_margin(-1)


def test_remembered_alpha_is_announced_and_reset(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--alpha 0.1` then `--margin 2%`: alpha stays 0.1, and now says so (stderr and verdict.md); `--reset`
    (the command the notice names) brings the ablation's own options back."""
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T})
    # --no-plots: each call would wait for the previous call's plot drawer (plots are no verdict option)
    assert dispatch("verdict", [str(root), "--no-plots", "--alpha", "0.1"]) == 0
    capsys.readouterr()
    assert dispatch("verdict", [str(root), "--no-plots", "--margin", "2%"]) == 0
    err = capsys.readouterr().err
    assert "alpha=0.1" in err and f"ablate verdict {root} --reset" in err
    v = _verdict(root)
    assert v["alpha"] == 0.1
    nd = {o["option"]: o for o in v["non_default_options"]}
    assert nd["alpha"]["source"] == "remembered" and nd["margin"]["source"] == "given now"
    md = (root / "verdict.md").read_text()
    assert "| changed from defaults | alpha = 0.1 (default 0.05; remembered" in md
    assert "(alpha 0.05 → 0.1, margin none → 2%); read it as exploratory" in md  # the post-hoc notice, once
    assert md.count("alpha = 0.1") == 1 and md.count("Post hoc") == 1
    # the hint's command, run as printed
    assert dispatch("verdict", [str(root), "--no-plots", "--reset"]) == 0
    v = _verdict(root)
    assert v["alpha"] == 0.05 and v["options"]["margin"] is None and v["non_default_options"] == []
    assert not (root / VERDICT_OPTIONS).exists()
    assert "| changed from defaults | nothing: every verdict option is at its default |" in \
        (root / "verdict.md").read_text()
    assert "remembered" not in capsys.readouterr().err


def test_options_from_the_ablation_config_are_stated(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T}, options={"multiplicity": "bh", "alpha": 0.01})
    v = write_verdict(SweepDir.open(root), {"plots": False})  # plots are no verdict option: not listed either way
    assert {(o["option"], o["source"]) for o in v["non_default_options"]} == {("alpha", "ablation config"),
                                                                             ("multiplicity", "ablation config")}


def test_two_treatments_decision_and_interval_agree(tmp_path: Path) -> None:
    """Issue 14 item 2: Holm decides `better` at its second step while the old table showed a 97.5% CI
    touching 0. Now the line, the table and the bottom line show the 95% CI it decided at, which excludes 0."""
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.2": STRONG, "lr=0.1": T}, options={"pairing": "unpaired"})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    c = {x["arm"]: x for x in v["comparisons"]}["lr=0.1"]
    assert c["verdict"] == "better" and c["ci_level"] == pytest.approx(0.95)
    ref = stats.ttest_ind(T, C, equal_var=False).confidence_interval(0.95)
    assert c["ci"] == pytest.approx([ref.low, ref.high], rel=1e-9) and c["ci"][0] > 0
    md = (root / "verdict.md").read_text()
    assert "(indicative 95% CI +0.0013 to +0.0371): **better (indicative)**" in md  # the bottom line
    assert "| [+0.0013, +0.0371] (95%, indicative) |" in md  # the comparisons table, same level
    # the strong arm, rejected at Holm's first step (α/2); indicative too at 5 seeds per arm (below 8 no verdict on a
    # continuous metric is firm)
    assert md.count("(97.5%, indicative) |") == 1
    assert "holm_ci" not in md


def test_bottom_line_comes_first_and_says_what_to_do(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.2": STRONG, "lr=0.1": T2})
    write_verdict(SweepDir.open(root), {"plots": False})
    md = (root / "verdict.md").read_text()
    assert md.index("## Bottom line") < md.index("## For the paper") < md.index("## Setup")
    bottom = md[md.index("## Bottom line"):md.index("## For the paper")]
    assert "- **lr=0.2** (task.optim.lr 0.05 → 0.2) changed val_acc by +0.0692 (" in bottom
    assert "- **lr=0.1** (task.optim.lr 0.05 → 0.1) changed val_acc by " in bottom
    assert "): **inconclusive**, the data cannot tell yet." in bottom
    # lr=0.2 is indicative at 5 seeds per arm (below 8 no verdict on a continuous metric is firm): Next extends to
    # the 20 seeds per arm at which it is firm if its p_adj stays below α (lr=0.1 alone needed more than the cap)
    assert f"Next: `ablate extend {root} seeds=20` (20 seeds per arm: runs only the 15 new ones" in bottom
    seeds = md[md.index("## Seed recommendation"):md.index("## Flags")]
    assert "(> cap: the advice's cap, the most seeds per arm it plans for, is 50)" in seeds
    # Welch's 97.5% interval (5 seeds per arm: pairing=auto does not pair), scipy's ttest_ind(...).confidence_interval
    ref = stats.ttest_ind(STRONG, C, equal_var=False).confidence_interval(0.975)
    assert (round(ref.low, 4), round(ref.high, 4)) == (0.0478, 0.0906)
    assert ("changed val_acc by +0.0692 (indicative 97.5% CI +0.0478 to +0.0906): **better (indicative)**, not yet "
            "firm (a lead to confirm).") in bottom
    assert "## Terms" in md


def test_bottom_line_run_k_more_seeds(tmp_path: Path) -> None:
    """An undecided treatment gets one number of seeds to add, planned on the SD's 90% upper confidence limit
    (statsmodels' N for the observed |Δ| at that SD), the power it has at that planning SD, and the command."""
    import math

    from statsmodels.stats.power import TTestIndPower

    root = make_sweep(tmp_path / "sw", {"control": C[:4], "lr=0.1": T[:4]}, options={"pairing": "unpaired"})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    c = v["comparisons"][0]
    adv = c["seed_advice"]
    assert c["verdict"] == "inconclusive"
    sd = math.sqrt((np.var(T[:4], ddof=1) + np.var(C[:4], ddof=1)) / 2)
    up = sd * math.sqrt(6 / stats.chi2.ppf(0.1, 6))
    need = math.ceil(TTestIndPower().solve_power(effect_size=abs(c["diff"]) / up, alpha=0.05, power=0.8))
    assert adv["sd_upper"] == pytest.approx(up, rel=1e-9) and adv["n_needed"] == need
    power = TTestIndPower().power(abs(c["diff"]) / up, need, 0.05)  # at the planning SD (issue 37, item 3)
    assert adv["power"] == pytest.approx(power, abs=1e-9)
    md = (root / "verdict.md").read_text()
    assert "): **inconclusive**, the data cannot tell yet." in md
    assert (f"Next: `ablate extend {root} seeds={need}` ({need} seeds per arm: runs only the {need - 4} new ones, in "
            "this sweep dir, and a two-stage combination test keeps α;") in md
    seeds = md[md.index("## Seed recommendation"):md.index("## Ablation table")]
    assert f"needs {need} seeds per arm (+{need - 4};" in seeds
    assert f"at the planning SD it has power {power:.2f}" in seeds


def test_bottom_line_says_indicative_below_20_seeds(tmp_path: Path) -> None:
    """Spec C1's dataset U (Welch p = 0.0387 at 5 seeds per arm) is `better`, and indicative: below 8 seeds per arm no
    verdict on a continuous metric is firm, whatever p (stop 48), so even a strong effect (p x 10 < 0.05) is; the
    reason is said once. With 3 more seeds per arm (8, p = 0.0383) p x 10 does not clear 0.05 and 8 < 20: the bottom
    line says indicative, why, and the seeds that would make it firm; verdict.json carries firm = false. A strong
    effect at 8 seeds is firm."""
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    c = v["comparisons"][0]
    assert stats.ttest_ind(T, C, equal_var=False).pvalue == pytest.approx(0.0386886, rel=1e-6)
    assert c["verdict"] == "better" and c["firm"] is False and c["firm_from"] == 20
    md = (root / "verdict.md").read_text()
    bottom = md[md.index("## Bottom line"):md.index("## For the paper")]
    assert "): **better (indicative)**, not yet firm (a lead to confirm)." in bottom
    assert f"Next: `ablate extend {root} seeds=20` (20 seeds per arm: runs only the 15 new ones, in this sweep dir" \
        in bottom
    seeds = md[md.index("## Seed recommendation"):md.index("## Ablation table")]
    why = "Not yet firm: below 8 seeds per arm (here 5) a verdict on a continuous metric is never firm, whatever its p"
    assert why in seeds and md.count(why) == 1
    assert "at 20 seeds per arm it is firm if its p is then below the level" in seeds
    assert "is not below α" not in md and "indicative_verdict" not in md
    strong5 = make_sweep(tmp_path / "sw5", {"control": C, "lr=0.1": STRONG})
    c5 = write_verdict(SweepDir.open(strong5), {"plots": False})["comparisons"][0]
    assert stats.ttest_ind(STRONG, C, equal_var=False).pvalue * 10 < 0.05
    assert c5["verdict"] == "better" and c5["firm"] is False and c5["firm_from"] == 20
    root = make_sweep(tmp_path / "sw8", {"control": C8, "lr=0.1": T8})
    c = write_verdict(SweepDir.open(root), {"plots": False})["comparisons"][0]
    p8 = stats.ttest_ind(T8, C8, equal_var=False).pvalue
    assert p8 == pytest.approx(0.0382581, rel=1e-5) and c["pvalue"] == pytest.approx(p8, rel=1e-9)
    assert c["verdict"] == "better" and c["firm"] is False and c["firm_from"] == 20
    md = (root / "verdict.md").read_text()
    bottom = md[md.index("## Bottom line"):md.index("## For the paper")]
    assert "): **better (indicative)**, not yet firm (a lead to confirm)." in bottom
    seeds = md[md.index("## Seed recommendation"):md.index("## Ablation table")]
    assert ("Not yet firm: with 8 seeds per arm no test of the mean holds α for every metric shape" in seeds
            and "At 20 seeds per arm it is firm if its p then stays below α (more seeds can also show no effect)."
            in seeds)
    # what is multiplied by what, and why, once (one treatment: no adjustment, so p); Welch's p from scipy
    why = (f"p × 10 = {p8 * 10:.2g} is not below α = 0.05 (below 20 seeds per arm a verdict is firm only when p is 10 "
           "times under its level)")
    assert why in seeds and md.count(why) == 1
    assert "p × 10 does not clear" not in md
    assert "The two numbers answer two questions: 20 seeds per arm is where ablate's rule calls this verdict firm" \
        in seeds
    assert "indicative_verdict" not in md  # the flag's words are the Seed recommendation's, said once there
    strong = make_sweep(tmp_path / "sw2", {"control": C8, "lr=0.1": STRONG8})
    c2 = write_verdict(SweepDir.open(strong), {"plots": False})["comparisons"][0]
    assert stats.ttest_ind(STRONG8, C8, equal_var=False).pvalue * 10 < 0.05
    assert c2["verdict"] == "better" and c2["firm"] is True and c2["firm_from"] is None
    assert "): **better**, firm." in (strong / "verdict.md").read_text()


def test_pairing_row_shows_the_correlation(tmp_path: Path) -> None:
    """The Setup says which analysis was used and why in plain words, and the arms' correlation ρ̂ (numpy's
    Pearson r) as information for planning the next ablation (never this one's analysis)."""
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    md = (root / "verdict.md").read_text()
    rho = float(np.corrcoef(T, C)[0, 1])
    assert round(rho, 2) == -0.91
    assert ("| pairing | auto: unpaired (Welch): pairing=auto pairs by seed only when the design shares randomness "
            "across arms (no fn task: ablate passes it the seed but cannot see whether it seeds initialisation and "
            "data order with it); declare pairing=paired if the arms' seeds share initialisation and data order; "
            f"correlation of the arms across seeds ρ̂: lr=0.1 {rho:.2f} |") in md
    (c,) = v["comparisons"]
    assert c["test"] == "Welch t" and not c["paired"]
    assert c["pairing"]["mode"] == "auto" and c["pairing"]["n_design"] == 5 and c["pairing"]["pair_from"] is None
    assert c["pairing"]["rho"] == pytest.approx(rho, rel=1e-12)
    assert c["pairing"]["reason"].startswith("unpaired (Welch): pairing=auto pairs by seed only when the design")

    # a fn task under determinism=seeded shares randomness by design: auto pairs at N = 5
    import yaml

    root = make_sweep(tmp_path / "fn", {"control": C, "lr=0.1": T})
    plan = yaml.safe_load((root / "ablation.yaml").read_text())
    plan["task"] = {"fn": "examples.digits.task:train"}
    plan["options"]["determinism"] = "seeded"
    (root / "ablation.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    c = write_verdict(SweepDir.open(root), {"plots": False})["comparisons"][0]
    assert c["paired"] and c["test"] == "paired t"
    assert c["pairing"]["reason"].startswith("paired by seed: pairing=auto: the design shares randomness across arms "
                                             "(a fn task under determinism=seeded")

    # declared paired: the paired t at N = 5, and the same ρ̂
    root = make_sweep(tmp_path / "declared", {"control": C, "lr=0.1": T}, options={"pairing": "paired"})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    assert (f"| pairing | paired: paired by seed: declared (pairing=paired); correlation of the arms across seeds "
            f"ρ̂: lr=0.1 {rho:.2f} |") in (root / "verdict.md").read_text()
    assert v["comparisons"][0]["test"] == "paired t"


def test_pairing_note_for_a_correlated_unpaired_design(tmp_path: Path) -> None:
    """ρ̂ >= 0.2 on a design auto left unpaired: the note says how to plan the next ablation, and that switching
    this one after seeing the data would raise its false-positive rate."""
    t = [c + 0.004 + 0.002 * (-1) ** i for i, c in enumerate(C)]
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": t})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    rho = float(np.corrcoef(t, C)[0, 1])
    assert rho > 0.9 and not v["comparisons"][0]["paired"]
    md = (root / "verdict.md").read_text()
    assert (f"ρ̂: lr=0.1 {rho:.2f} (information only: a declared pairing=paired is for the next ablation; switching "
            "this one now, after seeing the data, would raise its false-positive rate) |") in md


def test_equal_seed_lists_do_not_pair_without_shared_randomness(tmp_path: Path) -> None:
    """20 seeds per arm, the same seed list, correlated arms, no fn task: pairing=auto runs Welch (scipy's
    ttest_ind); the same plan with a fn task under determinism=seeded runs the paired t (ttest_rel), at any N."""
    import yaml

    rng = np.random.default_rng(5)
    shared = rng.normal(0, 0.01, 20)
    c20 = list(0.7 + shared + rng.normal(0, 0.005, 20))
    t20 = list(0.705 + shared + rng.normal(0, 0.005, 20))
    seen = 0
    for n in (5, 19, 20):
        for fn in (False, True):
            root = make_sweep(tmp_path / f"n{n}{fn}", {"control": c20[:n], "lr=0.1": t20[:n]})
            if fn:
                plan = yaml.safe_load((root / "ablation.yaml").read_text())
                plan["task"] = {"fn": "examples.digits.task:train"}
                (root / "ablation.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
            (c,) = write_verdict(SweepDir.open(root), {"plots": False})["comparisons"]
            ref = stats.ttest_rel(t20[:n], c20[:n]) if fn else stats.ttest_ind(t20[:n], c20[:n], equal_var=False)
            assert c["paired"] is fn and c["pvalue"] == pytest.approx(ref.pvalue, rel=1e-9)
            assert c["pairing"]["n_design"] == n
            seen += 1
    assert seen == 6


def test_verdict_defaults_are_stated_once_and_match_the_shipped_config() -> None:
    """The verdict's defaults live in ablate.judge.options.DEFAULTS; the plan-time options and the shipped
    ablate_base.yaml (what users read and override) say the same."""
    from dataclasses import asdict

    import yaml

    from ablate.judge.options import DEFAULTS
    from ablate.orchestrate.options import Options

    base = yaml.safe_load((Path(__file__).parents[2] / "ablate" / "conf" / "ablate_base.yaml").read_text())
    shipped = {k: base[k] for k in ("alpha", "margin", "pairing", "multiplicity", "sequential", "looks", "family",
                                    "effect", "futility")}
    # futility is null in the shipped file so that any `futility=` a user gives is seen (and refused without
    # effect=), the default's own value included; null means the default γ
    assert shipped["futility"] is None
    shipped["futility"] = DEFAULTS.futility
    assert shipped == {k: v for k, v in asdict(DEFAULTS).items() if k not in ("against", "curve")}
    from ablate.judge.curve_options import parse_curve

    assert DEFAULTS.curve is None and parse_curve(base["curve"], "val_acc") is None  # curves: off unless asked
    plan_time = asdict(Options(seeds=[0, 1, 2], metric="val_acc"))
    assert {k: plan_time[k] for k in shipped} == shipped


def test_paired_indicative_wording_counts_seeds_per_arm(tmp_path: Path) -> None:
    """A paired indicative verdict names its N as seeds per arm, as the seeds it asks for are ("with 5 pairs ...
    20 seeds per arm" read as two units), in the bottom line and the flag; the paired t p from scipy. At 5 pairs the
    reason is the 8-seed floor (below 8 seeds per arm no verdict on a continuous metric is firm)."""
    t = [0.722, 0.699, 0.743, 0.706, 0.727]  # C + 0.010, 0.004, 0.012, 0.002, 0.008: paired t p = 0.0178
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": t}, options={"pairing": "paired"})
    c = write_verdict(SweepDir.open(root), {"plots": False})["comparisons"][0]
    assert c["paired"] is True and c["pvalue"] == pytest.approx(stats.ttest_rel(t, C).pvalue, rel=1e-9)
    assert c["pvalue"] == pytest.approx(0.0178113, rel=1e-5)
    assert c["verdict"] == "better" and c["firm"] is False
    md = (root / "verdict.md").read_text()
    bottom = md[md.index("## Bottom line"):md.index("## For the paper")]
    seeds = md[md.index("## Seed recommendation"):md.index("## Ablation table")]
    assert "Not yet firm: below 8 seeds per arm (here 5, paired) a verdict on a continuous metric is never firm" \
        in seeds
    assert "; at 20 seeds per arm it is firm if its p is then below the level" in seeds
    assert "is never firm" not in md.replace(seeds, "").replace("## Terms", "@@").split("@@")[0]
    assert "pairs" not in bottom and "seeds=20" in bottom


def test_a_recorded_plan_without_effect_holds_the_default_futility() -> None:
    """Every plan records the parsed γ (0.1) whether or not ``effect`` was given: the verdict reads it back without
    a refusal, while the same value given at plan time without ``effect`` is refused (the shipped default is null,
    so the plan-time value is the user's own)."""
    from ablate.errors import ConfigError
    from ablate.judge.options import DEFAULTS, parse_futility, resolve_options

    assert resolve_options({"options": {"futility": 0.1, "effect": None}}).futility == DEFAULTS.futility == 0.1
    assert parse_futility(0.1, None) == 0.1 and parse_futility(None, None, given=True) == 0.1
    with pytest.raises(ConfigError, match="planned effect"):
        parse_futility(0.1, None, given=True)
    with pytest.raises(ConfigError, match="planned effect"):
        parse_futility(0.2, None)
    assert parse_futility(0.3, 0.5, given=True) == 0.3
