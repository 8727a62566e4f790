"""Arm labels on a real ablation (issue 17, item 4): unicode keys and values, values that collide once cleaned."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from ablate.record.names import value_hash
from tests.helpers import ablate_cli, commit_all

pytestmark = pytest.mark.slow

TASK = '''
def train(cfg):
    return {"val_acc": 0.5 + 0.01 * cfg.seed + 0.001 * len(str(cfg.task["größe"]))}
'''


@pytest.fixture
def label_project(project: Path) -> Path:
    (project / "labels.py").write_text(TASK)
    (project / "conf" / "task" / "labels.yaml").write_text(
        "fn: labels:train\nmetric: val_acc\ngoal: maximize\ngröße: plain\n", encoding="utf-8")
    (project / "conf" / "variable" / "size.yaml").write_text(
        'key: task.größe\nvalues: ["N/A", "N_A", "你好", "a b"]\n', encoding="utf-8")
    commit_all(project, "label task")
    return project


def test_unicode_and_colliding_values_get_readable_unique_arms(label_project: Path) -> None:
    res = ablate_cli(label_project, "-m", "variable=size", "task=labels", "seeds=3", "launcher=inline")
    assert res.returncode == 0, res.stderr
    (sd,) = [p.parent for p in label_project.glob("outputs/ablate/*/*/ablation.yaml")]
    want = {"N/A": f"größe=N_A~{value_hash('N/A')}", "N_A": "größe=N_A", "你好": "größe=你好",
            "a b": f"größe=a_b~{value_hash('a b')}"}
    assert sorted(p.name for p in (sd / "trials").iterdir()) == sorted(["control", *want.values()])
    with open(sd / "results.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["arm"], r["value"]) for r in rows if r["arm"] != "control"} == {(n, v) for v, n in want.items()}
    md = (sd / "verdict.md").read_text(encoding="utf-8")
    bottom, paper = md.split("## For the paper", 1)
    for value, name in want.items():  # the bottom line and the line for the paper always show the treatment's value
        line = next(x for x in bottom.splitlines() if x.startswith(f"- **{name}**"))
        assert line.startswith(f"- **{name}** (task.größe plain → {value})"), line
        line = next(x for x in paper.splitlines() if x.startswith(f"- {name} vs control"))
        assert line.startswith(f"- {name} vs control (task.größe plain → {value}): "), line
    v = json.loads((sd / "verdict.json").read_text(encoding="utf-8"))
    assert {c["value"] for c in v["comparisons"]} == set(want)
