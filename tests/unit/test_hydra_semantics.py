"""Hydra semantics for trials and app configs: ${now:} frozen, ${hydra:} per trial, ???, nan/inf, app overrides."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ablate.errors import ConfigError
from ablate.judge.confounds import check
from ablate.plan.arms import Variable, make_plan
from ablate.plan.hydra_semantics import freeze_now, missing_keys, per_trial_keys, trial_hydra
from ablate.trials.tasks.app import read_decorator, split_cli

WHEN = dt.datetime(2026, 3, 4, 5, 6, 7)


def test_freeze_now_replaces_only_the_now_parts_with_one_time() -> None:
    cfg = {"run": "x_${now:%Y-%m-%d}_${model}", "n": [1, "${now:%H%M%S}"], "hydra": {"d": "${now:%H}"}, "k": 3}
    changed = freeze_now(cfg, WHEN)
    assert cfg["run"] == "x_2026-03-04_${model}" and cfg["n"] == [1, "050607"]
    assert cfg["hydra"] == {"d": "${now:%H}"}  # hydra's own node is left to Hydra
    assert changed == {"run": "x_2026-03-04_${model}", "n.1": "050607"}


def test_per_trial_keys_follow_interpolations_from_hydra() -> None:
    raw = {"paths": {"out": "${hydra:runtime.output_dir}", "ckpt": "${paths.out}/ckpt", "data": "data/"},
           "logger": {"dir": "${paths.ckpt}/tb"}, "lr": 0.1}
    assert per_trial_keys(raw) == {"paths.out", "paths.ckpt", "logger.dir"}
    assert per_trial_keys({"a": 1}) == set()


def test_trial_hydra_points_hydra_resolvers_at_the_trial_run_dir(tmp_path: Path) -> None:
    cfg = OmegaConf.create({"out": "${hydra:runtime.output_dir}/x", "job": "${hydra:job.name}"})
    with trial_hydra(tmp_path / "run", {"app": "src/train.py"}):
        assert OmegaConf.to_container(cfg, resolve=True) == {"out": f"{tmp_path}/run/x", "job": "train"}


def test_missing_mandatory_values_are_named() -> None:
    assert missing_keys({"model": {"lr": "???", "w": 1}, "x": "???", "hydra": {"y": "???"}}) == ["model.lr", "x"]


def test_nan_and_inf_equal_themselves_in_the_plan_proof_and_the_confound_check() -> None:
    control = {"task": {"lr": 0.1, "clip": math.inf, "stop": math.nan, "vals": [math.nan, 1.0]}}
    plan = make_plan(control, Variable("lr", "task.lr", (0.2,)), [0, 1])
    assert plan.treatments[0].changes == {"task.lr": (0.1, 0.2)}
    manifests = {(a, s): {"config": {"task": {"stop": float("nan"), "clip": float("inf")}}}
                 for a in ("control", "lr=0.2") for s in (0, 1)}
    record = {"arms": [{"name": "control", "changes": {}}, {"name": "lr=0.2", "changes": {"task.lr": [0.1, 0.2]}}]}
    assert check(record, manifests, list(manifests))["findings"] == []


def test_app_overrides_on_the_command_line_never_collide_with_ablates_settings() -> None:
    ours, app = split_cli(["variable=lr", "seeds=3", "app.trainer=cpu", "+app.trainer.limit=3", "~app.logger",
                           "task.metric=x", "apple=1"])
    assert ours == ["variable=lr", "seeds=3", "task.metric=x", "apple=1"]
    assert app == ["trainer=cpu", "+trainer.limit=3", "~logger"]


@pytest.mark.parametrize(("decorator", "expected"), [
    ('@hydra.main(version_base="1.3", config_path="../configs", config_name="train.yaml")',
     {"version_base": "1.3", "config_path": "../configs", "config_name": "train.yaml"}),
    ('@main(config_path="conf", config_name="config", version_base=None)',
     {"config_path": "conf", "config_name": "config", "version_base": None}),
    ('@hydra.main("conf", "cfg")', {"config_path": "conf", "config_name": "cfg"}),
])
def test_decorator_read_without_running_the_script(tmp_path: Path, decorator: str, expected: dict) -> None:
    script = tmp_path / "train.py"
    script.write_text(f"import hydra\nfrom hydra import main\nraise SystemExit('never run')\n\n{decorator}\n"
                      "def run(cfg):\n    pass\n")
    assert read_decorator(script) == {**expected, "function": "run"}  # the function a warm fork calls


def test_a_script_without_hydra_main_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("def main():\n    pass\n")
    with pytest.raises(ConfigError, match=r"no function decorated with @hydra\.main"):
        read_decorator(tmp_path / "t.py")


def test_per_trial_keys_include_lists_holding_a_hydra_reader() -> None:
    # a variable whose treatment value is `${hydra:runtime.output_dir}/alt`: `variable.values` resolves per trial
    raw = {"variable": {"key": "z", "values": ["${hydra:runtime.output_dir}/alt"]}, "n": [1, {"a": 2}], "z": "x"}
    assert per_trial_keys(raw) == {"variable.values"}
