"""How a command task hands a script its settings, and reads back what it did (issue 28): argument styles,
shell quoting, safe trial paths, the failure line, seeds ignored, timing metrics."""

from __future__ import annotations

import ast
import json
import os
import shlex
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.judge.seedcheck import ignored_seed, message
from ablate.plan.arms import parse_variable
from ablate.record.errorline import exception_line, failure_line
from ablate.record.timing import is_timing_metric
from ablate.trials.tasks import argstyle
from ablate.trials.tasks.command import build_command, shell_quote
from ablate.trials.tasks.trialpath import is_safe, safe_alias

SETTINGS = {"dropout": 0.1, "compile": False, "name": "a b", "tags": [1, 2], "none": None}


def test_key_equals_value_renders_python_literals_a_configurator_reads_back() -> None:
    argv, env = argstyle.render(SETTINGS, *argstyle.check_style("--key=value", None))
    assert env == {}
    assert argv == ["--dropout=0.1", "--compile=False", "--name='a b'", "--tags=[1, 2]", "--none=None"]
    # what nanoGPT's configurator does with each: split on '=', literal_eval the value
    back = {a[2:].split("=")[0]: ast.literal_eval(a.split("=")[1]) for a in argv}
    assert back == SETTINGS


def test_key_space_value_plain_and_json() -> None:
    style = argstyle.check_style("--key value", None)
    argv, _ = argstyle.render({"lr": 5e-4, "do_eval": True, "layers": [4, 8]}, *style)
    assert argv == ["--lr", "0.0005", "--do_eval", "true", "--layers", "4", "8"]
    argv, _ = argstyle.render({"name": "a b", "on": True}, "--key value", "json")
    assert [json.loads(v) for v in argv[1::2]] == ["a b", True]


def test_env_style_names_variables_after_keys() -> None:
    argv, env = argstyle.render({"optim.lr": 0.1, "seed": 3}, *argstyle.check_style("env", None), env_prefix="TRAIN_")
    assert argv == [] and env == {"TRAIN_OPTIM_LR": "0.1", "TRAIN_SEED": "3"}


def test_unknown_style_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="not an argument style") as e:
        argstyle.check_style("--key:value", None)
    assert e.value.where == "task.args" and "'--key value'" in str(e.value)


def test_command_settings_strip_flag_dashes_and_seed_env() -> None:
    task = {"command": "python train.py config/small.py", "args": "--key=value",
            "params": {"--dropout": 0.2}, "seed_key": "--seed", "seed_env": "SEED"}
    argv, env = build_command(task, seed=3, determinism="seeded", run_dir=Path("/r"), metrics_path=Path("/m"))
    assert argv[1:] == ["train.py", "config/small.py", "--dropout=0.2", "--seed=3"]
    assert env == {"SEED": "3"}


@pytest.mark.parametrize("arg", ["device='cpu'", "plain", "a b", "it's $HOME", 'say "hi"', "x=1,2", "tab\there"])
def test_shell_quote_reads_back_with_a_posix_shell_split(arg: str) -> None:
    assert shlex.split(shell_quote(arg)) == [arg]


def test_shell_quote_reads_better_than_shlex_for_hydra_strings() -> None:
    assert shell_quote("device='cpu'") == "\"device='cpu'\""
    assert shlex.quote("device='cpu'") == "'device='\"'\"'cpu'\"'\"''"  # what it replaces


def test_safe_alias_links_the_trial_dir_with_no_split_characters(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    trial = sweep / "trials" / "lr=0.1" / "seed=3"
    trial.mkdir(parents=True)
    alias = safe_alias(trial, sweep)
    assert is_safe(alias) and not is_safe(trial)
    assert alias.parent == sweep / "links" and os.path.realpath(alias) == str(trial)
    assert safe_alias(trial, sweep) == alias  # made once, reused
    (alias / "run").mkdir()
    assert (trial / "run").is_dir()  # writes through the alias land in the trial dir
    plain = sweep / "trials" / "control" / "s1"
    plain.mkdir(parents=True)
    assert safe_alias(plain, sweep) == plain


def test_failure_line_is_the_exception_line_from_the_end_of_the_log() -> None:
    log = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    main()\n"
           "ValueError: Some specified arguments are not used by the HfArgumentParser: ['--lr', '1']\n")
    assert exception_line(log).startswith("ValueError: Some specified")
    err = f"the command exited with code 1; log tail:\n{log}"
    assert failure_line(err) == ("the command exited with code 1: ValueError: Some specified arguments are not used "
                                 "by the HfArgumentParser: ['--lr', '1']")
    argparse_log = "usage: train.py [-h] [--lr LR]\ntrain.py: error: unrecognized arguments: lr=0.1\n"
    assert exception_line(argparse_log) == "train.py: error: unrecognized arguments: lr=0.1"


