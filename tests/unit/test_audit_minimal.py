"""The audit's arms from a commit or a data version when the config is the same, a declared variable of those
kinds, and what the minimal ablation says when ablate cannot vary the difference (runs as the sources read them,
:class:`ablate.audit.runs.Run`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.audit.analysis import audit
from ablate.audit.arms import classify, group
from ablate.audit.minimal import plan
from ablate.audit.runs import Run
from ablate.errors import ConfigError

OLD, NEW = "a" * 40, "b" * 40


def _runs(*, lr_b: float = 0.1, data: tuple[str, str] | None = None) -> list[Run]:
    out = []
    for side, (commit, lr, vals) in enumerate(((OLD, 0.1, [0.70, 0.71, 0.69]), (NEW, lr_b, [0.75, 0.74, 0.77]))):
        for seed, v in enumerate(vals, 1):
            ctx = {"data": {"data/train.csv": data[side]}, "data_keys": {"data/train.csv": "data.path"}} if data \
                else {}
            out.append(Run(source="wandb", id=f"r{side}{seed}", config={"seed": seed, "lr": lr,
                                                                       "data.path": "data/train.csv"},
                           metrics={"val_acc": [(0, v)]}, commit=commit, commit_how="recorded by W&B",
                           context=ctx, started=10.0 * side + seed, status="finished"))
    return out


def test_one_config_and_two_commits_make_the_commit_the_variable_and_the_runs_to_make_by_hand(tmp_path: Path) -> None:
    runs = _runs()
    a, b = group(runs, "seed")
    assert (a.by, len(a.runs), len(b.runs)) == ("commit", 3, 3)
    report = {**audit(runs), "seed_key": "seed"}
    assert report["variable"] == {"key": "commit", "kind": "code", "a": OLD, "b": NEW, "how": "proposed"}
    assert report["confounds"] == []  # the commit is the variable, not a confound of itself
    m = plan(a, b, report, app="train.py", out=tmp_path, repo=None)
    assert m["command"] is None and m["config_dir"] is None
    assert m["by_hand"].startswith(f"ablate varies a config key at one commit, not the code: run the control config "
                                   f"at each commit ({OLD[:12]} and {NEW[:12]}) with the same 20 seeds")


def test_one_config_and_two_data_versions_make_the_data_version_the_variable(tmp_path: Path) -> None:
    runs = _runs(data=("md5:" + "1" * 32, "md5:" + "2" * 32))
    a, b = group(runs, "seed")
    assert a.by == "data"
    d = classify(a, b, None)
    assert d["variable"] == {"key": "data:data/train.csv", "kind": "data", "a": "md5:" + "1" * 32,
                             "b": "md5:" + "2" * 32, "config_key": "data.path", "how": "proposed"}
    (code,) = d["confounds"]
    assert (code["kind"], code["a"], code["b"]) == ("code", OLD, NEW)
    report = {**audit(runs), "seed_key": "seed"}
    m = plan(a, b, report, app="train.py", out=tmp_path, repo=None)
    assert m["variable"] == {"key": "data.path", "values": ["data/train.csv"]}
    assert "data.path=data/audit-1111111111/train.csv" in m["task"]["overrides"]
    assert m["task"]["data"] == ["data/audit-1111111111/train.csv", "data/train.csv"]


def test_a_commit_or_data_version_can_be_declared_the_variable_and_the_config_key_is_then_a_confound() -> None:
    runs = _runs(lr_b=0.2)
    a, b = group(runs, "seed")
    assert a.by == "config"
    d = classify(a, b, "commit")
    assert d["variable"]["key"] == "commit" and d["variable"]["how"] == "declared"
    assert [c["message"] for c in d["confounds"]] == ["config `lr`: 0.1 in A, 0.2 in B"]
    with pytest.raises(ConfigError, match=r"do not differ in 'data:data/train\.csv'") as e:
        classify(a, b, "data:data/train.csv")
    assert "`commit` or `data:PATH`" in e.value.fix


@pytest.mark.parametrize(("own", "expected"), [(None, "background_thread:false"), ("narenas:2", "narenas:2")])
def test_the_command_runs_ablate_with_pyarrows_allocator_thread_off_unless_the_user_set_it(
        tmp_path: Path, own: str | None, expected: str) -> None:
    """The env the printed command gives ``ablate``, read back through bash as the command runs: pyarrow's jemalloc
    starts no thread, so the warm parent can hold the tracker the app imports (ablate.audit.minimal.WARM_ENV); a
    value the user set is kept."""
    import os
    import subprocess

    from ablate.audit.minimal import WARM_ENV

    a, b = group(_runs(lr_b=0.2), "seed")
    m = plan(a, b, {**audit(_runs(lr_b=0.2)), "seed_key": "seed"}, app="train.py", out=tmp_path, repo=None)
    last = m["steps"][-1]
    assert f" {WARM_ENV} ablate --config-dir " in last
    env = {k: v for k, v in os.environ.items() if k != "JE_ARROW_MALLOC_CONF"} | (
        {"JE_ARROW_MALLOC_CONF": own} if own else {})
    shown = subprocess.run(["bash", "-c", last.replace(" ablate --config-dir", " printenv JE_ARROW_MALLOC_CONF #")],
                           env=env, capture_output=True, text=True, check=True).stdout
    assert shown == expected + "\n"


@pytest.mark.parametrize("key", ["--config-dir", "-x", "a b", "hydra.launcher._target_"])
def test_a_recorded_key_that_is_not_an_override_is_never_passed_to_the_app(tmp_path: Path, key: str) -> None:
    """A record is data: a key Hydra's parser rejects (it would read ``--config-dir=...`` as its own option) or one
    that sets Hydra's own config is not put on the app's command line; the audit says to make the runs by hand."""
    runs = _runs(lr_b=0.2)
    for r in runs:
        r.config[key] = "/tmp/elsewhere"
    a, b = group(runs, "seed")
    report = {**audit(runs), "seed_key": "seed"}
    assert report["variable"]["key"] == "lr"
    m = plan(a, b, report, app="train.py", out=tmp_path, repo=None)
    assert m["command"] is None and m["task"] is None
    assert m["by_hand"].startswith(f"arm A's runs recorded config keys that are not Hydra overrides of the app's "
                                   f"config (`{key}`)")


def test_recorded_keys_hydra_parses_stay_overrides(tmp_path: Path) -> None:
    runs = _runs(lr_b=0.2)
    for r in runs:
        r.config["model._target_"] = "torch.nn.Linear"  # the templates' own keys are config, not Hydra's
    a, b = group(runs, "seed")
    m = plan(a, b, {**audit(runs), "seed_key": "seed"}, app="train.py", out=tmp_path, repo=None)
    assert m["command"] is not None and "model._target_=torch.nn.Linear" in m["task"]["overrides"]
