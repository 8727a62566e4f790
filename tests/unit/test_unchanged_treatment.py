"""A treatment that changes nothing (issue 35, item 2): every seed's metrics bit-identical to the control's is named for
what it is, with the likely causes, in verdict.json and verdict.md's bottom line, never "run more seeds"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablate.judge.unchanged import likely_causes, unchanged_arms
from ablate.judge.verdict import write_verdict
from ablate.record.sweepdir import SweepDir
from tests.helpers import make_sweep

C = [0.712, 0.695, 0.731, 0.704, 0.719]


def _fn_sweep(root: Path, values: dict[str, list[float]], **options: Any) -> Path:
    """A synthetic sweep dir of an ``fn`` task (its plan names the task, as ablate's own do)."""
    make_sweep(root, values, options=options)
    plan = yaml.safe_load((root / "ablation.yaml").read_text())
    plan["task"] = {"fn": "toy:train"}
    (root / "ablation.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    return root


def _plan(task: dict[str, Any] | None = None, **variable: Any) -> dict[str, Any]:
    task = task or {"command": "python train.py"}
    var = {"name": "augment", "key": "task.params.augment", "values": [False], "is_group": False, **variable}
    control = {"name": "control", "label": "control", "value": True, "changes": {}, "config": {"task": task}}
    treat = {"name": "augment=false", "label": "false", "value": False,
             "changes": {var["key"]: [True, False]}, "config": {"task": task}}
    return {"arms": [control, treat], "variable": var, "seeds": [1, 2, 3], "task": task}


def _rows(values: dict[str, list[Any]], **extra: dict[str, list[Any]]) -> list[dict[str, Any]]:
    rows = []
    for arm, vals in values.items():
        for i, v in enumerate(vals, 1):
            row = {"arm": arm, "seed": i, "status": "failed" if v is None else "ok", "val_acc": v}
            for name, per_arm in extra.items():
                row[name] = per_arm[arm][i - 1]
            rows.append(row)
    return rows


@pytest.mark.parametrize(("values", "extra", "flagged"), [
    ({"control": [0.5, 0.6, 0.7], "augment=false": [0.5, 0.6, 0.7]}, {}, [1, 2, 3]),
    # a timing metric differs as machines do: still nothing the task computes changed
    ({"control": [0.5, 0.6, 0.7], "augment=false": [0.5, 0.6, 0.7]},
     {"samples_per_s": {"control": [100.0, 98.0, 101.0], "augment=false": [97.0, 99.0, 102.0]}}, [1, 2, 3]),
    # an int and a float of equal value are the same number
    ({"control": [1, 0, 1], "augment=false": [1.0, 0.0, 1.0]}, {}, [1, 2, 3]),
    # the seeds both arms finished: a failed one is left out
    ({"control": [0.5, None, 0.7], "augment=false": [0.5, 0.6, 0.7]}, {}, [1, 3]),
    # not flagged: one seed differs (in the last bit), one seed in common only, another metric differs
    ({"control": [0.5, 0.6, 0.7], "augment=false": [0.5, 0.6, 0.7000000000000001]}, {}, None),
    ({"control": [0.5, None, None], "augment=false": [0.5, 0.6, 0.7]}, {}, None),
    ({"control": [0.5, 0.6, 0.7], "augment=false": [0.5, 0.6, 0.7]},
     {"val_loss": {"control": [0.9, 0.8, 0.7], "augment=false": [0.9, 0.8, 0.71]}}, None),
])
def test_which_treatments_changed_nothing(values: dict[str, list[Any]], extra: dict[str, Any],
                                          flagged: list[int] | None) -> None:
    found = unchanged_arms(_plan(), _rows(values, **extra))
    if flagged is None:
        assert found == {}
    else:
        assert found == {"augment=false": {"arm": "augment=false", "label": "false", "seeds": flagged,
                                           "metrics": ["val_acc"]}}


def test_likely_causes_fit_the_form_and_the_variable() -> None:
    argparse_task = {"command": "python train.py", "args": "--key value"}
    first = likely_causes(_plan(argparse_task), "augment=false")[0]
    assert first.startswith("the script parses `--augment` with argparse's `type=bool`, which reads every non-empty "
                            "string as True, `false` included")
    assert "BooleanOptionalAction" in first
    hydra_script = likely_causes(_plan({"command": "python train.py"}), "augment=false")  # args: hydra parses bools
    assert not any("type=bool" in c for c in hydra_script)
    group = likely_causes(_plan({"app": "src/train.py"}, key="task/params/callbacks", is_group=True), "augment=false")
    assert group[0].startswith("the option of `callbacks` the treatment selects differs from the control's only in "
                               "what does not reach this metric")
    fn = likely_causes(_plan({"fn": "m:train"}, key="task.unused"), "augment=false")
    assert fn[0] == "the task never reads `task.unused` (a misspelt key, or a setting it takes from elsewhere)"


def test_the_bottom_line_names_it_and_never_advises_more_seeds(tmp_path: Path) -> None:
    # unpaired (as for a script): Welch's test finds no difference, and its seed advice would be "more seeds"
    root = _fn_sweep(tmp_path / "sw", {"control": C, "lr=0.1": list(C), "lr=0.2": [x + 0.02 for x in C]},
                     pairing="unpaired")
    v = write_verdict(SweepDir.open(root))
    same, moved = v["comparisons"]
    assert same["unchanged"]["seeds"] == [0, 1, 2, 3, 4] and same["unchanged"]["metrics"] == ["val_acc"]
    assert same["unchanged"]["message"].startswith("the treatment changed nothing the task reports: on each of the 5 "
                                                   "seeds both arms finished (0, 1, 2, 3, 4) its `val_acc` equal the "
                                                   "control's bit for bit, so no number of seeds can tell the two arms "
                                                   "apart. Likely causes: (1) the task never reads `task.optim.lr`")
    assert same["seed_advice"]["message"] == same["unchanged"]["message"]
    assert "unchanged" not in moved and not v["invalid"]
    md = (root / "verdict.md").read_text()
    bottom = md.split("## Bottom line", 1)[1].split("\n## ", 1)[0]
    line = next(x for x in bottom.splitlines() if x.startswith("- **lr=0.1**"))
    assert line == ("- **lr=0.1** (task.optim.lr 0.05 → 0.1): **inconclusive**: it changed nothing the task reports "
                    "(every seed equals the control's, bit for bit); likely: the task never reads `task.optim.lr`.")
    assert len(line.replace("**", "").split()) <= 31  # the bottom line's 30 words, and its list dash
    seeds = md.split("## Seed recommendation", 1)[1].split("\n## ", 1)[0]
    assert f"- **lr=0.1**: {same['unchanged']['message']}" in seeds and "Likely causes" in seeds
    assert "seeds per arm" not in line and "more seeds" not in line
    assert json.loads((root / "verdict.json").read_text())["comparisons"][0]["unchanged"] == same["unchanged"]


def test_next_never_runs_more_seeds_for_identical_arms(tmp_path: Path) -> None:
    root = _fn_sweep(tmp_path / "sw", {"control": C, "lr=0.1": list(C)})  # paired by seed: differences all 0
    v = write_verdict(SweepDir.open(root))
    md = (root / "verdict.md").read_text()
    bottom = md.split("## Bottom line", 1)[1].split("\n## ", 1)[0]
    assert ("- **lr=0.1** (task.optim.lr 0.05 → 0.1): **insufficient data**: it changed nothing the task reports "
            "(every seed equals the control's, bit for bit); likely: the task never reads `task.optim.lr`.") in bottom
    assert "paired differences are constant" not in bottom
    assert "Next: check that the change of lr=0.1 reaches the task (the trial's config.yaml, and command.json for a " \
           "script): no number of seeds tells identical arms apart." in bottom
    assert json.loads((root / "verdict.json").read_text())["bottom_line"]["next"]["command"] is None
    assert v["comparisons"][0]["unchanged"]["seeds"] == [0, 1, 2, 3, 4]


def test_runs_made_without_ablate_are_left_to_the_audit() -> None:
    plan = {**_plan(), "task": {}}  # `ablate audit` builds a plan with no task
    assert unchanged_arms(plan, _rows({"control": [0.5, 0.6, 0.7], "augment=false": [0.5, 0.6, 0.7]})) == {}
