"""Pure parts of warm trial processes (issue 15): the ablation's hash seed, and which warm-parent
states are refused (the forks themselves are tested in tests/integration/test_warm_launcher.py)."""

from __future__ import annotations

import pytest

from ablate.trials.seeding import MAX_SEED, ablation_hash_seed
from ablate.trials.warm.starter import unsafe_reason


def _plan(modes: list[str], seeds: list[int]) -> dict:
    arms = [{"name": f"determinism={m}", "config": {"determinism": m},
             "changes": {"determinism": ["seeded", m]} if i else {}} for i, m in enumerate(modes)]
    return {"arms": arms, "seeds": seeds, "options": {"determinism": modes[0]},
            "variable": {"key": "determinism"} if len(set(modes)) > 1 else {"key": "task.lr"}}


@pytest.mark.parametrize(("modes", "seeds", "expected"), [
    (["seeded", "seeded"], [4, 7], "4"),
    (["strict", "strict"], [0, 1, 2], "0"),
    (["off", "seeded"], [9, 1], "9"),  # determinism is the variable: one seeded arm fixes it for all
    (["seeded", "seeded"], [MAX_SEED + 5, 1], "4"),  # the hash seed's range is 0..2**32-1, as PYTHONHASHSEED's
])
def test_hash_seed_is_the_plans_first_seed(modes: list[str], seeds: list[int], expected: str) -> None:
    assert ablation_hash_seed(_plan(modes, seeds)) == expected


def test_hash_seed_is_random_when_nothing_is_seeded() -> None:
    drawn = {ablation_hash_seed(_plan(["off", "off"], [3, 4])) for _ in range(5)}
    assert all(0 <= int(h) <= MAX_SEED for h in drawn) and len(drawn) > 1


@pytest.mark.parametrize(("report", "words"), [
    ({"cuda": True, "threads": 1, "imported": ["task:train"]}, ["task:train", "initialised CUDA"]),
    ({"cuda": False, "threads": 3, "imported": ["task:train"]}, ["started 2 thread(s)"]),
    ({"cuda": True, "threads": 4, "imported": []}, ["the task module", "CUDA"]),
])
def test_unsafe_states_are_named(report: dict, words: list[str]) -> None:
    reason = unsafe_reason(report)
    assert reason is not None and all(w in reason for w in words), reason


def test_a_single_threaded_parent_without_cuda_is_safe() -> None:
    assert unsafe_reason({"cuda": False, "threads": 1, "imported": ["task:train"]}) is None
