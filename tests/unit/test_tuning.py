"""Tuning, the pure parts: the ``tune:`` declaration, its settings and seeds, the expanded arms, the choice, and
Dodge et al. (2019)'s expected best value per budget, checked against hand computations and brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from ablate.errors import ConfigError
from ablate.judge.tuning import edges, evaluation_view, section, select
from ablate.plan.tuning import draw_settings, expand, parse_tune, trial_count
from ablate.stats import StatsInputError, choose, expected_max

CONTROL = {"task": {"optim": {"lr": 0.05, "momentum": 0.9}, "hidden": 64}, "seed": 0}


# -- expected max (Dodge et al. 2019) -----------------------------------------------------------------
def test_expected_max_equals_hand_computation() -> None:
    # values 0.2, 0.5, 0.9 (n = 3). k = 2: P(max = v_(i)) = (i/3)^2 - ((i-1)/3)^2 = 1/9, 3/9, 5/9, so
    # E = (0.2 + 1.5 + 4.5) / 9 = 6.2/9; E[max^2] = (0.04 + 0.75 + 4.05) / 9 = 4.84/9.
    # k = 1: the mean 1.6/3. k = 3: P = 1/27, 7/27, 19/27, E = (0.2 + 3.5 + 17.1) / 27 = 20.8/27.
    em = expected_max([0.5, 0.9, 0.2])
    assert em.budgets == [1, 2, 3]
    assert em.mean == pytest.approx([1.6 / 3, 6.2 / 9, 20.8 / 27], abs=1e-12)
    sd2 = math.sqrt(4.84 / 9 - (6.2 / 9) ** 2)
    assert em.low[1] == pytest.approx(6.2 / 9 - sd2, abs=1e-12)
    assert em.high[1] == pytest.approx(min(6.2 / 9 + sd2, 0.9), abs=1e-12)  # clipped to the largest value
    assert em.high[2] == pytest.approx(0.9)
    # minimize, k = 2: P(min = 0.2) = 1 - (2/3)^2 = 5/9, P(0.5) = 3/9, P(0.9) = 1/9: E = 3.4/9
    assert expected_max([0.5, 0.9, 0.2], goal="minimize", budgets=[2]).mean == pytest.approx([3.4 / 9], abs=1e-12)


def test_expected_max_equals_brute_force_over_every_draw() -> None:
    rng = np.random.default_rng(7)
    values = rng.normal(size=5).round(3)
    em = expected_max(values, budgets=[1, 2, 3, 4])
    for k, m, lo, hi in zip(em.budgets, em.mean, em.low, em.high, strict=True):
        draws = [max(t) for t in itertools.product(values, repeat=k)]  # every ordered draw with replacement
        assert m == pytest.approx(np.mean(draws), abs=1e-12)
        assert lo == pytest.approx(max(np.mean(draws) - np.std(draws), values.min()), abs=1e-12)
        assert hi == pytest.approx(min(np.mean(draws) + np.std(draws), values.max()), abs=1e-12)


def test_expected_max_refuses_bad_input() -> None:
    with pytest.raises(StatsInputError, match="values"):
        expected_max([])
    with pytest.raises(StatsInputError, match="finite"):
        expected_max([0.1, math.nan])
    with pytest.raises(StatsInputError, match="budgets"):
        expected_max([0.1], budgets=[0])


# -- the declaration -------------------------------------------------------------------------------------
def test_grid_of_one_key_and_seeds_after_the_evaluation_seeds() -> None:
    t = parse_tune({"key": "task.optim.lr", "values": [0.01, 0.1], "seeds": 3}, [0, 1, 2, 3], CONTROL,
                   ["task.hidden"])
    assert t is not None
    assert t.settings == ({"task.optim.lr": 0.01}, {"task.optim.lr": 0.1})
    assert t.seeds == [4, 5, 6]  # disjoint from the evaluation seeds 0..3
    rec = t.record([0, 1, 2, 3], ["control", "hidden=32"])
    assert trial_count(rec, 2) == (2 * 2 * 3, 2 * 4)


def test_grid_of_several_keys_is_their_product() -> None:
    t = parse_tune({"params": {"task.optim.lr": [0.01, 0.1], "task.optim.momentum": [0.5, 0.9, 0.99]}},
                   [0, 1, 2], CONTROL, ["task.hidden"])
    assert t is not None and len(t.settings) == 6
    assert t.settings[1] == {"task.optim.lr": 0.01, "task.optim.momentum": 0.9}


def test_log_uniform_draws_are_seeded_and_come_from_scipy() -> None:
    cfg = {"key": "task.optim.lr", "values": "log_uniform(0.001, 0.1)", "budget": 5, "sampler_seed": 3}
    a = parse_tune(cfg, [0, 1, 2], CONTROL, ["task.hidden"])
    b = parse_tune(cfg, [0, 1, 2], CONTROL, ["task.hidden"])
    assert a is not None and b is not None and a.settings == b.settings and len(a.settings) == 5
    rng = np.random.default_rng(3)
    expected = [float(f"{stats.loguniform(0.001, 0.1).rvs(random_state=rng):.6g}") for _ in range(5)]
    assert [s["task.optim.lr"] for s in a.settings] == expected
    assert all(0.001 <= v <= 0.1 for v in expected)
    assert draw_settings({"x": {"grid": [1, 2]}}, 4, 0) == draw_settings({"x": {"grid": [1, 2]}}, 4, 0)


@pytest.mark.parametrize(("cfg", "where", "what"), [
    ({"key": "task.optim.lrr", "values": [0.1, 0.2]}, "tune", "not a key of the control config"),
    ({"key": "task.hidden", "values": [8, 16]}, "tune", "is the variable under test"),
    ({"key": "task.optim.lr", "values": []}, "tune.values", "non-empty list"),
    ({"key": "task.optim.lr", "values": [0.1, 0.1]}, "tune.values", "twice"),
    ({"key": "task.optim.lr", "values": "log_uniform(0.1, 0.01)", "budget": 4}, "tune.values", "0 < a < b"),
    ({"key": "task.optim.lr", "values": "log_uniform(0.01, 0.1)"}, "tune.budget", "number of settings"),
    ({"key": "task.optim.lr", "values": [0.1, 0.2], "budget": 4}, "tune.budget", "applies to a distribution"),
    ({"key": "task.optim.lr", "values": [0.1, 0.2], "seeds": 0}, "tune.seeds", "at least 1"),
    ({"key": "task.optim.lr", "values": [0.1, 0.2], "sed": 2}, "tune", "no setting 'sed'"),
])
def test_bad_declaration_names_where_and_how_to_fix(cfg: dict, where: str, what: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_tune(cfg, [0, 1, 2], CONTROL, ["task.hidden"])
    assert e.value.where == where
    assert what in str(e.value) and "Fix:" in str(e.value)


def test_nothing_declared_is_no_tuning() -> None:
    assert parse_tune(None, [0], CONTROL, []) is None
    assert parse_tune({"key": None, "values": None, "params": None, "seeds": 2}, [0], CONTROL, []) is None


# -- expanded arms, the choice ---------------------------------------------------------------------------
def _tuned_plan(goal: str = "maximize") -> dict:
    t = parse_tune({"key": "task.optim.lr", "values": [0.01, 0.05, 0.2], "seeds": 2}, [0, 1, 2], CONTROL,
                   ["task.hidden"])
    assert t is not None
    treat = {**CONTROL, "task": {**CONTROL["task"], "hidden": 32}}
    arms = [{"name": "control", "label": "control", "value": 64, "config": CONTROL, "changes": {}},
            {"name": "hidden=32", "label": "hidden=32", "value": 32, "config": treat,
             "changes": {"task.hidden": [64, 32]}}]
    return {"metric": "acc", "goal": goal, "seeds": t.seeds, "arms": expand(arms, t),
            "tuning": t.record([0, 1, 2], ["control", "hidden=32"])}


def test_every_arm_runs_every_setting_and_only_the_tuned_key_changes() -> None:
    plan = _tuned_plan()
    names = [a["name"] for a in plan["arms"]]
    assert names == ["control+lr=0.01", "control+lr=0.05", "control+lr=0.2",
                     "hidden=32+lr=0.01", "hidden=32+lr=0.05", "hidden=32+lr=0.2"]
    a = plan["arms"][5]
    assert a["config"]["task"] == {"optim": {"lr": 0.2, "momentum": 0.9}, "hidden": 32}
    assert a["changes"] == {"task.hidden": [64, 32], "task.optim.lr": [0.05, 0.2]}
    assert CONTROL["task"]["optim"]["lr"] == 0.05  # the control's config is not changed in place


def _rows(plan: dict, means: dict[str, list[float]], status: str = "ok") -> list[dict]:
    rows = []
    for a in plan["arms"]:
        for j, seed in enumerate(plan["seeds"]):
            rows.append({"arm": a["name"], "seed": seed, "status": status, "role": "tuning",
                         "acc": means[a["base"]][a["setting_index"]] + (0.01 if j else -0.01)})
    return rows


def test_the_choice_is_the_best_mean_of_clean_settings() -> None:
    plan = _tuned_plan()
    rows = _rows(plan, {"control": [0.80, 0.90, 0.85], "hidden=32": [0.70, 0.88, 0.95]})
    rows[2]["acc"] = math.nan  # control at lr=0.05 failed on one tuning seed: not chosen, though its mean is best
    rows[2]["status"] = "failed"
    sel = select(plan, rows)
    assert sel["control"]["arm"] == "control+lr=0.2"
    assert sel["control"]["means"][1] is None and sel["control"]["means"][0] == pytest.approx(0.80)
    assert sel["hidden=32"]["arm"] == "hidden=32+lr=0.2"
    assert edges(plan["tuning"], sel["hidden=32"]["setting"]) == ["lr=0.2 is the largest value tried"]
    assert edges(plan["tuning"], {"task.optim.lr": 0.05}) == []
    # minimize: the smallest mean
    plan_min = _tuned_plan("minimize")
    assert select(plan_min, _rows(plan_min, {"control": [0.8, 0.9, 0.85], "hidden=32": [0.7, 0.88, 0.95]})
                  )["hidden=32"]["arm"] == "hidden=32+lr=0.01"


def test_no_choice_while_a_tuning_trial_has_not_ended() -> None:
    plan = _tuned_plan()
    rows = _rows(plan, {"control": [0.8, 0.9, 0.85], "hidden=32": [0.7, 0.88, 0.95]})
    rows[0]["status"] = "pending"
    sel = select(plan, rows)
    assert sel["control"]["arm"] is None and "not all ended" in sel["control"]["why"]
    assert sel["hidden=32"]["arm"] == "hidden=32+lr=0.2"


@pytest.mark.parametrize("status", ["killed", "timeout"])
def test_no_choice_while_a_tuning_trial_was_stopped_from_outside(status: str) -> None:
    """A killed or timed-out tuning trial says nothing of its setting: choosing without it would drop a result, so
    no choice is made until ``--resubmit`` re-ran it (a failed trial's setting is left out instead)."""
    plan = _tuned_plan()
    rows = _rows(plan, {"control": [0.8, 0.9, 0.85], "hidden=32": [0.7, 0.88, 0.95]})
    rows[2].update(status=status, acc=None)
    sel = select(plan, rows)
    assert sel["control"]["arm"] is None and "stopped (killed or timed out)" in sel["control"]["why"]
    assert sel["hidden=32"]["arm"] == "hidden=32+lr=0.2"
    # the Tuning section of such a state (two clean settings against three): the curves compared where both are
    t = section(plan, rows, sel, None, [])
    (n,) = t["naive"]
    assert len(n["lead"]) == 2 and n["lead"][0] == pytest.approx((0.70 + 0.88 + 0.95) / 3 - (0.80 + 0.85) / 2)


def test_the_verdict_view_judges_each_chosen_arm_on_the_evaluation_seeds() -> None:
    plan = _tuned_plan()
    rows = [*_rows(plan, {"control": [0.8, 0.9, 0.85], "hidden=32": [0.7, 0.88, 0.95]}),
            *({"arm": n, "seed": s, "status": "ok", "role": "evaluation", "acc": 0.9}
              for n in ("control+lr=0.05", "hidden=32+lr=0.2") for s in (0, 1, 2))]
    view, eval_rows = evaluation_view(plan, rows, {"control": "control+lr=0.05", "hidden=32": "hidden=32+lr=0.2"})
    assert [a["name"] for a in view["arms"]] == ["control+lr=0.05", "hidden=32+lr=0.2"]
    assert [a["label"] for a in view["arms"]] == ["control", "hidden=32"]
    assert view["seeds"] == [0, 1, 2] and "tuning" not in view
    assert len(eval_rows) == 6 and {r["seed"] for r in eval_rows} == {0, 1, 2}


# -- where each arm is judged: its own choice or one common setting (stats.choose) ------------------------------------
def _values(means: list[list[float]], spread: float = 0.01) -> np.ndarray:
    """(1, arms, settings, 2 seeds): each setting's mean -/+ ``spread``, so the SD within settings is spread·√2."""
    m = np.asarray(means, dtype=float)[None, :, :, None]
    return m + np.array([-spread, spread])


def test_choose_keeps_own_choices_only_when_both_arms_prefer_them() -> None:
    # deviations ±0.01 on 2 seeds: s² = 4·0.0001/2 (df = 2 settings x 1), s = 0.01·√2; bar = 2·√2·s/√2 = 0.0283
    both = choose(_values([[0.90, 0.85], [0.85, 0.90]]))  # each prefers its own by 0.05 >= 0.0283
    assert both.own.tolist() == both.index.tolist() == [[0, 1]] and not both.common.any()
    # the control's preference, 0.02, is under the bar: one common setting, the best pooled mean
    # (0.85 + 0.80 = 1.65 at setting 0, 0.83 + 0.90 = 1.73 at setting 1)
    one = choose(_values([[0.85, 0.83], [0.80, 0.90]]))
    assert one.own.tolist() == [[0, 1]] and one.index.tolist() == [[1, 1]] and one.common.all()
    # minimize: the same rule on the other end
    low = choose(_values([[0.85, 0.83], [0.80, 0.90]]), goal="minimize")
    assert low.own.tolist() == [[1, 0]] and low.index.tolist() == [[0, 0]] and low.common.all()
    # one tuning seed: the noise cannot be estimated, the arms are judged at the common setting
    single = choose(np.asarray([[[0.90, 0.85], [0.85, 0.91]]])[..., None])
    assert single.index.tolist() == [[1, 1]] and single.common.all()
    with pytest.raises(StatsInputError, match="values: need shape"):
        choose(np.zeros((2, 3, 4)))
    with pytest.raises(StatsInputError, match="goal"):
        choose(_values([[0.9, 0.8]]), goal="best")


def test_choose_with_two_treatments_and_a_failed_setting() -> None:
    # bar 0.0283 (as above). Treatment 1 and the control each prefer their own choice (by 0.15 and 0.10): apart.
    # Treatment 2's choice is 0.02 below the control's on the control's data: with the control at the best of
    # their pooled means (0.90 + 0.86 = 1.76, 0.88 + 0.90 = 1.78, 1.50), setting 1, off the control's own best
    v = _values([[0.90, 0.88, 0.80], [0.80, 0.85, 0.95], [0.86, 0.90, 0.70]])
    c = choose(v)
    assert c.own.tolist() == [[0, 2, 1]]
    assert c.common.tolist() == [[True, False, True]]
    assert c.index.tolist() == [[1, 2, 1]]
    v[0, 0, 0, 1] = np.nan  # the control's best setting failed on a seed: never chosen
    assert choose(v).own[0, 0] == 1


def test_select_judges_where_choose_says_on_random_tuning_data() -> None:
    """The verdict's choice (select, on results rows) equals :func:`choose` on the same values, the function the
    A/A simulation (tests/unit/test_tuning_aa.py) runs: both cases, common and apart, occur among the draws."""
    plan = _tuned_plan()
    rng = np.random.default_rng(40)
    seen = set()
    for _ in range(60):
        v = rng.normal(0.0, 1.0, (1, 2, 3, 2)) + rng.choice([0.0, 3.0], size=(1, 2, 3, 1))
        rows = [{"arm": a["name"], "seed": seed, "status": "ok", "role": "tuning",
                 "acc": float(v[0, ["control", "hidden=32"].index(a["base"]), a["setting_index"], j])}
                for a in plan["arms"] for j, seed in enumerate(plan["seeds"])]
        sel = select(plan, rows)
        c = choose(v)
        assert [sel[b]["index"] for b in ("control", "hidden=32")] == c.index[0].tolist()
        assert [sel[b]["own_index"] for b in ("control", "hidden=32")] == c.own[0].tolist()
        assert [sel[b]["common"] for b in ("control", "hidden=32")] == c.common[0].tolist()
        seen.add(bool(c.common[0, 0]))
    assert seen == {True, False}
