"""The audit's grouping and classification on runs as the sources read them (ablate.audit.runs.Run), and its
statistics against ablate.stats and scipy; the sources themselves are read in tests/integration/test_audit.py."""

from __future__ import annotations

import pytest
from scipy import stats as sps

from ablate.audit.analysis import audit, choose_goal, choose_metric
from ablate.audit.arms import classify, group
from ablate.audit.runs import Run
from ablate.errors import ConfigError


def _run(seed: int, value: float, *, lr: float = 0.1, commit: str | None = "a" * 40, t: float = 0.0,
         **context: object) -> Run:
    return Run(source="wandb", id=f"r{seed}-{lr}", config={"seed": seed, "lr": lr, "epochs": 3},
               metrics={"val_acc": [(0, value / 2), (1, value)], "epoch": [(0, 0.0), (1, 1.0)]}, commit=commit,
               commit_how="recorded by W&B" if commit else "", context=dict(context), started=t)


A = [0.70, 0.71, 0.69]
B = [0.75, 0.74, 0.77]


def _runs(**kw: object) -> list[Run]:
    return ([_run(s, v, t=s, **kw) for s, v in enumerate(A, 1)]
            + [_run(s, v, lr=0.2, t=10 + s, **kw) for s, v in enumerate(B, 1)])


def test_replicates_are_runs_differing_only_in_the_seed_and_the_earlier_side_is_the_control() -> None:
    runs = _runs()
    arms = group(list(reversed(runs)), "seed")
    assert [a.name for a in arms] == ["A", "B"]
    assert [a.config["lr"] for a in arms] == [0.1, 0.2]
    assert [len(a.runs) for a in arms] == [3, 3]


def test_library_and_hardware_differences_are_confounds_and_missing_commits_are_said() -> None:
    runs = _runs(libraries={"torch": "2.1.0", "numpy": "1.26.0"}, hardware={"gpu": "A100"})
    for r in runs[3:]:
        r.context = {"libraries": {"torch": "2.2.0", "numpy": "1.26.0"}, "hardware": {"gpu": "H100"}}
    runs[0].commit = None
    d = classify(*group(runs, "seed"), None)
    assert d["variable"] == {"key": "lr", "a": 0.1, "b": 0.2, "how": "proposed", "kind": "config"}
    msgs = [c["message"] for c in d["confounds"]]
    assert "library version `torch`: 2.1.0 in A, 2.2.0 in B" in msgs
    assert "hardware `gpu`: A100 in A, H100 in B" in msgs
    assert not any("numpy" in m for m in msgs)
    assert "no commit recorded for 1 of 6 runs" in d["missing"]
    assert "no data version recorded for 6 of 6 runs" in d["missing"]


def test_replicates_at_several_commits_are_reported_within_the_arm() -> None:
    runs = _runs()
    runs[1].commit = "b" * 40
    d = classify(*group(runs, "seed"), None)
    assert d["within"] == [f"arm A's runs ran at 2 commits: {'a' * 10}, {'b' * 10}"]


def test_two_config_keys_differing_give_no_proposed_variable_until_one_is_declared() -> None:
    runs = _runs()
    for r in runs[3:]:
        r.config["epochs"] = 5
    a, b = group(runs, "seed")
    d = classify(a, b, None)
    assert d["variable"] is None and d["config_differences"] == ["epochs", "lr"]
    d = classify(a, b, "lr")
    assert d["variable"]["how"] == "declared"
    assert [c["message"] for c in d["confounds"]] == ["config `epochs`: 3 in A, 5 in B"]
    with pytest.raises(ConfigError, match="do not differ in 'seed'"):
        classify(a, b, "seed")


def test_post_hoc_statistics_are_the_verdicts_on_the_reduced_values() -> None:
    out = audit(_runs(), reduce="last")
    comp = out["statistics"]["verdict"]["comparisons"][0]
    assert comp["pvalue"] == pytest.approx(sps.ttest_ind(B, A, equal_var=False).pvalue, rel=1e-9)
    assert comp["diff"] == pytest.approx(sum(B) / 3 - sum(A) / 3, rel=1e-12)
    out = audit(_runs(), reduce="min")  # the first logged value is half the last
    assert out["statistics"]["values"]["control"] == {str(s): v / 2 for s, v in enumerate(A, 1)}


