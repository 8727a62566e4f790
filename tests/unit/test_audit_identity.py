"""The audit's pure parts: the goal from whole name tokens, Hydra interpolations resolved from the record only,
commit ids as data, and runs as identities (one run through several records counted once)."""

from __future__ import annotations

import pytest

from ablate.audit.analysis import choose_goal, guess_goal
from ablate.audit.identity import merge, unfinished
from ablate.audit.runs import Run, commit_id
from ablate.audit.sources.hydra import resolve_nodes
from ablate.errors import ConfigError


@pytest.mark.parametrize(("name", "goal"), [
    ("answer_accuracy", "maximize"), ("flowers102_acc", "maximize"), ("cancer_auc", "maximize"),
    ("answer_f1", "maximize"), ("val/acc", "maximize"), ("eval_rouge1", "maximize"), ("episode_return", "maximize"),
    ("val_loss", "minimize"), ("valLoss", "minimize"), ("top1_err", "minimize"), ("train/perplexity", "minimize"),
    ("test_wer", "minimize"), ("answer_cer", "minimize"),
    ("objective", None), ("val_metric", None), ("acc_loss", None), ("lowerbound", None)])
def test_the_goal_is_guessed_from_whole_name_tokens(name: str, goal: str | None) -> None:
    assert guess_goal(name) == goal


def test_an_unsure_goal_is_refused_and_sides_must_agree() -> None:
    with pytest.raises(ConfigError, match="cannot be told from its name") as e:
        choose_goal([], "objective", None)
    assert "--goal maximize" in e.value.fix
    with pytest.raises(ConfigError, match="val_acc / val_loss"):
        choose_goal([], ["val_acc", "val_loss"], None)
    assert choose_goal([], ["val_acc", "val_accuracy"], None) == ("maximize", "guessed from the metric's name")
    assert choose_goal([], "objective", "minimize") == ("minimize", "given")


def test_interpolations_take_the_records_own_values_and_never_the_environment(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    monkeypatch.setenv("AUDIT_SECRET", "leaked")
    flat = {"data.mix": "new", "data.path": "data/${data.mix}.csv", "data.rel": "${.mix}", "epochs": 4,
            "sched.epochs": "${epochs}", "token": "${oc.env:AUDIT_SECRET}", "copy": "${token}",
            "mixed": "${oc.env:AUDIT_SECRET,x}/${data.mix}", "loop.a": "${loop.b}", "loop.b": "${loop.a}",
            "gone": "${nowhere}", "when": "${now:%Y}"}
    got, texts = resolve_nodes(flat)
    assert got["data.path"] == "data/new.csv" and got["data.rel"] == "new"
    assert got["sched.epochs"] == 4  # a whole interpolation keeps the value's type
    for k in ("token", "copy", "mixed", "loop.a", "loop.b", "gone", "when"):
        assert got[k] == flat[k], k  # as written
    assert "leaked" not in repr(got)
    assert set(texts) == {k for k, v in flat.items() if isinstance(v, str) and "${" in v}


@pytest.mark.parametrize("value", ["--output=/tmp/x", "-p", "HEAD", "a" * 6, "abc def0123", "0123456789abcdefg", None,
                                   123, "ABCDEF1234"])
def test_a_commit_id_is_hex_or_nothing(value: object) -> None:
    assert commit_id(value) is None


def _run(source: str, origin: str, seed: int, value: float, rid: str, **kw: object) -> Run:
    return Run(source=source, id=rid, config={"seed": seed, "lr": 0.1}, metrics={"val_acc": [(0, value / 2),
                                                                                              (1, value)]},
               origin=origin, **kw)  # type: ignore[arg-type]


def test_one_run_through_three_records_is_counted_once_and_runs_of_one_record_never_merge() -> None:
    import numpy as np

    runs = [_run("hydra", "multirun", 1, 0.7, "multirun/0"), _run("mlflow", "mlflow.db", 1, 0.7, "abc"),
            _run("tensorboard", "runs", 1, float(np.float32(0.7)), "runs/x"),  # TensorBoard keeps float32
            _run("wandb", "wandb", 1, 0.7, "w1", commit="a" * 40, commit_how="recorded by W&B"),
            _run("hydra", "multirun", 1, 0.7, "multirun/1"),  # seed 1 run twice into one record: two runs
            _run("mlflow", "mlflow.db", 2, 0.7, "def")]  # another seed: another run
    out, said = merge(runs, ["seed"])
    assert len(out) == 3 and said["runs"] == 1 and said["records"] == 4
    (one,) = [r for r in out if len(r.records) == 4]
    assert one.source == "wandb" and one.commit == "a" * 40  # the most complete record speaks for it
    assert sorted(one.records) == ["hydra:multirun/0", "mlflow:abc", "tensorboard:runs/x", "wandb:w1"]
    assert said["message"] == ("1 runs were each seen through 4 records (hydra, mlflow, tensorboard, wandb): counted "
                               "once (same seed, config, commit and logged values)")
    again, said = merge([*runs[:2], runs[0]], ["seed"])  # a record given twice
    assert len(again) == 1 and said["repeated"] == 1


def test_runs_that_differ_in_a_recorded_commit_or_a_value_are_other_runs() -> None:
    a = _run("mlflow", "m", 1, 0.7, "x", commit="a" * 40, commit_how="recorded by MLflow")
    b = _run("wandb", "w", 1, 0.7, "y", commit="b" * 40, commit_how="recorded by W&B")
    c = _run("hydra", "h", 1, 0.7 + 1e-12, "z")  # the last digits of a float printed and read back
    assert len(merge([a, b], ["seed"])[0]) == 2
    assert len(merge([a, c], ["seed"])[0]) == 1
    d = _run("hydra", "h", 1, 0.71, "z")
    assert len(merge([a, d], ["seed"])[0]) == 2


def test_a_run_shorter_than_its_arms_others_is_unfinished_unless_lengths_vary() -> None:
    full = [Run(source="hydra", id=f"r{i}", config={}, metrics={"m": [(s, 0.5) for s in range(8)]}) for i in range(3)]
    short = Run(source="mlflow", id="s", config={}, metrics={"m": [(s, 0.5) for s in range(4)]}, status="finished")
    kept, lines, note = unfinished([*full, short], {id(r): "m" for r in [*full, short]}, "B")
    assert kept == full and note == ""
    assert lines == ["s: logged 4 of 8 steps of m (its arm's others logged 8; its record says finished, as MLflow says "
                     "of any run whose process exited): unfinished"]
    varied = [Run(source="hydra", id=f"v{i}", config={}, metrics={"m": [(s, 0.5) for s in range(3 + i)]})
              for i in range(4)]  # early stopping: every run its own length
    kept, lines, note = unfinished(varied, {id(r): "m" for r in varied}, "A")
    assert kept == varied and lines == [] and "lengths vary" in note
