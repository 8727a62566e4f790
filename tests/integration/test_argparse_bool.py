"""A treatment that changes nothing, from a real argparse script (issue 35, item 2), whose metric is printed inside its
log lines (item 6).

tests/fixtures/argparse_bool/train.py parses ``--augment`` with ``type=bool``: ``--augment false`` is True, so both
arms run the same thing and every seed's value is bit-identical across arms. The verdict names that for what it is,
with argparse's ``type=bool`` first among the likely causes, in verdict.json and verdict.md's bottom line, and never
advises more seeds. The script prints ``epoch 3 val_acc: 0.9083`` and ``step 30 | loss=0.0145 acc: 0.9982``: the
values are read from inside those lines, equal to what the script prints when run by hand. One ablation for the
module; the script is never edited (checked).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ablate_cli, commit_all, only_sweep

pytestmark = pytest.mark.slow
SCRIPT = REPO / "tests" / "fixtures" / "argparse_bool" / "train.py"
TASK = {"command": "python argparse_bool/train.py", "args": "--key value", "params": {"lr": 0.05, "augment": True},
        "metric": "val_acc", "goal": "maximize"}


@pytest.fixture(scope="module")
def ablated(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    project = tmp_path_factory.mktemp("argparse_bool") / "proj"
    shutil.copytree(project_template, project, symlinks=True)
    (project / "argparse_bool").mkdir()
    shutil.copy2(SCRIPT, project / "argparse_bool" / "train.py")
    (project / "conf" / "task" / "augment_task.yaml").write_text(yaml.safe_dump(TASK, sort_keys=False))
    (project / "conf" / "variable" / "augment.yaml").write_text("key: task.params.augment\nvalues: [false]\n")
    commit_all(project, "an argparse script")
    res = ablate_cli(project, "-m", "task=augment_task", "variable=augment", "seeds=4", "launcher.max_parallel=2")
    assert res.returncode == 0, res.stderr[-3000:]
    assert hashlib.sha256((project / "argparse_bool" / "train.py").read_bytes()).digest() == \
        hashlib.sha256(SCRIPT.read_bytes()).digest()
    return project, only_sweep(project), res.stdout + res.stderr


def _by_hand(project: Path, *argv: str) -> str:
    return subprocess.run([sys.executable, "argparse_bool/train.py", *argv], cwd=project, capture_output=True,
                          text=True, check=True).stdout


def test_values_are_read_from_inside_the_printed_lines(ablated: tuple[Path, Path, str]) -> None:
    project, sd, _ = ablated
    for arm, flag in (("control", "true"), ("augment=false", "false")):
        for seed in (1, 2, 3, 4):
            t = sd / "trials" / arm / f"seed={seed}"
            rec = json.loads((t / "result.json").read_text())
            argv = json.loads((t / "command.json").read_text())["argv"]
            assert argv[-6:] == ["--lr", "0.05", "--augment", flag, "--seed", str(seed)]
            out = _by_hand(project, "--lr", "0.05", "--augment", flag, "--seed", str(seed))
            want = float(re.findall(r"val_acc: ([0-9.]+)", out)[-1])
            assert rec["status"] == "ok" and rec["metrics"]["val_acc"] == want
            assert rec["metrics"]["acc"] == float(re.findall(r"acc: ([0-9.]+)", out.splitlines()[-2])[-1])
            assert rec["metric_source"]["kind"] == "stdout"
            assert rec["metric_source"]["match"] == f"line 6: epoch 3 val_acc: {want:.4f}"


def test_the_verdict_names_a_treatment_that_changed_nothing(ablated: tuple[Path, Path, str]) -> None:
    _, sd, _ = ablated
    verdict = json.loads((sd / "verdict.json").read_text())
    (c,) = verdict["comparisons"]
    per_seed = {a["arm"]: a["values"] for a in verdict["arms"]}
    assert per_seed["control"] == per_seed["augment=false"]  # bit-identical on every seed: one thing ran twice
    assert not verdict["invalid"]
    assert c["unchanged"]["seeds"] == [1, 2, 3, 4] and c["unchanged"]["metrics"] == ["acc", "loss", "val_acc"]
    msg = c["unchanged"]["message"]
    assert msg.startswith("the treatment changed nothing the task reports: on each of the 4 seeds both arms finished "
                          "(1, 2, 3, 4) its `acc`, `loss`, `val_acc` equal the control's bit for bit")
    assert ("Likely causes: (1) the script parses `--augment` with argparse's `type=bool`, which reads every "
            "non-empty string as True, `false` included") in msg
    assert c["seed_advice"]["message"] == msg
    md = (sd / "verdict.md").read_text()
    bottom = md.split("## Bottom line", 1)[1].split("\n## ", 1)[0]
    (line,) = [x for x in bottom.splitlines() if x.startswith("- **augment=false**")]
    assert line.endswith(f": **{c['verdict']}**: it changed nothing the task reports (every seed equals the "
                         "control's, bit for bit); likely: argparse's `type=bool` reads `--augment false` as True.")
    assert "seeds per arm" not in bottom and "more seeds" not in bottom
    seeds = md.split("## Seed recommendation", 1)[1].split("\n## ", 1)[0]
    assert f"- **augment=false**: {msg}" in seeds  # every likely cause, where the seed advice would stand