def test_two_replicates_give_no_test_and_the_seed_advice_from_their_spread() -> None:
    from ablate.stats.power import recommend_seeds

    runs = [r for r in _runs() if r.config["seed"] != 3]
    out = audit(runs)
    ss = out["statistics"]["sample_size"]
    assert out["statistics"]["verdict"] is None and ss["n"] == 2
    xa, xb = A[:2], B[:2]
    ma, mb = sum(xa) / 2, sum(xb) / 2
    sd = ((sum((x - ma) ** 2 for x in xa) + sum((x - mb) ** 2 for x in xb)) / 2) ** 0.5
    adv = recommend_seeds(2, sd, 2, target=abs(mb - ma), target_kind="observed")
    assert ss["seeds_needed"] == max(20, adv.n_needed)  # at least ablate's firm threshold (FIRM_FROM)
    assert "2 seeds per arm give no test" in ss["message"]


def test_metric_and_goal_choice() -> None:
    runs = _runs()
    assert choose_metric(runs, None) == "val_acc"  # epoch is a counter, never proposed
    with pytest.raises(ConfigError, match="did not log 'loss'"):
        choose_metric(runs, "loss")
    assert choose_goal(runs, "val_loss", None) == ("minimize", "guessed from the metric's name")
    assert choose_goal(runs, "val_acc", None) == ("maximize", "guessed from the metric's name")
    for r in runs[:3]:
        r.context["goal"] = "maximize"
    for r in runs[3:]:
        r.context["goal"] = "minimize"
    with pytest.raises(ConfigError, match="mixed directions"):
        choose_goal(runs, "val_acc", None)


def test_one_config_or_three_are_refused() -> None:
    runs = _runs()
    with pytest.raises(ConfigError, match="all runs share one config"):
        audit(runs[:3])
    runs[0].config["lr"] = 0.3
    with pytest.raises(ConfigError, match="form 3 configs"):
        audit(runs)


def test_a_data_file_changed_under_the_same_path_is_a_data_confound(tmp_path) -> None:
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text("1\n2\n")
    git("add", "-A")
    git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "v1")
    old = git("rev-parse", "HEAD")
    blob_old = git("rev-parse", "HEAD:data/train.csv")
    (tmp_path / "data" / "train.csv").write_text("1\n2\n3\n")
    git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qam", "v2")
    new = git("rev-parse", "HEAD")
    blob_new = git("rev-parse", "HEAD:data/train.csv")
    runs = _runs()
    for r in runs:
        r.config["data.path"] = "data/train.csv"
        r.commit = old if r.config["lr"] == 0.1 else new
    from ablate.audit.versions import add_data_versions

    add_data_versions(runs, str(tmp_path))  # the version of each file the config names, at each run's commit
    d = classify(*group(runs, "seed"), None, str(tmp_path))
    (data,) = [c for c in d["confounds"] if c["kind"] == "data"]
    assert (data["field"], data["a"], data["b"]) == ("data/train.csv", f"git:{blob_old[:12]}", f"git:{blob_new[:12]}")
    (code,) = [c for c in d["confounds"] if c["kind"] == "code"]
    assert code["files"] == ["M data/train.csv"]


def test_a_swapped_config_group_is_the_variable_and_its_keys_come_with_it(tmp_path) -> None:
    from ablate.audit.minimal import plan

    runs = _runs()
    for r in runs:
        wide = r.config["lr"] == 0.2
        r.config.pop("lr")
        r.config.update({"hydra-choice:model": "wide" if wide else "mlp", "model.hidden": 256 if wide else 64,
                         "model.act": "tanh"})
    a, b = group(runs, "seed")
    d = classify(a, b, None)
    assert d["variable"] == {"key": "hydra-choice:model", "a": "mlp", "b": "wide", "how": "proposed", "kind": "config"}
    assert d["derived"] == [{"key": "model.hidden", "a": "64", "b": "256",
                             "why": "in config group model, swapped mlp -> wide"}]
    assert d["confounds"] == []
    report = {**audit(runs), "seed_key": "seed"}
    m = plan(a, b, report, app="train.py", out=tmp_path, repo=None)
    assert m["variable"] == {"group": "model", "values": ["wide"]}
    assert m["task"]["overrides"] == ["epochs=3", "model=mlp", "model.act=tanh"]


def test_a_key_only_one_side_recorded_is_a_difference_never_taken_as_equal() -> None:
    runs = _runs()
    for r in runs[3:]:
        r.config["dropout"] = None  # recorded as null on B's side only
    d = classify(*group(runs, "seed"), "lr")
    assert [c["message"] for c in d["confounds"]] == ["config `dropout`: (not set) in A, null in B"]