def rows(values: dict[str, list[float]], extra: dict[str, list[float]] | None = None) -> list[dict]:
    out = []
    for arm, vals in values.items():
        for seed, v in enumerate(vals, 1):
            r = {"arm": arm, "seed": seed, "status": "ok", "value": None, "duration_s": 1.0 + seed, "val_loss": v,
                 "eval_runtime": 0.1 * seed}
            for k, col in (extra or {}).items():
                r[k] = col[seed - 1]
            out.append(r)
    return out


PLAN = {"arms": [{"name": "control", "label": "control", "config": {"task": {"command": "x", "seed_key": None}}},
                 {"name": "d=0.2", "label": "d=0.2", "config": {}}], "task": {"command": "x"}}


def test_an_arm_with_bit_identical_metrics_across_seeds_ignored_its_seed() -> None:
    flagged = ignored_seed(PLAN, rows({"control": [2.5042] * 3, "d=0.2": [2.6393] * 3}))
    assert set(flagged) == {"control", "d=0.2"}  # timing (eval_runtime, duration_s) differs: not a seed's result
    assert flagged["control"]["seeds"] == [1, 2, 3] and flagged["control"]["metrics"] == {"val_loss": 2.5042}
    text = message(flagged, PLAN)
    assert text.startswith("the task ignored its seed: arm control gave bit-identical metrics for seeds 1, 2, 3")
    assert "set `seed_key:`" in text


def test_seeds_that_change_any_metric_are_not_ignored() -> None:
    same_loss = rows({"control": [1.0] * 3}, extra={"val_acc": [0.9, 0.91, 0.9]})
    assert ignored_seed(PLAN, same_loss) == {}
    assert ignored_seed(PLAN, rows({"control": [1.0, 1.0 + 2 ** -40, 1.0]})) == {}  # bitwise, not rounded
    assert ignored_seed(PLAN, rows({"control": [1.0]})) == {}  # one seed shows nothing
    fn_plan = {**PLAN, "task": {"fn": "m:train"}}  # an fn task can re-seed itself too (issue 35: seed_everything())
    assert ignored_seed(fn_plan, rows({"control": [1.0] * 3}))["control"]["seeds"] == [1, 2, 3]


@pytest.mark.parametrize(("name", "timing"), [
    ("eval_runtime", True), ("eval_samples_per_second", True), ("train_steps_per_second", True), ("time", True),
    ("duration", True), ("train_s", True), ("step_time", True), ("val_loss", False), ("eval_accuracy", False),
    ("epoch", False), ("val_acc", False)])
def test_timing_metrics_known_by_the_fields_names(name: str, timing: bool) -> None:
    assert is_timing_metric(name) is timing
    assert is_timing_metric("tokens", extra=["tokens"])


def test_variable_keys_as_flags_and_list_elements() -> None:
    assert parse_variable({"key": "task.params.--dropout", "values": [0.2]}, "d").key == "task.params.dropout"
    assert parse_variable({"key": "task.layers.1", "values": [64]}, "w").key == "task.layers.1"
    with pytest.raises(ConfigError, match="not a dotted config path"):
        parse_variable({"key": "task.--lr", "values": [1]}, "x")


def test_repository_owned_by_another_user_names_the_safe_directory_fix(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from ablate.errors import PinError
    from ablate.pin.pins import git_root

    if os.getuid() != 0:  # only root can hand a repository to another user here
        pytest.skip("needs root to chown the repository to another user")
    repo = tmp_path / "theirs"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["chown", "-R", "65534:65534", str(repo)], check=True)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))  # --global writes here, not the machine's
    with pytest.raises(PinError) as e:
        git_root(repo)
    assert "another user owns it" in e.value.what and "not inside a git repository" not in str(e.value)
    fix = e.value.fix
    assert fix == f"git config --global --add safe.directory {repo}"
    subprocess.run(shlex.split(fix), check=True)  # the fix, run as given
    assert git_root(repo) == repo
