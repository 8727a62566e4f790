"""The bottom line's parts without an ablation: the rerun command from a recorded command line (quoting, the seeds
replaced in place, a sequential design's last look, a record that is not one), the command the plan records, and the
words of one treatment (the metric's own sign, a confounded comparison never advised, a margin's size)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from scipy import stats

from ablate.judge.bottom_line import bottom_line, treatment_line
from ablate.judge.report import bottom_line_words
from ablate.judge.rerun import recorded, rerun_command, without_keys
from ablate.judge.verdict import write_verdict
from ablate.plan.overrides import command_record
from ablate.record.sweepdir import SweepDir
from tests.helpers import make_sweep

C = [0.712, 0.695, 0.731, 0.704, 0.719]
T = [0.728, 0.741, 0.716, 0.739, 0.733]  # Welch vs C: p = 0.0386886 (spec C1)


def test_rerun_replaces_the_seeds_in_place_and_keeps_every_other_override() -> None:
    cmd = command_record(["task=toy", "variable=lr", "seeds=[0,1,2]", "task.name='a b'", "dry_run=true",
                          "app.trainer.max_epochs=1"])
    line = rerun_command(cmd, 12)
    assert line == ("ablate -m task=toy variable=lr seeds=12 \"task.name='a b'\" app.trainer.max_epochs=1")
    assert shlex.split(line)[2:] == ["task=toy", "variable=lr", "seeds=12", "task.name='a b'",
                                     "app.trainer.max_epochs=1"]  # the shell gives Hydra the overrides as typed


def test_rerun_adds_seeds_after_the_variable_and_raises_the_last_look() -> None:
    cmd = command_record(["variable=lr,dropout", "sequential=group", "looks=[5,10]", "launcher=inline"])
    assert rerun_command(cmd, 23, looks=[5, 10]) == ("ablate -m variable=lr,dropout seeds=23 sequential=group "
                                                    "launcher=inline 'looks=[5,10,23]'")
    assert rerun_command(cmd, 8, looks=[5, 10]).endswith("'looks=[5,10]'")  # the last look already covers 8


def test_command_record_names_only_a_config_path_other_than_conf(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert command_record(["variable=lr"], config_path="conf")["config_path"] is None
    other = command_record(["variable=lr"], config_path="elsewhere/conf", config_dirs=["extra"], config_name="x")
    assert other["config_path"] == os.path.join(tmp_path, "elsewhere", "conf")
    assert rerun_command(other, 5) == (f"ablate -m --config-path {tmp_path}/elsewhere/conf --config-dir "
                                       f"{tmp_path}/extra --config-name x variable=lr seeds=5")


def test_a_record_that_is_not_one_is_not_rendered() -> None:
    """ablation.yaml is input from others: a command entry edited into another shape is ignored, not run."""
    bad = {"overrides": ["variable=lr", ["; rm -rf ~"]], "config_path": None}
    assert not recorded(bad) and not recorded({"overrides": "variable=lr"}) and not recorded(None)
    assert rerun_command(bad, 20, variables=["lr"]) == "ablate -m variable=lr seeds=20"
    line = rerun_command(command_record(["variable=lr", "x='; rm -rf ~'", "y=$(id)", 'z="`id`"']), 3)
    assert shlex.split(line)[3:] == ["seeds=3", "x='; rm -rf ~'", "y=$(id)", 'z="`id`"']  # text, never run
    scale = command_record(["variable=lr", "scale.key=task.hidden", "scale.values=[32,64]", "seeds=3"])
    assert without_keys(scale, frozenset({"scale.key", "scale.values"}), ["task.hidden=32"])["overrides"] == [
        "variable=lr", "seeds=3", "task.hidden=32"]


@pytest.fixture(scope="module")
def minimized(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """val_loss lower in the treatment (spec C1's dataset U, arms swapped), one treatment, Welch."""
    root = make_sweep(tmp_path_factory.mktemp("bl") / "sw", {"control": T, "lr=0.1": C}, metric="val_loss",
                      goal="minimize")
    return write_verdict(SweepDir.open(root), {"plots": False})


def test_a_treatment_in_the_metrics_own_sign(minimized: dict) -> None:
    (c,) = minimized["comparisons"]
    ci = stats.ttest_ind(C, T, equal_var=False).confidence_interval(0.95)
    t = treatment_line(c, minimized)
    assert (t.delta, t.ci) == (pytest.approx(sum(C) / 5 - sum(T) / 5), (pytest.approx(ci.low), pytest.approx(ci.high)))
    assert t.sentence() == (f"**lr=0.1** (task.optim.lr 0.05 → 0.1) changed val_loss by -0.0192 (indicative 95% CI "
                            f"{ci.low:+.4f} to {ci.high:+.4f}): **better (indicative)**, not yet firm (a lead to "
                            "confirm).")
    assert len(t.sentence(markdown=False).split()) <= 30
    bl = bottom_line(minimized)
    assert bl.direction == "lower is better" and bl.next.seeds == 20
    assert bl.lines(markdown=False)[-1] == bl.next.line(markdown=False) == (
        f"Next: ablate extend {minimized['extend_dir']} seeds=20 (20 seeds per arm: runs only the 15 new ones, in "
        "this sweep dir, and a two-stage combination test keeps α; Seed recommendation says why).")
    without = bottom_line({k: v for k, v in minimized.items() if k != "extend_dir"})  # `ablate audit`: no sweep dir
    assert without.next.line(markdown=False) == (
        "Next: ablate -m variable=lr seeds=20 (20 seeds per arm, a new sweep dir; Seed recommendation says why; this "
        "plan did not record its command line: add the run's other overrides).")


def test_a_tuned_ablation_s_next_line_counts_its_tuning_trials(minimized: dict) -> None:
    """A new run of a tuned ablation tunes every arm again: 20 evaluation seeds per arm over 2 arms, plus 2 arms x 4
    settings x 2 tuning seeds = 16 tuning trials, is 56 trials; `ablate extend` (which refuses a tuned sweep dir)
    is never the Next line."""
    tuned = {**minimized, "tuning": {"arms": [{"arm": "control"}, {"arm": "lr=0.1"}],
                                     "settings": [{"task.optim.lr": x} for x in (0.01, 0.03, 0.1, 0.3)],
                                     "seeds": [5, 6]}}
    assert bottom_line(tuned).next.line(markdown=False) == (
        "Next: ablate -m variable=lr seeds=20 (20 evaluation seeds per arm = 20 x 2 arms + 16 tuning trials = 56 "
        "trials, a new sweep dir that tunes again; Seed recommendation says why; this plan did not record its "
        "command line: add the run's other overrides).")


def test_a_confounded_comparison_is_never_credited_to_the_variable(minimized: dict) -> None:
    """``ablate audit``'s words for a comparison whose runs differ in more than the variable."""
    (c,) = minimized["comparisons"]
    said = bottom_line_words(c, minimized, confounded=True, change="epochs 4 → 5",
                             rerun=lambda n: f"run the minimal ablation ({n} seeds per arm)")
    assert said.startswith("**lr=0.1** (epochs 4 → 5) changed val_loss by -0.0192 (")
    assert ("**better (indicative)**, but the runs differ in more than the variable, so it cannot be credited to it. "
            "Next: run the minimal ablation (20 seeds per arm).") in said
    assert "adopt" not in said and "reject" not in said


def test_next_run_stops_at_the_cap_when_the_advice_is_above_it() -> None:
    """Issue 37: a range answer advises the planning SD's N even above the cap (the spec's example: 24 at the point
    SD, 54 at its 90% upper limit, cap 50); the Next line's seeds stay within the cap, as before the change."""
    from ablate.judge.bottom_line import seeds_next
    from ablate.stats import recommend_seeds

    a = recommend_seeds(5, 0.0121, 8, target=0.01, target_kind="margin")
    assert a is not None and a.is_range and a.n_needed == 54 and a.cap == 50
    c = {"verdict": "inconclusive", "firm": None, "n_treatment": 5, "n_control": 5,
         "seed_advice": {"n": 5, "n_needed": a.n_needed, "cap": a.cap}}
    assert seeds_next(c) == 50
    c["seed_advice"]["cap"] = 100  # a cap above the advice: the advised N itself
    assert seeds_next(c) == 54


def test_an_inconclusive_continuous_verdict_runs_at_least_8_seeds() -> None:
    """Stop 48: below 8 seeds per arm no verdict on a continuous metric is firm, so an inconclusive one whose 80% power
    needs fewer (3 seeds, SD 0.01 with 4 df, δ = 0.04: 5 seeds per arm, planned on the SD's 90% upper limit) runs 8, and
    the Seed recommendation says why; a 0/1 metric (firm where its exact test rejects, at any N) runs the 5."""
    from ablate.judge.bottom_line import seeds_next
    from ablate.judge.report import seed_advice_text
    from ablate.stats import recommend_seeds
    from ablate.stats.core import FIRM_MIN_CONTINUOUS

    a = recommend_seeds(3, 0.01, 4, target=0.04, target_kind="margin")
    assert a is not None and a.n_needed == 5 and FIRM_MIN_CONTINUOUS == 8
    c = {"verdict": "inconclusive", "firm": None, "n_treatment": 3, "n_control": 3,
         "seed_advice": {"n": 3, "n_needed": a.n_needed, "cap": a.cap, "message": a.message()}}
    assert seeds_next(c) == 8
    said = seed_advice_text(c)
    assert said.startswith(a.message()) and said.endswith(" The Next line runs 8 seeds per arm: below 8 a verdict on "
                                                          "a continuous metric is never firm (docs/verdict.md).")
    c["binary"] = {"paired": False}
    assert seeds_next(c) == 5 and seed_advice_text(c) == a.message()
    c.pop("binary")
    c["seed_advice"]["n_needed"] = 9  # more than the floor: the advice itself, nothing added
    assert seeds_next(c) == 9 and "The Next line runs" not in seed_advice_text(c)
