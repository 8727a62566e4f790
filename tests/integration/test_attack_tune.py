"""Tuning (``tune``) with odd input (the 2026-12-03 attack), refused in one line with the fix before any trial:
a key that is ablate's own (the seed, the metric) and a tuning seed count no sweep dir could hold. The digits
example's project, ablate's CLI entry called in this process (dry runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ablate_in


@pytest.mark.parametrize(("key", "why"), [
    ("seed", "the seed differs by trial and is paired across arms"),
    ("task.metric", "the verdict compares one metric across arms"),
    ("launcher.max_parallel", "`launcher` is a setting of ablate itself, not of the task"),
])
def test_tuning_a_key_of_ablate_is_refused(project: Path, key: str, why: str) -> None:
    """`tune.key=seed tune.values=[1,2]` planned 12 tuning trials at "tuning seeds 3, 4" that each set the seed."""
    res = ablate_in(project, "-m", "variable=lr", f"tune.key={key}", "tune.values=[1,2]", "dry_run=true")
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f"`tune`: {key!r} cannot be tuned: {why}" in line, line
    assert "Fix: tune a key of the task, e.g. `tune.key=task.optim.momentum`" in line, line


def test_a_tuning_seed_count_no_sweep_dir_could_hold_is_refused(project: Path) -> None:
    """`tune.seeds=200000000` built the list of tuning seeds until a MemoryError traceback."""
    res = ablate_in(project, "-m", "variable=lr", "tune.key=task.optim.momentum", "tune.values=[0.5,0.9]",
                    "tune.seeds=200000000", "dry_run=true")
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert ("`tune.seeds`: 200000000 tuning seeds per setting is more than 100000, the most a sweep dir holds (one "
            "dir per trial): taken for a typo. Fix: e.g. `tune.seeds=2`.") in line, line


def test_a_tuning_budget_no_sweep_dir_could_hold_is_refused(project: Path) -> None:
    """`tune.budget=1000000000` drew settings without end (the dry run never answered)."""
    res = ablate_in(project, "-m", "variable=lr", "tune.key=task.optim.momentum", "tune.values='log_uniform(0.1,0.9)'",
                    "tune.budget=1000000000", "dry_run=true")
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert ("`tune.budget`: 1000000000 settings is more than 100000, the most a sweep dir holds (one dir per "
            "trial): taken for a typo. Fix: e.g. `tune.budget=8`.") in line, line
