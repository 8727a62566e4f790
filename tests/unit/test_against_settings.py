"""`ablate verdict --against` leaves ablate's own settings out of the config diff (issue 23): `scale.*`,
`seeds`, `alpha` ... differ between a proxy and its target by design; `determinism` and `threads` are kept."""

from __future__ import annotations

from pathlib import Path

import yaml

from ablate.judge.against import _SKIP_PREFIXES, compare_plans

BASE = Path(__file__).resolve().parents[2] / "ablate" / "conf" / "ablate_base.yaml"


def plan(**control: object) -> dict:
    return {"pins": {"code": {"commit": "a" * 40}}, "arms": [{"resolved": control}]}


def test_every_ablate_setting_but_determinism_and_threads_is_left_out() -> None:
    settings = set(yaml.safe_load(BASE.read_text())) - {"defaults"}
    assert settings - set(_SKIP_PREFIXES) == {"determinism", "threads"}


def test_scale_and_seeds_differ_silently_the_task_and_threads_do_not() -> None:
    this = plan(seeds=10, alpha=0.05, scale={"key": "task.hidden", "values": [32, 128]},
                launcher={"max_parallel": 2}, threads=1, task={"hidden": 64, "lr": 0.05})
    target = plan(seeds=3, alpha=0.01, scale={"key": None, "values": None},
                  launcher={"max_parallel": 8}, threads=4, task={"hidden": 512, "lr": 0.05})
    diffs = [d for d in compare_plans(this, target) if d["kind"] == "config"]
    assert [(d["field"], d["this"], d["target"]) for d in diffs] == [("task.hidden", 64, 512), ("threads", 1, 4)]
