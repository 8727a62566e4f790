"""Pure parts of composing an app with its own context: keys resolved only in the trial, the snapshot
guard, and repro's path-only differences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.orchestrate.repro import manifest_differences
from ablate.plan.app_config import resolve_container
from ablate.trials.tasks.app import trial_resolved_keys
from ablate.trials.workdir import guard_snapshot


def test_keys_resolved_only_in_the_trial_and_their_readers_keep_their_text() -> None:
    params = {"n": 8, "steps": "${later_only:${n},1}", "copy": "${steps}", "lr": 0.1, "half": "${oc.env:NOPE,2}"}
    keys, resolvers = trial_resolved_keys(params)
    assert (keys, resolvers) == (["copy", "steps"], ["later_only"])  # oc.env is known: resolvable at plan time
    cfg = {"seed": 1, "task": {"app": "a.py", "params": params, "trial_resolved": keys}}
    out = resolve_container(cfg)["task"]["params"]
    assert out == {"n": 8, "steps": "${later_only:${n},1}", "copy": "${steps}", "lr": 0.1, "half": "2"}


def test_a_write_into_the_snapshot_is_named_and_reads_are_not(tmp_path: Path) -> None:
    snap = tmp_path / "code"
    (snap / "src").mkdir(parents=True)
    (snap / "src" / "train.py").write_text("x = 1\n")
    with guard_snapshot(snap):
        (snap / "src" / "train.py").read_text()
        (snap / "src" / "__pycache__").mkdir()  # bytecode caches are not the task's writes
        (tmp_path / "elsewhere.txt").write_text("fine")
    with pytest.raises(ConfigError, match=r"wrote into the shared code snapshot.*code/src/last\.ckpt, "
                                          r".*code/src/train\.py;"), guard_snapshot(snap):
        (snap / "src" / "last.ckpt").write_text("w")
        (snap / "src" / "train.py").write_text("x = 22\n")


def test_repro_lists_differences_of_each_runs_own_dir_apart() -> None:
    def manifest(out: str, lr: float) -> dict:
        return {"config": {"task": {"params": {"paths": {"output_dir": out}, "lr": lr}}}}

    orig, new = "/s/trials/control/seed=1", "/s/repro/control/seed=1/1"
    diffs, paths = manifest_differences(manifest(f"{orig}/run", 0.1), manifest(f"{new}/run", 0.1), (orig, new))
    assert diffs == [] and paths == [f"config `task.params.paths.output_dir`: {orig}/run (original) -> {new}/run "
                                     "(re-run)"]
    diffs, paths = manifest_differences(manifest(f"{orig}/run", 0.1), manifest("/elsewhere/run", 0.2), (orig, new))
    assert len(diffs) == 2 and paths == []  # another dir is a real difference, as is another value


def test_repro_counts_an_imported_distribution_only_where_both_runs_imported_it() -> None:
    # a warm fork holds what its parent imported for ablate's own use (xxhash); a fresh re-run may not have it
    def manifest(imported: dict) -> dict:
        return {"environment": {"imported": imported}}

    orig = manifest({"numpy": "2.1.0", "xxhash": "3.5.0"})
    assert manifest_differences(orig, manifest({"numpy": "2.1.0"})) == ([], [])
    diffs, _ = manifest_differences(orig, manifest({"numpy": "2.2.0"}))
    assert diffs == ["environment `imported.numpy`: 2.1.0 (original) -> 2.2.0 (re-run)"]


def test_metrics_are_read_from_the_run_dir_then_the_files_the_app_wrote_into_its_working_dir(tmp_path: Path) -> None:
    from ablate.metrics import collect

    run, work, code = tmp_path / "run", tmp_path / "work", tmp_path / "code"
    for d in (run, work, code):
        d.mkdir()
    (run / "ablate_seen.json").write_text(json.dumps({"config": {"lr": 0.1}}))  # ablate's record, never a metric
    (code / "old.json").write_text(json.dumps({"val_acc": 0.1}))
    (work / "old.json").symlink_to(code / "old.json")  # the mirror's link to the code snapshot: not the app's write
    (work / "metrics.json").write_text(json.dumps({"val_acc": 0.75, "val_loss": 1.5}))  # chdir=false app's file
    metrics, src = collect(run, [], "val_acc", source="json", work_dir=work)
    assert metrics == {"val_acc": 0.75, "val_loss": 1.5} and src["path"] == str(work / "metrics.json")
    (run / "m.jsonl").write_text(json.dumps({"val_acc": 0.5}) + "\n")  # the run dir's own file comes first
    assert collect(run, [], "val_acc", source="json", work_dir=work)[0] == {"val_acc": 0.5}
